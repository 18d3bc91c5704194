"""The router's answers vary as a real engine's do: both routers, byte for byte, and the tokens module's rules.

A choice may stop before ``max_tokens`` (finish_reason "stop"), come without logprobs (null), and a request
that asks for ``prompt_logprobs=k`` gets vLLM's per-position entries. The compiled and the Python router must
send the same bytes for the same request: the client recomputes what it expects from the tokens module alone,
whichever router a trial ran.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from test_router import check_body, compiled_router, payload, post

from faultload.model import tokens
from faultload.model.router import RouterConfig
from faultload.router.bodies import completion_body
from faultload.router.handle import RouterHandle, start_router

# (nonce, n, max_tokens, extra prompt tokens, prompt_logprobs): plain requests, a one-token limit, many
# samples, and every prompt_logprobs shape SkyRL and TuFT send (0: the prompt token's own; k: top k besides).
CASES = [
    (1, 1, 5, 0, None),
    (2**40 - 1, 2, 2_000, 0, None),
    (77, 16, 1, 0, None),
    (123_456, 32, 40, 3, None),
    (9, 3, 12, 4, 0),
    (10, 2, 12, 6, 3),
    (11, 1, 7, 2, tokens.MAX_TOPK),
]


@pytest.fixture(scope="module")
def both_routers() -> Iterator[tuple[RouterHandle, RouterHandle]]:
    """The compiled router and the Python one, one process each, side by side."""
    compiled = start_router(RouterConfig(), compiled=compiled_router())
    python = start_router(RouterConfig())
    assert (compiled.impl, python.impl) == ("compiled", "python")
    yield compiled, python
    compiled.stop()
    python.stop()


def _request(nonce: int, n: int, max_tokens: int, extra: int, plp: int | None) -> dict[str, Any]:
    body = payload(nonce, n, max_tokens, model="base-ü\u2028")
    body["prompt"] = tokens.prompt_tokens(nonce, extra) + [-3, 70_000]  # tokens a vocabulary would not hold
    if plp is not None:
        body["prompt_logprobs"] = plp
    return body


@pytest.mark.parametrize("case", CASES)
def test_both_routers_send_the_same_bytes(both_routers: tuple[RouterHandle, RouterHandle], case: tuple) -> None:
    request = _request(*case)

    async def answers() -> list[bytes]:
        out = []
        for h in both_routers:
            status, body, _ = await post(h.url, request)
            assert status == 200, body
            out.append(body)
        return out

    compiled_body, python_body = asyncio.run(answers())
    assert compiled_body == python_body
    nonce, n, max_tokens, _, plp = case
    assert python_body == completion_body(nonce, n, max_tokens, request["model"], request["prompt"], plp)
    check_body(python_body, nonce, n, max_tokens)


def test_both_routers_refuse_more_top_entries_than_vllm_allows(both_routers) -> None:
    request = _request(5, 1, 4, 0, tokens.MAX_TOPK + 1)

    async def answers() -> list[tuple[int, bytes]]:
        return [(status, body) for status, body, _ in [await post(h.url, request) for h in both_routers]]

    (s1, b1), (s2, b2) = asyncio.run(answers())
    assert s1 == s2 == 400 and json.loads(b1) == json.loads(b2)
    assert "greater than max allowed: 20" in json.loads(b1)["message"]


def _as_tinker(prompt: list[int], raw: list, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """vLLM's prompt logprobs as the Tinker API returns them (SkyRL 0.4.0's convert_vllm_prompt_logprobs and
    its proto fill): each prompt token's own logprob, and the top k by logprob, position 0 masked."""
    own = np.full(len(prompt), np.nan, dtype=np.float32)
    ids = np.full((len(prompt), k), tokens.TOPK_MASK_TOKEN, dtype=np.int32)
    lps = np.full((len(prompt), k), tokens.TOPK_MASK_LOGPROB, dtype=np.float32)
    for i, (tid, entries) in enumerate(zip(prompt, raw)):
        if entries is None:
            continue
        own[i] = entries[str(tid)]["logprob"]
        top = sorted(((int(t), e["logprob"]) for t, e in entries.items()), key=lambda x: x[1], reverse=True)[:k]
        for m, (t, lp) in enumerate(top):
            ids[i, m], lps[i, m] = t, lp
    return own, ids, lps


@pytest.mark.parametrize("k", [0, 1, 4, tokens.MAX_TOPK])
def test_prompt_logprobs_read_as_the_tokens_module_says(k: int) -> None:
    prompt = tokens.prompt_tokens(4242, extra=5) + [49_999, 0]
    doc = json.loads(completion_body(4242, 2, 3, "m", prompt, k))
    raw = doc["choices"][0]["prompt_logprobs"]
    assert raw == doc["choices"][1]["prompt_logprobs"] and raw[0] is None and len(raw) == len(prompt)
    for i, entries in enumerate(raw[1:], start=1):
        ranks = sorted(e["rank"] for e in entries.values())
        own = tokens.prompt_rank(4242, i, k)
        assert entries[str(prompt[i])]["rank"] == own
        assert len(entries) == (k if own <= k else k + 1) or (k == 0 and len(entries) == 1), entries
        assert ranks == sorted(set(range(1, k + 1)) | {own})
    own_lps, ids, lps = _as_tinker(prompt, raw, k)
    np.testing.assert_array_equal(own_lps, tokens.prompt_logprobs(4242, prompt, k))
    want_ids, want_lps = tokens.topk_prompt_logprobs(4242, prompt, k)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(lps, want_lps)


def test_choices_vary_in_the_stated_shares_and_independently() -> None:
    shapes = [tokens.choice(nonce, j, 64) for nonce in range(2_000) for j in range(4)]
    stopped = np.array([s.stopped for s in shapes])
    bare = np.array([not s.has_logprobs for s in shapes])
    assert abs(stopped.mean() - 1 / tokens.STOP_EVERY) < 0.02
    assert abs(bare.mean() - 1 / tokens.NO_LOGPROBS_EVERY) < 0.02
    assert (stopped & bare).any() and (stopped & ~bare).any()
    assert all(1 <= s.length < 64 for s in shapes if s.stopped)
    assert {s.length for s in shapes if s.stopped} == set(range(1, 64))
    assert all(s.length == 64 for s in shapes if not s.stopped)
    assert not any(tokens.choice(nonce, 0, 1).stopped for nonce in range(100))  # one token: only "length"


def test_asks_cover_each_kind_of_request() -> None:
    """About one request in ASK_EVERY asks for prompt logprobs alone and one for top-k besides, in every
    trial's nonces (its salt above the request index) and whatever the salt."""
    for salt in (0, 1, 0xBEEF):
        asks = [tokens.asks((salt << 24) | i) for i in range(8_000)]
        assert abs(sum(a == tokens.Asks(True, 0) for a in asks) / 8_000 - 1 / tokens.ASK_EVERY) < 0.02
        assert abs(sum(a.topk > 0 for a in asks) / 8_000 - 1 / tokens.ASK_EVERY) < 0.02
        assert all(a.prompt_logprobs for a in asks if a.topk)
        assert {a.topk for a in asks if a.topk} == {1, 2, 3, 4, 5}
    assert (
        len({(a.prompt_logprobs, a.topk > 0) for a in map(tokens.asks, [s << 24 for s in range(64)])}) == 3
    )  # a trial's first request may ask too
