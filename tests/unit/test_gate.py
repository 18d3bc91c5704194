"""The pull-request gate (faultload.suite.gate) through the suite's runner: each example on the head and its base.

TEST DOUBLES: both builds' executors are :class:`tests.quality.fakes.KnownFailure` (no server: a trial fails by
a rule fixed beforehand), so a test knows which violations each build shows on each example; what is checked
is what the runner makes of the pair: new ones fail, known and fixed ones are counted, the base runs the same
example with the session's fixes and without its regressions.
"""

from __future__ import annotations

import dataclasses

import pytest

from faultload.model.faults import Fault
from faultload.suite.executor import SuiteError
from faultload.suite.gate import BASE_AGAIN, FIXED, KNOWN, NEW, check_base, on_base
from faultload.suite.properties import Property
from tests.quality.fakes import FakeClock, KnownFailure, make_runner, quality_profile, runner_clock, trial

LOST = Property("lost", ("no_lost_results",), ())
FAULT = Fault("backend", "down", start_s=0.0, duration_s=0.25)
NODE = "tests/unit/test_gate.py::test_p"
BASE = "skyrl@/tmp/base-checkout"


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    return runner_clock(monkeypatch)


def gate(tmp_path, clock, head: KnownFailure, base: KnownFailure, **profile):
    """(a runner with a base, the property's state) with one property begun."""
    runner = make_runner(tmp_path, head, quality_profile(**profile), base=BASE, base_executor=base)
    return runner, runner.begin(NODE)


def test_a_violation_the_base_shows_on_the_same_example_is_known_and_does_not_fail(tmp_path, clock) -> None:
    head, base = KnownFailure(min_requests=40), KnownFailure(min_requests=40)
    runner, state = gate(tmp_path, clock, head, base)
    config = dataclasses.replace(trial(50, FAULT), regress=("early-408",), fixes=("plain-tracebacks",))
    runner.check(LOST, config)  # no AssertionError
    assert base.ran == [on_base(config, BASE)]
    assert base.ran[0].target == BASE and base.ran[0].regress == () and base.ran[0].fixes == ("plain-tracebacks",)
    assert state.gate.both == 1 and state.gate.seen[KNOWN]["no_lost_results"].examples == 1
    assert state.gate.seen[NEW] == {} and state.best is None
    prop = runner.summary_dict({NODE: "passed"})["properties"][0]
    assert prop["gate"]["known"]["no_lost_results"]["requests"] == 50 and prop["violated"] == []


def test_a_violation_the_base_does_not_show_is_new_and_fails(tmp_path, clock) -> None:
    head, base = KnownFailure(min_requests=40), KnownFailure(min_requests=10**6)
    runner, state = gate(tmp_path, clock, head, base)
    with pytest.raises(AssertionError, match="no_lost_results violated"):
        runner.check(LOST, trial(50, FAULT))
    assert state.gate.seen[NEW]["no_lost_results"].examples >= 1 and state.best is not None
    # the reducer's candidates that still fail on the head ran on the base too, each once
    failing_heads = [c for c in head.ran if head.fails(c)]
    assert len(base.ran) >= len(failing_heads) and all(c.target == BASE for c in base.ran)
    prop = runner.summary_dict({NODE: "failed"})["properties"][0]
    assert prop["violated"] == ["no_lost_results"] and prop["gate"]["new"]["no_lost_results"]["examples"] >= 1


def test_another_invariant_on_the_base_does_not_make_the_heads_known(tmp_path, clock) -> None:
    head = KnownFailure(min_requests=40)
    base = KnownFailure(min_requests=40, invariant="futures_resolve")
    runner, state = gate(tmp_path, clock, head, base)
    with pytest.raises(AssertionError, match="no_lost_results violated"):
        runner.check(LOST, trial(50, FAULT))
    assert state.gate.seen[FIXED]["futures_resolve"].examples >= 1  # the head no longer shows the base's


def test_a_violation_only_the_base_shows_is_fixed(tmp_path, clock) -> None:
    head, base = KnownFailure(min_requests=10**6), KnownFailure(min_requests=40)
    runner, state = gate(tmp_path, clock, head, base)
    runner.check(LOST, trial(50, FAULT))
    assert state.gate.seen[FIXED]["no_lost_results"].examples == 1 and state.gate.seen[NEW] == {}
    lines = "\n".join(runner.summary_lines())
    assert "1 examples on the head and its base" in lines
    assert "fixed (the base only): no_lost_results in 1 examples, the smallest 50 requests" in lines


def test_a_passing_head_past_its_time_bound_skips_the_base_a_failing_one_never_does(tmp_path, clock) -> None:
    head = KnownFailure(min_requests=40, clock=clock, trial_s=60.0)
    base = KnownFailure(min_requests=10**6, clock=clock, trial_s=60.0)
    runner, state = gate(tmp_path, clock, head, base, property_s=100.0)
    runner.check(LOST, trial(1))  # head 60 s, base 60 s: the bound is spent after both
    runner.check(LOST, trial(2))  # not run at all (the head's own bound)
    assert len(base.ran) == 1 and state.not_run == 1
    clock.advance(-60.0)  # back to 60 s into the property
    runner.check(LOST, trial(3))  # the head runs to 120 s: its bound is spent, the base of a passing head is cut
    assert state.gate.head_only == 1 and len(base.ran) == 1


