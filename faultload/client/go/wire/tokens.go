// Package wire ports the Python raw client's pure functions (faultload/client/raw.py and what it calls) to Go,
// byte for byte and decision for decision, so the compiled load client answers, judges and records exactly
// as the Python one does. RunVectors lets a Python test hold each function against its original.
package wire

// The arithmetic of faultload/model/tokens.py. Python's ints are unbounded; every product here stays below
// 2**63 for nonce < 2**40 (the comment in tokens.py), so int64 gives the same numbers, as in the compiled
// router (faultload/router/go/body.go).

import "math"

const (
	promptMark      = 0xF417
	vocab           = 50_000
	logprobScale    = 10_000
	noncePart       = 1 << 20
	choiceMod       = 2_147_483_647
	stopEvery       = 4
	noLogprobsEvery = 8
	askEvery        = 16
	rankStep        = 100
	altStep         = 7_919
	topkMaskToken   = 0
	topkMaskLogprob = -99999.0
)

// The (a, b, c, mod) of tokens.output_tokens and tokens.logprob_digits.
const (
	tokA, tokB, tokC = 1_000_003, 7_919, 104_729
	lpA, lpB, lpC    = 2_654_435_761, 31, 17
)

// logprobValues is tokens._logprob_values: entry d is -(d/10000) in float64, rounded once to float32.
var logprobValues = func() [logprobScale]float32 {
	var v [logprobScale]float32
	for d := range v {
		v[d] = float32(-(float64(d) / logprobScale))
	}
	return v
}()

// pyMod is Python's %: the result takes the sign of the (positive) modulus.
func pyMod(x, m int64) int64 {
	r := x % m
	if r < 0 {
		r += m
	}
	return r
}

// steps is tokens._steps: position i's share of the mix, (i*c) % mod, the same for every request of a length.
func steps(length int, c, mod int64) []int32 {
	out := make([]int32, length)
	for i := range out {
		out[i] = int32(int64(i) * c % mod)
	}
	return out
}

// mixBase is tokens._mix's base, (nonce*a + sample*b) % mod, reduced first so the products fit int64.
func mixBase(nonce, sample, a, b, mod int64) int64 {
	return (pyMod(nonce, mod)*(a%mod) + pyMod(sample, mod)*(b%mod)) % mod
}

// choiceHash is tokens._choice_hash.
func choiceHash(nonce, sample int64) int64 {
	return (pyMod(nonce, choiceMod)*1_103_515_245 + sample*12_345 + 1) % choiceMod
}

// choice is tokens.choice: the choice's length, whether it stopped early, and whether it has logprobs.
func choice(nonce, sample, maxTokens int64) (length int64, stopped, hasLogprobs bool) {
	h := choiceHash(nonce, sample)
	stopped = maxTokens > 1 && h%stopEvery == 0
	length = maxTokens
	if stopped {
		length = 1 + (h/stopEvery)%(maxTokens-1)
	}
	return length, stopped, (h/7)%noLogprobsEvery != 0
}

// asks is tokens.asks: whether request nonce asks for prompt logprobs, and its top-k (0: none).
func asks(nonce int64) (promptLogprobs bool, topk int64) {
	slot := (pyMod(nonce, choiceMod)*48_271 + 11) % choiceMod % askEvery
	switch slot {
	case 1:
		return true, 0
	case 2:
		return true, 1 + pyMod(nonce, 5)
	}
	return false, 0
}

// promptToken is tokens.prompt_tokens(nonce, extra)[i]: the mark, the nonce's two halves, then 1s.
func promptToken(nonce int64, i int) int64 {
	switch i {
	case 0:
		return promptMark
	case 1:
		return nonce / noncePart
	case 2:
		return nonce % noncePart
	}
	return 1
}

// promptRank is tokens.prompt_rank.
func promptRank(nonce, position, k int64) int64 {
	return 1 + pyMod(nonce+position, k+1)
}

// rankDigit is tokens.rank_digit.
func rankDigit(nonce, position, rank int64) int64 {
	return pyMod(7*nonce+13*position, 1000) + rankStep*rank
}

// altToken is tokens.alt_token.
func altToken(promptToken, rank int64) int64 {
	return pyMod(promptToken+rank*altStep, vocab)
}

// expectedPromptLogprob is tokens.prompt_logprobs(nonce, prompt, k)[i]: NaN at position 0.
func expectedPromptLogprob(nonce int64, i, k int64) float32 {
	if i == 0 {
		return float32(math.NaN())
	}
	return logprobValues[rankDigit(nonce, i, promptRank(nonce, i, k))]
}

// expectedTopk is tokens.topk_prompt_logprobs(nonce, prompt, k)[.][i, m-1]: rank m's id and logprob.
func expectedTopk(nonce int64, i int, m, k int64) (int32, float32) {
	if i == 0 {
		return topkMaskToken, topkMaskLogprob
	}
	own := promptToken(nonce, i)
	id := altToken(own, m)
	if m == promptRank(nonce, int64(i), k) {
		id = own
	}
	return int32(id), logprobValues[rankDigit(nonce, int64(i), m)]
}
