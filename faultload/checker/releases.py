"""Does the server release what it no longer owes: ``releases_results``.

A store that never evicts delivered results, or whose sweeper task died on its
first exception, answers every request correctly and grows without bound; no
other invariant sees it within one trial. This one looks at the server's RSS
once every result has been delivered and the family's TTL for it and a sweep
have passed: by then a correct server holds none of the trial's results, so
its RSS is back near where the trial started, and what it still holds,
measured against the result bytes it delivered, is the leak.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from faultload.checker.budgets import MIB, Budgets
from faultload.checker.contract.retention import SWEEP_ON_REGISTRATION
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.checker.wording import fmt_bytes, fmt_s
from faultload.record.history import Outcome

if TYPE_CHECKING:  # type-only: keeps this module cheap to import
    from faultload.record.samples import MonitorSamples

NAME = "releases_results"


def release_due_s(inputs: CheckInputs, ttl_s: float) -> float:
    """Trial seconds by which a correct server released every result: the last request's end, then the
    family's longest TTL (a fix may keep a delivered result its completed TTL) and one sweep interval, scaled
    by the trial's time scale."""
    done = inputs.history["done"]
    last = float(np.nanmax(done)) if np.isfinite(done).any() else 0.0
    return last + inputs.shape.scaled(ttl_s + (inputs.contract.sweep_s or 0.0))


def _rss(monitor: MonitorSamples) -> tuple[np.ndarray, np.ndarray]:
    rss, t = monitor.samples.get("rss"), monitor.samples.get("t")
    if rss is None or t is None or rss.size == 0 or rss.size != t.size:
        return np.empty(0), np.empty(0)
    valid = np.isfinite(rss) & (rss >= 0)
    return rss[valid], t[valid]


def _unknown(detail: str, budget: float | None = None) -> Verdict:
    return Verdict(ok=None, figure=None, budget=budget, head=detail)


def check_releases_results(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Once every result is past the family's longest TTL and a sweep, the server's RSS is back near its start.

    Held = the median RSS over the samples taken after the release was due
    (:func:`release_due_s`) − the RSS at the trial's start (its baseline).
    Figure: MiB of RSS still held per MiB of results delivered (held floored
    at 0); budget: ``release_held_per_delivered``.
    Unknown when the family has no TTL (it keeps every result by its contract:
    TuFT), when a request never finished (its result may still be owed), when
    fewer than ``release_min_result_bytes`` were delivered (a kept result would
    not stand out of the RSS's noise), when there are no RSS samples, and when
    fewer than two samples came after the release was due (the trial did not
    wait: its ``hold_s``). Not judged for a family that sweeps only at every
    N-th registration (``sweep_registrations``): a trial registers nothing
    after its own release is due.
    """
    budget = budgets.release_held_per_delivered
    history = inputs.history
    outcome = history["outcome"]
    ok = outcome == Outcome.OK
    ttl = inputs.contract.longest_ttl_s
    if ttl is None:
        return _unknown(
            "not applicable: the family's contract has no TTL (it keeps every result until the "
            "server stops), so nothing is owed back"
        )
    sweep_n = inputs.contract.sweep_registrations
    if sweep_n:
        return _unknown(
            f"not judged: the family forgets expired futures only at every {sweep_n:,}th registration, and no "
            f"registration of a trial comes after its own release is due ({SWEEP_ON_REGISTRATION.name})"
        )
    if inputs.monitor is None:
        return _unknown("no monitor samples", budget)
    rss, t = _rss(inputs.monitor)
    if rss.size == 0:
        return _unknown("no RSS samples (server RSS not readable)", budget)
    pending = int(np.count_nonzero(outcome == Outcome.PENDING))
    if pending or not len(history):
        return _unknown(f"{pending} of {len(history)} requests never finished: not every result was delivered", budget)
    delivered = float(history["result_bytes"][ok].astype(np.float64).sum())
    if delivered < budgets.release_min_result_bytes:
        return _unknown(
            f"{fmt_bytes(delivered)} of results delivered, under release_min_result_bytes "
            f"{fmt_bytes(budgets.release_min_result_bytes)}: a kept result would not be measurable",
            budget,
        )
    due = release_due_s(inputs, ttl)
    after = t >= due
    if np.count_nonzero(after) < 2:
        sweep = inputs.contract.sweep_s or 0.0
        return _unknown(
            f"the trial did not wait long enough: release due at {fmt_s(due)} (last request's end + "
            f"(TTL {ttl:g} + sweep {sweep:g}) SDK s × {inputs.shape.time_scale:g}), "
            f"last sample at {fmt_s(float(t[-1]))}",
            budget,
        )
    return _judge(inputs.monitor, rss, t, after, delivered, due, ttl, budget)


def _judge(
    monitor: MonitorSamples,
    rss: np.ndarray,
    t: np.ndarray,
    after: np.ndarray,
    delivered: float,
    due: float,
    ttl: float,
    budget: float,
) -> Verdict:
    """The figure from the samples after the release was due, against the baseline."""
    base = monitor.baseline
    baseline, base_note = (
        (int(base.rss), "baseline") if base is not None and base.rss >= 0 else (int(rss[0]), "first sample")
    )
    held = float(np.median(rss[after])) - baseline
    figure = max(0.0, held) / delivered
    peak = float(rss.max()) - baseline
    head = (
        f"{figure:.3f} MiB held per MiB delivered (budget {budget:g}): median RSS "
        f"{fmt_bytes(baseline + held)} over {int(np.count_nonzero(after))} samples from {fmt_s(due)} "
        f"(TTL {ttl:g} SDK s and a sweep past the last request) to {fmt_s(float(t[-1]))} vs {base_note} "
        f"{fmt_bytes(baseline)}: {held / MIB:+.1f} MiB for {delivered / MIB:.1f} MiB of results delivered "
        f"(peak {peak / MIB:+.1f} MiB)"
    )
    if figure > budget:
        return Verdict(ok=False, figure=figure, budget=budget, head=f"results kept past their TTL: {head}")
    return Verdict(ok=True, figure=figure, budget=budget, head=head)
