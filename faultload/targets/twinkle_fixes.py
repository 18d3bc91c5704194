"""twinkle-kit's candidate fixes, applied in every Ray worker by ``twinkle_patches.worker_setup`` when the launch
spec names them (``--fix NAME``; their names are ``faultload.model.switches.TWINKLE_FIXES``).

Runs under the target's Python; each takes the modules it patches by name (so that faultload's own Python can
import this file to describe the fixes) and returns what it changed, for the launch log.
"""

from __future__ import annotations

import sys
from typing import Any, Callable


def _asked(body: Any) -> tuple[bool, int]:
    """What a tinker ``SampleRequest`` asks beside its samples: prompt logprobs, and how many top-k of them."""
    topk = int(getattr(body, "topk_prompt_logprobs", 0) or 0)
    return bool(getattr(body, "prompt_logprobs", None)) or topk > 0, topk


def _handler_body(depth: int) -> Any:
    """The ``body`` (a ``SampleRequest``) of the sampler handler's closure ``depth`` frames up, or None."""
    return sys._getframe(depth + 1).f_locals.get("body")


def prompt_logprobs_asked(modules: dict[str, Any]) -> str:
    """Finding 16: the Tinker handler builds twinkle's ``SamplingParams`` from max_tokens, temperature, top_p,
    top_k and stop only. Here the params it builds carry the request's ask (``prompt_logprobs`` = its top-k, 0
    for the prompt's own logprobs alone, as vLLM takes it), and the ``SampleResponse`` it builds keeps exactly
    what was asked (no top-k where none was). The two classes are patched, not the handler's names: Serve runs
    the handler's closure as pickled by the driver, with globals of its own. With a vLLM sampler, twinkle's
    engine would also have to answer a 0 (``vllm_engine.py`` reads only ``prompt_logprobs_k > 0``), which a CPU
    launch, without vLLM, cannot patch: faultload's stand-in answers any k it is given."""
    params_cls, response_cls = modules["SamplingParams"], modules["SampleResponse"]
    params_init, response_init = params_cls.__init__, response_cls.__init__

    def params_init_asked(self: Any, *args: Any, **kwargs: Any) -> None:
        params_init(self, *args, **kwargs)
        wants, topk = _asked(_handler_body(1))
        if wants and getattr(self, "prompt_logprobs", None) is None:
            self.prompt_logprobs = topk

    def response_init_asked(self: Any, **fields: Any) -> None:
        body = _handler_body(1)
        if body is not None and hasattr(body, "topk_prompt_logprobs"):
            wants, topk = _asked(body)
            if topk == 0:
                fields["topk_prompt_logprobs"] = None
            if not wants:
                fields["prompt_logprobs"] = None
        response_init(self, **fields)

    params_cls.__init__ = params_init_asked
    response_cls.__init__ = response_init_asked
    return "prompt-logprobs-asked: the sampler is asked for the prompt logprobs the request asks for"


FIXES: dict[str, Callable[[dict[str, Any]], str]] = {"prompt-logprobs-asked": prompt_logprobs_asked}
