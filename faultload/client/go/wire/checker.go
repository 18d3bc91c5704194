package wire

// faultload/client/decode.py's decode and check: the verdict on a retrieve_future result.

import (
	"fmt"
	"math"
	"strings"
)

// The verdict classes (faultload/record/history.ErrorClass).
const (
	ClassOK        = 0
	ClassIntegrity = 8
	ClassDecode    = 9
)

const protoContentType = "application/x-protobuf"

// result is decode.Result, flattened: sequence j's tokens are toks[tokOff[j]:tokOff[j+1]], and so on.
type result struct {
	toks          []int32
	lps           []float32
	tokOff, lpOff []int
	stops         []string
	plp           []float32
	hasPlp        bool
	plpFlat       bool // false: a JSON list of lists, never the one-dimensional shape expected
	topIds        []int32
	topLps        []float32
	hasTop        bool
	topRows, topK int
}

func (r *result) reset() {
	r.toks, r.lps, r.stops = r.toks[:0], r.lps[:0], r.stops[:0]
	r.tokOff, r.lpOff = append(r.tokOff[:0], 0), append(r.lpOff[:0], 0)
	r.plp, r.hasPlp, r.plpFlat = r.plp[:0], false, true
	r.topIds, r.topLps, r.hasTop, r.topRows, r.topK = r.topIds[:0], r.topLps[:0], false, 0, 0
}

// endSequence closes sequence j after its tokens and logprobs were appended.
func (r *result) endSequence(stop string) {
	r.tokOff, r.lpOff = append(r.tokOff, len(r.toks)), append(r.lpOff, len(r.lps))
	r.stops = append(r.stops, stop)
}

func (r *result) sequences() int { return len(r.stops) }

// Checker judges results of one load shape. Not safe for concurrent use: it keeps its buffers (a goroutine
// holds its own, or guards it).
type Checker struct {
	numSamples, maxTokens, promptExtra int
	tokSteps, lpSteps                  []int32 // tokens._steps for max_tokens, computed once as Python caches
	tape                               tape
	pb                                 pbResponse
	res                                result
}

// NewChecker is a Checker for requests of numSamples samples of maxTokens, their prompts padded by promptExtra.
func NewChecker(numSamples, maxTokens, promptExtra int) *Checker {
	n := max(maxTokens, 0)
	return &Checker{numSamples: numSamples, maxTokens: maxTokens, promptExtra: promptExtra,
		tokSteps: steps(n, tokC, vocab), lpSteps: steps(n, lpC, logprobScale)}
}

// Judge is decode.decode then decode.check on a result of request nonce: ClassOK with no message, ClassDecode
// with the DecodeError's text, or ClassIntegrity with check()'s.
func (c *Checker) Judge(contentType string, body []byte, nonce int64) (int, string) {
	var problem string
	if strings.Contains(contentType, protoContentType) {
		problem = c.decodeProto(body)
	} else {
		problem = c.decodeJSON(body)
	}
	if problem != "" {
		return ClassDecode, problem
	}
	if problem = c.check(nonce); problem != "" {
		return ClassIntegrity, problem
	}
	return ClassOK, ""
}

var protoStops = map[int32]string{0: "stop", 1: "length"}

// decodeProto is decode.decode_proto: "" or the DecodeError's message.
func (c *Checker) decodeProto(body []byte) string {
	r := &c.res
	r.reset()
	if !c.pb.parse(body) {
		return "not a SampleResponse proto: Error parsing message with type 'tinker_public.SampleResponse'"
	}
	for _, s := range c.pb.seqs {
		if msg := packed(s.tokens, "tokens", "int32"); msg != "" {
			return msg
		}
		if msg := packed(s.logprobs, "logprobs", "float32"); msg != "" {
			return msg
		}
		r.toks, r.lps = int32s(r.toks, s.tokens), float32s(r.lps, s.logprobs)
		stop, known := protoStops[s.stop]
		if !known {
			stop = fmt.Sprintf("stop reason %d", s.stop)
		}
		r.endSequence(stop)
	}
	if r.hasPlp = c.pb.hasPlp; r.hasPlp {
		if msg := packed(c.pb.plp, "prompt_logprobs", "float32"); msg != "" {
			return msg
		}
		r.plp = float32s(r.plp, c.pb.plp)
	}
	if r.hasTop = c.pb.hasTop; r.hasTop {
		return c.protoTopk(&c.pb.top)
	}
	return ""
}

// protoTopk is decode._proto_topk.
func (c *Checker) protoTopk(top *pbTopk) string {
	r := &c.res
	if msg := packed(top.ids, "top-k token ids", "int32"); msg != "" {
		return msg
	}
	if msg := packed(top.lps, "top-k logprobs", "float32"); msg != "" {
		return msg
	}
	ids, lps := len(top.ids)/4, len(top.lps)/4
	if uint64(ids) != uint64(top.promptLength)*uint64(top.k) || lps != ids {
		return fmt.Sprintf("top-k prompt logprobs of %d ids and %d logprobs, not %dx%d", ids, lps, top.promptLength,
			top.k)
	}
	r.topRows, r.topK = int(top.promptLength), int(top.k)
	r.topIds, r.topLps = int32s(r.topIds, top.ids), float32s(r.topLps, top.lps)
	return ""
}

