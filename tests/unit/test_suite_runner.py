"""Unit tests of the suite engine's bookkeeping (``faultload.suite.runner.SuiteRunner``).

Trials come from a test double (``tests.quality.fakes.KnownFailure``: no
server starts) and time from a test-double clock: the runner reads
``time.monotonic()`` through its module's ``time``, which the ``clock``
fixture replaces with :class:`~tests.quality.fakes.FakeClock` (only in
``faultload.suite.runner``; the fake executor advances it by ``trial_s`` per
trial). No Hypothesis here: the properties steer by no figure, so ``check`` is
called directly, as one example at a time.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from faultload.model.codec import config_from_dict
from faultload.model.faults import Fault
from faultload.model.training import TrainingMix
from faultload.model.watchdog import WatchdogLimits
from faultload.store.repro import config_key
from faultload.suite import runner as runner_mod
from faultload.suite.executor import SuiteError
from faultload.suite.properties import ALL, Property
from faultload.suite.reducer import complexity, reductions, with_requests
from faultload.suite.state import Tally
from faultload.suite.summary import summary_dict
from tests.quality.fakes import (
    TARGET,
    TIME_SCALE,
    FakeClock,
    KnownFailure,
    big_failure,
    make_runner,
    quality_profile,
    runner_clock,
    trial,
)

LOST = Property("lost", ("no_lost_results",), ())  # steers by nothing: check() needs no Hypothesis context
FAULT = Fault("backend", "down", start_s=0.0, duration_s=0.25)
OTHER = Fault("edge", "latency", {"latency": 50}, duration_s=0.5)  # big_failure's first fault
NODE = "tests/unit/test_suite_runner.py::test_p"


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    return runner_clock(monkeypatch)


def setup(tmp_path, clock, trial_s: float = 30.0, remaining: int = 0, fake=None, **profile):
    """(runner, fake executor, the property's state) with one property begun."""
    fake = fake or KnownFailure(min_requests=40, clock=clock, trial_s=trial_s)
    runner = make_runner(tmp_path, fake, quality_profile(**profile))
    return runner, fake, runner.begin(NODE, remaining)


# --------------------------------------------------------------------------- time bounds


def test_a_property_stops_drawing_after_property_s(tmp_path, clock) -> None:
    runner, fake, state = setup(tmp_path, clock, property_s=100.0)
    for requests in range(1, 7):  # 30 s each: trials start at 0, 30, 60, 90; the 5th and 6th would start at 120
        runner.check(LOST, trial(requests))
    assert (state.trials, state.not_run, len(fake.ran)) == (4, 2, 4)
    assert state.tally == {"no_lost_results": Tally(judged=4, unknown=0, skipped=2)}
    assert runner.not_judged(NODE) is None
    assert "2 examples not run (time bound spent)" in "\n".join(runner.summary_lines())
    runner.check(LOST, trial(1))  # a config that already ran is still answered: from the cache
    assert (state.cached, state.not_run, len(fake.ran)) == (1, 2, 4)
    assert state.tally["no_lost_results"] == Tally(judged=4, unknown=0, skipped=2)  # and not tallied twice


def test_a_propertys_known_trials_run_whatever_its_time_bound_and_its_draws_get_their_own(
    tmp_path, clock, monkeypatch
) -> None:
    """Two known trials of 30 s each on a property bound to 45 s: both run (the profile's promise), and the
    draws after them still get their 45 s (two trials start, at 60 and 90 s of the property's wall; a third
    would start at 120 s, past 60 + 45)."""
    monkeypatch.setattr(runner_mod, "known_configs", lambda profile, prop, target, regress: [None, None])
    runner, fake, state = setup(tmp_path, clock, property_s=45.0)
    for requests in range(1, 6):
        runner.check(LOST, trial(requests))
    assert (state.trials, state.not_run, state.known_left) == (4, 1, 0)
    assert state.known_s == pytest.approx(60.0)


def test_a_property_draws_for_its_fair_share_of_the_session(tmp_path, clock) -> None:
    runner, fake, state = setup(tmp_path, clock, remaining=3, session_s=400.0, property_s=1000.0)
    assert state.share_s == pytest.approx(100.0)
    for requests in range(1, 7):
        runner.check(LOST, trial(requests))
    assert (state.trials, state.not_run) == (4, 2)


def test_a_property_whose_every_example_was_skipped_is_not_judged(tmp_path, clock) -> None:
    runner = make_runner(tmp_path, KnownFailure(clock=clock), quality_profile(session_s=100.0))
    clock.advance(101.0)  # the session's time is spent before this property starts
    state = runner.begin(NODE)
    for requests in (1, 2, 3):
        runner.check(LOST, trial(requests))
    assert (state.trials, state.not_run) == (0, 3)
    assert state.tally == {"no_lost_results": Tally(judged=0, unknown=0, skipped=3)}
    reason = runner.not_judged(NODE)
    assert reason == "not judged: no example judged any of no_lost_results (3 examples not run (time bound spent))"
    (prop,) = runner.summary_dict({NODE: "failed"})["properties"]
    assert prop["error"] == reason and prop["judged_trials"] == 0
    assert prop["invariants"] == {"no_lost_results": {"judged": 0, "unknown": 0, "skipped": 3}}


def test_after_a_failure_the_shrink_budget_bounds_trials_instead_of_property_s(tmp_path, clock) -> None:
    runner, fake, state = setup(tmp_path, clock, property_s=15.0, shrink_s=100.0, reduce_share=0.0)
    with pytest.raises(AssertionError, match="no_lost_results violated"):
        runner.check(LOST, trial(40, FAULT))  # fails at t=30: shrinking may go on until t=130
    assert state.shrink_until - state.first_failure_at == pytest.approx(100.0)
    for requests in range(41, 45):  # start at 30, 60, 90, 120: past property_s, inside the shrink budget
        with pytest.raises(AssertionError):
            runner.check(LOST, trial(requests, FAULT))
    assert state.trials == 5 and not state.shrink_cut
    runner.check(LOST, trial(45, FAULT))  # t=150: not run, so it passes, and the cut is reported
    assert state.not_run == 1 and state.shrink_cut and len(fake.ran) == 5
    with pytest.raises(AssertionError):  # a failure already run still fails (Hypothesis's final replay)
        runner.check(LOST, trial(40, FAULT))
    assert state.best[0].shape.requests == 40 and state.failures == 6


@pytest.mark.parametrize("remaining, expected_s", [(2, 190.0), (10, 20.0)])
def test_a_first_failure_shrinks_only_as_long_as_leaves_the_later_properties_their_time(
    tmp_path, clock, remaining: int, expected_s: float
) -> None:
    """session 300 s, failure at 30 s, 0.8 × 50 s kept for each later property; never less than 20 s."""
    runner, _, state = setup(
        tmp_path, clock, remaining=remaining, session_s=300.0, property_s=50.0, shrink_s=1000.0, reduce_share=0.0
    )
    with pytest.raises(AssertionError):
        runner.check(LOST, trial(40, FAULT))
    assert state.shrink_until - state.first_failure_at == pytest.approx(expected_s)


def test_no_trial_starts_after_session_s_even_inside_the_shrink_budget(tmp_path, clock) -> None:
    runner, fake, state = setup(tmp_path, clock, trial_s=90.0, session_s=100.0, reduce_share=0.0)
    with pytest.raises(AssertionError):
        runner.check(LOST, trial(40, FAULT))  # fails at t=90: shrink budget floor 20 s, to t=110
    assert state.shrink_until == pytest.approx(state.first_failure_at + 20.0)
    clock.advance(15.0)  # t=105: inside the shrink budget, past the session's end
    runner.check(LOST, trial(41, FAULT))
    assert state.not_run == 1 and len(fake.ran) == 1


def test_the_reducer_spends_only_its_share_of_the_shrink_budget(tmp_path, clock) -> None:
    runner, fake, state = setup(tmp_path, clock, trial_s=12.0, shrink_s=100.0, reduce_share=0.5)
    with pytest.raises(AssertionError):
        runner.check(LOST, big_failure(FAULT))
    # 50 s for the reducer: steps start at 0, 12, 24, 36, 48 s after the failure; the 6th would start at 60.
    assert len(state.reduce_log) == 5 and len(fake.ran) == 6
    assert [step["seconds"] for step in state.reduce_log] == [12.0] * 5


# --------------------------------------------------------------------------- cache and tallies


def test_the_same_config_twice_runs_once_and_is_tallied_once(tmp_path, clock) -> None:
    runner, fake, state = setup(tmp_path, clock)
    runner.check(LOST, trial(3))
    runner.check(LOST, trial(3))
    assert (len(fake.ran), state.trials, state.cached, state.judged_trials) == (1, 1, 1, 1)
    assert state.tally == {"no_lost_results": Tally(judged=1, unknown=0, skipped=0)}
    other = runner.begin("tests/unit/test_suite_runner.py::test_q")  # the cache is the session's
    runner.check(LOST, trial(3))
    assert (len(fake.ran), other.trials, other.cached, other.judged_trials) == (1, 0, 1, 1)
    assert runner.summary_dict()["trials"] == 1


def test_a_cached_failure_fails_again(tmp_path, clock) -> None:
    runner, fake, state = setup(tmp_path, clock, reduce_share=0.0)
    for _ in range(2):
        with pytest.raises(AssertionError, match="by a 40-request trial"):
            runner.check(LOST, trial(40, FAULT))
    assert (len(fake.ran), state.cached, state.failures) == (1, 1, 2)


def test_unknown_verdicts_are_tallied_unknown_and_judge_nothing(tmp_path, clock) -> None:
    fake = KnownFailure(unknown_for=("bounded_cpu",))
    runner, _, state = setup(tmp_path, clock, fake=fake)
    runner.check(Property("cpu", ("bounded_cpu", "no_lost_results"), ()), trial(3))
    assert state.tally == {"bounded_cpu": Tally(0, 1, 0), "no_lost_results": Tally(1, 0, 0)}
    assert state.judged_trials == 1
    cpu_only = runner.begin("tests/unit/test_suite_runner.py::test_cpu")
    runner.check(Property("cpu", ("bounded_cpu",), ()), trial(4))
    assert cpu_only.judged_trials == 0
    assert runner.not_judged(cpu_only.nodeid).startswith("not judged: no example judged any of bounded_cpu")


# --------------------------------------------------------------------------- the config as run


def test_the_config_as_run_is_what_runs_what_is_cached_and_what_the_repro_stores(tmp_path, clock) -> None:
    watchdog = WatchdogLimits(stall_latency_s=7.0)
    runner = make_runner(tmp_path, KnownFailure(clock=clock), quality_profile(reduce_share=0.0), watchdog=watchdog)
    fake = runner.executor
    state = runner.begin(NODE)
    drawn = trial(40, FAULT)
    assert drawn.watchdog != watchdog
    with pytest.raises(AssertionError):
        runner.check(LOST, drawn)
    (ran,) = fake.ran
    assert ran == dataclasses.replace(drawn, watchdog=watchdog)
    assert list(runner.cache) == [config_key(ran)] and config_key(drawn) not in runner.cache
    data = json.loads(runner.write_repro(state).read_text())
    assert config_from_dict(data["config"]) == ran


# --------------------------------------------------------------------------- every violation fails


def test_a_violation_of_an_invariant_the_property_does_not_assert_fails_it(tmp_path, clock) -> None:
    """A trial whose only violation is outside its property's invariants fails it and is shrunk."""
    fake = KnownFailure(min_requests=40, clock=clock, invariant="futures_resolve")
    runner, fake, state = setup(tmp_path, clock, fake=fake, reduce_share=0.0)
    assert "futures_resolve" not in LOST.invariants
    runner.check(LOST, trial(10, FAULT))  # below the double's threshold: nothing violated, passes
    with pytest.raises(
        AssertionError, match=r"futures_resolve violated \(seen by this trial, not asserted by its property\)"
    ):
        runner.check(LOST, trial(50, FAULT))
    assert state.failures == 1 and state.best is not None
    assert summary_dict(runner)["properties"][0]["violated"] == ["futures_resolve"]  # what the matrix reads


def test_a_trial_that_was_no_test_of_the_target_is_rejected_and_reported_not_failed(tmp_path, clock) -> None:
    """A fault the injector could not heal (fault_not_healed): the example is rejected (so it neither passes,
    nor fails the property, nor stays in Hypothesis's database to be replayed every night), the property goes
    on, and the summary says which trial was not judged and why."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from hypothesis.errors import Unsatisfiable

    why = "not judged: the fault injector could not heal edge:latency@1+1: toxiproxy remove_toxic timed out"
    fake = KnownFailure(min_requests=40, clock=clock, unjudged=why)
    runner, fake, state = setup(tmp_path, clock, fake=fake)

    @settings(max_examples=1, database=None, suppress_health_check=list(HealthCheck))
    @given(st.just(trial(50, FAULT)))
    def prop(config) -> None:  # as the suite's properties call it: inside a Hypothesis test
        runner.check(LOST, config)

    with pytest.raises(Unsatisfiable):  # every example rejected: none passed, none failed
        prop()
    assert state.broken is None and state.failures == 0 and state.unjudged == [why]
    assert state.judged_trials == 0
    assert summary_dict(runner)["properties"][0]["unjudged"] == [why]
    assert "1 trial(s) not judged: " + why in "\n".join(runner.summary_lines())


# --------------------------------------------------------------------------- repros


def test_the_repro_file_round_trips_its_config_and_says_how_it_was_found(tmp_path, clock) -> None:
    runner, fake, state = setup(tmp_path, clock, reduce_share=0.0)
    config = trial(50, FAULT)
    with pytest.raises(AssertionError):
        runner.check(LOST, config)
    path = runner.write_repro(state, hypothesis_seed=1234)
    assert path.parent == tmp_path / "repros" and path.name.startswith("test_p-") and path == state.repro_path
    assert path.name.endswith(f"-{config_key(config)}.json")
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no report (no TrialResult), no temp file
    assert state.bundle_path is None  # no bundle either: nothing recorded to judge again
    state.bundle_path = path.with_suffix(".bundle")  # as write_property_repro sets it when the result was kept
    assert (
        f"    repro: {path}\n    replay: faultload replay {path}\n    bundle: {state.bundle_path}\n"
        f"    check: faultload check {state.bundle_path}"
    ) in "\n".join(runner.summary_lines())
    data = json.loads(path.read_text())
    assert config_from_dict(data["config"]) == config
    assert (data["target"], data["requests"], data["time_scale"]) == (TARGET, 50, TIME_SCALE)
    assert data["checked"] == list(ALL)  # a replay fails on any violation, as the session did
    assert [v["name"] for v in data["failing"]] == ["no_lost_results"]
    assert [v["name"] for v in data["verdicts"]] == list(ALL)
    assert data["replay"] == f"faultload replay {path}"
    assert data["found_by"] == {
        "property": NODE,
        "profile": "quality",
        "hypothesis_seed": 1234,
        "trials_run": 1,
        "shrink": {
            "from_requests": 50,
            "to_requests": 50,
            "failing_examples": 1,
            "shrink_s": 0.0,
            "cut_by_budget": False,
            "budget_s": pytest.approx(1e6),
            "reduce_steps": [],
            "hypothesis_final_requests": 50,
        },
    }


def test_the_repro_is_the_reduced_failure_with_its_steps(tmp_path, clock) -> None:
    runner, fake, state = setup(tmp_path, clock, trial_s=1.0)
    with pytest.raises(AssertionError):
        runner.check(LOST, big_failure(FAULT))
    data = json.loads(runner.write_repro(state).read_text())
    config = config_from_dict(data["config"])
    assert 40 <= config.shape.requests < 80 and [f.kind for f in config.faults.faults] == ["down"]
    assert config.shape.arrival == "burst"
    shrink = data["found_by"]["shrink"]
    assert shrink["from_requests"] == 256 and shrink["to_requests"] == config.shape.requests
    assert shrink["reduce_steps"] == state.reduce_log and shrink["hypothesis_final_requests"] == config.shape.requests


def test_no_failure_no_repro(tmp_path, clock) -> None:
    runner, _, state = setup(tmp_path, clock)
    runner.check(LOST, trial(3))
    assert runner.write_repro(state) is None and not (tmp_path / "repros").exists()


# --------------------------------------------------------------------------- harness errors


@pytest.mark.parametrize("mode", ["suite_error", "harness_error"])
def test_an_executor_error_breaks_the_property_once(tmp_path, clock, mode: str) -> None:
    message = "could not start the stack for skyrl==0.4.0: boom"
    runner, fake, state = setup(tmp_path, clock, fake=KnownFailure(**{mode: message}))
    for requests in (3, 4, 3):
        with pytest.raises(SuiteError, match="boom"):
            runner.check(LOST, trial(requests))
    assert len(fake.ran) == 1 and state.broken == message and state.trials == 0
    assert runner.not_judged(NODE) is None  # an error, reported as one, not as "not judged"
    (prop,) = runner.summary_dict({NODE: "failed"})["properties"]
    assert prop["error"] == message and prop["violated"] == []


# --------------------------------------------------------------------------- the reducer's parts


def test_reductions_try_fewer_requests_first_then_each_fault() -> None:
    labels = [label for label, _ in reductions(big_failure(FAULT))]
    assert labels[:2] == ["1 request", "128 requests"]
    assert "one burst" in labels and labels.index("one burst") < labels.index(f"without {FAULT.to_spec()}")
    assert {f"without {OTHER.to_spec()}", f"without {FAULT.to_spec()}"} <= set(labels)


def test_a_training_failure_shrinks_its_trainers_and_steps_after_its_requests_and_ranks_by_all_it_sends() -> None:
    trained = dataclasses.replace(
        big_failure(FAULT),
        engine="null",
        shape=dataclasses.replace(
            big_failure(FAULT).shape, training=TrainingMix(trainers=32, steps=16, datums=4, datum_tokens=128)
        ),
    )
    labels = [label for label, _ in reductions(trained)]
    assert labels[2:7] == ["1 trainer", "16 trainers", "1 step", "8 steps", "1 datum of 16 tokens"]
    assert "no training" not in " ".join(labels)  # a training failure needs a trainer
    fewer_trainers = dataclasses.replace(
        trained,
        shape=dataclasses.replace(trained.shape, training=dataclasses.replace(trained.shape.training, trainers=1)),
    )
    assert complexity(fewer_trainers) < complexity(trained)  # 2 x 1 x 16 training calls, not 2 x 32 x 16


def test_with_requests_keeps_the_cap_and_workers_within_the_requests() -> None:
    config = dataclasses.replace(trial(256), shape=dataclasses.replace(trial(256).shape, max_outstanding=64))
    fewer = with_requests(config, 10)
    assert (fewer.shape.requests, fewer.shape.max_outstanding, fewer.shape.workers) == (10, 10, 1)
    assert with_requests(trial(256), 10).shape.max_outstanding == 0  # no cap stays no cap


def test_complexity_ranks_fewer_requests_before_fewer_faults() -> None:
    assert complexity(trial(40, FAULT, OTHER)) < complexity(trial(41, FAULT))
    assert complexity(trial(40, FAULT)) < complexity(trial(40, FAULT, OTHER))


# --------------------------------------------------------------------------- the machine's turns (lanes)


class TurnRecorder(KnownFailure):
    """TEST DOUBLE executor: a KnownFailure that records, as each trial runs, what holds the machine's slots."""

    def __init__(self, admission_folder, **kwargs) -> None:
        super().__init__(**kwargs)
        self.folder = admission_folder
        self.seen: list[list[str]] = []

    def run(self, config):
        from faultload.host.admission import Admission

        self.seen.append(Admission(self.folder, 2).running())
        return super().run(config)


def test_each_trial_takes_its_turn_of_the_machine_alone_when_it_needs_it(tmp_path, clock) -> None:
    from faultload.host.admission import Admission

    folder = tmp_path / "admission"
    fake = TurnRecorder(folder, min_requests=40, clock=clock, trial_s=1.0)
    runner, _, state = setup(tmp_path, clock, fake=fake)
    runner.admission, runner.lane = Admission(folder, 2), "gw1"
    lines: list[str] = []
    runner._log = lines.append
    runner.check(LOST, trial(8))  # small: one slot, beside whatever runs
    runner.check(LOST, trial(2048))  # past ALONE_FROM_REQUESTS: every slot
    with pytest.raises(AssertionError):
        runner.check(LOST, trial(40, FAULT))  # fails: beside others; its shrinking runs alone
    assert fake.seen[0] == ["gw1 test_p trial 1 (8 req)"]
    assert fake.seen[1] == ["gw1 test_p trial 2 (2048 req) (alone)"] * 2
    assert fake.seen[2] == ["gw1 test_p trial 3 (40 req)"]
    assert all(len(seen) == 2 for seen in fake.seen[3:]) and len(fake.seen) > 3  # the reducer's trials: alone
    assert "test_p: trial 2 runs alone: 2,048 requests: past 1,024, its own load keeps the machine busy" in lines
    assert any("runs alone: shrinking a failure" in line for line in lines)
    assert Admission(folder, 2).running() == []  # nothing held once the trials ended
    assert state.trials == len(fake.seen)


def test_a_lane_starts_no_trial_once_its_session_should_stop(tmp_path, clock) -> None:
    runner, fake, state = setup(tmp_path, clock)
    runner.stop_file = tmp_path / "stop-1"
    runner.check(LOST, trial(3))
    runner.stop_file.touch()  # another lane's property failed under -x
    runner.check(LOST, trial(4))
    assert (state.trials, state.not_run, len(fake.ran)) == (1, 1, 1)


def test_a_shrinks_waits_for_its_turns_are_not_its_budget(tmp_path, clock) -> None:
    runner, _, state = setup(tmp_path, clock)
    state.first_failure_at, state.shrink_until = clock.now, clock.now + 100.0
    clock.advance(150.0)
    assert runner._out_of_time(state, clock.now, LOST)  # 150 s of its 100
    state.shrink_waited_s = 60.0  # the other lanes' trials ran 60 s of them
    assert not runner._out_of_time(state, clock.now, LOST)
