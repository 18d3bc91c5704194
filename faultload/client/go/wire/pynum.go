package wire

// Python's int(str) and float(str) (history.server_id_key reads ids with int(); numpy reads a JSON string in a
// float or int array with float() and int()). Both first map Unicode decimal digits to ASCII digits and Unicode
// spaces to ' ' (_PyUnicode_TransformDecimalAndSpaceToASCII), then parse ASCII with underscores between digits.

import (
	"math"
	"math/bits"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// isNd: a Unicode decimal digit (category Nd), which Python's int() and float() read as its value.
func isNd(r rune) bool { return unicode.Is(unicode.Nd, r) }

// ndValue is an Nd rune's value: Unicode lays decimal digits out in runs of ten starting at zero.
func ndValue(r rune) int {
	for _, rg := range unicode.Nd.R16 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	return -1
}

// toASCII is the transform: ASCII kept, Unicode spaces to ' ', Unicode digits to ASCII, anything else '?'
// (Python's int() fails on it, as on '?'). Invalid UTF-8 and surrogates (WTF-8) are '?' too.
func toASCII(dst, s []byte) []byte {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		s = s[size:]
		switch {
		case r < utf8.RuneSelf && size == 1:
			dst = append(dst, byte(r))
		case r == utf8.RuneError:
			dst = append(dst, '?')
		case unicode.IsSpace(r):
			dst = append(dst, ' ')
		case digitValue(r) >= 0:
			dst = append(dst, byte('0'+digitValue(r)))
		default:
			dst = append(dst, '?')
		}
	}
	return dst
}

// trimPySpace strips what Python's Py_ISSPACE calls space: " \t\n\v\f\r".
func trimPySpace(s []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// pyInt is Python's int(text) when it succeeds and fits int64; false otherwise (a ValueError, or past int64).
func pyInt(text []byte) (int64, bool) {
	var scratch [64]byte
	s := trimPySpace(toASCII(scratch[:0], text))
	neg := len(s) > 0 && s[0] == '-'
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	var mag uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' && i > 0 && i+1 < len(s) && s[i-1] != '_' {
			continue
		}
		if c < '0' || c > '9' {
			return 0, false
		}
		var ok bool
		if mag, ok = mulAdd(mag, int(c-'0')); !ok {
			return 0, false
		}
	}
	if len(s) == 0 || s[len(s)-1] == '_' || (!neg && mag > math.MaxInt64) {
		return 0, false
	}
	if neg {
		return int64(-mag), true
	}
	return int64(mag), true
}

// pyFloat is Python's float(text): a decimal with optional sign, fraction and exponent, underscores only between
// digits, or inf / infinity / nan in any case; out-of-range values are infinities, not errors.
func pyFloat(text []byte) (float64, bool) {
	var scratch, clean [64]byte
	s := trimPySpace(toASCII(scratch[:0], text))
	body := s
	if len(body) > 0 && (body[0] == '-' || body[0] == '+') {
		body = body[1:]
	}
	switch string(toLower(clean[:0], body)) {
	case "inf", "infinity":
		return math.Copysign(math.Inf(1), signOf(s)), true
	case "nan":
		return math.NaN(), true
	}
	out, ok := floatSyntax(clean[:0], s)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(out), 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func signOf(s []byte) float64 {
	if len(s) > 0 && s[0] == '-' {
		return -1
	}
	return 1
}

func toLower(dst, s []byte) []byte {
	for _, c := range s {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// floatSyntax checks [sign] (digits [. [digits]] | . digits) [(e|E) [sign] digits] with single underscores
// between digits, and returns it without the underscores.
func floatSyntax(dst, s []byte) ([]byte, bool) {
	i := 0
	digitsAt := func() int { // digits with underscores between them, copied to dst; how many digits
		n := 0
		for i < len(s) {
			c := s[i]
			if c == '_' && n > 0 && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
				i++
				continue
			}
			if c < '0' || c > '9' {
				break
			}
			dst = append(dst, c)
			i++
			n++
		}
		return n
	}
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		dst = append(dst, s[i])
		i++
	}
	n := digitsAt()
	if i < len(s) && s[i] == '.' {
		dst = append(dst, '.')
		i++
		n += digitsAt()
	}
	if n == 0 {
		return nil, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		dst = append(dst, 'e')
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			dst = append(dst, s[i])
			i++
		}
		if digitsAt() == 0 {
			return nil, false
		}
	}
	return dst, i == len(s)
}

// digitValue is a Unicode decimal digit's value (Nd runs are ten in a row, starting at zero), or -1.
func digitValue(r rune) int {
	if r >= '0' && r <= '9' {
		return int(r - '0')
	}
	if r < 0x80 || !isNd(r) {
		return -1
	}
	return ndValue(r)
}

// mulAdd is v*10 + d for a magnitude, false when it passes 2**63 (held as uint64 so -2**63 still fits).
func mulAdd(v uint64, d int) (uint64, bool) {
	hi, lo := bits.Mul64(v, 10)
	lo, carry := bits.Add64(lo, uint64(d), 0)
	return lo, hi == 0 && carry == 0 && lo <= 1<<63
}
