"""The deterministic link between a request and its result.

Each request carries a unique nonce in its prompt tokens; the fake router
derives every output token and logprob from (nonce, sample index, position).
The client recomputes the same arrays, so a result delivered to the wrong
request, truncated, or duplicated is caught by comparing arrays, with no
per-request state shared between processes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

# First prompt token of every faultload request, so a stray prompt is recognisable.
PROMPT_MARK = 0xF417
# Output token ids stay below this (a small model's vocabulary).
VOCAB = 50_000
# Logprobs are -d / LOGPROB_SCALE for an integer d in [0, LOGPROB_SCALE):
# exactly four decimals, so the router can print them at fixed width.
LOGPROB_SCALE = 10_000
_NONCE_PART = 1 << 20
# Bits of a nonce below the trial's salt (a request's index): room for 16M requests per trial.
NONCE_INDEX_BITS = 24


def prompt_tokens(nonce: int, extra: int = 0) -> list[int]:
    """Prompt token ids that encode ``nonce`` (< 2**40), padded by ``extra`` tokens."""
    if not 0 <= nonce < _NONCE_PART * _NONCE_PART:
        raise ValueError(f"nonce {nonce} out of range [0, 2**40)")
    return [PROMPT_MARK, nonce // _NONCE_PART, nonce % _NONCE_PART] + [1] * extra


def nonce_of(prompt: list[int]) -> int | None:
    """Inverse of :func:`prompt_tokens`; None when the prompt is not one of ours."""
    if len(prompt) < 3 or prompt[0] != PROMPT_MARK:
        return None
    return int(prompt[1]) * _NONCE_PART + int(prompt[2])


@functools.lru_cache(maxsize=64)
def _steps(length: int, c: int, mod: int) -> np.ndarray:
    """Position i's share of the mix, (i * c) % mod, for i < length: the same for every request of a length
    (read-only, so a cached array is never changed by a caller)."""
    steps = np.arange(length, dtype=np.int64) * c % mod
    steps.flags.writeable = False
    return steps


def _mix(nonce: int, sample: int, length: int, a: int, b: int, c: int, mod: int) -> np.ndarray:
    # Mix nonce and sample index with Python ints (no overflow), then position in int64:
    # (base + i*c) % mod == (base + (i*c) % mod) % mod, the per-position part cached per length.
    base = (nonce * a + sample * b) % mod
    return (_steps(length, c, mod) + base) % mod


def output_tokens(nonce: int, sample: int, length: int) -> np.ndarray:
    """Output token ids for sample ``sample`` of request ``nonce`` (int32)."""
    return _mix(nonce, sample, length, 1_000_003, 7_919, 104_729, VOCAB).astype(np.int32)


def logprob_digits(nonce: int, sample: int, length: int) -> np.ndarray:
    """The integer d of each logprob -d/LOGPROB_SCALE (int64)."""
    return _mix(nonce, sample, length, 2_654_435_761, 31, 17, LOGPROB_SCALE)


@functools.cache
def _logprob_values() -> np.ndarray:
    """Entry d = the float32 logprob -d / LOGPROB_SCALE (computed in float64, then rounded once)."""
    values = (-(np.arange(LOGPROB_SCALE, dtype=np.float64) / LOGPROB_SCALE)).astype(np.float32)
    values.flags.writeable = False
    return values


def output_logprobs(nonce: int, sample: int, length: int) -> np.ndarray:
    """Output logprobs as float32, exactly as a JSON or proto round trip yields them."""
    return np.asarray(_logprob_values()[logprob_digits(nonce, sample, length)])


# --------------------------------------------------------------------------- what a real engine varies
#
# A real engine does not answer every choice alike: a choice can end on a stop token before max_tokens
# ("stop") or at it ("length"), and vLLM occasionally returns no logprobs for a choice under load (the
# path SkyRL zero-fills). The router varies both per choice, from (nonce, sample index) alone, so the
# client recomputes what it should receive. The arithmetic stays below 2**63 at every step (nonce < 2**40),
# so the compiled router (faultload/router/go/body.go) repeats it in int64.

_CHOICE_MOD = 2_147_483_647  # 2**31 - 1, prime
STOP_EVERY = 4  # one choice in STOP_EVERY ends on a stop token before max_tokens
NO_LOGPROBS_EVERY = 8  # one choice in NO_LOGPROBS_EVERY comes without logprobs


def _choice_hash(nonce: int, sample: int) -> int:
    return ((nonce % _CHOICE_MOD) * 1_103_515_245 + sample * 12_345 + 1) % _CHOICE_MOD


class Choice(NamedTuple):
    """How the router answers choice ``sample`` of request ``nonce`` at ``max_tokens`` (a named tuple: built
    for every choice the router answers, where a frozen dataclass's construction costs twice as much)."""

    # Tokens sent: the first ``length`` of output_tokens(nonce, sample, max_tokens), and the first ``length``
    # logprobs. Both sides slice the max_tokens arrays rather than ask for ``length`` (the same values): the
    # per-length steps are cached for few lengths, and a stopped choice's length is any below max_tokens.
    length: int
    stopped: bool  # finish_reason "stop" (a stop token before the limit); else "length" at max_tokens
    has_logprobs: bool  # False: the choice's "logprobs" is null


def choice(nonce: int, sample: int, max_tokens: int) -> Choice:
    """The choice's length, finish reason and whether it carries logprobs (independent bits of one hash)."""
    h = _choice_hash(nonce, sample)
    stopped = max_tokens > 1 and h % STOP_EVERY == 0
    length = 1 + (h // STOP_EVERY) % (max_tokens - 1) if stopped else max_tokens
    return Choice(length, stopped, (h // 7) % NO_LOGPROBS_EVERY != 0)


# --------------------------------------------------------------------------- prompt logprobs and top-k
#
# vLLM's prompt_logprobs=k answers, per prompt position i >= 1, the prompt token's own entry (with its rank)
# followed by the top k entries (rank 1..k) without it: k entries when the prompt token ranks in the top k,
# k + 1 when it does not. Position 0 has none (null). Here the entry of rank m has logprob
# -(base_i + RANK_STEP * m) / LOGPROB_SCALE, the prompt token ranks 1 + (nonce + i) % (k + 1), and the
# other entry of rank m is token (prompt_i + m * ALT_STEP) % VOCAB (never the prompt token, for m <= MAX_TOPK).

MAX_TOPK = 20  # vLLM's default max_logprobs: a larger prompt_logprobs is a 400
RANK_STEP = 100
ALT_STEP = 7_919


def prompt_rank(nonce: int, position: Any, k: int) -> Any:
    """The prompt token's rank at ``position`` (>= 1) when the request asks for ``k`` top entries (an int, or
    an int64 array of positions: the rules below read the same for both)."""
    return 1 + (nonce + position) % (k + 1)


def rank_digit(nonce: int, position: Any, rank: Any) -> Any:
    """d of the logprob -d/LOGPROB_SCALE of the entry ranked ``rank`` at ``position``."""
    return (7 * nonce + 13 * position) % 1000 + RANK_STEP * rank


def alt_token(prompt_token: Any, rank: Any) -> Any:
    """The entry ranked ``rank`` when it is not the prompt token."""
    return (prompt_token + rank * ALT_STEP) % VOCAB


def prompt_logprobs(nonce: int, prompt: list[int], k: int) -> np.ndarray:
    """Each prompt token's own logprob (float32), NaN at position 0: what the Tinker API returns."""
    i = np.arange(len(prompt), dtype=np.int64)
    out = _logprob_values()[rank_digit(nonce, i, prompt_rank(nonce, i, k))]
    out[0] = np.nan
    return np.asarray(out)


# The Tinker API's fill for an empty top-k cell (tinker's MASK_LOGPROB; SkyRL's _TOPK_MASK_TOKEN_ID/_LOGPROB).
TOPK_MASK_TOKEN = 0
TOPK_MASK_LOGPROB = -99999.0


def topk_prompt_logprobs(nonce: int, prompt: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` (token id, logprob) per prompt position as (len(prompt), k) int32 and float32 matrices,
    by rank; position 0 is masked, as the Tinker API's proto fills it."""
    i = np.arange(len(prompt), dtype=np.int64)[:, None]
    ranks = np.arange(1, k + 1, dtype=np.int64)
    own = np.asarray(prompt, dtype=np.int64)[:, None]
    ids = np.where(ranks == prompt_rank(nonce, i, k), own, alt_token(own, ranks)).astype(np.int32)
    lps = _logprob_values()[rank_digit(nonce, i, ranks)]
    ids[0], lps[0] = TOPK_MASK_TOKEN, TOPK_MASK_LOGPROB
    return ids, lps


# --------------------------------------------------------------------------- what a request asks


ASK_EVERY = 16  # one request in ASK_EVERY asks for prompt logprobs, another for top-k besides


@dataclass(frozen=True)
class Asks:
    """What request ``nonce`` asks for beside its samples (the Tinker API's SampleRequest fields)."""

    prompt_logprobs: bool
    topk: int  # topk_prompt_logprobs; > 0 implies prompt logprobs


def asks(nonce: int) -> Asks:
    """Few requests ask, so the servers' common path is measured as it was. The whole nonce is mixed (a
    trial's nonces are its salt above its request indices), so which request asks differs between trials."""
    slot = ((nonce % _CHOICE_MOD) * 48_271 + 11) % _CHOICE_MOD % ASK_EVERY
    if slot == 1:
        return Asks(True, 0)
    if slot == 2:
        return Asks(True, 1 + nonce % 5)
    return Asks(False, 0)
