package wire

// A JSON parser into a flat tape, with two modes: simdMode accepts what pysimdjson's parse accepts (the raw
// client parses results and asample answers with it), pyMode what Python's json.loads of bytes accepts
// (sdk_rules). Written here rather than taken from a library so that every input both accept or reject is
// decided the same way: UTF-8 validity, lone surrogates, unescaped control characters, big integers, NaN
// literals, a leading BOM, nesting depth, duplicate keys (read by the caller: first for simdjson, last for json).

import (
	"math"
	"unicode/utf8"
)

type jsonMode uint8

const (
	simdMode jsonMode = iota
	pyMode
)

type kind uint8

const (
	kNull kind = iota
	kFalse
	kTrue
	kInt   // num holds an int64
	kUint  // simdMode: an integer past int64 that fits uint64 (simdjson keeps it as uint64)
	kBig   // pyMode: an integer past int64 (Python's unbounded int), its text in src[lo:hi]
	kFloat // num holds float64 bits
	kStr   // src[lo:hi] is the raw content between the quotes
	kArr
	kObj // children alternate key (kStr), value
)

// node is one value. Containers are followed by their children; next is the index after the subtree.
type node struct {
	kind   kind
	esc    bool // a string with backslash escapes
	lo, hi int32
	next   int32
	n      int32 // children: elements, or members for an object
	num    uint64
}

const (
	simdMaxDepth = 1024 // simdjson's default: deeper is DEPTH_ERROR
	pyMaxDepth   = 990  // json.loads's C scanner: a RecursionError near the interpreter's 1000-frame limit
)

type tape struct {
	mode  jsonMode
	src   []byte
	pos   int
	depth int
	nodes []node
	err   string
	buf   []byte // scratch for decoded strings
}

// parse fills the tape from src; false (and err) when the parser of its mode would raise.
func (t *tape) parse(src []byte, mode jsonMode) bool {
	t.mode, t.src, t.pos, t.depth, t.nodes, t.err = mode, src, 0, 0, t.nodes[:0], ""
	if !t.prelude() {
		return false
	}
	t.skipSpace()
	if t.pos == len(t.src) {
		return t.fail("EMPTY: no JSON found")
	}
	if !t.value() {
		return false
	}
	t.skipSpace()
	if t.pos != len(t.src) {
		return t.fail("TAPE_ERROR: extra data after the document")
	}
	return true
}

// prelude checks the encoding and skips one UTF-8 BOM, as both parsers do (a second BOM is an error).
func (t *tape) prelude() bool {
	b := t.src
	if t.mode == pyMode && !utf8Family(b) {
		return t.fail("a UTF-16 or UTF-32 body (json.loads would decode it so; not supported here)")
	}
	valid := utf8.Valid(b)
	if t.mode == pyMode {
		valid = validWTF8(b) // json.loads decodes with surrogatepass: encoded surrogates are accepted
	}
	if !valid {
		return t.fail("UTF8_ERROR: The input is not valid UTF-8")
	}
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		t.pos = 3
	}
	return true
}

// utf8Family is json.detect_encoding choosing UTF-8 (with or without its BOM).
func utf8Family(b []byte) bool {
	if len(b) >= 2 && ((b[0] == 0xFE && b[1] == 0xFF) || (b[0] == 0xFF && b[1] == 0xFE)) {
		return false
	}
	if len(b) >= 4 && !(b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF) {
		return b[0] != 0 && b[1] != 0
	}
	return len(b) != 2 || (b[0] != 0 && b[1] != 0)
}

func (t *tape) fail(msg string) bool {
	if t.err == "" {
		t.err = msg
	}
	return false
}

func (t *tape) skipSpace() {
	for t.pos < len(t.src) {
		switch t.src[t.pos] {
		case ' ', '\t', '\n', '\r':
			t.pos++
		default:
			return
		}
	}
}

// delimited: what follows an atom or number may end it (simdjson checks this; for json.loads anything else
// would fail at the next token, so both reject the same inputs).
func (t *tape) delimited() bool {
	if t.pos == len(t.src) {
		return true
	}
	switch t.src[t.pos] {
	case ' ', '\t', '\n', '\r', ',', ':', ']', '}', '[', '{':
		return true
	}
	return false
}

func (t *tape) push(k kind, lo, hi int) int {
	t.nodes = append(t.nodes, node{kind: k, lo: int32(lo), hi: int32(hi)})
	return len(t.nodes) - 1
}

func (t *tape) value() bool {
	if t.pos >= len(t.src) {
		return t.fail("TAPE_ERROR: unexpected end")
	}
	switch c := t.src[t.pos]; {
	case c == '{' || c == '[':
		return t.container(c)
	case c == '"':
		return t.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return t.number()
	}
	return t.atom()
}

