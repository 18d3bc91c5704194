package wire

// faultload/client/sdk_rules.py's is_try_again and failure_reported: json.loads semantics (pyMode).

import (
	"bytes"
	"strings"
	"sync"
)

// tryAgainMaxBytes is sdk_rules._TRY_AGAIN_MAX_BYTES: a larger body is a result, never parsed as an answer.
const tryAgainMaxBytes = 4096

var pyTapes = sync.Pool{New: func() any { return new(tape) }}

// loadsObject parses payload as json.loads would when the cheap tests pass; false for a non-object.
func loadsObject(t *tape, contentType string, payload []byte, marker string) bool {
	if !strings.Contains(contentType, "json") || len(payload) > tryAgainMaxBytes ||
		!bytes.Contains(payload, []byte(marker)) {
		return false
	}
	return t.parse(payload, pyMode) && t.nodes[0].kind == kObj
}

// typeIsTryAgain: body.get("type") == "try_again" (the last "type" wins, as in a dict).
func typeIsTryAgain(t *tape) bool {
	v := t.lastMember(0, "type")
	return v >= 0 && t.nodes[v].kind == kStr && t.keyIs(v, "try_again")
}

// IsTryAgain is sdk_rules.is_try_again: a 200 poll answer that is the SDK's TryAgainResponse.
func IsTryAgain(contentType string, payload []byte) bool {
	t := pyTapes.Get().(*tape)
	defer pyTapes.Put(t)
	return loadsObject(t, contentType, payload, "try_again") && typeIsTryAgain(t)
}

// FailureReported is sdk_rules.failure_reported: str(body["error"]) of a 200 poll answer that is the server's
// failure report. The message of a list or dict is Python's repr of json.loads's value.
func FailureReported(contentType string, payload []byte) (string, bool) {
	t := pyTapes.Get().(*tape)
	defer pyTapes.Put(t)
	if !loadsObject(t, contentType, payload, `"error"`) || typeIsTryAgain(t) {
		return "", false
	}
	v := t.lastMember(0, "error")
	if v < 0 {
		return "", false
	}
	return string(t.pyStr(nil, v)), true
}
