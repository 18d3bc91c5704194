"""TuFT's sampling backend pointed at faultload's router: each Tinker sample becomes one ``/v1/completions``.

Runs under the target's Python, installed by ``tuft_launch.py``. TuFT samples in-process (a vLLM engine in a
Ray actor, or its dummy for CPU tests) and has no backend that calls an inference server over HTTP, so this
one stands where its vLLM backend would: the prompt's token ids in, vLLM's answer shape
(``choices[].token_ids``, ``choices[].logprobs.token_logprobs``) out, as SkyRL's forwarding client sends and
reads it. A router error raises, which TuFT stores as the future's failure (a 422 to the poll). Its client is
aiohttp's, as SkyRL 0.4.0's forwarding: a connection the router closes is closed here at once (httpx's pool
keeps such a socket open until it next picks it, which the trial's drain would count as the server's fds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import aiohttp
from tinker import types
from tuft.backends.base_backend import BaseSamplingBackend


class RouterSamplingBackend(BaseSamplingBackend):
    """One sampling-capable model served by the router at ``url``."""

    def __init__(self, config: Any, url: str, timeout_s: float, max_connections: int | None) -> None:
        super().__init__(config)
        self.url = url.rstrip("/")
        self._timeout_s = timeout_s
        self._max_connections = max_connections
        self._client: aiohttp.ClientSession | None = None

    async def async_init(self) -> None:
        self._client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self._max_connections or 0),
            timeout=aiohttp.ClientTimeout(total=self._timeout_s),
        )

    def get_openai_api_url(self) -> Optional[str]:
        return self.url

    async def sample(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        lora_id: Optional[str] = None,
    ) -> types.SampleResponse:
        assert self._client is not None, "async_init runs before the first sample"
        body: dict[str, Any] = {
            "model": lora_id or self.config.model_name,
            "prompt": prompt.to_ints(),
            "n": num_samples,
            "max_tokens": sampling_params.max_tokens or 16,
            "logprobs": 0,
            "return_token_ids": True,
        }
        for name in ("temperature", "top_p", "top_k", "seed"):
            value = getattr(sampling_params, name, None)
            if value is not None:
                body[name] = value
        if include_prompt_logprobs or topk_prompt_logprobs:
            body["prompt_logprobs"] = topk_prompt_logprobs
        async with self._client.post(f"{self.url}/v1/completions", json=body) as answer:
            answer.raise_for_status()
            data = await answer.json()
        return _sample_response(data, include_prompt_logprobs or topk_prompt_logprobs > 0, topk_prompt_logprobs)

    async def add_adapter(self, lora_id: str, adapter_path: Path) -> None:
        raise NotImplementedError("faultload's router serves the base model only")

    async def remove_adapter(self, lora_id: str) -> None:
        raise NotImplementedError("faultload's router serves the base model only")

    async def shutdown(self) -> None:
        if self._client is not None:
            await self._client.close()


def _sample_response(data: dict, with_prompt_logprobs: bool, topk: int = 0) -> types.SampleResponse:
    sequences = []
    for choice in sorted(data["choices"], key=lambda c: c.get("index", 0)):
        tokens = list(choice["token_ids"])
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs") or [0.0] * len(tokens)
        sequences.append(
            types.SampledSequence(
                stop_reason="length" if choice.get("finish_reason") == "length" else "stop",
                _tokens_list=tokens,
                _logprobs_list=[float(x) for x in logprobs],
            )
        )
    prompt_logprobs = topk_rows = None
    if with_prompt_logprobs:
        raw = data["choices"][0].get("prompt_logprobs") or []
        prompt_logprobs = [None] + [next(iter(d.values()))["logprob"] if d else None for d in raw[1:]]
        if topk > 0:  # as TuFT's vLLM backend (_build_sample_response): each position's entries by rank, k of them
            topk_rows = [None] + [
                [(int(t), e["logprob"]) for t, e in sorted(d.items(), key=lambda x: x[1]["rank"])[:topk]] if d else None
                for d in raw[1:]
            ]
    return types.SampleResponse(
        sequences=sequences, _prompt_logprobs_list=prompt_logprobs, _topk_prompt_logprobs_list=topk_rows
    )


def install(backend_base: type, url: str, timeout_s: float, max_connections: int | None) -> None:
    """Make ``backend_base.create_backend`` (TuFT's one sampling-backend factory) build a router backend."""

    def create_backend(cls, config, worker_venv_path=None):
        return RouterSamplingBackend(config, url, timeout_s, max_connections)

    backend_base.create_backend = classmethod(create_backend)
