package wire

// RunVectors: the port's test mode. A Python test writes cases as JSON lines, the Go answers each with one JSON
// line, and the test compares them with the Python functions' answers (tests/unit/test_compiled_wire.py).

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// vector is one case; which fields matter depends on its kind.
type vector struct {
	Kind            string  `json:"kind"`
	SessionID       string  `json:"session_id"`
	SeqID           int64   `json:"seq_id"`
	NumSamples      int     `json:"num_samples"`
	ResultTokens    int     `json:"result_tokens"`
	MaxTokens       int     `json:"max_tokens"`
	PromptExtra     int     `json:"prompt_extra"`
	Nonce           int64   `json:"nonce"`
	RequestID       string  `json:"request_id"`
	Payload         *string `json:"payload"`
	PayloadB64      string  `json:"payload_b64"`
	BodyB64         string  `json:"body_b64"`
	ContentType     string  `json:"content_type"`
	Seed            uint64  `json:"seed"`
	DelayFraction   float64 `json:"delay_fraction"`
	DelayS          float64 `json:"delay_s"`
	AbandonFraction float64 `json:"abandon_fraction"`
}

type checkerKey struct{ samples, tokens, extra int }

// RunVectors answers each JSON line of in with one JSON line on out, by the case's "kind":
//
//	asample {session_id, seq_id, num_samples, result_tokens, prompt_extra, nonce} -> {"body"}
//	poll {request_id} -> {"body"}; server_id {request_id} -> {"key"}
//	request_id {payload | payload_b64} -> {"id", "error"}
//	plan {seed, nonce, delay_fraction, delay_s, abandon_fraction} -> {"delay", "abandon"}
//	try_again, failure {content_type, payload | payload_b64} -> {"yes", "message"}
//	judge {content_type, body_b64, nonce, num_samples, max_tokens, prompt_extra} -> {"class", "message"}
func RunVectors(in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 1<<28)
	w := bufio.NewWriter(out)
	checkers := map[checkerKey]*Checker{}
	for scanner.Scan() {
		var v vector
		if err := json.Unmarshal(scanner.Bytes(), &v); err != nil {
			return fmt.Errorf("vector %q: %w", scanner.Text(), err)
		}
		line, err := answer(&v, checkers)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	if err := scanner.Err(); err != nil {
		return err
	}
	return w.Flush()
}

func (v *vector) payload() ([]byte, error) {
	if v.Payload != nil {
		return []byte(*v.Payload), nil
	}
	return base64.StdEncoding.DecodeString(v.PayloadB64)
}

// jsonObject writes {"k": v, ...} from alternating keys and values (string, bool, int, int64, float64).
func jsonObject(kv ...any) []byte {
	out := []byte{'{'}
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			out = append(out, ", "...)
		}
		out = append(appendPyJSONString(out, kv[i].(string)), ": "...)
		switch x := kv[i+1].(type) {
		case string:
			out = appendPyJSONString(out, x)
		case bool:
			out = strconv.AppendBool(out, x)
		case int:
			out = strconv.AppendInt(out, int64(x), 10)
		case int64:
			out = strconv.AppendInt(out, x, 10)
		case float64:
			out = strconv.AppendFloat(out, x, 'g', -1, 64)
		}
	}
	return append(out, '}')
}

func answer(v *vector, checkers map[checkerKey]*Checker) ([]byte, error) {
	switch v.Kind {
	case "asample":
		body := AsampleBody(v.SessionID, v.SeqID, v.NumSamples, v.ResultTokens, v.PromptExtra, v.Nonce)
		return jsonObject("body", string(body)), nil
	case "poll":
		return jsonObject("body", string(PollBody(v.RequestID))), nil
	case "server_id":
		return jsonObject("key", ServerIDKey(v.RequestID)), nil
	case "plan":
		delay, abandon := FirstPollPlan(v.Seed, v.Nonce, v.DelayFraction, v.DelayS, v.AbandonFraction)
		return jsonObject("delay", delay, "abandon", abandon), nil
	case "judge":
		return judgeVector(v, checkers)
	}
	payload, err := v.payload()
	if err != nil {
		return nil, err
	}
	switch v.Kind {
	case "request_id":
		id, err := RequestIDOf(payload)
		return jsonObject("id", id, "error", err != nil), nil
	case "try_again":
		return jsonObject("yes", IsTryAgain(v.ContentType, payload), "message", ""), nil
	case "failure":
		message, yes := FailureReported(v.ContentType, payload)
		return jsonObject("yes", yes, "message", message), nil
	}
	return nil, fmt.Errorf("unknown vector kind %q", v.Kind)
}

func judgeVector(v *vector, checkers map[checkerKey]*Checker) ([]byte, error) {
	body, err := base64.StdEncoding.DecodeString(v.BodyB64)
	if err != nil {
		return nil, err
	}
	key := checkerKey{v.NumSamples, v.MaxTokens, v.PromptExtra}
	c := checkers[key]
	if c == nil {
		c = NewChecker(key.samples, key.tokens, key.extra)
		checkers[key] = c
	}
	class, message := c.Judge(v.ContentType, body, v.Nonce)
	return jsonObject("class", class, "message", message), nil
}
