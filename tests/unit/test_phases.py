"""A trial's wall split into phases: on the TrialResult, in the report, and summed in the suite summary.

``run_trial`` runs here against TEST DOUBLES of the stack, the sampling
session, the load workers, the monitor, the load wait and the gather
(replaced in ``faultload.run.trial``'s namespace): no server, router or
worker starts. Nothing asserts a duration: only that the phases are there, in
order, non-negative, and add up to the wall.
"""

from __future__ import annotations

import dataclasses
import json
import time
from types import SimpleNamespace

import pytest

from faultload.checker.budgets import Budgets
from faultload.checker.judge import judge
from faultload.compare.judge import CompareSettings
from faultload.host.workspace import Workspace
from faultload.model.build import parse_build
from faultload.model.trial import TRIAL_PHASES
from faultload.run import trial as trial_mod
from faultload.store import report
from faultload.store.bundle import load_bundle, write_bundle
from faultload.suite.comparative import ComparingExecutor
from faultload.suite.executor import TrialOutcome
from faultload.suite.properties import Property
from tests.quality.compare_fakes import CostlierSwitch
from tests.quality.fakes import KnownFailure, make_runner, trial
from tests.unit.test_judge import _result as judged_result

URL = "http://127.0.0.1:9"
LOST = Property("lost", ("no_lost_results",), ())  # steers by nothing: check() needs no Hypothesis context


def _fake_stack(config) -> SimpleNamespace:
    """TEST DOUBLE of a running Stack: what run_trial and _clean_up read of one, and nothing runs."""
    server = SimpleNamespace(
        version="test double",
        pid=0,
        tree=False,
        url=URL,
        log_path="/nonexistent",
        healthz_url=URL,
        log_tail=lambda lines: [],
    )
    router = SimpleNamespace(url=URL, pids=lambda: [], config=config.router, completion_count=lambda: 0)
    return SimpleNamespace(
        config=config.stack_config(),
        server=server,
        router=router,
        topology={},
        faults=None,
        use_router=lambda router_config: None,
        load_url_for=lambda direct: URL,
        close=lambda server_grace_s=None: [],
        start=lambda: None,
    )


class _FakePool:
    """TEST DOUBLE of WorkerPool: every step returns at once."""

    def __init__(self, jobs) -> None:
        self.jobs = jobs

    start = wait_ready = stop = terminate = lambda self: None
    go = lambda self, t0: None  # noqa: E731
    live = lambda self: 0  # noqa: E731


class _FakeMonitor:
    """TEST DOUBLE of Monitor: no sampler or prober thread."""

    fd_limit = None

    def __init__(self, *args, **kwargs) -> None:
        pass

    start = lambda self: None  # noqa: E731
    stop = lambda self, wait_s=None: None  # noqa: E731


@pytest.fixture
def doubles(monkeypatch):
    """run_trial's collaborators replaced by test doubles; ``wait_load`` returns ``doubles.wait()``."""
    box = SimpleNamespace(wait=lambda: False)
    monkeypatch.setattr(trial_mod, "open_sampling_session", lambda url, model, access: "test-double-session")
    monkeypatch.setattr(trial_mod, "retrieve_futures_advertised", lambda url, access: False)
    monkeypatch.setattr(trial_mod, "Monitor", _FakeMonitor)
    monkeypatch.setattr(trial_mod, "LogFollower", lambda path: SimpleNamespace())
    monkeypatch.setattr(trial_mod, "wait_load", lambda *args: box.wait())
    monkeypatch.setattr(trial_mod, "gather_what_can_be", lambda *args: None)
    return box


def _assert_phases_split_the_wall(result, outside_s: float) -> None:
    """The phases in order, none negative, adding up to the wall; and the wall itself no longer than the run
    measured from outside (``outside_s``: a clock the trial does not keep, so the sum is not checked
    against itself alone)."""
    assert list(result.phases_s) == list(TRIAL_PHASES)
    assert all(seconds >= 0 for seconds in result.phases_s.values())
    assert sum(result.phases_s.values()) == pytest.approx(result.wall_s, abs=1e-9)
    assert 0 < result.wall_s <= outside_s
    assert result.phases_s["load"] == pytest.approx(result.load_stopped_s, abs=1e-9)


@pytest.mark.parametrize("own_stack", [True, False])
def test_the_phases_add_up_to_the_wall_in_the_order_they_run(doubles, monkeypatch, tmp_path, own_stack) -> None:
    config = trial(8)
    stack = _fake_stack(config)
    if own_stack:
        monkeypatch.setattr(trial_mod, "Stack", lambda *args: SimpleNamespace(start=lambda: stack))
    before = time.monotonic()
    result = trial_mod.run_trial(config, Workspace(tmp_path), stack=None if own_stack else stack, pools=_FakePool)
    _assert_phases_split_the_wall(result, time.monotonic() - before)


@pytest.mark.parametrize("own_stack", [True, False])
def test_workers_are_spawned_while_a_trials_own_stack_starts(doubles, monkeypatch, tmp_path, own_stack) -> None:
    """On its own stack a trial spawns its workers first and gives them their jobs once the server is up;
    on a shared (already running) stack there is nothing to overlap, and the pool is made with its jobs."""
    events: list[tuple] = []

    class EarlyPool(_FakePool):
        """TEST DOUBLE of WorkerPool with spawn_early: records what the trial asks of it, in order."""

        def __init__(self, jobs) -> None:
            super().__init__(jobs)
            events.append(("made with jobs", len(jobs)))

        @classmethod
        def spawn_early(cls, count: int):
            events.append(("spawned early", count))
            return _FakePool([])

    config = trial(8)
    stack = _fake_stack(config)
    monkeypatch.setattr(
        trial_mod, "Stack", lambda *args: SimpleNamespace(start=lambda: events.append(("stack started",)) or stack)
    )
    monkeypatch.setattr(_FakePool, "assign", lambda self, jobs: events.append(("assigned", len(jobs))), raising=False)
    result = trial_mod.run_trial(config, Workspace(tmp_path), stack=None if own_stack else stack, pools=EarlyPool)
    assert result.error is None
    workers = config.shape.workers
    if own_stack:
        assert events == [("spawned early", workers), ("stack started",), ("assigned", workers)]
    else:
        assert events == [("made with jobs", workers)]


