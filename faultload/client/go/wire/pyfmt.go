package wire

// Python's text of values: json.dumps of a str (ensure_ascii), repr() of a float and of a str, and str() /
// repr() of what json.loads or pysimdjson returns, for the messages the Python client writes.

import (
	"math"
	"strconv"
	"unicode"
	"unicode/utf16"
)

const hexDigits = "0123456789abcdef"

// appendPyJSONString is json.dumps(s) with ensure_ascii: \" \\ \n \r \t \b \f short, other characters
// outside ' '..'~' as \u00XX, astral ones as a surrogate pair. s may hold WTF-8 surrogates.
func appendPyJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		r, size := decodeWTF8([]byte(s[i:min(len(s), i+4)]))
		i += size
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\b':
			dst = append(dst, '\\', 'b')
		case r == '\f':
			dst = append(dst, '\\', 'f')
		case r >= 0x20 && r < 0x7f:
			dst = append(dst, byte(r))
		case r >= 0x10000:
			hi, lo := utf16.EncodeRune(r)
			dst = appendU4(appendU4(dst, 'u', hi), 'u', lo)
		default:
			dst = appendU4(dst, 'u', r)
		}
	}
	return append(dst, '"')
}

// appendU4 writes \u (or \x, \U by letter) and the code in lowercase hex: 4 digits, 2 for \x, 8 for \U.
func appendU4(dst []byte, letter byte, r rune) []byte {
	width := 4
	switch letter {
	case 'x':
		width = 2
	case 'U':
		width = 8
	}
	dst = append(dst, '\\', letter)
	for shift := 4 * (width - 1); shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(r>>shift)&0xF])
	}
	return dst
}

// appendPyFloat is repr(float): the shortest digits that read back, positional for exponents -4 <= e < 16,
// else d.ddde+XX; always a '.0' or an exponent, and inf, -inf, nan.
func appendPyFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "nan"...)
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	if e[0] == '-' {
		dst = append(dst, '-')
		e = e[1:]
	}
	mark := 0
	for e[mark] != 'e' {
		mark++
	}
	exp, _ := strconv.Atoi(string(e[mark+1:]))
	var digits []byte
	for _, c := range e[:mark] {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	if exp < -4 || exp >= 16 {
		dst = append(dst, digits[0])
		if len(digits) > 1 {
			dst = append(append(dst, '.'), digits[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst, exp = append(dst, '-'), -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	return appendPositional(dst, digits, exp+1)
}

// appendPositional writes digits with the point after the first point digits (point may be <= 0).
func appendPositional(dst, digits []byte, point int) []byte {
	switch {
	case point <= 0:
		dst = append(dst, '0', '.')
		for ; point < 0; point++ {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	case point >= len(digits):
		dst = append(dst, digits...)
		for k := len(digits); k < point; k++ {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	}
	return append(append(append(dst, digits[:point]...), '.'), digits[point:]...)
}

// appendPyStrRepr is repr(str): single quotes unless the text has one and no double quote; \\, the quote, \t
// \n \r escaped; other non-printable characters as \xXX, \uXXXX or \UXXXXXXXX. unicode.IsPrint is Python's
// isprintable (categories L, M, N, P, S and the space), up to the two runtimes' Unicode versions.
func appendPyStrRepr(dst []byte, s []byte) []byte {
	quote := byte('\'')
	if containsByte(s, '\'') && !containsByte(s, '"') {
		quote = '"'
	}
	dst = append(dst, quote)
	for len(s) > 0 {
		r, size := decodeWTF8(s)
		if r == 0xFFFD && size == 1 {
			r = rune(s[0]) | 0xDC00 // not reachable for parsed text; shown as Python's surrogateescape would
		}
		s = s[size:]
		switch {
		case r == '\\' || r == rune(quote):
			dst = append(dst, '\\', byte(r))
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r < 0x20 || r == 0x7f:
			dst = appendU4(dst, 'x', r)
		case r < 0x7f || (r < 0xD800 || r > 0xDFFF) && unicode.IsPrint(r):
			dst = appendWTF8(dst, r)
		case r <= 0xFF:
			dst = appendU4(dst, 'x', r)
		case r <= 0xFFFF:
			dst = appendU4(dst, 'u', r)
		default:
			dst = appendU4(dst, 'U', r)
		}
	}
	return append(dst, quote)
}

func containsByte(s []byte, c byte) bool {
	for _, b := range s {
		if b == c {
			return true
		}
	}
	return false
}

// pyStr appends str() of node i: a string's text, else its repr.
func (t *tape) pyStr(dst []byte, i int) []byte {
	if t.nodes[i].kind == kStr {
		return t.text(i, dst)
	}
	return t.pyRepr(dst, i)
}

// pyRepr appends repr() of node i as the Python value its parser gives: json.loads's lists and dicts (a
// repeated key keeps its first place and last value), or pysimdjson's Array and Object proxies, whose repr
// carries an address (written here as 0x0).
func (t *tape) pyRepr(dst []byte, i int) []byte {
	n := t.nodes[i]
	switch n.kind {
	case kNull:
		return append(dst, "None"...)
	case kTrue:
		return append(dst, "True"...)
	case kFalse:
		return append(dst, "False"...)
	case kInt:
		return strconv.AppendInt(dst, int64(n.num), 10)
	case kUint:
		return strconv.AppendUint(dst, n.num, 10)
	case kBig:
		return append(dst, t.src[n.lo:n.hi]...)
	case kFloat:
		return appendPyFloat(dst, math.Float64frombits(n.num))
	case kStr:
		return appendPyStrRepr(dst, t.text(i, nil))
	}
	if t.mode == simdMode {
		name := map[kind]string{kArr: "Array", kObj: "Object"}[n.kind]
		return append(dst, "<csimdjson."+name+" object at 0x0>"...)
	}
	if n.kind == kArr {
		return t.listRepr(dst, i)
	}
	return t.dictRepr(dst, i)
}

func (t *tape) listRepr(dst []byte, i int) []byte {
	dst = append(dst, '[')
	for k, c := int32(0), i+1; k < t.nodes[i].n; k, c = k+1, t.after(c) {
		if k > 0 {
			dst = append(dst, ", "...)
		}
		dst = t.pyRepr(dst, c)
	}
	return append(dst, ']')
}

func (t *tape) dictRepr(dst []byte, i int) []byte {
	dst = append(dst, '{')
	first := true
	for k, c := int32(0), i+1; k < t.nodes[i].n; k, c = k+1, t.after(c+1) {
		key := string(t.text(c, nil))
		if t.member(i, key) != c+1 {
			continue // a repeated key: shown once, where it first came
		}
		if !first {
			dst = append(dst, ", "...)
		}
		first = false
		dst = append(appendPyStrRepr(dst, []byte(key)), ": "...)
		dst = t.pyRepr(dst, t.lastMember(i, key))
	}
	return append(dst, '}')
}
