"""Did requests cost what they should: ``retry_amplification`` (attempts) and ``unprovoked_resets``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.common import event_time, fault_label, ordered, overlaps
from faultload.checker.contract.faults import in_force_windows
from faultload.checker.contract.polls import long_poll_cycle
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.checker.wording import DETAIL_ITEMS, few, fmt_s, request_label
from faultload.record.history import AttemptKind, ErrorClass, History

if TYPE_CHECKING:  # type-only: keeps this module cheap to import (no toxiproxy client, no psutil)
    from faultload.model.faults import Fault


def check_retry_amplification(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """HTTP attempts per request: mean ≤ attempts_per_request (+ abandoned-poll fraction), max ≤ the max.

    A request costs 2 attempts when nothing goes wrong: one ``asample`` POST and
    one ``retrieve_future`` poll. The shape's abandoned first polls each cost
    one more, so the mean budget is attempts_per_request + abandon fraction.
    Requests whose [submit, done] overlapped any applied fault are expected to
    retry: they are judged against attempts_per_request_max only, and the mean
    is taken over the others. Requests with 0 attempts recorded (never
    submitted) are left out; if none has a count: unknown. Both clients count
    attempts (the SDK client on its own wire, ``faultload.client.sdk_wire``).
    Figure: the mean attempts per request over the requests that overlapped
    no fault (None when every request overlapped one, and only the max is
    judged); budget: ``attempts_per_request`` + the abandoned-poll fraction;
    a request over the max is named in the detail. Polls the
    contract calls the long-poll cycle (``contract/polls.py``: the client's
    own timeout, or a "not yet" after a full hold, before the router completed the
    request) are not counted; a "not yet" before the hold counts (and fails
    ``polls_held``). Resets on a
    healthy network are ``unprovoked_resets``.
    """
    history = inputs.history
    shape = inputs.shape
    mean_budget = budgets.attempts_per_request + shape.abandon_polls.fraction
    if len(history) == 0:
        return Verdict(ok=None, figure=None, budget=mean_budget, head="no requests in the history")
    attempts = history["attempts"].astype(np.int64)
    started = np.isfinite(history["submit_start"]) | (attempts > 0)
    recorded = started & (attempts > 0)
    unrecorded = int(np.count_nonzero(started & (attempts == 0)))
    if not recorded.any():
        return Verdict(
            ok=None,
            figure=None,
            budget=mean_budget,
            head=f"no attempt counts recorded ({int(started.sum())} requests started)",
        )
    cycle = long_poll_cycle(inputs)
    assert cycle.counts is not None
    attempts = attempts - cycle.counts
    overlapped, labels = overlaps(history, in_force_windows(inputs), among=recorded)
    calm = recorded & ~overlapped
    idx_max = int(np.flatnonzero(recorded)[np.argmax(attempts[recorded])])
    worst = int(attempts[idx_max])
    max_text = f"max {worst} by {request_label(history, idx_max)} at {fmt_s(event_time(history, idx_max))}"
    notes = []
    n_faulted = int((recorded & overlapped).sum())
    if n_faulted:
        notes.append(f"{n_faulted} overlapping {'/'.join(labels)} judged on max only")
    if unrecorded:
        notes.append(f"{unrecorded} without attempt counts left out")
    if cycle.note:
        notes.append(cycle.note)
    tail = ("; " + "; ".join(notes)) if notes else ""
    mean = float(attempts[calm].mean()) if calm.any() else None
    if mean is None:
        head = f"all {int(recorded.sum())} requests overlapped faults (no mean judged); {max_text}"
    else:
        head = (
            f"mean {mean:.2f} attempts over {int(calm.sum())} requests (baseline 2, budget {mean_budget:g}); {max_text}"
        )
    if worst > budgets.attempts_per_request_max:
        over = recorded & (attempts > budgets.attempts_per_request_max)
        items = [f"{request_label(history, int(i))} {int(attempts[i])}" for i in ordered(history, over)[:DETAIL_ITEMS]]
        return Verdict(
            ok=False,
            figure=mean,
            budget=mean_budget,
            head=f"{int(over.sum())} requests over {budgets.attempts_per_request_max} attempts: "
            f"{few(items, int(over.sum()))}; {head}{tail}",
        )
    head += f" ≤ {budgets.attempts_per_request_max}"
    if mean is not None and mean > mean_budget:
        return Verdict(ok=False, figure=mean, budget=mean_budget, head=f"amplified: {head}{tail}")
    return Verdict(ok=True, figure=mean, budget=mean_budget, head=f"{head}{tail}")


def check_unprovoked_resets(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """HTTP attempts reset or refused on a healthy network ≤ ``unprovoked_resets_max``.

    Counts attempts that ended in a connection reset or a failed connect
    while no fault was in force (nor ``log_fault_grace_s`` after one). Such a
    reset is the server closing a connection the client was entitled to reuse
    (a keep-alive shorter than the client's idle expiry) or refusing connects
    (an accept backlog overflowing). Attempts that ended after the harness
    stopped the load (``load_stopped_s``: a collapse called, Ctrl-C) are not
    counted: the harness cut them off. Unknown without an attempt log (both
    clients keep one). Figure: such attempts; budget ``unprovoked_resets_max``.
    """
    history = inputs.history
    budget = budgets.unprovoked_resets_max
    n_attempts = int(history.attempts["row"].size) if len(history) else 0
    if n_attempts == 0:
        return Verdict(ok=None, figure=None, budget=budget, head=f"no attempt log ({len(history)} requests)")
    windows = in_force_windows(inputs, grace_s=budgets.log_fault_grace_s)
    count, text = _unprovoked_resets(history, windows, inputs.load_stopped_s)
    labels = "/".join(dict.fromkeys(fault_label(f) for _, _, f in windows))
    scope = f"over {n_attempts} attempts" + (
        f", those during {labels} or {budgets.log_fault_grace_s:g}s after not counted" if windows else ""
    )
    if count > budget:
        return Verdict(
            ok=False,
            figure=count,
            budget=budget,
            head=f"{count} attempts reset or refused with no fault in force (budget {budget}): {text}; {scope}",
        )
    if count:
        return Verdict(
            ok=True, figure=count, budget=budget, head=f"{count} unprovoked resets ≤ {budget}: {text}; {scope}"
        )
    return Verdict(
        ok=True, figure=0, budget=budget, head=f"no attempt reset or refused with no fault in force, {scope}"
    )


def _unprovoked_resets(
    history: History, windows: list[tuple[float, float, Fault]], load_stopped_s: float | None = None
) -> tuple[int, str]:
    """Attempts that ended in a reset or connect error outside every fault window, before the
    harness stopped the load; (count, detail)."""
    attempts = history.attempts
    if attempts["row"].size == 0:
        return 0, ""
    status = attempts["status"].astype(np.int64)
    failed = (status == -int(ErrorClass.RESET)) | (status == -int(ErrorClass.CONNECT))
    start = attempts["start"].astype(np.float64)
    end = attempts["end"].astype(np.float64)
    inside = np.zeros(status.size, dtype=bool)
    for w_start, w_end, _ in windows:
        inside |= (start <= w_end) & (end >= w_start)
    out = failed & ~inside
    if load_stopped_s is not None:
        out &= end < load_stopped_s
    n = int(out.sum())
    if not n:
        return 0, ""
    resets = int((out & (status == -int(ErrorClass.RESET))).sum())
    first = int(np.flatnonzero(out)[np.argmin(end[out])])
    row = int(attempts["row"][first])
    text = (
        f"{resets} resets, {n - resets} connect errors; first at {fmt_s(float(end[first]))} "
        f"({AttemptKind(int(attempts['kind'][first])).name.lower()} of {request_label(history, row)})"
    )
    return n, text
