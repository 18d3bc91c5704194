"""The deterministic link between a request and its result.

Each request carries a unique nonce in its prompt tokens; the fake router
derives every output token and logprob from (nonce, sample index, position).
The client recomputes the same arrays, so a result delivered to the wrong
request, truncated, or duplicated is caught by comparing arrays, with no
per-request state shared between processes.
"""

from __future__ import annotations

import functools

import numpy as np

# First prompt token of every faultload request, so a stray prompt is recognisable.
PROMPT_MARK = 0xF417
# Output token ids stay below this (a small model's vocabulary).
VOCAB = 50_000
# Logprobs are -d / LOGPROB_SCALE for an integer d in [0, LOGPROB_SCALE):
# exactly four decimals, so the router can print them at fixed width.
LOGPROB_SCALE = 10_000
_NONCE_PART = 1 << 20


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
    return _logprob_values()[logprob_digits(nonce, sample, length)]
