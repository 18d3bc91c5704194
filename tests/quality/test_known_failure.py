"""Quality tier: the suite engine, driven by real Hypothesis, against a failure known in advance.

The executor is a test double (:class:`tests.quality.fakes.KnownFailure`):
``no_lost_results`` is violated iff a trial has at least ``N`` requests and a
``backend:down`` fault, so the simplest failing trial is known before the run —
exactly ``N`` requests with that one fault — and so is every count the
session summary must report. The properties draw the suite's own
``faultload.strategies.trial_configs`` (with the fault added to some draws, see
``configs_meeting``) and call ``SuiteRunner.check`` as the suite's properties
do. Runs in about a second on CPU; nothing starts.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings

from faultload.matrix.run import judge_row, select_rows
from faultload.model.codec import config_from_dict
from faultload.model.faults import Fault
from faultload.store.repro import config_key
from faultload.suite.properties import ALL, Property
from tests.quality.fakes import TIME_SCALE, KnownFailure, big_failure, configs_meeting, make_runner

N = 40  # the failure's threshold: ci draws up to 256 requests, so draws exceed it
FAULT = Fault("backend", "down", start_s=0.0, duration_s=5.0 * TIME_SCALE)
# result_integrity is asserted too and always comes back unknown: the tallies must tell them apart.
KNOWN_FAILURE = Property("known_failure", ("no_lost_results", "result_integrity"), ("no_lost_results",))
NODEID = "tests/quality::known_failure"
ALL_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)


def drive(runner, prop: Property, nodeid: str, phases=ALL_PHASES, examples: int = 60, first=None):
    """Run one property as the suite does; (the final AssertionError or None, the examples Hypothesis ran).

    ``first``: an explicit example tried before any draw (as the known trials are).
    """
    examples_run = []

    def test(config):
        examples_run.append(config)
        runner.check(prop, config)

    test = given(config=configs_meeting(FAULT))(test)
    if first is not None:
        test = example(config=first)(test)
    test = settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        print_blob=False,
    )(test)
    runner.begin(nodeid)
    try:
        test()
    except AssertionError as exc:
        return exc, examples_run
    finally:
        runner.end()
    return None, examples_run


def fault_names(config) -> list[str]:
    return [f"{f.link}:{f.kind}" for f in config.faults.faults]


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One shrinking session (Hypothesis's shrinker and the suite's reducer), shared by the tests below."""
    fake = KnownFailure(min_requests=N, link=FAULT.link, kind=FAULT.kind, unknown_for=("result_integrity",))
    runner = make_runner(tmp_path_factory.mktemp("quality"), fake)
    error, examples = drive(runner, KNOWN_FAILURE, NODEID)
    return runner, fake, error, examples


def test_the_property_fails_on_the_known_failure(session) -> None:
    runner, fake, error, _ = session
    assert error is not None, "the property passed although the executor fails at >= 40 requests with backend:down"
    assert f"by a {N}-request trial" in str(error) and "no_lost_results violated" in str(error)
    assert any(fake.fails(c) for c in fake.ran) and not all(fake.fails(c) for c in fake.ran)


def test_the_repro_is_exactly_n_requests_with_the_one_fault(session) -> None:
    runner, fake, _, examples = session
    state = runner.states[NODEID]
    assert state.first_failure_requests > N, "the first failure was already minimal: this run proves no shrinking"
    path = runner.write_repro(state, hypothesis_seed="derandomized")
    data = json.loads(path.read_text())
    config = config_from_dict(data["config"])
    assert data["requests"] == config.shape.requests == N
    assert fault_names(config) == ["backend:down"]
    assert fake.fails(config) and config_key(config) in runner.cache
    assert [v["name"] for v in data["failing"]] == ["no_lost_results"]
    assert data["checked"] == list(ALL)  # a replay fails on any violation, as the session did
    shrink = data["found_by"]["shrink"]
    assert shrink["from_requests"] == state.first_failure_requests
    assert shrink["to_requests"] == N and shrink["hypothesis_final_requests"] == N
    # Failing examples: Hypothesis's (replays of a cached failure too) and the reducer's kept steps.
    failing = sum(1 for c in examples if fake.fails(c)) + sum(1 for s in state.reduce_log if s["still_fails"])
    assert shrink["failing_examples"] == state.failures == failing
    assert data["found_by"]["trials_run"] == len(fake.ran)


