"""What the checkers share about time: fault windows, request spans and overlaps, when a request's fate was seen.

Times are trial seconds. How a verdict words what they find is :mod:`faultload.checker.wording`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np

from faultload.record.history import History

if TYPE_CHECKING:  # type-only: keeps this module cheap to import (no toxiproxy client, no psutil)
    from faultload.model.faults import Fault
    from faultload.record.faults import FaultLog
    from faultload.record.training import TrainingLog


def fault_label(fault: Fault) -> str:
    return f"{fault.link}:{fault.kind}"


def is_fatal(fault: Fault, kinds: Iterable[str]) -> bool:
    kinds = set(kinds)
    return fault.kind in kinds or fault_label(fault) in kinds or fault.to_spec() in kinds


def fault_windows(
    faults: FaultLog | None, keep: Callable[[Fault], bool] = lambda f: True, grace_s: float = 0.0
) -> list[tuple[float, float, Fault]]:
    """(start, end, fault) in trial seconds for each fault that took effect."""
    if faults is None:
        return []
    out = []
    for record in faults.records:
        if not record.applied or not keep(record.fault):
            continue
        end = math.inf if record.healed_at_s is None else record.healed_at_s + grace_s  # contract: fault_not_healed
        out.append((float(record.applied_at_s), end, record.fault))  # type: ignore[arg-type]
    return out


def request_spans(history: History | TrainingLog, until: str = "done") -> tuple[np.ndarray, np.ndarray]:
    """[submit start, ``until`` (done, or submit_end)] per request; unknown start -> 0, not reached -> +inf."""
    start = np.where(np.isfinite(history["submit_start"]), history["submit_start"], 0.0)
    end = np.where(np.isfinite(history[until]), history[until], np.inf)
    return start, end


def overlaps(
    history: History | TrainingLog,
    windows: list[tuple[float, float, Fault]],
    among: np.ndarray | None = None,
    spans: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, list[str]]:
    """Which requests (of ``among``) overlap any window, and the labels of the windows that hit one.

    A request's span is [submit start, done] unless ``spans`` gives others.
    """
    start, end = request_spans(history) if spans is None else spans
    hit = np.zeros(len(history), dtype=bool)
    labels: list[str] = []
    for w_start, w_end, fault in windows:
        mask = (start <= w_end) & (end >= w_start)
        if among is not None:
            mask &= among
        if mask.any():
            hit |= mask
            label = fault_label(fault)
            if label not in labels:
                labels.append(label)
    return hit, labels


def event_times(history: History) -> np.ndarray:
    """When each request's fate was seen: done, else submit end, else submit start (NaN: never)."""
    t = history["done"]
    t = np.where(np.isfinite(t), t, history["submit_end"])
    return np.where(np.isfinite(t), t, history["submit_start"])


def event_time(history: History, i: int) -> float:
    return first_finite(history["done"][i], history["submit_end"][i], history["submit_start"][i])


def first_finite(*values: float) -> float:
    for value in values:
        if math.isfinite(float(value)):
            return float(value)
    return math.nan


def ordered(history: History, mask: np.ndarray) -> np.ndarray:
    """Indices where ``mask`` holds, earliest event first (unknown times last)."""
    idx = np.flatnonzero(mask)
    times = event_times(history)[idx]
    order = np.argsort(np.where(np.isfinite(times), times, np.inf), kind="stable")
    return idx[order]
