"""judge() maps a TrialResult onto the invariants' inputs, and figures_of() reads the verdicts (pure: no process)."""

from __future__ import annotations

from faultload.checker.budgets import Budgets
from faultload.checker.compose import overall
from faultload.checker.inputs import Verdict
from faultload.checker.judge import error_examples, judge
from faultload.model.trial import TrialConfig
from faultload.record.history import Outcome
from faultload.record.trial import TrialResult, WorkerSummary
from faultload.store.repro import FIGURE_ALIASES, figures_of
from tests.invariant_doubles import NOT_LOADED, make_history, make_monitor, rejected, set_row, submit_log


def _result(**flags) -> TrialResult:
    history = set_row(make_history(), 7, outcome=Outcome.PENDING, done=float("nan"))
    return TrialResult(
        TrialConfig(target="skyrl==0.4.0"), history, [], make_monitor(), {}, {}, 600.0, 600.0, {}, **flags
    )


def _lost(result: TrialResult):
    return {v.name: v for v in judge(result, Budgets())}["no_lost_results"]


def test_a_request_left_pending_by_the_wall_bound_is_lost_and_one_cut_off_by_the_harness_is_unfinished() -> None:
    assert _lost(_result()).ok is False  # pending at the end of a load that ended by itself: lost
    for cut in (_result(cut_off=True), _result(cut_off=True, load_stopped_s=100.0)):  # the wall bound hides no hang
        verdicts = {v.name: v for v in judge(cut, Budgets())}
        assert verdicts["no_lost_results"].ok is False and verdicts["futures_resolve"].ok is False
    for stopped in (_result(interrupted=True), _result(stopped_early=True)):  # Ctrl-C, or a collapse called
        verdict = _lost(stopped)
        assert verdict.ok is True and "1 unfinished" in verdict.detail


def _rejected_result() -> TrialResult:
    """Every asample answered 400, as a server without its base model does; two workers kept examples."""
    history = submit_log(rejected(make_history(16), slice(None)), {i: [400] for i in range(16)})
    workers = [
        WorkerSummary(0, {}, {}, {"http_4xx": NOT_LOADED}),
        WorkerSummary(1, {}, {}, {"http_4xx": "asample: HTTP 400: b'other'", "reset": "x"}),
    ]
    return TrialResult(
        TrialConfig(target="url=http://127.0.0.1:9"), history, workers, make_monitor(), {}, {}, 5.0, 5.0, {}
    )


def test_the_clients_first_example_of_a_rejection_reaches_accepted_requests() -> None:
    result = _rejected_result()
    assert error_examples(result) == {"http_4xx": NOT_LOADED, "reset": "x"}  # first worker's first
    verdicts = {v.name: v for v in judge(result, Budgets())}
    accepted = verdicts["accepted_requests"]
    assert accepted.ok is False and accepted.figure == 16
    assert '400 ×16 (e.g. asample: HTTP 400: b\'{"detail":"base model not loaded"}\')' in accepted.detail
    assert verdicts["no_lost_results"].ok is None
    assert verdicts["no_lost_results"].detail.startswith("0 accepted (see accepted_requests)")
    assert overall(verdicts.values()) is False


def test_the_steering_figures_are_the_verdicts_figures() -> None:
    """fds_per_in_flight, rss_growth_mib and healthz_p99_s are copies of the judged figures, not recomputed."""
    verdicts = judge(_result(cut_off=True), Budgets())
    figures = figures_of(verdicts)
    by_name = {v.name: v for v in verdicts}
    assert set(figures) == {v.name for v in verdicts} | set(FIGURE_ALIASES)
    for alias, name in FIGURE_ALIASES.items():
        assert by_name[name].figure is not None
        assert figures[alias] == figures[name]["figure"] == by_name[name].figure
    assert figures["fds_per_in_flight"] == by_name["bounded_fds"].figure < Budgets().fds_per_in_flight
    unmeasured = [Verdict(name="bounded_fds", ok=None, figure=None, budget=3.0, head="no monitor samples")]
    assert "fds_per_in_flight" not in figures_of(unmeasured)