def test_a_base_that_cannot_run_is_a_harness_error(tmp_path, clock) -> None:
    head, base = KnownFailure(min_requests=40), KnownFailure(harness_error="the stack did not start")
    runner, state = gate(tmp_path, clock, head, base)
    with pytest.raises(SuiteError, match="the base skyrl@/tmp/base-checkout: the stack did not start"):
        runner.check(LOST, trial(50, FAULT))


def test_without_a_base_every_violation_fails(tmp_path, clock) -> None:
    runner = make_runner(tmp_path, KnownFailure(min_requests=40))
    state = runner.begin(NODE)
    with pytest.raises(AssertionError):
        runner.check(LOST, trial(50, FAULT))
    assert state.gate.both == 0 and runner.summary_dict({NODE: "failed"})["properties"][0]["gate"] is None


@pytest.mark.parametrize(
    "base, says",
    [
        ("url=http://127.0.0.1:8000", "a base is a build faultload launches"),
        ("tuft==0.2.2", "a tuft build, the target is skyrl"),
        ("skyrl@{head}", "the target itself"),
    ],
)
def test_a_base_is_a_launchable_build_of_the_targets_family(tmp_path, base: str, says: str) -> None:
    for name in ("head", "base"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "pyproject.toml").write_text("[project]\nname = 'skyrl'\n")
    head = f"skyrl@{tmp_path / 'head'}"
    with pytest.raises(ValueError, match=says):
        check_base(head, base.format(head=tmp_path / "head"))
    assert check_base(head, f"skyrl@{tmp_path / 'base'}") == f"skyrl@{tmp_path / 'base'}"
    assert check_base(head, "skyrl==0.4.0") == "skyrl==0.4.0"


def test_a_failing_head_runs_its_base_past_the_time_bound(tmp_path, clock) -> None:
    head = KnownFailure(min_requests=40, clock=clock, trial_s=60.0)
    base = KnownFailure(min_requests=40, clock=clock, trial_s=60.0)
    runner, state = gate(tmp_path, clock, head, base, property_s=100.0)
    clock.advance(60.0)
    runner.check(LOST, trial(50, FAULT))  # the head ends at 120 s, past the bound: its base runs all the same
    assert len(base.ran) == 1 and state.gate.seen[KNOWN]["no_lost_results"].examples == 1


def test_the_job_summary_lists_new_known_and_fixed_apart(tmp_path, clock) -> None:
    from faultload.store.summary_markdown import summary_markdown

    head, base = KnownFailure(min_requests=40), KnownFailure(min_requests=40, invariant="futures_resolve")
    runner, state = gate(tmp_path, clock, head, base)
    with pytest.raises(AssertionError):
        runner.check(LOST, trial(50, FAULT))
    text = summary_markdown(runner.summary_dict({NODE: "failed"}))
    assert text.startswith("## faultload: failed: test_p\n")
    assert (
        f"beside its base `{BASE}`" in text and "| property | outcome | trials | judged | new | known | fixed |" in text
    )
    assert "### What failed" in text and "  - `no_lost_results`: test double: fails at" in text
    assert "### Fixed (the base only)" in text and "- `futures_resolve` in" in text
    assert "### Known" not in text  # none


def test_a_session_without_a_base_has_no_gate_columns() -> None:
    from faultload.store.summary_markdown import summary_markdown

    data = {"target": "skyrl==0.4.0", "profile": "ci", "trials": 3, "judged_trials": 3, "wall_s": 12.0}
    props = [{"name": "test_health", "outcome": "passed", "trials": 3, "judged_trials": 3, "gate": None}]
    text = summary_markdown({**data, "properties": props, "base": None})
    assert (
        text.startswith("## faultload: passed\n")
        and "| new |" not in text
        and "| test_health | passed | 3 | 3 |" in text
    )


def test_a_violation_the_base_shows_on_a_second_run_of_the_example_is_known(tmp_path, clock) -> None:
    """TEST DOUBLE base: the same example violates no_lost_results on its second run only (a flaky known bug)."""

    class SecondRunFails(KnownFailure):
        def run(self, config):
            outcome = super().run(config)
            if sum(c == config for c in self.ran) != 2:
                outcome.verdicts = [dataclasses.replace(v, ok=True) if v.ok is False else v for v in outcome.verdicts]
            return outcome

    head, base = KnownFailure(min_requests=40), SecondRunFails(min_requests=40)
    runner, state = gate(tmp_path, clock, head, base)
    runner.check(LOST, trial(50, FAULT))  # known: no AssertionError
    assert len(base.ran) == 2 and state.gate.seen[KNOWN]["no_lost_results"].examples == 1
    never = KnownFailure(min_requests=10**6)
    runner, state = gate(tmp_path / "2", clock, KnownFailure(min_requests=40), never)
    with pytest.raises(AssertionError):
        runner.check(LOST, trial(50, FAULT))
    assert sum(c == never.ran[0] for c in never.ran) == 1 + BASE_AGAIN  # tried again before it was called new
