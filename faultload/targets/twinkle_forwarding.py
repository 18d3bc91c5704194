"""twinkle-kit's sample sent to faultload's router: one ``/v1/completions`` per Tinker sample request.

Runs under the target's Python, inside the Ray worker of twinkle's sampler replica (installed by
``twinkle_patches.py``). twinkle's mock sampler is called synchronously from the replica's request handler
(``self.sampler.sample(...)``, as its vLLM sampler is): this client is synchronous too, standard library only,
and so, as twinkle's own design has it, the replica runs one sample at a time. The request's prompt token ids
in (twinkle passes the prompt once per sample wanted: one completion with ``n`` of them), vLLM's answer shape
(``choices[].token_ids``, ``choices[].logprobs.token_logprobs``) out, as SkyRL's forwarding client sends and
reads it. A router error raises, which twinkle's handler turns into the future's failure (category Server).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import router_answers


class RouterSampler:
    """The router at ``url``, as the sampler's model."""

    def __init__(self, url: str, model: str, timeout_s: float) -> None:
        self.url = url.rstrip("/") + "/v1/completions"
        self.model = model
        self.timeout_s = timeout_s

    def sample(self, prompt: list[int], params: Any, n: int) -> tuple[list[tuple[list[int], list[float], str]], dict]:
        """``n`` completions of ``prompt``: (tokens, their logprobs, stop reason) each, in index order; and, when
        ``params.prompt_logprobs`` asks for k > 0, the prompt's logprobs and its top k at each position, as
        twinkle's vLLM engine answers them (``prompt_logprobs``, ``topk_prompt_logprobs``), else nothing."""
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": [int(t) for t in prompt],
            "n": n,
            "max_tokens": int(getattr(params, "max_tokens", None) or 16),
            "logprobs": 0,
            "return_token_ids": True,
        }
        k = getattr(params, "prompt_logprobs", None)
        if k is not None:
            body["prompt_logprobs"] = int(k)
        for name in ("temperature", "top_p", "top_k"):
            if getattr(params, name, None) is not None:
                body[name] = getattr(params, name)
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:  # an HTTP error status raises
            data = json.loads(answer.read())
        out = []
        for choice in sorted(data["choices"], key=lambda c: c.get("index", 0)):
            tokens = [int(t) for t in choice["token_ids"]]
            logprobs = (choice.get("logprobs") or {}).get("token_logprobs") or [0.0] * len(tokens)
            stop = "length" if choice.get("finish_reason") == "length" else "stop"
            out.append((tokens, [float(x) for x in logprobs], stop))
        prompt_part: dict = {}
        if k is not None and data["choices"]:
            first = min(data["choices"], key=lambda c: c.get("index", 0))
            prompt_part = {
                "prompt_logprobs": router_answers.prompt_logprobs(first),
                "topk_prompt_logprobs": [
                    None if row is None else [tuple(pair) for pair in row]
                    for row in router_answers.topk_prompt_logprobs(first, int(k))
                ],
            }
        return out, prompt_part
