"""A verdict is data: its head, its notes and the contract's rules that covered its requests, rendered into one
detail line by one property; its name is given where its checker is registered. Histories are the hand-made
test doubles of ``tests/invariant_doubles.py``."""

from __future__ import annotations

import dataclasses

import pytest

from faultload.checker.compose import CHECKERS, check_all
from faultload.checker.contract.faults import FATAL_DEFINITE_ERROR
from faultload.checker.inputs import DETAIL_MAX, RuleCase, Verdict
from faultload.checker.results import check_no_lost_results
from faultload.record.history import ErrorClass, Outcome
from tests.invariant_doubles import BUDGETS, CRASH, applied, fault_log, make_history, make_inputs, set_row


def test_an_explained_loss_is_a_note_and_a_rule_case_not_only_words() -> None:
    h = set_row(make_history(), 25, outcome=Outcome.GAVE_UP, error=ErrorClass.CONNECT, done=0.35)
    inputs = make_inputs(history=h, faults=fault_log(applied(CRASH, 0.2, 0.5)), fatal_fault_kinds=frozenset({"crash"}))
    verdict = check_no_lost_results(inputs, BUDGETS)
    assert verdict.ok is True and verdict.name == ""  # a checker does not name itself
    assert verdict.notes == ("1 ended during fatal router:crash (explained)",)
    assert verdict.cases == (RuleCase(FATAL_DEFINITE_ERROR.name, 1),)
    assert verdict.detail == f"{verdict.head}; 1 ended during fatal router:crash (explained)"


def test_the_name_comes_from_where_the_checker_is_registered() -> None:
    verdicts = check_all(make_inputs(), BUDGETS)
    assert [v.name for v in verdicts] == [name for name, _ in CHECKERS]
    renamed = check_all(make_inputs(), BUDGETS, checkers=(("any_name", check_no_lost_results),))
    assert renamed[0].name == "any_name"


def test_a_verdict_is_built_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        Verdict("no_lost_results", True, 0, 0, "positional")  # type: ignore[misc]


def test_the_detail_line_is_one_line_and_bounded() -> None:
    verdict = Verdict(ok=False, figure=1, budget=0, head="a\nb   c", notes=("x" * DETAIL_MAX,))
    assert "\n" not in verdict.detail and verdict.detail.startswith("a b c; x")
    assert len(verdict.detail) == DETAIL_MAX and verdict.detail.endswith("…")


def test_a_verdict_round_trips_through_its_dict_and_an_older_dict_reads_as_its_head() -> None:
    verdict = Verdict(name="n", ok=None, figure=2, budget=1.5, head="h", notes=("a", "b"), cases=(RuleCase("r", 3),))
    assert Verdict.from_dict(verdict.to_dict()) == verdict
    old = {"name": "n", "ok": False, "figure": 1, "budget": 0, "detail": "1 lost of 2 accepted; note"}
    assert Verdict.from_dict(old) == Verdict(name="n", ok=False, figure=1, budget=0, head=old["detail"])
    assert Verdict.from_dict(old).detail == old["detail"]


def test_replacing_a_field_keeps_the_rest() -> None:
    verdict = Verdict(ok=True, head="h", notes=("n",))
    assert dataclasses.replace(verdict, name="x").detail == "h; n"
