"""``releases_results`` and ``session_growth`` on hand-made histories, monitor samples and trial starts.

Test doubles: every history, monitor sample and trial start here is built by hand (no server ran); the
arithmetic and each unknown case are what is checked.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from faultload.checker.budgets import MIB, Budgets
from faultload.checker.growth import TrialStart, check_session_growth, slope_per_k
from faultload.checker.inputs import CheckInputs
from faultload.checker.releases import check_releases_results, release_due_s
from faultload.model.family import SKYRL_CONTRACT, TUFT_CONTRACT
from faultload.model.shape import LoadShape
from faultload.record.history import History, Outcome
from faultload.record.samples import SAMPLE_FIELDS, MonitorSamples, ProcessSnapshot

BUDGETS = Budgets()
SCALE = 0.05
SHAPE = LoadShape(requests=256, result_tokens=32768, max_outstanding=32, time_scale=SCALE)
RESULT = 256 * 1024
BASE = 500 * MIB
# SkyRL at 0.05: the longest TTL (600 s) and a sweep (30 s) are 31.5 s past the last request's end (8 s)
DUE = 8.0 + SCALE * (600.0 + 30.0)


def history(n: int = 256, result_bytes: int = RESULT, last_done: float = 8.0) -> History:
    """A double: ``n`` requests delivered OK, evenly until ``last_done``."""
    h = History.empty(n)
    h["nonce"][:] = np.arange(n)
    h["submit_start"][:] = np.linspace(0.0, last_done - 0.1, n)
    h["done"][:] = np.linspace(0.1, last_done, n)
    h["result_bytes"][:] = result_bytes
    h["attempts"][:] = 2
    h["outcome"][:] = Outcome.OK
    return h


def monitor(held: float, until: float = DUE + 3.0, peak: float = 64 * MIB) -> MonitorSamples:
    """A double: RSS from the baseline up to ``peak`` during the load, then ``held`` over it from the due time."""
    t = np.arange(0.0, until, 0.5)
    rss = np.where(t < 8.0, BASE + peak, np.where(t < DUE, BASE + peak, BASE + held))
    samples = {name: np.full(t.size, -1.0) for name in SAMPLE_FIELDS}
    samples.update(t=t, rss=rss)
    empty = np.empty(0)
    return MonitorSamples(samples, empty, empty, np.empty(0, dtype=bool), baseline=ProcessSnapshot(BASE, 40, 1.0))


def inputs(h: History | None = None, m: MonitorSamples | None = None, **changes) -> CheckInputs:
    return CheckInputs(
        history=history() if h is None else h,
        monitor=monitor(4 * MIB) if m is None else m,
        faults=None,
        shape=SHAPE,
        **{"contract": SKYRL_CONTRACT, **changes},
    )


def test_due_is_the_last_end_plus_the_longest_ttl_and_a_sweep_scaled() -> None:
    assert release_due_s(inputs(), SKYRL_CONTRACT.longest_ttl_s) == pytest.approx(DUE)


def test_a_server_that_released_its_results_holds() -> None:
    verdict = check_releases_results(inputs(), BUDGETS)
    assert verdict.ok is True
    assert verdict.figure == pytest.approx(4 / 64)  # 4 MiB held for 64 MiB delivered
    assert verdict.budget == BUDGETS.release_held_per_delivered
    assert "0.062 MiB held per MiB delivered" in verdict.detail


def test_a_server_that_kept_its_results_is_violated() -> None:
    verdict = check_releases_results(inputs(m=monitor(70 * MIB)), BUDGETS)
    assert verdict.ok is False
    assert verdict.figure == pytest.approx(70 / 64)
    assert verdict.detail.startswith("results kept past their TTL")


def test_below_the_baseline_is_zero_held() -> None:
    verdict = check_releases_results(inputs(m=monitor(-10 * MIB)), BUDGETS)
    assert verdict.ok is True and verdict.figure == 0.0


def test_only_samples_after_the_due_time_count() -> None:
    """The peak (results still within their TTL) is not held; the median after the due time is."""
    verdict = check_releases_results(inputs(m=monitor(2 * MIB, peak=500 * MIB)), BUDGETS)
    assert verdict.ok is True and verdict.figure == pytest.approx(2 / 64)


def test_a_failed_request_is_delivered_too_but_not_counted_in_the_bytes() -> None:
    h = history()
    h["outcome"][:128] = Outcome.FAILED
    verdict = check_releases_results(inputs(h=h, m=monitor(16 * MIB)), BUDGETS)
    assert verdict.figure == pytest.approx(16 / 32)


@pytest.mark.parametrize(
    "case, make, says",
    [
        ("trial too short", lambda: inputs(m=monitor(0.0, until=DUE + 0.4)), "did not wait long enough"),
        ("no monitor", lambda: dataclasses.replace(inputs(), monitor=None), "no monitor samples"),
        ("small results", lambda: inputs(h=history(result_bytes=1024)), "would not be measurable"),
        ("a request never finished", lambda: inputs(h=_pending()), "never finished"),
        ("no TTL (TuFT)", lambda: inputs(contract=TUFT_CONTRACT), "not applicable"),
        ("no RSS samples", lambda: inputs(m=_no_rss()), "no RSS samples"),
    ],
)
def test_unknown_never_ok(case: str, make, says: str) -> None:
    verdict = check_releases_results(make(), BUDGETS)
    assert verdict.ok is None, case
    assert says in verdict.detail, case


def _pending() -> History:
    h = history()
    h["outcome"][0] = Outcome.PENDING
    h["done"][0] = np.nan
    return h


def _no_rss() -> MonitorSamples:
    m = monitor(0.0)
    m.samples["rss"][:] = -1.0
    return m


# --------------------------------------------------------------------------- session_growth


def starts(
    rss_mib_per_k: float, fds_per_k: float = 0.0, server: int = 7, n: int = 6, step: int = 1000
) -> list[TrialStart]:
    """A double: ``n`` trial starts ``step`` requests apart, growing as asked."""
    return [
        TrialStart(
            server, i * step, int(BASE + i * step / 1000 * rss_mib_per_k * MIB), 40 + int(i * step / 1000 * fds_per_k)
        )
        for i in range(n)
    ]


def test_slope_is_least_squares_per_thousand() -> None:
    assert slope_per_k([0.0, 1000.0, 2000.0], [1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert slope_per_k([5.0, 5.0], [1.0, 9.0]) == 0.0  # no spread of requests: no slope


def test_a_flat_server_holds() -> None:
    verdict = check_session_growth(starts(0.5), BUDGETS)
    assert verdict.ok is True and verdict.figure == pytest.approx(0.5, abs=0.01)


def test_rss_growing_with_the_requests_is_violated() -> None:
    verdict = check_session_growth(starts(10.0), BUDGETS)
    assert verdict.ok is False and verdict.figure == pytest.approx(10.0, abs=0.01)
    assert "(RSS)" in verdict.detail


def test_fds_growing_with_the_requests_is_violated() -> None:
    verdict = check_session_growth(starts(0.0, fds_per_k=50.0), BUDGETS)
    assert verdict.ok is False and "(fds)" in verdict.detail


def test_the_first_start_of_a_process_is_warm_up() -> None:
    points = starts(0.0)
    points[0] = dataclasses.replace(points[0], rss=BASE - 300 * MIB)  # the server before its first trial
    assert check_session_growth(points, BUDGETS).ok is True


def test_a_high_water_step_in_the_first_half_is_not_growth() -> None:
    """A load that leaves the heap 200 MiB higher once (a trial holding thousands at once), then flat."""
    points = [dataclasses.replace(p, rss=p.rss + (200 * MIB if p.requests >= 2000 else 0)) for p in starts(0.0)]
    assert check_session_growth(points, BUDGETS).ok is True


def test_a_restart_starts_a_series_of_its_own() -> None:
    """Two processes, each flat, the second from a lower RSS: no growth (one series would have fallen)."""
    second = [dataclasses.replace(p, server=8, rss=p.rss + 100 * MIB) for p in starts(0.0)]
    verdict = check_session_growth(starts(0.0) + second, BUDGETS)
    assert verdict.ok is True


@pytest.mark.parametrize("points", [[], starts(50.0, n=3), starts(50.0, step=100)])
def test_too_little_to_judge_is_unknown(points: list[TrialStart]) -> None:
    verdict = check_session_growth(points, BUDGETS)
    assert verdict.ok is None and "not enough to judge" in verdict.detail


def test_growth_is_judged_after_the_largest_trials() -> None:
    """A lane meets its largest loads late (the ci fixed row's gw3, its starts as measured: trials of 216 requests
    x 868 x 3 tokens at 2,664-3,708 of 4,386 requests raised the heap 586 -> 604 MiB, then flat): the steps its
    largest trials left are not growth; what comes after them is judged."""
    served = [0, 1, 196, 391, 441, 491, 731, 971, 1160, 1283, 1519, 1629, 1739, 1849, 1959, 2140, 2321, 2502, 2556]
    served += [2610, 2664, 2796, 2928, 3060, 3276, 3492, 3708, 3924, 4140, 4263, 4386]
    mib = [573.4, 574.3, 575.9, 577.7, 577.7, 577.9, 580.6, 582.8, 583.8, 584.4, 585.2, 585.5, 585.5, 585.5, 585.6]
    mib += [586.1, 586.3, 587.3, 587.3, 587.3, 585.6, 589.3, 592.9, 598.2, 600.4, 604.4, 604.5, 596.6, 598.7, 598.6]
    mib += [598.7]
    asked = [(b - a, (b - a) * 100) for a, b in zip(served, served[1:])] + [(100, 10_000)]
    asked[23:26] = [(216, 216 * 868 * 3)] * 3  # the three largest, from the start at 3,060 requests
    points = [TrialStart(7, n, int(m * MIB), 19, r, t) for n, m, (r, t) in zip(served, mib, asked)]
    old_rule = [p for p in points if p.requests >= 0.5 * points[-1].requests]
    assert (
        slope_per_k([p.requests for p in old_rule], [p.rss / MIB for p in old_rule])
        > BUDGETS.session_rss_mib_per_k_requests
    )
    verdict = check_session_growth(points, BUDGETS)
    assert verdict.ok is None and "after its high-water marks" in verdict.detail
    # a store that keeps what it serves grows after its largest trial too
    leak = [dataclasses.replace(p, requests=p.requests * 4, rss=p.rss + p.requests * 4 * 20 * 1024) for p in points]
    verdict = check_session_growth(leak, BUDGETS)
    assert verdict.ok is False and "(RSS)" in verdict.detail
