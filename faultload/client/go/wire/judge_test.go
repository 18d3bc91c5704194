package wire

// Judge on results built here as tests/results.py builds them (decode.expected, encoded as SkyRL's proto or as
// SampleOutput JSON), then with one field wrong; and Judge's speed on the common result.

import (
	"encoding/binary"
	"math"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

type expectedSeq struct {
	toks []int32
	lps  []float32
	stop string
}

// expectedResult is decode.expected's sequences for request nonce.
func expectedResult(nonce int64, samples, maxTokens int) []expectedSeq {
	out := make([]expectedSeq, samples)
	for j := range out {
		length, stopped, hasLogprobs := choice(nonce, int64(j), int64(maxTokens))
		s := &out[j]
		s.stop = map[bool]string{true: "stop", false: "length"}[stopped]
		tb, lb := mixBase(nonce, int64(j), tokA, tokB, vocab), mixBase(nonce, int64(j), lpA, lpB, logprobScale)
		for i := int64(0); i < length; i++ {
			s.toks = append(s.toks, int32((i*tokC%vocab+tb)%vocab))
			lp := logprobValues[(i*lpC%logprobScale+lb)%logprobScale]
			if !hasLogprobs {
				lp = 0
			}
			s.lps = append(s.lps, lp)
		}
	}
	return out
}

func le32(vals []uint32) []byte {
	out := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], v)
	}
	return out
}

// encodeProto is tests/results.encode_proto for a result with no prompt logprobs.
func encodeProto(seqs []expectedSeq) []byte {
	var body []byte
	for _, s := range seqs {
		var seq []byte
		if s.stop == "length" {
			seq = protowire.AppendVarint(protowire.AppendTag(seq, 1, protowire.VarintType), 1)
		}
		toks, lps := make([]uint32, len(s.toks)), make([]uint32, len(s.lps))
		for i := range s.toks {
			toks[i], lps[i] = uint32(s.toks[i]), math.Float32bits(s.lps[i])
		}
		seq = protowire.AppendBytes(protowire.AppendTag(seq, 2, protowire.BytesType), le32(toks))
		seq = protowire.AppendBytes(protowire.AppendTag(seq, 3, protowire.BytesType), le32(lps))
		body = protowire.AppendBytes(protowire.AppendTag(body, 1, protowire.BytesType), seq)
	}
	return body
}

// encodeJSON is tests/results.encode_json: json.dumps of the document, logprobs as Python floats.
func encodeJSON(seqs []expectedSeq) []byte {
	out := []byte(`{"sequences": [`)
	for j, s := range seqs {
		if j > 0 {
			out = append(out, ", "...)
		}
		out = append(out, `{"tokens": [`...)
		for i, tok := range s.toks {
			if i > 0 {
				out = append(out, ", "...)
			}
			out = strconv.AppendInt(out, int64(tok), 10)
		}
		out = append(out, `], "logprobs": [`...)
		for i, lp := range s.lps {
			if i > 0 {
				out = append(out, ", "...)
			}
			out = appendPyFloat(out, float64(lp))
		}
		out = append(append(append(out, `], "stop_reason": "`...), s.stop...), `"}`...)
	}
	return append(out, `], "type": "sample", "prompt_logprobs": null}`...)
}

const benchNonce = 1 << 24 // asks nothing; sample 0 at 16 tokens is "length", with logprobs

func TestJudgeExactAndWrong(t *testing.T) {
	c := NewChecker(2, 12, 0)
	for nonce := int64(1 << 24); nonce < 1<<24+400; nonce++ {
		if plp, _ := asks(nonce); plp {
			continue
		}
		seqs := expectedResult(nonce, 2, 12)
		for _, ct := range []string{protoContentType, "application/json"} {
			body := encodeJSON(seqs)
			if ct == protoContentType {
				body = encodeProto(seqs)
			}
			if class, msg := c.Judge(ct, body, nonce); class != ClassOK {
				t.Fatalf("nonce %d %s: %d %s", nonce, ct, class, msg)
			}
			if class, _ := c.Judge(ct, body[:len(body)-1], nonce); class != ClassDecode {
				t.Errorf("nonce %d %s: a cut body was %d", nonce, ct, class)
			}
			if class, msg := c.Judge(ct, body, nonce+1); class != ClassIntegrity || msg[:9] != "sample 0:" {
				t.Errorf("nonce %d %s: the next nonce's verdict was %d %q", nonce, ct, class, msg)
			}
		}
	}
}

func TestJudgeNamesTheWrongField(t *testing.T) {
	c := NewChecker(1, 16, 0)
	good := expectedResult(benchNonce, 1, 16)
	lps := append([]float32(nil), good[0].lps...)
	lps[3] = -0.5
	cases := map[string][]expectedSeq{
		"sample 0: logprobs do not match nonce 16777216":                {{good[0].toks, lps, "length"}},
		"sample 0: stop reason 'stop', expected 'length'":               {{good[0].toks, good[0].lps, "stop"}},
		"sample 0: 15 tokens, expected 16":                              {{good[0].toks[1:], good[0].lps[1:], "length"}},
		"0 sequences, expected 1":                                       {},
		"sample 0: stop reason \"it's\", expected 'length'":             {{good[0].toks, good[0].lps, "it's"}},
		"sample 0: stop reason 'ça\\x07', expected 'length'":            {{good[0].toks, good[0].lps, "ça\\u0007"}},
		"sample 0: stop reason 'length\\\\', expected 'length'":         {{good[0].toks, good[0].lps, "length\\\\"}},
		"sample 0: stop reason '\\u2028\\U000e0001', expected 'length'": {{good[0].toks, good[0].lps, "\\u2028\\udb40\\udc01"}},
	}
	for want, seqs := range cases {
		if class, msg := c.Judge("application/json", encodeJSON(seqs), benchNonce); class != ClassIntegrity ||
			msg != want {
			t.Errorf("got %d %q, want %q", class, msg, want)
		}
	}
	odd := append(encodeProto(good), 0x0a, 0x03, 0x12, 0x01, 0x00) // a sequence whose tokens are 1 byte
	if _, msg := c.Judge(protoContentType, odd, benchNonce); msg != "tokens of 1 bytes, not whole int32 values" {
		t.Errorf("odd packed bytes: %q", msg)
	}
}

func benchmarkJudge(b *testing.B, contentType string, body []byte) {
	c := NewChecker(1, 16, 0)
	if class, msg := c.Judge(contentType, body, benchNonce); class != ClassOK {
		b.Fatalf("%d %s", class, msg)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		c.Judge(contentType, body, benchNonce)
	}
}

func BenchmarkJudgeProto16(b *testing.B) {
	benchmarkJudge(b, protoContentType, encodeProto(expectedResult(benchNonce, 1, 16)))
}

func BenchmarkJudgeJSON16(b *testing.B) {
	benchmarkJudge(b, "application/json", encodeJSON(expectedResult(benchNonce, 1, 16)))
}