def test_an_interrupted_load_still_splits_its_wall(doubles, tmp_path) -> None:
    def interrupted():
        raise KeyboardInterrupt

    doubles.wait = interrupted
    config = trial(8)
    before = time.monotonic()
    result = trial_mod.run_trial(config, Workspace(tmp_path), stack=_fake_stack(config), pools=_FakePool)
    assert result.interrupted
    _assert_phases_split_the_wall(result, time.monotonic() - before)


def _phased() -> trial_mod.TrialResult:
    result = judged_result()
    result.phases_s = dict(zip(TRIAL_PHASES, (4.0, 0.1, 0.9, 7.0, 1.5, 0.0, 0.5, 0.0)))
    result.wall_s = sum(result.phases_s.values())
    return result


def test_judging_adds_its_phase_after_the_wall_and_the_report_shows_them() -> None:
    result = _phased()
    verdicts = judge(result, Budgets())
    assert list(result.phases_s) == [*TRIAL_PHASES, "judge"] and result.phases_s["judge"] >= 0
    built = report.build_report(result, verdicts)
    assert list(built["phases_s"]) == [*TRIAL_PHASES, "judge"]
    assert built["phases_s"]["load"] == 7.0 and report.phases_wall(built["phases_s"]) == pytest.approx(14.0)
    line = next(ln for ln in report.render_text(built).splitlines() if ln.startswith("trial wall"))
    assert line.startswith("trial wall 14.0 s: load 50%, stack_start 29%, gather 11%,") and "; judge +" in line


def test_a_report_or_bundle_written_before_phases_still_reads(tmp_path) -> None:
    result = _phased()
    verdicts = judge(result, Budgets())
    old = report.build_report(result, verdicts)
    del old["phases_s"]
    assert "trial wall" not in report.render_text(old)
    directory = write_bundle(result, Budgets(), verdicts, tmp_path / "b")
    stored_trial = json.loads((directory / "trial.json").read_text())
    del stored_trial["phases_s"]
    (directory / "trial.json").write_text(json.dumps(stored_trial))
    stored = load_bundle(directory)
    assert stored.phases_s == {}
    assert report.build_report(stored, verdicts)["phases_s"] == {}


@dataclasses.dataclass
class _Phased(KnownFailure):
    """TEST DOUBLE executor: a KnownFailure whose every trial reports these phases."""

    phases: dict = dataclasses.field(
        default_factory=lambda: {
            "stack_ready": 2.0,
            **dict(zip(TRIAL_PHASES, (1.0, 0.0, 1.0, 6.0, 1.0, 0.0, 1.0, 0.0))),
            "judge": 0.5,
        }
    )

    def run(self, config) -> TrialOutcome:
        outcome = super().run(config)
        outcome.phases_s = dict(self.phases)
        return outcome


def test_the_summary_sums_every_trial_runs_phases_once(tmp_path) -> None:
    runner = make_runner(tmp_path, _Phased(min_requests=10**6))
    runner.begin("tests/unit/test_phases.py::test_p")
    for requests in (1, 2, 1):  # the third is the first again: answered from the cache, not summed twice
        runner.check(LOST, trial(requests))
    summary = runner.summary_dict()
    assert summary["phases_s"] == {
        "stack_ready": 4.0,
        "stack_start": 2.0,
        "session_open": 0.0,
        "workers_start": 2.0,
        "load": 12.0,
        "gather": 2.0,
        "hold": 0.0,
        "clean_up": 2.0,
        "other": 0.0,
        "judge": 1.0,
    }
    assert summary["trial_wall_s"] == 20.0 and summary["load_share"] == pytest.approx(0.6)
    assert (
        "  trial wall 20 s: load 60%, stack_start 10%, workers_start 10%, gather 10%, clean_up 10%, "
        "session_open 0%, hold 0%, other 0%; stack_ready +4.0 s, judge +1.0 s"
    ) in runner.summary_lines()


def test_a_session_without_phases_says_so_in_its_summary(tmp_path) -> None:
    runner = make_runner(tmp_path, KnownFailure(min_requests=10**6))
    summary = runner.summary_dict()
    assert (summary["phases_s"], summary["trial_wall_s"], summary["load_share"]) == ({}, 0.0, None)
    assert not any("trial wall" in line for line in runner.summary_lines())


@dataclasses.dataclass
class _PhasedSide(CostlierSwitch):
    """TEST DOUBLE executor: a CostlierSwitch whose every trial reports a load and a judge phase."""

    def run(self, config) -> TrialOutcome:
        outcome = super().run(config)
        outcome.phases_s = {"load": 1.0, "judge": 0.25}
        return outcome


def test_a_comparative_example_sums_the_phases_of_both_sides_trials() -> None:
    side = _PhasedSide()
    outcome = ComparingExecutor(
        parse_build("skyrl==0.4.0"),
        {"baseline": side, "candidate": side},
        2,
        CompareSettings(),
        log=lambda message: None,
    ).run(trial(200))
    assert len(side.ran) == 4 and outcome.phases_s == {"load": 4.0, "judge": 1.0}
