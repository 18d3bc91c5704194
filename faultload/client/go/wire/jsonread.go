package wire

// The tape's numbers, strings and lookups.

import (
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// digits advances past a run of digits; false when there is none.
func (t *tape) digits() bool {
	start := t.pos
	for t.pos < len(t.src) && isDigit(t.src[t.pos]) {
		t.pos++
	}
	return t.pos > start
}

// number scans -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? (both parsers' grammar) and classifies it as
// simdjson does (int64, else uint64, else an error; a double out of range is an error) or as Python does.
func (t *tape) number() bool {
	start := t.pos
	if t.src[t.pos] == '-' {
		t.pos++
		if t.mode == pyMode && t.pos < len(t.src) && t.src[t.pos] == 'I' {
			t.pos = start
			return t.atom()
		}
	}
	if t.pos < len(t.src) && t.src[t.pos] == '0' {
		t.pos++
	} else if !t.digits() {
		return t.fail("NUMBER_ERROR: Problem while parsing a number")
	}
	integer := true
	if t.pos < len(t.src) && t.src[t.pos] == '.' {
		t.pos++
		integer = false
		if !t.digits() {
			return t.fail("NUMBER_ERROR: Problem while parsing a number")
		}
	}
	if t.pos < len(t.src) && (t.src[t.pos] == 'e' || t.src[t.pos] == 'E') {
		t.pos++
		integer = false
		if t.pos < len(t.src) && (t.src[t.pos] == '+' || t.src[t.pos] == '-') {
			t.pos++
		}
		if !t.digits() {
			return t.fail("NUMBER_ERROR: Problem while parsing a number")
		}
	}
	if !t.delimited() {
		return t.fail("NUMBER_ERROR: Problem while parsing a number")
	}
	if integer {
		return t.integer(start)
	}
	return t.float(start)
}

func (t *tape) integer(start int) bool {
	text := t.src[start:t.pos]
	neg := text[0] == '-'
	if neg {
		text = text[1:]
	}
	var mag uint64
	over := false
	for _, c := range text {
		hi, lo := bits.Mul64(mag, 10)
		lo, carry := bits.Add64(lo, uint64(c-'0'), 0)
		over = over || hi != 0 || carry != 0
		mag = lo
	}
	at := t.push(kInt, start, t.pos)
	n := &t.nodes[at]
	switch {
	case !over && neg && mag <= 1<<63:
		n.num = uint64(-int64(mag))
	case !over && !neg && mag <= math.MaxInt64:
		n.num = mag
	case t.mode == pyMode:
		n.kind = kBig
	case !over && !neg:
		n.kind, n.num = kUint, mag
	default:
		return t.fail("BIGINT_ERROR: Big integer value that cannot be represented using 64 bits")
	}
	return true
}

var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
	1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// float parses correctly rounded: Clinger's exact path (a mantissa below 2**53 times or over an exact power
// of ten is one rounding) for the common short logprob, strconv otherwise.
func (t *tape) float(start int) bool {
	text := t.src[start:t.pos]
	f, ok := fastFloat(text)
	if !ok {
		var err error
		if f, err = strconv.ParseFloat(string(text), 64); err != nil && !math.IsInf(f, 0) {
			return t.fail("NUMBER_ERROR: Problem while parsing a number")
		}
	}
	if math.IsInf(f, 0) && t.mode == simdMode {
		return t.fail("NUMBER_ERROR: Problem while parsing a number")
	}
	at := t.push(kFloat, start, t.pos)
	t.nodes[at].num = math.Float64bits(f)
	return true
}

func fastFloat(text []byte) (float64, bool) {
	i, neg := 0, text[0] == '-'
	if neg {
		i++
	}
	var mant uint64
	nd, fd, frac := 0, 0, false
	for ; i < len(text); i++ {
		c := text[i]
		if c == '.' {
			frac = true
			continue
		}
		if !isDigit(c) {
			break
		}
		if frac {
			fd++
		}
		if mant == 0 && c == '0' {
			continue // leading zeros carry no digit
		}
		if nd++; nd > 19 {
			return 0, false
		}
		mant = mant*10 + uint64(c-'0')
	}
	exp := -fd
	if i < len(text) {
		e, err := strconv.Atoi(string(text[i+1:]))
		if err != nil || e > 400 || e < -400 {
			return 0, false
		}
		exp += e
	}
	if mant > 1<<53 || exp > 22 || exp < -22 {
		return 0, false
	}
	f := float64(mant)
	if exp >= 0 {
		f *= exactPow10[exp]
	} else {
		f /= exactPow10[-exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

// after is the index of the node after i and its subtree.
func (t *tape) after(i int) int {
	if k := t.nodes[i].kind; k == kArr || k == kObj {
		return int(t.nodes[i].next)
	}
	return i + 1
}

// text appends string node i's decoded content; lone surrogates (json.loads keeps them) as WTF-8.
func (t *tape) text(i int, dst []byte) []byte {
	n := t.nodes[i]
	raw := t.src[n.lo:n.hi]
	if !n.esc {
		return append(dst, raw...)
	}
	for j := 0; j < len(raw); j++ {
		c := raw[j]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		j++
		switch raw[j] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw, j+1)
			j += 4
			if lo, ok := hex4(raw, j+3); ok && r >= 0xD800 && r < 0xDC00 && raw[j+1] == '\\' && raw[j+2] == 'u' &&
				lo >= 0xDC00 && lo <= 0xDFFF {
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				j += 6
			}
			dst = appendWTF8(dst, r)
		default:
			dst = append(dst, raw[j])
		}
	}
	return dst
}

// appendWTF8 is UTF-8 that also encodes a surrogate as its three bytes (Python's surrogatepass).
func appendWTF8(dst []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(dst, 0xED, byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(dst, r)
}

// decodeWTF8 is utf8.DecodeRune that also reads an encoded surrogate.
func decodeWTF8(s []byte) (rune, int) {
	r, size := utf8.DecodeRune(s)
	if r == utf8.RuneError && size == 1 && len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF &&
		s[2] >= 0x80 && s[2] <= 0xBF {
		return 0xD000 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	}
	return r, size
}

// validWTF8: valid UTF-8, encoded surrogates allowed.
func validWTF8(s []byte) bool {
	for len(s) > 0 {
		r, size := decodeWTF8(s)
		if r == utf8.RuneError && size == 1 {
			return false
		}
		s = s[size:]
	}
	return true
}

// keyIs: string node i's decoded text equals key.
func (t *tape) keyIs(i int, key string) bool {
	n := t.nodes[i]
	if !n.esc {
		return string(t.src[n.lo:n.hi]) == key
	}
	t.buf = t.text(i, t.buf[:0])
	return string(t.buf) == key
}

// member is the value of obj's first member named key (pysimdjson's [] and get), -1 when none.
func (t *tape) member(obj int, key string) int {
	for i, k := obj+1, int32(0); k < t.nodes[obj].n; k++ {
		if t.keyIs(i, key) {
			return i + 1
		}
		i = t.after(i + 1)
	}
	return -1
}

// lastMember is the value of obj's last member named key (json.loads's dict), -1 when none.
func (t *tape) lastMember(obj int, key string) int {
	found := -1
	for i, k := obj+1, int32(0); k < t.nodes[obj].n; k++ {
		if t.keyIs(i, key) {
			found = i + 1
		}
		i = t.after(i + 1)
	}
	return found
}
