package main

// The bodies: the same bytes as faultload/router/bodies.py's completion_body, from the same
// arithmetic as faultload/tokens.py (a request's tokens and logprobs follow from its nonce).

import (
	"fmt"
	"strconv"
	"unicode/utf16"

	"github.com/valyala/fastjson"
)

const (
	promptMark    = 0xF417
	vocab         = 50_000
	logprobScale  = 10_000
	noncePart     = 1 << 20
	maxTokens     = 2_000_000
	maxN          = 1024
	maxTotalToken = 8_000_000
	tokenWidth    = 5 // len(str(vocab - 1))
	maxTopK       = 20
	choiceMod     = 2_147_483_647
	stopEvery     = 4
	noLogprobsOf  = 8
	rankStep      = 100
	altStep       = 7_919
)

// choiceShape is tokens.choice: how many tokens choice sample carries, whether it stopped before maxTok
// ("stop") and whether it carries logprobs (null otherwise). Every product stays below 2**63.
func choiceShape(nonce, sample, maxTok int64) (length int64, stopped, hasLogprobs bool) {
	h := ((nonce%choiceMod)*1_103_515_245 + sample*12_345 + 1) % choiceMod
	stopped = maxTok > 1 && h%stopEvery == 0
	length = maxTok
	if stopped {
		length = 1 + (h/stopEvery)%(maxTok-1)
	}
	return length, stopped, (h/7)%noLogprobsOf != 0
}

// mixInto writes (base + (i*c) % mod) % mod for i < len(out), base = (nonce*a + sample*b) % mod.
func mixInto(out []int64, nonce, sample, a, b, c, mod int64) {
	base := ((nonce%mod)*(a%mod) + (sample%mod)*(b%mod)) % mod
	for i := range out {
		out[i] = (int64(i)*c%mod + base) % mod
	}
}

var tokenRows, logprobRows = buildTables()

// buildTables: token id i right-aligned in tokenWidth then ','; logprob digit d as "-0.dddd,".
func buildTables() ([]byte, []byte) {
	tok := make([]byte, vocab*(tokenWidth+1))
	for i := 0; i < vocab; i++ {
		row := tok[i*(tokenWidth+1) : (i+1)*(tokenWidth+1)]
		s := strconv.Itoa(i)
		for k := range row {
			row[k] = ' '
		}
		copy(row[tokenWidth-len(s):], s)
		row[tokenWidth] = ','
	}
	lp := make([]byte, logprobScale*8)
	for d := 0; d < logprobScale; d++ {
		copy(lp[d*8:], fmt.Sprintf("-0.%04d,", d))
	}
	return tok, lp
}

type job struct {
	nonce          int64
	n              int64
	maxTokens      int64
	model          string
	prompt         []int64
	promptLogprobs int64 // the request's prompt_logprobs (k top entries), -1 when it asks for none
}

// parsers are reused: a fastjson.Parser keeps its buffers between bodies.
var parsers fastjson.ParserPool

// intOf: a JSON number written as an integer (Python's json gives an int for it, a float otherwise).
func intOf(v *fastjson.Value) (int64, bool) {
	if v == nil || v.Type() != fastjson.TypeNumber {
		return 0, false
	}
	i, err := v.Int64()
	return i, err == nil
}

// parseJob mirrors bodies.parse_job: the request's parameters, or a one-line reason for a 400. With fastjson:
// encoding/json (into a map of interfaces, then into a struct) took 10-12% of the router's CPU per completion,
// fastjson N% (perf, README "Benchmarks").
func parseJob(raw []byte) (*job, string) {
	p := parsers.Get()
	defer parsers.Put(p)
	payload, err := p.ParseBytes(raw)
	if err != nil {
		return nil, "invalid JSON: " + err.Error()
	}
	if payload.Type() != fastjson.TypeObject {
		return nil, "body must be a JSON object"
	}
	list, err := payload.Get("prompt").Array()
	if err != nil {
		return nil, "prompt must be a list of token ids"
	}
	prompt := make([]int64, len(list))
	for i, t := range list {
		v, ok := intOf(t)
		if !ok {
			f, err := t.Float64() // bodies.py takes int() of the tokens after the first three
			if i < 3 || err != nil {
				return nil, "prompt must be a list of token ids"
			}
			v = int64(f)
		}
		prompt[i] = v
	}
	if len(prompt) < 3 || prompt[0] != promptMark {
		return nil, "not a faultload prompt (first token is not tokens.PROMPT_MARK)"
	}
	if prompt[1] < 0 || prompt[1] >= noncePart*noncePart || prompt[2] < 0 || prompt[2] >= noncePart*noncePart {
		return nil, "not a faultload prompt (nonce out of range)"
	}
	j := &job{nonce: prompt[1]*noncePart + prompt[2], n: 1, maxTokens: 16, prompt: prompt, promptLogprobs: -1}
	if v := payload.Get("n"); v != nil {
		n, ok := intOf(v)
		if !ok || n < 1 || n > maxN {
			return nil, fmt.Sprintf("n must be an int in [1, %d] (got %s)", maxN, v)
		}
		j.n = n
	}
	if v := payload.Get("max_tokens"); v != nil {
		m, ok := intOf(v)
		if !ok || m < 1 || m > maxTokens {
			return nil, fmt.Sprintf("max_tokens must be an int in [1, %d] (got %s)", maxTokens, v)
		}
		j.maxTokens = m
	}
	if j.n*j.maxTokens > maxTotalToken {
		return nil, fmt.Sprintf("n * max_tokens must be <= %d", maxTotalToken)
	}
	if v := payload.Get("prompt_logprobs"); v != nil && v.Type() != fastjson.TypeNull {
		plp, ok := intOf(v)
		if !ok || plp < 0 {
			return nil, fmt.Sprintf("prompt_logprobs must be a non-negative int (got %s)", v)
		}
		if plp > maxTopK {
			return nil, fmt.Sprintf("Requested prompt logprobs of %d, which is greater than max allowed: %d", plp, maxTopK)
		}
		j.promptLogprobs = plp
	}
	if v := payload.Get("model"); v != nil {
		model, err := v.StringBytes()
		if err != nil {
			return nil, "model must be a string"
		}
		j.model = string(model)
	}
	return j, ""
}

