package wire

// decode.topk_matrices on a JSON top-k list, and numpy's conversion of a Python value into a float32 or an
// int32 array element (what `ids[i, m], lps[i, m] = tid, lp` does with each JSON value).

import (
	"math"
	"unicode/utf8"
)

// leafFloat32 is a float32 array element set from node i (or, when i < 0, from the Python str s): numbers and
// bools as floats, None as NaN, a str through float(); a list or dict is an error.
func (c *Checker) leafFloat32(i int, s []byte) (float32, bool) {
	t := &c.tape
	if i >= 0 {
		n := t.nodes[i]
		switch n.kind {
		case kNull:
			return float32(math.NaN()), true
		case kFalse:
			return 0, true
		case kTrue:
			return 1, true
		case kInt:
			return float32(float64(int64(n.num))), true
		case kUint:
			return float32(float64(n.num)), true
		case kFloat:
			return float32(math.Float64frombits(n.num)), true
		case kStr:
			s = t.text(i, nil)
		default:
			return 0, false
		}
	}
	f, ok := pyFloat(s)
	return float32(f), ok
}

// leafInt32 is an int32 array element set from node i (or the str s): an int in range, a float truncated (NaN
// and out-of-range values fail: numpy raises ValueError or OverflowError), a bool, a str through int().
func (c *Checker) leafInt32(i int, s []byte) (int32, bool) {
	t := &c.tape
	if i >= 0 {
		n := t.nodes[i]
		switch n.kind {
		case kFalse:
			return 0, true
		case kTrue:
			return 1, true
		case kInt:
			v := int64(n.num)
			return int32(v), v >= math.MinInt32 && v <= math.MaxInt32
		case kFloat:
			f := math.Trunc(math.Float64frombits(n.num))
			return int32(f), f >= math.MinInt32 && f <= math.MaxInt32 // NaN fails both
		case kStr:
			s = t.text(i, nil)
		default:
			return 0, false
		}
	}
	v, ok := pyInt(s)
	return int32(v), ok && v >= math.MinInt32 && v <= math.MaxInt32
}

// pyLen is len(row) of a truthy row and whether the row is truthy; ok is false where len() raises.
func (c *Checker) pyLen(i int) (n int, truthy, ok bool) {
	t := &c.tape
	nd := t.nodes[i]
	switch nd.kind {
	case kNull, kFalse:
		return 0, false, true
	case kInt, kUint:
		return 0, nd.num != 0, nd.num == 0
	case kFloat:
		zero := math.Float64frombits(nd.num) == 0
		return 0, !zero, zero
	case kStr:
		n = utf8.RuneCount(t.text(i, nil))
	case kArr:
		n = int(nd.n)
	case kObj:
		n = len(c.uniqueKeys(i, nil))
	default: // kTrue
		return 0, true, false
	}
	return n, n > 0, true
}

// uniqueKeys are a dict's keys (node indexes), each once at its first place, as json → dict keeps them.
func (c *Checker) uniqueKeys(obj int, dst []int) []int {
	t := &c.tape
	for k, key := int32(0), obj+1; k < t.nodes[obj].n; k, key = k+1, t.after(key+1) {
		if t.member(obj, string(t.text(key, nil))) == key+1 {
			dst = append(dst, key)
		}
	}
	return dst
}

// jsonTopk is topk_matrices(top.as_list()): k is the widest truthy row (1 when none); each truthy row's items
// unpack into (token id, logprob) pairs; the rest of the (rows, k) matrices is masked.
func (c *Checker) jsonTopk(top int) string {
	t, r := &c.tape, &c.res
	if t.nodes[top].kind != kArr {
		return "'topk_prompt_logprobs' has no attribute 'as_list'"
	}
	rows, k := int(t.nodes[top].n), 0
	for q, row := 0, top+1; q < rows; q, row = q+1, t.after(row) {
		n, _, ok := c.pyLen(row)
		if !ok {
			return "a top-k row has no len()"
		}
		k = max(k, n)
	}
	k = max(k, 1)
	r.topRows, r.topK = rows, k
	for q := 0; q < rows*k; q++ {
		r.topIds, r.topLps = append(r.topIds, topkMaskToken), append(r.topLps, topkMaskLogprob)
	}
	for q, row := 0, top+1; q < rows; q, row = q+1, t.after(row) {
		if !c.fillRow(row, r.topIds[q*k:(q+1)*k], r.topLps[q*k:(q+1)*k]) {
			return "a top-k entry is not a (token id, logprob) pair"
		}
	}
	return ""
}

// fillRow unpacks a truthy row's items: a list's elements, a dict's keys (each a str of two characters, read
// as id and logprob); a str's characters never unpack into two.
func (c *Checker) fillRow(row int, ids []int32, lps []float32) bool {
	t := &c.tape
	if _, truthy, _ := c.pyLen(row); !truthy {
		return true
	}
	switch t.nodes[row].kind {
	case kArr:
		for m, item := 0, row+1; m < int(t.nodes[row].n); m, item = m+1, t.after(item) {
			if !c.unpackInto(item, &ids[m], &lps[m]) {
				return false
			}
		}
		return true
	case kObj:
		for m, key := range c.uniqueKeys(row, nil) {
			if !c.unpackInto(key, &ids[m], &lps[m]) {
				return false
			}
		}
		return true
	}
	return false
}

// unpackInto is `tid, lp = item` then the two element assignments: item a list of two, a str of two
// characters, or a dict of two keys.
func (c *Checker) unpackInto(item int, id *int32, lp *float32) bool {
	t := &c.tape
	n := t.nodes[item]
	var ok1, ok2 bool
	switch {
	case n.kind == kArr && n.n == 2:
		*id, ok1 = c.leafInt32(item+1, nil)
		*lp, ok2 = c.leafFloat32(t.after(item+1), nil)
	case n.kind == kStr:
		text := t.text(item, nil)
		if utf8.RuneCount(text) != 2 {
			return false
		}
		_, size := utf8.DecodeRune(text)
		*id, ok1 = c.leafInt32(-1, text[:size])
		*lp, ok2 = c.leafFloat32(-1, text[size:])
	case n.kind == kObj:
		keys := c.uniqueKeys(item, nil)
		if len(keys) != 2 {
			return false
		}
		*id, ok1 = c.leafInt32(keys[0], nil)
		*lp, ok2 = c.leafFloat32(keys[1], nil)
	}
	return ok1 && ok2
}
