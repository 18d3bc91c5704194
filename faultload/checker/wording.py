"""How a verdict words what a checker found: times, byte counts, requests, and a few of many.

A detail line names at most :data:`DETAIL_ITEMS` requests, classes or times before "...". The logic it words
(fault windows, spans, which request came first) is :mod:`faultload.checker.common`.
"""

from __future__ import annotations

import math
from typing import Sequence

from faultload.checker.budgets import MIB
from faultload.checker.common import event_time
from faultload.record.history import ErrorClass, History, Outcome

# How many requests/classes/times a detail line names before "...".
DETAIL_ITEMS = 5


def fmt_s(t: float | None) -> str:
    """Trial seconds for a detail line."""
    if t is None or not math.isfinite(t):
        return "?"
    return f"{t:.1f}s"


def fmt_bytes(n: float) -> str:
    """A byte count for a detail line: MiB, or smaller/larger units when that reads better."""
    if abs(n) < 1024:
        return f"{n:.0f} B"
    if abs(n) < MIB:
        return f"{n / 1024:.1f} KiB"
    if abs(n) < 10 * 1024 * MIB:
        return f"{n / MIB:.0f} MiB"
    return f"{n / (1024 * MIB):.1f} GiB"


def few(items: Sequence[str], total: int | None = None) -> str:
    total = len(items) if total is None else total
    shown = ", ".join(items[:DETAIL_ITEMS])
    return shown + (", ..." if total > DETAIL_ITEMS else "")


def request_label(history: History, i: int) -> str:
    return f"nonce {int(history['nonce'][i])} (id {int(history['server_id'][i])})"


_OUTCOME_WORDS = {
    Outcome.LOST: "404",
    Outcome.GAVE_UP: "gave up",
    Outcome.FAILED: "failed",
    Outcome.PENDING: "never finished",
    Outcome.REJECTED: "rejected after acceptance",
    Outcome.CORRUPT: "corrupt",
}


def what_happened(history: History, i: int) -> str:
    outcome = Outcome(int(history["outcome"][i]))
    word = _OUTCOME_WORDS.get(outcome, outcome.name.lower())
    error = int(history["error"][i])
    if outcome != Outcome.LOST and error != ErrorClass.NONE and error in ErrorClass._value2member_map_:
        word += f" ({ErrorClass(error).key})"
    return f"{request_label(history, i)} {word} at {fmt_s(event_time(history, i))}"


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
