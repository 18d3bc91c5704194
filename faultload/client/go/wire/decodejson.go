package wire

// decode.decode_json: a SampleOutput JSON body read as pysimdjson and numpy read it. Every exception the Python
// catches (ValueError, KeyError, TypeError, AttributeError) is a DecodeError, so here any failure is one; the
// message after the prefix is only close to Python's.

import "math"

const jsonPrefix = "not a SampleOutput JSON: "

func (c *Checker) decodeJSON(body []byte) string {
	t, r := &c.tape, &c.res
	r.reset()
	if !t.parse(body, simdMode) {
		return jsonPrefix + t.err
	}
	if t.nodes[0].kind != kObj {
		return jsonPrefix + "the document is not subscriptable by 'sequences'"
	}
	seqs := t.member(0, "sequences")
	if seqs < 0 {
		return jsonPrefix + "'sequences'"
	}
	if msg := c.jsonSequences(seqs); msg != "" {
		return jsonPrefix + msg
	}
	if plp := t.member(0, "prompt_logprobs"); plp >= 0 && t.nodes[plp].kind != kNull {
		r.hasPlp = true
		if msg := c.jsonPromptLogprobs(plp); msg != "" {
			return jsonPrefix + msg
		}
	}
	if top := t.member(0, "topk_prompt_logprobs"); top >= 0 && t.nodes[top].kind != kNull {
		r.hasTop = true
		if msg := c.jsonTopk(top); msg != "" {
			return jsonPrefix + msg
		}
	}
	return ""
}

// jsonSequences iterates doc["sequences"] as Python does: a list's elements, an object's keys or a string's
// characters (either fails at seq["tokens"] unless there are none), anything else not iterable.
func (c *Checker) jsonSequences(seqs int) string {
	t := &c.tape
	n := t.nodes[seqs]
	switch {
	case n.kind == kObj && n.n == 0, n.kind == kStr && n.hi == n.lo:
		return ""
	case n.kind != kArr:
		return "'sequences' is not a list of objects"
	}
	for k, seq := int32(0), seqs+1; k < n.n; k, seq = k+1, t.after(seq) {
		if t.nodes[seq].kind != kObj {
			return "a sequence is not an object"
		}
		toks, lps := t.member(seq, "tokens"), t.member(seq, "logprobs")
		if toks < 0 || lps < 0 {
			return "'tokens' or 'logprobs' missing"
		}
		if msg := c.flatten(toks, true); msg != "" {
			return msg
		}
		if msg := c.flatten(lps, false); msg != "" {
			return msg
		}
		c.res.endSequence(c.stopReason(t.member(seq, "stop_reason")))
	}
	return ""
}

// stopReason is str(seq.get("stop_reason")), without allocating for the two expected names.
func (c *Checker) stopReason(v int) string {
	t := &c.tape
	if v < 0 {
		return "None"
	}
	if t.nodes[v].kind == kStr {
		switch {
		case t.keyIs(v, "stop"):
			return "stop"
		case t.keyIs(v, "length"):
			return "length"
		}
	}
	return string(t.pyStr(nil, v))
}

// flatten is Array.as_buffer(of_type="i" or "d"): nested lists flattened; for "i" an int64 (a uint64 past it
// is out of range), cast to int32 wrapping; for "d" any number as a double, then float32.
func (c *Checker) flatten(i int, ints bool) string {
	t, r := &c.tape, &c.res
	if t.nodes[i].kind != kArr {
		return "the value has no attribute 'as_buffer'"
	}
	for k, e := int32(0), i+1; k < t.nodes[i].n; k, e = k+1, t.after(e) {
		n := t.nodes[e]
		switch {
		case n.kind == kArr:
			if msg := c.flatten(e, ints); msg != "" {
				return msg
			}
		case ints && n.kind == kInt:
			r.toks = append(r.toks, int32(int64(n.num)))
		case !ints && n.kind == kInt:
			r.lps = append(r.lps, float32(float64(int64(n.num))))
		case !ints && n.kind == kUint:
			r.lps = append(r.lps, float32(float64(n.num)))
		case !ints && n.kind == kFloat:
			r.lps = append(r.lps, float32(math.Float64frombits(n.num)))
		case n.kind == kUint:
			return "NUMBER_OUT_OF_RANGE: The JSON number is too large or too small to fit within the requested type."
		default:
			return "INCORRECT_TYPE: The JSON element does not have the requested type."
		}
	}
	return ""
}

// jsonPromptLogprobs is np.array([nan if x is None else x for x in plp.as_list()], dtype=float32).
func (c *Checker) jsonPromptLogprobs(i int) string {
	t, r := &c.tape, &c.res
	if t.nodes[i].kind != kArr {
		return "'prompt_logprobs' has no attribute 'as_list'"
	}
	var dims [65]int
	nd := 0
	for x := i; t.nodes[x].kind == kArr && nd <= 64; x++ {
		dims[nd] = int(t.nodes[x].n)
		nd++
		if dims[nd-1] == 0 {
			break
		}
	}
	if nd > 64 {
		return "the requested array would exceed the maximum number of dimensions of 64"
	}
	if !c.rectangular(i, dims[:nd], 0) {
		return "could not convert the prompt logprobs to a float32 array"
	}
	r.plpFlat = nd == 1
	return ""
}

// rectangular: numpy's array of the nested lists has the shape dims, and each leaf converts to float32 (only
// a one-dimensional array's values are kept: no other shape is compared further).
func (c *Checker) rectangular(i int, dims []int, level int) bool {
	t := &c.tape
	n := t.nodes[i]
	if level == len(dims) {
		f, ok := c.leafFloat32(i, nil)
		if ok && len(dims) == 1 {
			c.res.plp = append(c.res.plp, f)
		}
		return ok
	}
	if n.kind != kArr || int(n.n) != dims[level] {
		return false
	}
	for k, e := int32(0), i+1; k < n.n; k, e = k+1, t.after(e) {
		if !c.rectangular(e, dims, level+1) {
			return false
		}
	}
	return true
}
