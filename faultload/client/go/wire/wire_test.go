package wire

// Golden values from the Python functions (tests/unit/test_compiled_wire.py compares far more, through
// RunVectors); these keep a plain `go test` meaningful.

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestAsampleBodyIsPythons(t *testing.T) {
	cases := map[int64]string{
		5<<24 | 7: `{"sampling_session_id":"sess","seq_id":12,"num_samples":2,"type":"sample","prompt":{"chunks":[{"type":"encoded_text","tokens":[62487,80,7,1]}]},"sampling_params":{"max_tokens":8,"temperature":1.0,"seed":83886087},"prompt_logprobs":true,"topk_prompt_logprobs":0}`,
		1<<24 | 9: `{"sampling_session_id":"sess","seq_id":12,"num_samples":2,"type":"sample","prompt":{"chunks":[{"type":"encoded_text","tokens":[62487,16,9,1]}]},"sampling_params":{"max_tokens":8,"temperature":1.0,"seed":16777225}}`,
	}
	for nonce, want := range cases {
		if got := string(AsampleBody("sess", 12, 2, 8, 1, nonce)); got != want {
			t.Errorf("nonce %d:\n got %s\nwant %s", nonce, got, want)
		}
	}
}

func TestPollBodyEscapesAsJSONDumps(t *testing.T) {
	got := string(PollBody("a\"b\\c\n\x01\x7fé😀"))
	want := `{"request_id": "a\"b\\c\n\u0001\u007f\u00e9\ud83d\ude00"}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestServerIDKeyIsPythons(t *testing.T) {
	cases := map[string]int64{"123": 123, "-5": -5, " 7 ": 7, "1_000": 1000, "0": 1, "٣٤": 34,
		"9223372036854775808":                  2490532927339371312,
		"4f7c1e52-8a2b-4d0e-9c1a-2b3c4d5e6f70": 511859236367790308, "é": 3658805136710223435}
	for id, want := range cases {
		if got := ServerIDKey(id); got != want {
			t.Errorf("%q: got %d, want %d", id, got, want)
		}
	}
}

func TestFirstPollPlanIsPythons(t *testing.T) {
	delays := []float64{0, 2, 2, 0, 0, 0, 0, 2}
	abandons := []bool{false, false, true, true, true, true, true, false}
	for n := range delays {
		d, a := FirstPollPlan(math.MaxUint64, int64(n), 0.5, 2.0, 0.5)
		if d != delays[n] || a != abandons[n] {
			t.Errorf("nonce %d: got (%v, %v), want (%v, %v)", n, d, a, delays[n], abandons[n])
		}
	}
}

func TestRequestIDOf(t *testing.T) {
	ok := map[string]string{`{"request_id": 42}`: "42", `{"request_id": "ab"}`: "ab",
		`{"request_id": "a", "request_id": "b"}`: "a", `{"request_id": 9223372036854775808}`: "9223372036854775808",
		"\xef\xbb\xbf{\"request_id\": \"\\u0041\"}": "A"}
	for in, want := range ok {
		if got, err := RequestIDOf([]byte(in)); err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`{"request_id": ""}`, `{"request_id": true}`, `{"request_id": 1.0}`, `{}`, `[1]`,
		`{"request_id": null}`, `{"request_id": 18446744073709551616}`, "{\"request_id\": \"\xff\"}", ``} {
		if got, err := RequestIDOf([]byte(in)); err == nil {
			t.Errorf("%s: got %q, want an error", in, got)
		}
	}
}

func TestPyFloatRepr(t *testing.T) {
	cases := map[float64]string{1: "1.0", 1e16: "1e+16", 1e15: "1000000000000000.0", 1e-5: "1e-05",
		0.0001: "0.0001", 1.5e300: "1.5e+300", 123.456: "123.456", math.Copysign(0, -1): "-0.0",
		math.Inf(-1): "-inf", 5e-324: "5e-324", -0.1234000027179718: "-0.1234000027179718"}
	for f, want := range cases {
		if got := string(appendPyFloat(nil, f)); got != want {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
}

func TestPyStrRepr(t *testing.T) {
	cases := map[string]string{"stop": "'stop'", "st'op": `"st'op"`, `a'b"`: `'a\'b"'`, "ça\n\x07": `'ça\n\x07'`,
		"\u00a0\u2028\U0001f600": `'\xa0\u2028😀'`, "\xed\xa0\x80": `'\ud800'`}
	for s, want := range cases {
		if got := string(appendPyStrRepr(nil, []byte(s))); got != want {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}

// TestSimdjsonAcceptance: what pysimdjson's parse accepts and rejects (found by running it).
func TestSimdjsonAcceptance(t *testing.T) {
	accept := []string{"1", " 1 ", "\xef\xbb\xbf[1]", "-0", "1e05", "1E+5", "-0.0", `"\/"`, `"\u00E9"`,
		`"a\u0000b"`, `"a\ud800\udc00b"`, `{"a":1,"a":2}`, "1e-400", "4.9e-324", "18446744073709551615",
		strings.Repeat("[", 1024) + strings.Repeat("]", 1024)}
	reject := []string{"", "  ", "01", "1.", ".5", "NaN", "Infinity", `"\ud800"`, `"a\udc00b"`, `"\ud800\u0041"`,
		"\"\xff\"", "\ufeff\ufeff1", "1 2", "[1,]", "tru", "-", "1e", "[1]x", "\"a\x01b\"", `"\a"`, `"\u12"`,
		"truex", "[1true]", "\v1", "\xc2\xa01", "1e400", "1.7976931348623159e308", "18446744073709551616",
		"-9223372036854775809", strings.Repeat("[", 1025) + strings.Repeat("]", 1025), `{"a" 1}`, `{1:1}`}
	var tp tape
	for _, in := range accept {
		if !tp.parse([]byte(in), simdMode) {
			t.Errorf("%q rejected: %s", in, tp.err)
		}
	}
	for _, in := range reject {
		if tp.parse([]byte(in), simdMode) {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestFailureReportedAndTryAgain(t *testing.T) {
	failures := map[string]string{`{"error": "boom"}`: "boom", `{"error": 1.5e300}`: "1.5e+300",
		`{"error": null}`: "None", `{"error": [1, "a'b", {"k": null, "j": -0.0}]}`: `[1, "a'b", {'k': None, 'j': -0.0}]`,
		`{"error": {"a": 1, "b": [], "a": 2}}`: "{'a': 2, 'b': []}", `{"error": NaN}`: "nan",
		`{"error": 12345678901234567890123}`: "12345678901234567890123", `{"error": "a", "error": "b"}`: "b",
		`{"error": "\ud800"}`: "\xed\xa0\x80"}
	for in, want := range failures {
		if got, yes := FailureReported("application/json", []byte(in)); !yes || got != want {
			t.Errorf("%s: got %q, %v; want %q", in, got, yes, want)
		}
	}
	for _, in := range []string{`{"error": "x", "type": "try_again"}`, `{"msg": "error"}`, `["error"]`,
		`{"error": 1,}`, "{\"error\": \"\xff\"}"} {
		if got, yes := FailureReported("application/json", []byte(in)); yes {
			t.Errorf("%s: reported %q", in, got)
		}
	}
	if _, yes := FailureReported("text/plain", []byte(`{"error": 1}`)); yes {
		t.Error("a non-JSON content type was read")
	}
	yes := map[string]bool{`{"type": "try_again"}`: true, `{"type": "try_again", "type": "x"}`: false,
		`{"type": "x", "type": "try_again"}`: true, `["try_again"]`: false, `{"type": "try_again", "n": NaN}`: true, `{"type": "try\u005fagain"}`: false,
		`{"type": "try_again"` + strings.Repeat(" ", 4100) + "}": false}
	for in, want := range yes {
		if got := IsTryAgain("application/json", []byte(in)); got != want {
			t.Errorf("%.60s: got %v, want %v", in, got, want)
		}
	}
}

func TestRunVectors(t *testing.T) {
	in := strings.NewReader(`{"kind":"server_id","request_id":" 7 "}` + "\n" +
		`{"kind":"failure","content_type":"application/json","payload_b64":"eyJlcnJvciI6ICJcdTAwZTkifQ=="}` + "\n")
	var out bytes.Buffer
	if err := RunVectors(in, &out); err != nil {
		t.Fatal(err)
	}
	want := `{"key": 7}` + "\n" + `{"yes": true, "message": "\u00e9"}` + "\n"
	if out.String() != want {
		t.Errorf("got %s, want %s", out.String(), want)
	}
}
