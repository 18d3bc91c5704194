"""Did the server stay responsive: ``healthz_latency`` (``/healthz`` p99 and failures during load)."""

from __future__ import annotations

import math

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.contract.faults import in_force_windows
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.checker.wording import DETAIL_ITEMS, few, fmt_s
from faultload.record.history import History


def _load_window(history: History) -> tuple[float, float] | None:
    starts = history["submit_start"]
    ends = np.concatenate([history["done"], history["submit_end"], starts])
    if len(history) == 0 or not np.isfinite(starts).any():
        return None
    return float(np.nanmin(starts)), float(np.nanmax(ends))


def check_healthz_latency(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """``/healthz`` p99 latency ≤ healthz_p99_s and failures within budget, during load.

    "During load" is [first submit, last request event]; if no probe fell in it
    (a very short trial), all probes are judged. Failed probes count with the
    time they took (up to the prober's timeout). Failures allowed: the larger
    of healthz_max_failures and healthz_failure_fraction × probes. Probes
    in flight at any time from a fault's start to healthz_fault_recovery_s
    after its end (one sent just before a restart fails with it) are counted
    in the detail but not judged (see the budget); if every probe fell there
    the verdict is unknown, never ok. Figure: the p99 of the judged probes
    (too many failures is named in the detail).
    """
    monitor = inputs.monitor
    if monitor is None:
        return Verdict(ok=None, figure=None, budget=budgets.healthz_p99_s, head="no monitor samples")
    t = np.asarray(monitor.healthz_t, dtype=np.float64)
    latency = np.asarray(monitor.healthz_latency_s, dtype=np.float64)
    ok = np.asarray(monitor.healthz_ok, dtype=bool)
    if latency.size == 0:
        return Verdict(ok=None, figure=None, budget=budgets.healthz_p99_s, head="no /healthz probes")
    select, where = _probes_during_load(t, inputs.history)
    recovering = np.zeros(t.size, dtype=bool)
    answered = t + np.where(np.isfinite(latency), latency, 0.0)  # a probe in flight when a fault began met it
    for w_start, w_end, _ in in_force_windows(inputs, grace_s=budgets.healthz_fault_recovery_s):
        recovering |= (answered >= w_start) & (t <= w_end)
    excused = select & recovering
    fault_text = ""
    if excused.any():
        finite_excused = latency[excused][np.isfinite(latency[excused])]
        worst_excused = float(finite_excused.max()) if finite_excused.size else math.inf
        fault_text = (
            f"; {int(excused.sum())} probes during faults or {budgets.healthz_fault_recovery_s:g}s "
            f"after not judged (max {worst_excused:.3f}s, {int((~ok[excused]).sum())} failed)"
        )
    select = select & ~recovering
    if not select.any():
        return Verdict(
            ok=None,
            figure=None,
            budget=budgets.healthz_p99_s,
            head=f"every probe {where} fell during a fault or its recovery allowance{fault_text}",
        )
    t, latency, ok = t[select], latency[select], ok[select]
    n = int(latency.size)
    finite = np.isfinite(latency)
    p99 = float(np.percentile(latency[finite], 99)) if finite.any() else math.inf
    worst = int(np.argmax(np.where(finite, latency, -1.0)))
    failures = int(np.count_nonzero(~ok))
    allowed = max(budgets.healthz_max_failures, math.floor(budgets.healthz_failure_fraction * n))
    head = f"p99 {p99:.3f}s over {n} probes {where} (max {latency[worst]:.3f}s at {fmt_s(float(t[worst]))})"
    fail_times = [fmt_s(float(x)) for x in t[~ok][:DETAIL_ITEMS]]
    fail_text = f"{failures} failed (allowed {allowed})" + (f" at {few(fail_times, failures)}" if failures else "")
    if p99 > budgets.healthz_p99_s:
        return Verdict(
            ok=False,
            figure=p99,
            budget=budgets.healthz_p99_s,
            head=f"slow: {head} > {budgets.healthz_p99_s:g}s; {fail_text}{fault_text}",
        )
    if failures > allowed:
        return Verdict(
            ok=False, figure=p99, budget=budgets.healthz_p99_s, head=f"failing: {fail_text}; {head}{fault_text}"
        )
    return Verdict(ok=True, figure=p99, budget=budgets.healthz_p99_s, head=f"{head}; {fail_text}{fault_text}")


def _probes_during_load(t: np.ndarray, history: History) -> tuple[np.ndarray, str]:
    """(the probes sent during load, where that is in words): all of them when none was, or no load window."""
    window = _load_window(history)
    if window is None:
        return np.ones(t.size, dtype=bool), "over the trial"
    during = (t >= window[0]) & (t <= window[1])
    load = f"during load {fmt_s(window[0])}-{fmt_s(window[1])}"
    if during.any():
        return during, load
    return np.ones(t.size, dtype=bool), f"over the trial (none {load})"