// shortEscapes are the characters Python's json writes as a backslash and a letter.
var shortEscapes = map[rune]byte{'"': '"', '\\': '\\', '\n': 'n', '\r': 'r', '\t': 't', '\b': 'b', '\f': 'f'}

// pyJSONString is Python's json.dumps of a str (ensure_ascii): the body names its model as the Python router did.
func pyJSONString(s string) []byte {
	out := []byte{'"'}
	for _, r := range s {
		if short, ok := shortEscapes[r]; ok {
			out = append(out, '\\', short)
		} else if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, "\\u%04x\\u%04x", hi, lo)
		} else if r < 0x20 || r >= 0x7f {
			out = fmt.Appendf(out, "\\u%04x", r)
		} else {
			out = append(out, byte(r))
		}
	}
	return append(out, '"')
}

// promptLogprobsJSON is bodies._prompt_logprobs_json: per position the prompt token's own entry, then the
// top-k without it (tokens.prompt_rank, tokens.rank_digit, tokens.alt_token).
func promptLogprobsJSON(nonce int64, prompt []int64, k int64) []byte {
	out := []byte("[null")
	for i := int64(1); i < int64(len(prompt)); i++ {
		base := (7*(nonce%1000) + 13*i) % 1000
		own := 1 + (nonce%(k+1)+i%(k+1))%(k+1)
		tid := prompt[i]
		out = fmt.Appendf(out, `,{"%d":{"logprob":-0.%04d,"rank":%d,"decoded_token":""}`, tid, base+rankStep*own, own)
		for m := int64(1); m <= k; m++ {
			if m != own {
				alt := ((tid%vocab+vocab)%vocab + m*altStep) % vocab
				out = fmt.Appendf(out, `,"%d":{"logprob":-0.%04d,"rank":%d,"decoded_token":""}`, alt, base+rankStep*m, m)
			}
		}
		out = append(out, '}')
	}
	return append(out, ']')
}

// completionBody is the full vLLM /v1/completions JSON body for j.n samples of at most j.maxTokens each.
func completionBody(j *job) []byte {
	var plp []byte
	if j.promptLogprobs >= 0 && len(j.prompt) > 0 {
		plp = promptLogprobsJSON(j.nonce, j.prompt, j.promptLogprobs)
	}
	t := j.maxTokens
	size := 200 + len(j.model)*6 + int(j.n)*(int(t)*(tokenWidth+1+8)+160+len(plp))
	out := make([]byte, 0, size)
	out = fmt.Appendf(out, `{"id":"cmpl-%x","object":"text_completion","created":0,"model":`, j.nonce)
	out = append(out, pyJSONString(j.model)...)
	out = append(out, `,"choices":[`...)
	idx := make([]int64, t)
	completion := int64(0)
	for s := int64(0); s < j.n; s++ {
		if s > 0 {
			out = append(out, ',')
		}
		length, stopped, hasLogprobs := choiceShape(j.nonce, s, t)
		completion += length
		out = appendChoice(out, idx[:length], j.nonce, s, stopped, hasLogprobs)
		if plp != nil {
			out = append(out, `,"prompt_logprobs":`...)
			out = append(out, plp...)
		}
		out = append(out, '}')
	}
	promptLen := int64(len(j.prompt))
	return fmt.Appendf(out, `],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}`,
		promptLen, promptLen+completion, completion)
}

// appendChoice is bodies._choice_parts: choice s up to its finish reason, len(idx) tokens.
func appendChoice(out []byte, idx []int64, nonce, s int64, stopped, hasLogprobs bool) []byte {
	out = fmt.Appendf(out, `{"index":%d,"text":"","token_ids":[`, s)
	mixInto(idx, nonce, s, 1_000_003, 7_919, 104_729, vocab)
	for _, v := range idx {
		out = append(out, tokenRows[v*(tokenWidth+1):(v+1)*(tokenWidth+1)]...)
	}
	out = out[:len(out)-1]
	if hasLogprobs {
		out = append(out, `],"logprobs":{"token_logprobs":[`...)
		mixInto(idx, nonce, s, 2_654_435_761, 31, 17, logprobScale)
		for _, v := range idx {
			out = append(out, logprobRows[v*8:v*8+8]...)
		}
		out = out[:len(out)-1]
		out = append(out, ']', '}')
	} else {
		out = append(out, `],"logprobs":null`...)
	}
	if stopped {
		return append(out, `,"finish_reason":"stop","stop_reason":null`...)
	}
	return append(out, `,"finish_reason":"length","stop_reason":null`...)
}
