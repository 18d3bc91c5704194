package wire

// faultload/client/sample_bodies.py, poll_plan.py and record/history.server_id_key.

import (
	"encoding/binary"
	"errors"
	"strconv"
	"sync"

	"golang.org/x/crypto/blake2b"
)

// AsampleBody is sample_bodies.asample_body: the same f-string, field for field (seqID is job.first + row).
func AsampleBody(sessionID string, seqID int64, numSamples, resultTokens, promptExtra int, nonce int64) []byte {
	out := make([]byte, 0, 320+2*promptExtra+len(sessionID))
	out = append(out, `{"sampling_session_id":"`...)
	out = append(out, sessionID...)
	out = append(out, `","seq_id":`...)
	out = strconv.AppendInt(out, seqID, 10)
	out = append(out, `,"num_samples":`...)
	out = strconv.AppendInt(out, int64(numSamples), 10)
	out = append(out, `,"type":"sample","prompt":{"chunks":[{"type":"encoded_text","tokens":[`...)
	for i := 0; i < 3+promptExtra; i++ {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, promptToken(nonce, i), 10)
	}
	out = append(out, `]}]},"sampling_params":{"max_tokens":`...)
	out = strconv.AppendInt(out, int64(resultTokens), 10)
	out = append(out, `,"temperature":1.0,"seed":`...)
	out = strconv.AppendInt(out, pyMod(nonce, 1<<31), 10)
	out = append(out, '}')
	out = appendAsksJSON(out, nonce)
	return append(out, '}')
}

// appendAsksJSON is decode.asks_json: the sample body's trailing fields for what the request asks.
func appendAsksJSON(out []byte, nonce int64) []byte {
	plp, topk := asks(nonce)
	if !plp {
		return out
	}
	out = append(out, `,"prompt_logprobs":true,"topk_prompt_logprobs":`...)
	return strconv.AppendInt(out, topk, 10)
}

// PollBody is sample_bodies.poll_body: json.dumps({"request_id": id}), default separators and ensure_ascii.
func PollBody(requestID string) []byte {
	out := make([]byte, 0, 20+len(requestID))
	out = append(out, `{"request_id": `...)
	out = appendPyJSONString(out, requestID)
	return append(out, '}')
}

// simdTapes keeps parsers between calls of the plain functions (RequestIDOf has no Checker to hold one).
var simdTapes = sync.Pool{New: func() any { return new(tape) }}

// RequestIDOf is sample_bodies.request_id_of: the 2xx asample answer's "request_id" (its first occurrence, as
// pysimdjson reads it), a non-empty string or an integer, as text; any other body is an error.
func RequestIDOf(payload []byte) (string, error) {
	t := simdTapes.Get().(*tape)
	defer simdTapes.Put(t)
	if !t.parse(payload, simdMode) {
		return "", errors.New(t.err)
	}
	if t.nodes[0].kind != kObj {
		return "", errors.New("the body is not a JSON object")
	}
	v := t.member(0, "request_id")
	if v < 0 {
		return "", errors.New("'request_id'")
	}
	switch n := &t.nodes[v]; n.kind {
	case kInt:
		return strconv.FormatInt(int64(n.num), 10), nil
	case kUint:
		return strconv.FormatUint(n.num, 10), nil
	case kStr:
		if s := t.text(v, nil); len(s) > 0 {
			return string(s), nil
		}
	}
	return "", errors.New("request_id " + string(t.pyRepr(nil, v)) + " is not an id")
}

// ServerIDKey is history.server_id_key: the id when Python's int() reads it and it fits int64, else the top 62
// bits of its blake2b-64 digest; 0 (the column's "no id") becomes 1.
func ServerIDKey(requestID string) int64 {
	value, ok := pyInt([]byte(requestID))
	if !ok {
		h, _ := blake2b.New(8, nil)
		h.Write([]byte(requestID))
		value = int64(binary.BigEndian.Uint64(h.Sum(nil)) >> 2)
	}
	if value == 0 {
		return 1
	}
	return value
}

// unit is poll_plan._unit: splitmix64 of the mix in wrapping uint64, as a float in [0, 1).
func unit(seed uint64, nonce int64, stream uint64) float64 {
	x := seed*0x9E3779B97F4A7C15 + uint64(nonce)*0xD1B54A32D192ED03 + stream*0x8CB92BA72F3D8DD7
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	// Python's int / float converts the int to the nearest double first, as Go's conversion does.
	return float64(x^(x>>31)) / (1 << 64)
}

// FirstPollPlan is poll_plan.first_poll_plan with the shape's numbers passed in: seed is Python's seed masked to
// 64 bits, delayS the already scaled delay. A zero fraction draws nothing, as Python's truthiness test.
func FirstPollPlan(seed uint64, nonce int64, delayFraction, delayS, abandonFraction float64) (float64, bool) {
	delay := 0.0
	if delayFraction != 0 && unit(seed, nonce, 1) < delayFraction {
		delay = delayS
	}
	abandon := abandonFraction != 0 && unit(seed, nonce, 2) < abandonFraction
	return delay, abandon
}