// packed is decode._packed's check: a bytes field of whole 4-byte values.
func packed(data []byte, field, dtype string) string {
	if len(data)%4 != 0 {
		return fmt.Sprintf("%s of %d bytes, not whole %s values", field, len(data), dtype)
	}
	return ""
}

// check is decode.check: "" when the result is exactly request nonce's, else the first wrong field.
func (c *Checker) check(nonce int64) string {
	r := &c.res
	if r.sequences() != c.numSamples {
		return fmt.Sprintf("%d sequences, expected %d", r.sequences(), c.numSamples)
	}
	for j := 0; j < r.sequences(); j++ {
		length, stopped, hasLogprobs := choice(nonce, int64(j), int64(c.maxTokens))
		toks := r.toks[r.tokOff[j]:r.tokOff[j+1]]
		if int64(len(toks)) != max(length, 0) {
			return fmt.Sprintf("sample %d: %d tokens, expected %d", j, len(toks), max(length, 0))
		}
		if !c.sameTokens(toks, nonce, int64(j)) {
			return fmt.Sprintf("sample %d: tokens do not match nonce %d", j, nonce)
		}
		lps := r.lps[r.lpOff[j]:r.lpOff[j+1]]
		if len(lps) != len(toks) || !c.sameLogprobs(lps, nonce, int64(j), hasLogprobs) {
			return fmt.Sprintf("sample %d: logprobs do not match nonce %d", j, nonce)
		}
		want := "length"
		if stopped {
			want = "stop"
		}
		if r.stops[j] != want {
			return fmt.Sprintf("sample %d: stop reason %s, expected %s", j,
				appendPyStrRepr(nil, []byte(r.stops[j])), appendPyStrRepr(nil, []byte(want)))
		}
	}
	return c.promptLevel(nonce)
}

func (c *Checker) sameTokens(toks []int32, nonce, sample int64) bool {
	base := mixBase(nonce, sample, tokA, tokB, vocab)
	for i, got := range toks {
		if int64(got) != (int64(c.tokSteps[i])+base)%vocab {
			return false
		}
	}
	return true
}

// sameLogprobs: the router's logprobs, or all MISSING_LOGPROB (0.0) for a choice sent without them.
func (c *Checker) sameLogprobs(lps []float32, nonce, sample int64, hasLogprobs bool) bool {
	if !hasLogprobs {
		for _, got := range lps {
			if got != 0 {
				return false
			}
		}
		return true
	}
	base := mixBase(nonce, sample, lpA, lpB, logprobScale)
	for i, got := range lps {
		if got != logprobValues[(int64(c.lpSteps[i])+base)%logprobScale] {
			return false
		}
	}
	return true
}

func presence(missing bool) string {
	if missing {
		return "missing (asked for,"
	}
	return "not asked for ("
}

// promptLevel is decode._prompt_level: prompt logprobs and top-k present exactly where asked, and the nonce's.
func (c *Checker) promptLevel(nonce int64) string {
	r := &c.res
	wantPlp, k := asks(nonce)
	wantTop := k > 0
	if !r.hasPlp && !wantPlp && !r.hasTop && !wantTop {
		return ""
	}
	if r.hasPlp != wantPlp {
		return fmt.Sprintf("prompt logprobs %s nonce %d)", presence(!r.hasPlp), nonce)
	}
	if r.hasPlp && !c.samePlp(nonce, k) {
		return fmt.Sprintf("prompt logprobs do not match nonce %d", nonce)
	}
	if r.hasTop != wantTop {
		return fmt.Sprintf("top-k prompt logprobs %s nonce %d)", presence(!r.hasTop), nonce)
	}
	if r.hasTop && !c.sameTop(nonce, k) {
		return fmt.Sprintf("top-k prompt logprobs do not match nonce %d", nonce)
	}
	return ""
}

// samePlp compares with NaN equal to NaN (position 0), as _same(equal_nan=True).
func (c *Checker) samePlp(nonce, k int64) bool {
	r := &c.res
	if !r.plpFlat || len(r.plp) != 3+c.promptExtra {
		return false
	}
	for i, got := range r.plp {
		want := expectedPromptLogprob(nonce, int64(i), k)
		if got != want && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
			return false
		}
	}
	return true
}

// sameTop compares the (positions, k) matrices exactly (a NaN never matches, as _same without equal_nan).
func (c *Checker) sameTop(nonce, k int64) bool {
	r := &c.res
	if r.topRows != 3+c.promptExtra || int64(r.topK) != k {
		return false
	}
	for i := 0; i < r.topRows; i++ {
		for m := 0; m < r.topK; m++ {
			id, lp := expectedTopk(nonce, i, int64(m+1), k)
			if r.topIds[i*r.topK+m] != id || r.topLps[i*r.topK+m] != lp {
				return false
			}
		}
	}
	return true
}