def test_the_summary_counts_what_the_executor_saw(session) -> None:
    runner, fake, _, examples = session
    state = runner.states[NODEID]
    summary = runner.summary_dict({NODEID: "failed"})
    (prop,) = summary["properties"]
    ran = len(fake.ran)
    assert len({config_key(c) for c in fake.ran}) == ran, "the cache let one config run twice"
    assert summary["trials"] == prop["trials"] == ran
    # Every example and every reducer step is answered once: run, from the cache, or not run.
    assert prop["trials"] + prop["cached"] + prop["not_run"] == len(examples) + len(state.reduce_log)
    assert prop["cached"] >= 1  # Hypothesis's final replay of the shrunk example costs no trial
    assert prop["not_run"] == 0
    assert prop["judged_trials"] == summary["judged_trials"] == ran
    assert prop["invariants"] == {
        "no_lost_results": {"judged": ran, "unknown": 0, "skipped": 0},
        "result_integrity": {"judged": 0, "unknown": ran, "skipped": 0},
    }
    assert summary["invariants"] == prop["invariants"]
    assert prop["violated"] == ["no_lost_results"] and prop["repro_requests"] == N
    assert prop["first_failure_requests"] == state.first_failure_requests and prop["error"] is None
    line = next(line for line in runner.summary_lines() if "known_failure:" in line)
    assert f"{ran} trials" in line and f"shrunk from {state.first_failure_requests} to {N} requests" in line


def test_the_reducer_alone_halves_to_within_twice_n_and_drops_the_other_faults(tmp_path) -> None:
    """Only the explicit phase (no draws, no Hypothesis shrinking): the repro is the suite's own reducer's work."""
    fake = KnownFailure(min_requests=N, link=FAULT.link, kind=FAULT.kind)
    runner = make_runner(tmp_path, fake)
    error, examples = drive(runner, KNOWN_FAILURE, NODEID, phases=(Phase.explicit,), first=big_failure(FAULT))
    assert error is not None and len(examples) == 1  # the big failure only: an explicit example is not replayed
    state = runner.states[NODEID]
    assert state.first_failure_requests == 256
    config = state.best[0]
    assert N <= config.shape.requests < 2 * N, f"reduced {state.first_failure_requests} -> {config.shape.requests}"
    assert fault_names(config) == ["backend:down"]
    kept = [step["step"] for step in state.reduce_log if step["still_fails"]]
    assert any(step.endswith(" requests") for step in kept), state.reduce_log


def test_an_executor_that_judges_nothing_leaves_the_property_not_judged(tmp_path) -> None:
    fake = KnownFailure(min_requests=N, link=FAULT.link, kind=FAULT.kind, unknown=True)
    runner = make_runner(tmp_path, fake)
    error, _ = drive(runner, KNOWN_FAILURE, NODEID, examples=10)
    assert error is None  # unknown is never a violation ...
    reason = runner.not_judged(NODEID)  # ... and never a pass: the plugin fails the property with this
    assert reason is not None and reason.startswith("not judged: no example judged any of no_lost_results")
    assert "left every invariant unknown" in reason
    (prop,) = runner.summary_dict({NODEID: "failed"})["properties"]
    assert prop["judged_trials"] == 0 and prop["trials"] == len(fake.ran) > 0
    assert prop["invariants"]["no_lost_results"] == {"judged": 0, "unknown": len(fake.ran), "skipped": 0}
    assert prop["error"] == reason


@pytest.mark.parametrize("outcome", ["failed", "passed", "skipped"])
def test_a_row_whose_properties_judged_zero_trials_is_error(tmp_path, outcome: str) -> None:
    """However pytest reported the property (the plugin fails it; JUnit may call it skipped), the row is error."""
    runner = make_runner(tmp_path, KnownFailure(unknown=True))
    drive(runner, KNOWN_FAILURE, NODEID, examples=5)
    summary = runner.summary_dict({NODEID: outcome})
    assert summary["judged_trials"] == 0
    summary["profile"] = "ci"  # the row's profile (this session's is ci with wider time bounds)
    clean_row = select_rows(["clean"])[0]
    result = judge_row(clean_row, summary, 1 if outcome == "failed" else 0, 1.0)
    assert result.result == "error", f"a row that judged nothing came out {result.result}"
    assert "not judged" in (result.error or "")
