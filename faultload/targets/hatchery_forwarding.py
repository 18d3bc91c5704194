"""hatchery-core's sample job sent to faultload's router: each Tinker sample becomes one ``/v1/completions``.

Runs under the target's Python, installed by ``hatchery_patches.py``. hatchery samples inside its worker (a GPU
worker's model, or its scripted stub without a GPU); this stands where the model would: the job's prompt token
ids in, vLLM's answer shape (``choices[].token_ids``, ``choices[].logprobs.token_logprobs``) out, as SkyRL's
forwarding client sends and reads it, returned as the result dict hatchery's ``_wrap_future_result`` reads
(``sequences``, ``stop_reasons``, ``sequence_logprobs``, prompt logprobs). A router error raises, which the
worker ``nack``s: the queue retries the job and stores a failure after its third attempt.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import router_answers


class RouterSampler:
    """The router at ``url``, as the worker's sampling model; its client is made in the worker's event loop."""

    def __init__(self, url: str, model: str, timeout_s: float) -> None:
        self.url = url.rstrip("/")
        self.model = model
        self._timeout_s = timeout_s
        self._client: aiohttp.ClientSession | None = None

    async def sample(self, payload: dict) -> dict:
        if self._client is None:
            self._client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=self._timeout_s)
            )
        topk = int(payload.get("topk_prompt_logprobs") or 0)
        with_prompt = bool(payload.get("include_prompt_logprobs")) or topk > 0
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": list(payload["prompt_tokens"]),
            "n": int(payload.get("n") or 1),
            "max_tokens": int(payload.get("max_tokens") or 16),
            "logprobs": 0,
            "return_token_ids": True,
        }
        for name in ("temperature", "top_p", "top_k", "seed"):
            if payload.get(name) is not None:
                body[name] = payload[name]
        if with_prompt:
            body["prompt_logprobs"] = topk
        async with self._client.post(f"{self.url}/v1/completions", json=body) as answer:
            answer.raise_for_status()
            data = await answer.json()
        return result_of(data, with_prompt, topk)


def result_of(data: dict, with_prompt_logprobs: bool, topk: int = 0) -> dict:
    """The router's completion as the sample job's result dict."""
    choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
    sequences = [list(choice["token_ids"]) for choice in choices]
    logprobs = [
        [float(x) for x in ((choice.get("logprobs") or {}).get("token_logprobs") or [0.0] * len(tokens))]
        for choice, tokens in zip(choices, sequences)
    ]
    result: dict[str, Any] = {
        "sequences": sequences,
        "stop_reasons": ["length" if c.get("finish_reason") == "length" else "stop" for c in choices],
        "sequence_logprobs": logprobs,
    }
    if with_prompt_logprobs:
        result["prompt_logprobs"] = router_answers.prompt_logprobs(choices[0])
        if topk > 0:  # each position's entries by rank, k of them, as the SDK's topk_prompt_logprobs
            result["topk_prompt_logprobs"] = router_answers.topk_prompt_logprobs(choices[0], topk)
    return result
