"""judge() maps a TrialResult onto the invariants' inputs (pure: no process is started)."""

from __future__ import annotations

from faultload.budgets import Budgets
from faultload.history import Outcome
from faultload.judge import judge
from faultload.trial import TrialConfig, TrialResult
from tests.test_invariants import make_history, make_monitor, set_row


def _result(**flags) -> TrialResult:
    history = set_row(make_history(), 7, outcome=Outcome.PENDING, done=float("nan"))
    return TrialResult(TrialConfig(target="skyrl==0.4.0"), history, [], make_monitor(), {}, {}, 600.0, 600.0, {},
                       **flags)


def _lost(result: TrialResult):
    return {v.name: v for v in judge(result, Budgets())}["no_lost_results"]


def test_a_request_left_pending_by_the_wall_bound_is_unfinished_not_lost() -> None:
    assert _lost(_result()).ok is False  # pending at the end of a load that ended by itself: lost
    verdict = _lost(_result(cut_off=True))
    assert verdict.ok is True and "1 unfinished" in verdict.detail