// word is a literal: true, false, null and (json.loads only) NaN, Infinity, -Infinity.
type word struct {
	text string
	kind kind
	num  float64
}

var (
	simdWords = []word{{"true", kTrue, 0}, {"false", kFalse, 0}, {"null", kNull, 0}}
	pyWords   = append(simdWords[:3:3], word{"NaN", kFloat, math.NaN()}, word{"Infinity", kFloat, math.Inf(1)},
		word{"-Infinity", kFloat, math.Inf(-1)})
)

func (t *tape) atom() bool {
	words := simdWords
	if t.mode == pyMode {
		words = pyWords
	}
	rest := t.src[t.pos:]
	for _, w := range words {
		if len(rest) >= len(w.text) && string(rest[:len(w.text)]) == w.text {
			i := t.push(w.kind, t.pos, t.pos+len(w.text))
			t.nodes[i].num = math.Float64bits(w.num)
			t.pos += len(w.text)
			return t.delimited() || t.fail("ATOM_ERROR: Problem while parsing an atom")
		}
	}
	return t.fail("TAPE_ERROR: The JSON document has an improper structure")
}

func (t *tape) container(open byte) bool {
	k, closer := kArr, byte(']')
	if open == '{' {
		k, closer = kObj, '}'
	}
	if t.depth++; (t.mode == simdMode && t.depth > simdMaxDepth) || (t.mode == pyMode && t.depth > pyMaxDepth) {
		return t.fail("DEPTH_ERROR: The JSON document was too deep")
	}
	at := t.push(k, t.pos, t.pos)
	t.pos++
	t.skipSpace()
	count := int32(0)
	if t.pos < len(t.src) && t.src[t.pos] == closer {
		t.pos++
	} else {
		for {
			if !t.entry(k == kObj) {
				return false
			}
			count++
			t.skipSpace()
			if t.pos < len(t.src) && t.src[t.pos] == ',' {
				t.pos++
				t.skipSpace()
				continue
			}
			if t.pos < len(t.src) && t.src[t.pos] == closer {
				t.pos++
				break
			}
			return t.fail("TAPE_ERROR: missing or superfluous commas, braces, missing keys")
		}
	}
	t.depth--
	t.nodes[at].n, t.nodes[at].next, t.nodes[at].hi = count, int32(len(t.nodes)), int32(t.pos)
	return true
}

// entry is an array's element, or an object's key, ':' and value.
func (t *tape) entry(keyed bool) bool {
	if !keyed {
		return t.value()
	}
	if t.pos >= len(t.src) || t.src[t.pos] != '"' {
		return t.fail("TAPE_ERROR: an object key is not a string")
	}
	if !t.str() {
		return false
	}
	t.skipSpace()
	if t.pos >= len(t.src) || t.src[t.pos] != ':' {
		return t.fail("TAPE_ERROR: missing ':' after an object key")
	}
	t.pos++
	t.skipSpace()
	return t.value()
}

// str scans a string: no unescaped control characters, known escapes only, and (simdjson) no lone surrogate.
func (t *tape) str() bool {
	start := t.pos + 1
	esc := false
	for i := start; i < len(t.src); i++ {
		switch c := t.src[i]; {
		case c == '"':
			at := t.push(kStr, start, i)
			t.nodes[at].esc = esc
			t.pos = i + 1
			return true
		case c < 0x20:
			return t.fail("UNESCAPED_CHARS: Within strings, some characters must be escaped")
		case c == '\\':
			esc = true
			n, ok := t.escape(i)
			if !ok {
				return t.fail("STRING_ERROR: Problem while parsing a string")
			}
			i += n - 1
		}
	}
	return t.fail("UNCLOSED_STRING: A string is opened, but never closed.")
}

// escape checks the escape at src[i] ('\\') and returns its length.
func (t *tape) escape(i int) (int, bool) {
	if i+1 >= len(t.src) {
		return 0, false
	}
	switch t.src[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
		u, ok := hex4(t.src, i+2)
		if !ok {
			return 0, false
		}
		if t.mode == pyMode || u < 0xD800 || u > 0xDFFF {
			return 6, true
		}
		if u >= 0xDC00 { // a low surrogate first
			return 0, false
		}
		if i+7 < len(t.src) && t.src[i+6] == '\\' && t.src[i+7] == 'u' {
			if lo, ok := hex4(t.src, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				return 12, true
			}
		}
		return 0, false
	}
	return 0, false
}

// hex4 reads the four hex digits of a \u escape.
func hex4(s []byte, at int) (rune, bool) {
	if at+4 > len(s) {
		return 0, false
	}
	var v rune
	for _, c := range s[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
