"""Did the server write errors it had no cause for: ``clean_server_log``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.common import fault_label, overlaps
from faultload.checker.contract.faults import in_force_windows
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.checker.wording import few, fmt_s
from faultload.record.history import History
from faultload.record.log_summary import LogClass, ServerLogSummary

if TYPE_CHECKING:  # type-only: keeps this module cheap to import (no toxiproxy client, no psutil)
    from faultload.model.faults import Fault


def check_clean_server_log(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """No error lines in the server log, unless every one was written while a fault was active.

    An error counts as during a fault when its log time, mapped to trial
    seconds with ``trial_start_epoch``, falls in [applied, removed +
    log_fault_grace_s] of a fault that took effect, or when it names
    (``request_id=N``) a request that was in flight while a fault was in
    force. The second rule is needed because the server writes each failure
    when its handler gets the event loop back: after a router crash SkyRL
    0.4.0 prints one Rich traceback per failed forward (0.1-0.3 s each), so
    the last of 50 failures is written ~8 s after the crash although every
    one was caused by it. With faults injected but no way to map the log's
    times (no start epoch, or lines without timestamps) the verdict is
    unknown; so it is for a log of no lines (nothing was read, as for a
    ``url=`` target: an empty log is not a clean one). Classes matching
    ``clean_log_allow`` are ignored.

    Figure: error lines outside fault windows (every error line when no fault took effect); budget 0.
    """
    log = inputs.server_log
    if log is None:
        return Verdict(ok=None, figure=None, budget=0, head="no server log")
    if log.lines == 0:  # nothing was read (a url= target's log is not faultload's): not "clean"
        return Verdict(
            ok=None, figure=None, budget=0, head="no server log lines to read (a url= target's log is not followed)"
        )
    classes, allowed_note = _judged_classes(log, budgets)
    total = sum(c.count for c in classes)
    if total == 0:
        return Verdict(ok=True, figure=0, budget=0, head=f"no error lines in {log.lines} log lines{allowed_note}")
    all_counts = {c.name: c.count for c in classes}
    windows = in_force_windows(inputs, grace_s=budgets.log_fault_grace_s)
    if not windows:
        return Verdict(
            ok=False,
            figure=total,
            budget=0,
            head=f"{total} error lines with no fault injected: {_summary(classes, all_counts)}",
        )
    start_epoch = _start_epoch(inputs)
    if start_epoch is None:
        return Verdict(
            ok=None,
            figure=total,
            budget=0,
            head=f"faults were active; log not attributable (no trial start time): {_summary(classes, all_counts)}",
        )
    faulted_ids = _faulted_server_ids(inputs.history, in_force_windows(inputs))
    outside, first_outside, untimed, by_request = _outside_faults(classes, start_epoch, windows, faulted_ids)
    labels = "/".join(dict.fromkeys(fault_label(f) for _, _, f in windows))
    if outside:
        n_out = sum(outside.values())
        return Verdict(
            ok=False,
            figure=n_out,
            budget=0,
            head=f"{n_out} of {total} error lines outside fault windows ({labels}), first at "
            f"{fmt_s(min(first_outside))}: {_summary(classes, outside)}{allowed_note}",
        )
    if untimed:
        return Verdict(
            ok=None,
            figure=untimed,
            budget=0,
            head=f"faults were active; log not attributable: {untimed} error lines without timestamps: "
            f"{_summary(classes, all_counts)}",
        )
    by_request_note = f" ({by_request} by the request they name)" if by_request else ""
    return Verdict(
        ok=True,
        figure=0,
        budget=0,
        head=f"{total} error lines, all while faults were active{by_request_note} ({labels}): "
        f"{_summary(classes, all_counts)}{allowed_note}",
    )


def _judged_classes(log: ServerLogSummary, budgets: Budgets) -> tuple[list[LogClass], str]:
    """(the error classes ``clean_log_allow`` does not match, a note of how many lines it allowed)."""
    patterns = [re.compile(p) for p in budgets.clean_log_allow]
    classes = [c for c in log.classes.values() if not any(p.search(c.name) or p.search(c.example) for p in patterns)]
    allowed = sum(c.count for c in log.classes.values()) - sum(c.count for c in classes)
    return classes, (f"; {allowed} allowed by clean_log_allow" if allowed else "")


def _start_epoch(inputs: CheckInputs) -> float | None:
    """The trial's start on the log's clock: the trial's own, else the fault schedule's."""
    if inputs.trial_start_epoch is not None:
        return inputs.trial_start_epoch
    return inputs.faults.trial_start_epoch if inputs.faults is not None else None


def _summary(classes: list[LogClass], counts: dict[str, int]) -> str:
    """The classes with a count in ``counts``, in log order: "name ×n: example"."""
    items = []
    for c in classes:
        if counts.get(c.name):
            items.append(f"{c.name} ×{counts[c.name]}: {c.example[:160]}")
    return few(items, len(items))


def _outside_faults(
    classes: list[LogClass], start_epoch: float, windows: list[tuple[float, float, Fault]], faulted_ids: np.ndarray
) -> tuple[dict[str, int], list[float], int, int]:
    """Error lines not attributable to a fault: (class -> count outside, first time outside per such class,
    lines without timestamps, lines attributed by the request they name)."""
    outside: dict[str, int] = {}
    first_outside: list[float] = []
    untimed = 0
    by_request = 0
    for c in classes:
        trial_t = np.asarray(c.times, dtype=np.float64) - start_epoch
        inside = np.zeros(trial_t.size, dtype=bool)
        for w_start, w_end, _ in windows:  # a time written to the second may be up to a second later
            inside |= (trial_t + c.resolution_s > w_start) & (trial_t <= w_end)
        if faulted_ids.size and c.request_ids.size == trial_t.size:
            named = ~inside & np.isin(c.request_ids, faulted_ids)
            by_request += int(np.count_nonzero(named))
            inside |= named
        n_out = int(np.count_nonzero(~inside))
        if n_out:
            outside[c.name] = n_out
            first_outside.append(float(trial_t[~inside][0]))
        untimed += c.untimed
    return outside, first_outside, untimed, by_request


def _faulted_server_ids(history: History, windows: list[tuple[float, float, Fault]]) -> np.ndarray:
    """Server ids of the requests in flight while a fault was in force (sorted, unique, known ids only)."""
    if not windows or len(history) == 0:
        return np.empty(0, dtype=np.int64)
    hit, _ = overlaps(history, windows)
    ids = history["server_id"][hit]
    return np.unique(ids[ids != 0])
