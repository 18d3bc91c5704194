"""faultload's router's ``/v1/completions`` answer (vLLM's shape), read as the families' forwarding clients need it.

Runs under the target's Python (standard library only), imported by ``hatchery_forwarding.py`` and
``twinkle_forwarding.py`` beside it. A position's prompt-logprob entry maps token ids to ``{"logprob", "rank"}``,
the prompt's own token first, as vLLM answers ``prompt_logprobs=k``.
"""

from __future__ import annotations


def prompt_logprobs(choice: dict) -> list:
    """The prompt's own token's logprob at each position (None at the first, which has no context)."""
    raw = choice.get("prompt_logprobs") or []
    return [None] + [next(iter(d.values()))["logprob"] if d else None for d in raw[1:]]


def topk_prompt_logprobs(choice: dict, topk: int) -> list:
    """The ``topk`` best (token id, logprob) pairs at each position, by rank (None at the first)."""
    raw = choice.get("prompt_logprobs") or []
    return [None] + [
        [[int(t), e["logprob"]] for t, e in sorted(d.items(), key=lambda x: x[1]["rank"])[:topk]] if d else None
        for d in raw[1:]
    ]
