"""What a completions request asks (:func:`parse_job`) and the body that answers it.

The body format is specified in :mod:`faultload.router` ("Bodies"): numbers
are printed from fixed-width lookup tables by one numpy gather per array.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from faultload.model import tokens
from faultload.model.router import is_int

MAX_TOKENS = 2_000_000  # per choice
MAX_N = 1024
MAX_TOTAL_TOKENS = 8_000_000  # n * max_tokens, bounds one body to ~110 MB


@functools.cache
def _token_table() -> np.ndarray:
    """Row i = token id i right-aligned in a fixed width plus ',' (one void item per row)."""
    width = len(str(tokens.VOCAB - 1))
    ids = np.arange(tokens.VOCAB, dtype=np.int64)
    rows = np.full((tokens.VOCAB, width + 1), ord(" "), dtype=np.uint8)
    rows[:, width] = ord(",")
    rest = ids.copy()
    for col in range(width - 1, -1, -1):
        digit = (rest % 10 + ord("0")).astype(np.uint8)
        keep = (ids >= 10 ** (width - 1 - col)) | (col == width - 1)
        rows[keep, col] = digit[keep]
        rest //= 10
    return np.ascontiguousarray(rows).view(f"V{width + 1}").reshape(-1)


@functools.cache
def _logprob_table() -> np.ndarray:
    """Row d = '-0.dddd,' as one uint64 (8 bytes), d in [0, LOGPROB_SCALE)."""
    scale = tokens.LOGPROB_SCALE
    assert scale == 10_000, "the table prints exactly four decimals"
    d = np.arange(scale, dtype=np.int64)
    rows = np.empty((scale, 8), dtype=np.uint8)
    rows[:, :3] = np.frombuffer(b"-0.", dtype=np.uint8)
    for col, div in zip(range(3, 7), (1000, 100, 10, 1)):
        rows[:, col] = (d // div % 10 + ord("0")).astype(np.uint8)
    rows[:, 7] = ord(",")
    return rows.view(np.uint64).reshape(-1)


def _without_last_byte(rows: np.ndarray) -> memoryview:
    """The gathered rows as bytes, minus the trailing comma (no copy)."""
    return memoryview(rows.view(np.uint8).reshape(-1))[:-1]


def _prompt_logprobs_json(nonce: int, prompt: list[int], k: int) -> bytes:
    """vLLM-shaped prompt logprobs for ``prompt_logprobs=k``: null, then per position the prompt token's own
    entry and the top-k entries without it (the ranks and values of :mod:`faultload.model.tokens`)."""
    items = ["null"]
    for i in range(1, len(prompt)):
        tid, own = int(prompt[i]), tokens.prompt_rank(nonce, i, k)
        entries = [(tid, own)] + [(tokens.alt_token(tid, m), m) for m in range(1, k + 1) if m != own]
        items.append(
            "{"
            + ",".join(
                f'"{t}":{{"logprob":-0.{tokens.rank_digit(nonce, i, m):04d},"rank":{m},"decoded_token":""}}'
                for t, m in entries
            )
            + "}"
        )
    return ("[" + ",".join(items) + "]").encode()


def _choice_parts(
    nonce: int, j: int, max_tokens: int, tok_table: np.ndarray, lp_table: np.ndarray
) -> tuple[list[Any], int]:
    """Choice ``j``'s JSON up to its finish reason (its tokens, and its logprobs or null: tokens.choice) and
    how many tokens it holds."""
    shape = tokens.choice(nonce, j, max_tokens)
    parts: list[Any] = [
        b'%s{"index":%d,"text":"","token_ids":[' % (b"," if j else b"", j),
        _without_last_byte(tok_table[tokens.output_tokens(nonce, j, max_tokens)[: shape.length]]),
    ]
    if shape.has_logprobs:
        lps = lp_table[tokens.logprob_digits(nonce, j, max_tokens)[: shape.length]]
        parts += [b'],"logprobs":{"token_logprobs":[', _without_last_byte(lps), b"]}"]
    else:
        parts.append(b'],"logprobs":null')
    parts.append(
        b',"finish_reason":"stop","stop_reason":null'
        if shape.stopped
        else b',"finish_reason":"length","stop_reason":null'
    )
    return parts, shape.length


def completion_body(
    nonce: int,
    n: int,
    max_tokens: int,
    model: str = "",
    prompt: list[int] | None = None,
    prompt_logprobs: int | None = None,
) -> bytes:
    """The full vLLM /v1/completions JSON body for ``n`` samples of at most ``max_tokens`` each."""
    prompt_len = len(prompt) if prompt is not None else 3
    plp = _prompt_logprobs_json(nonce, prompt, prompt_logprobs) if prompt_logprobs is not None and prompt else None
    head = b'{"id":"cmpl-%x","object":"text_completion","created":0,"model":%s,"choices":[' % (
        nonce,
        json.dumps(model).encode(),
    )
    parts: list[Any] = [head]
    tok_table, lp_table = _token_table(), _logprob_table()
    completion = 0
    for j in range(n):
        choice, length = _choice_parts(nonce, j, max_tokens, tok_table, lp_table)
        parts += choice
        completion += length
        if plp is not None:
            parts += [b',"prompt_logprobs":', plp]
        parts.append(b"}")
    parts.append(
        b'],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}'
        % (prompt_len, prompt_len + completion, completion)
    )
    return b"".join(parts)


@dataclass(frozen=True)
class _Job:
    nonce: int
    n: int
    max_tokens: int
    model: str
    prompt: list[int]
    prompt_logprobs: int | None


def parse_job(raw: bytes) -> _Job | str:
    """The request's parameters, or a one-line reason for a 400."""
    try:
        payload = json.loads(raw)
    except ValueError as e:
        return f"invalid JSON: {e}"
    if not isinstance(payload, dict):
        return "body must be a JSON object"
    prompt = payload.get("prompt")
    if not isinstance(prompt, list) or not all(is_int(t) for t in prompt[:3]):
        return "prompt must be a list of token ids"
    nonce = tokens.nonce_of(prompt)
    if nonce is None:
        return "not a faultload prompt (first token is not tokens.PROMPT_MARK)"
    n, max_tokens = payload.get("n", 1), payload.get("max_tokens", 16)
    if not is_int(n) or not 1 <= n <= MAX_N:
        return f"n must be an int in [1, {MAX_N}] (got {n!r})"
    if not is_int(max_tokens) or not 1 <= max_tokens <= MAX_TOKENS:
        return f"max_tokens must be an int in [1, {MAX_TOKENS}] (got {max_tokens!r})"
    if n * max_tokens > MAX_TOTAL_TOKENS:
        return f"n * max_tokens must be <= {MAX_TOTAL_TOKENS}"
    plp = payload.get("prompt_logprobs")
    if plp is not None and (not is_int(plp) or plp < 0):
        return f"prompt_logprobs must be a non-negative int (got {plp!r})"
    if plp is not None and plp > tokens.MAX_TOPK:
        return f"Requested prompt logprobs of {plp}, which is greater than max allowed: {tokens.MAX_TOPK}"
    model = payload.get("model", "")
    if not isinstance(model, str):
        return "model must be a string"
    return _Job(nonce, n, max_tokens, model, prompt, plp)
