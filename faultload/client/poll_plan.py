"""Which requests have their first poll delayed or abandoned: a function of (seed, request) only."""

from __future__ import annotations

from faultload.model.shape import LoadShape

_MASK64 = (1 << 64) - 1


def _unit(seed: int, nonce: int, stream: int) -> float:
    """A uniform number in [0, 1) fixed by (seed, nonce, stream): splitmix64 of their mix."""
    x = (seed * 0x9E3779B97F4A7C15 + nonce * 0xD1B54A32D192ED03 + stream * 0x8CB92BA72F3D8DD7) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (x ^ (x >> 31)) / 2.0**64


def first_poll_plan(shape: LoadShape, nonce: int) -> tuple[float, bool]:
    """(delay before the first poll in trial seconds, abandon the first poll?)

    A function of (seed, request) only: drawing from a shared generator in
    the order submits happen to complete would make a replayed repro delay
    or abandon different requests.
    """
    delay = 0.0
    if shape.delay_polls.fraction and _unit(shape.seed, nonce, 1) < shape.delay_polls.fraction:
        delay = shape.scaled(shape.delay_polls.after_s)
    abandon = bool(shape.abandon_polls.fraction) and _unit(shape.seed, nonce, 2) < shape.abandon_polls.fraction
    return delay, abandon
