"""How many lanes a machine holds (faultload.host.lanes), which trial needs the machine, and one summary from
the lanes' (faultload.suite.lanes): pure functions on hand-made machines, needs and summaries."""

from __future__ import annotations

import contextlib
import dataclasses
import types
from pathlib import Path

import pytest

from faultload.host.lanes import DEFAULT_NEEDS, LaneNeeds, Machine, lanes_for, read_needs, write_needs
from faultload.host.lanes import machine_lanes as host_machine_lanes
from faultload.suite.lanes import (
    ALONE_FROM_REQUESTS,
    MOST_LANES,
    choose_lanes,
    merge_summaries,
    names_suite,
    needs_machine,
    needs_of,
    trial_turn,
)
from faultload.suite.properties import PROPERTIES
from faultload.suite.state import PropertyState

GIB = 2**30
NEEDS = LaneNeeds(cores=0.25, rss_bytes=GIB, fds=2_000, trials=40)


def test_each_bound_is_what_the_machine_holds_for_the_measured_needs() -> None:
    roomy = Machine(cores=2, available_bytes=22 * GIB, free_files=1_000_000)
    lanes = lanes_for(roomy, NEEDS, most=9)
    assert (lanes.by_cpu, lanes.by_memory, lanes.count) == (6, 11, 6)  # 2 x 0.75 / 0.25; 22 x 0.5 / 1
    assert "6 lane(s): cores allow 6, memory 11" in lanes.reason() and "measured over 40 trials" in lanes.reason()
    assert lanes_for(Machine(2, 3 * GIB, 1_000_000), NEEDS, most=9).count == 1  # memory: 1.5 GiB for 1 GiB lanes
    assert lanes_for(Machine(16, 64 * GIB, 1_000_000), NEEDS, most=9).count == 9  # never more than properties
    assert lanes_for(Machine(2, 22 * GIB, 5_000), NEEDS, most=9).count == 1  # files: 2,500 for 2,000 a lane
    busy = LaneNeeds(cores=3.0, rss_bytes=GIB, fds=10)
    assert lanes_for(roomy, busy, most=9).count == 1  # at least one, whatever a trial needs


def test_needs_come_from_the_last_session_else_the_defaults(tmp_path: Path) -> None:
    assert read_needs(tmp_path) == DEFAULT_NEEDS
    write_needs(tmp_path, NEEDS)
    assert read_needs(tmp_path) == NEEDS
    assert not list(tmp_path.glob("*.part"))
    (tmp_path / "lanes.json").write_text("{not json")
    assert read_needs(tmp_path) == DEFAULT_NEEDS


def test_a_lane_with_a_base_keeps_two_stacks_and_needs_twice_the_memory(tmp_path: Path) -> None:
    write_needs(tmp_path, LaneNeeds(cores=0.01, rss_bytes=GIB, fds=1))
    one, two = host_machine_lanes(tmp_path, 100, 1), host_machine_lanes(tmp_path, 100, 2)
    assert two.needs.rss_bytes == 2 * GIB and two.needs.cores == one.needs.cores
    assert two.by_memory <= one.by_memory // 2 + 1 and two.by_cpu == one.by_cpu


def test_needs_of_the_lanes_usage_weigh_cores_by_wall_and_take_the_largest_memory() -> None:
    usages = [
        {"cpu_s": 10.0, "wall_s": 100.0, "rss_bytes": 500, "own_rss_bytes": 100, "fds": 30, "trials": 5},
        {"cpu_s": 30.0, "wall_s": 100.0, "rss_bytes": 700, "own_rss_bytes": 0, "fds": 10, "trials": 3},
        {"cpu_s": 0.0, "wall_s": 0.0, "rss_bytes": 0, "fds": 0, "trials": 0},
    ]
    assert needs_of(usages) == LaneNeeds(cores=0.2, rss_bytes=700, fds=30, trials=8)
    assert needs_of([usages[2]]) is None


def test_what_needs_the_machine() -> None:
    assert needs_machine(ALONE_FROM_REQUESTS - 1, comparative=False, shrinking=False) is None
    assert "2,048 requests" in needs_machine(2048, comparative=False, shrinking=False)
    assert "comparison" in needs_machine(128, comparative=True, shrinking=False)
    assert "shrinking" in needs_machine(8, comparative=False, shrinking=True)
    assert "stack starts" in needs_machine(8, comparative=False, shrinking=False, starting=True)


def test_most_lanes_is_the_count_of_properties() -> None:
    assert MOST_LANES == len(PROPERTIES)


@pytest.mark.parametrize(
    ("paths", "pyargs", "named"),
    [
        (["faultload"], False, True),
        (["faultload/suite"], False, True),
        (["faultload/suite/test_properties.py::test_health"], False, True),
        (["faultload.suite"], True, True),
        (["faultload"], True, True),
        (["tests"], False, False),
        (["tests/quality/test_plugin_session.py"], False, False),
        ([], False, False),
    ],
)
def test_which_command_lines_name_the_suite(paths, pyargs, named, monkeypatch) -> None:
    package = Path(__file__).resolve().parent.parent.parent / "faultload"
    monkeypatch.chdir(package.parent)
    assert names_suite(paths, pyargs, package) is named


def summary(trials: int, props: list[str], growth_ok: bool | None, judged: int) -> dict:
    return {
        "profile": "ci",
        "target": "skyrl==0.4.0",
        "trials": trials,
        "stack_starts": 1,
        "judged_trials": judged,
        "trial_wall_s": 10.0 * trials,
        "phases_s": {"load": 5.0 * trials, "judge": 1.0},
        "invariants": {"no_lost_results": {"judged": judged, "unknown": 1, "skipped": 0}},
        "properties": [{"nodeid": name, "outcome": "passed"} for name in props],
        "session_growth": {"name": "session_growth", "ok": growth_ok},
        "notes": ["compared with its release"],
    }


def test_one_summary_from_the_lanes() -> None:
    merged = merge_summaries(
        [summary(3, ["a"], True, 3), summary(5, ["b", "c"], False, 4)], wall_s=61.23, lanes={"count": 2}
    )
    assert merged["trials"] == 8 and merged["judged_trials"] == 7 and merged["stack_starts"] == 2
    assert [p["nodeid"] for p in merged["properties"]] == ["a", "b", "c"]
    assert merged["invariants"]["no_lost_results"] == {"judged": 7, "unknown": 2, "skipped": 0}
    assert merged["phases_s"] == {"load": 40.0, "judge": 2.0} and merged["load_share"] == 0.5
    assert merged["session_growth"]["ok"] is False  # the worst lane's stack
    assert merged["notes"] == ["compared with its release"] and merged["wall_s"] == 61.2
    assert merged["lanes"] == {"count": 2}
    assert merge_summaries([], 1.0, {}) == {}


class FakeConfig:
    """TEST DOUBLE of ``pytest.Config``: what ``choose_lanes`` reads (its options, its args)."""

    def __init__(
        self, args: list[str], lanes: str = "auto", numprocesses=None, workdir: str = "", target: str = ""
    ) -> None:
        import argparse

        self.args = args
        self.option = argparse.Namespace(numprocesses=numprocesses, dist="no")
        self._options = {
            "faultload_lanes": lanes,
            "collectonly": False,
            "pyargs": False,
            "faultload_workdir": workdir,
            "faultload_target": target,
        }

    def getoption(self, name: str, default=None):
        return self._options.get(name, default)


def test_a_session_of_the_suite_gets_its_lanes_as_pytest_xdist_workers(tmp_path: Path, monkeypatch) -> None:
    package = Path(__file__).resolve().parent.parent.parent / "faultload"
    monkeypatch.chdir(package.parent)
    config = FakeConfig(["faultload"], lanes="3", workdir=str(tmp_path))
    lanes = choose_lanes(config, {}, package)
    assert lanes is not None and lanes.count == 3
    assert (config.option.numprocesses, config.option.dist) == (3, "worksteal")
    for not_ours in (
        FakeConfig(["tests"], workdir=str(tmp_path)),  # not the suite's properties
        FakeConfig(["faultload"], numprocesses=2, workdir=str(tmp_path)),  # -n given: it wins
        FakeConfig(["faultload"], lanes="1", workdir=str(tmp_path)),  # one lane: no workers
        FakeConfig(["faultload"], workdir=str(tmp_path), target="url=http://127.0.0.1:9"),  # a server not ours
    ):
        assert choose_lanes(not_ours, {}, package) is None
        assert not_ours.option.numprocesses in (None, 2)


def test_under_maxfail_the_controller_marks_its_lanes_to_stop(tmp_path: Path) -> None:
    """pytest-xdist lets each lane finish the property it runs; the mark makes their examples left not run."""
    from types import SimpleNamespace

    from faultload.suite import plugin

    class Controller:  # TEST DOUBLE of pytest.Config: its stash and --maxfail
        stash = pytest.Stash()

        def getoption(self, name: str, default=None):
            return 2 if name == "maxfail" else default

    config = Controller()
    config.stash[plugin._STOP] = tmp_path / "stop-1"
    token = plugin._CONTROLLER.set(config)
    try:
        plugin.pytest_runtest_logreport(SimpleNamespace(failed=False))
        plugin.pytest_runtest_logreport(SimpleNamespace(failed=True))
        assert not (tmp_path / "stop-1").exists()  # one failure of the two --maxfail 2 allows
        plugin.pytest_runtest_logreport(SimpleNamespace(failed=True))
        assert (tmp_path / "stop-1").exists()
    finally:
        plugin._CONTROLLER.reset(token)


LANE_CONTROLLER = """
import pathlib, subprocess, sys
from faultload.suite.lanes import interrupt_lanes
lane = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
interrupt_lanes(pathlib.Path(sys.argv[1]), int(sys.argv[2]))
try:
    print(lane.wait(timeout=float(sys.argv[3])))
except subprocess.TimeoutExpired:
    lane.kill()
    print("alive")
"""


@pytest.mark.parametrize(("sig", "wait_s", "lane_sees"), [(15, 10.0, "-15"), (1, 10.0, "-15"), (2, 0.5, "alive")])
def test_an_interrupted_controller_stops_its_lanes(tmp_path: Path, sig: int, wait_s: float, lane_sees: str) -> None:
    """SIGTERM or SIGHUP sent to the controller alone reach each lane as SIGTERM; a SIGINT reaches them from the
    terminal (the whole group), so the controller only marks the stop; the mark is made in every case."""
    import subprocess
    import sys

    mark = tmp_path / "admission" / "stop-1"
    out = subprocess.run(
        [sys.executable, "-c", LANE_CONTROLLER, str(mark), str(sig), str(wait_s)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == lane_sees, out.stderr
    assert mark.exists()


def test_a_shrinking_propertys_turns_count_their_waits(tmp_path: Path, monkeypatch) -> None:
    """Each candidate of a shrink takes its own alone turn; how long each took to come is added to the property's
    ``shrink_waited_s`` (its budget is spent on its own trials), and nothing is counted before it shrinks."""
    from faultload.suite import lanes as lanes_mod
    from tests.quality.fakes import FakeClock

    clock = FakeClock()
    monkeypatch.setattr(lanes_mod, "time", clock.as_time_module())

    class SlowTurns:  # TEST DOUBLE of Admission: every turn comes 7 s after it was asked for
        slots = 2

        @contextlib.contextmanager
        def alone(self, label):
            clock.advance(7.0)
            yield

        @contextlib.contextmanager
        def beside(self, label):
            clock.advance(7.0)
            yield []

    lines: list[str] = []
    state = PropertyState("faultload/suite/test_properties.py::test_health")
    config = types.SimpleNamespace(
        shape=types.SimpleNamespace(requests=8, max_outstanding=0, arrival="burst"),
        router=types.SimpleNamespace(mode="latency"),
    )
    with trial_turn(SlowTurns(), "gw1", state, config, None, lines.append):
        pass
    assert state.shrink_waited_s == 0.0  # not shrinking: its property's own time bound counts it
    state.first_failure_at = clock.now
    for _ in range(2):
        with trial_turn(SlowTurns(), "gw1", state, config, None, lines.append):
            pass
    assert (
        state.shrink_waited_s == 14.0
        and lines.count("runs alone: shrinking a failure: its repro is what it would be alone") == 2
    )


def test_a_lanes_collection_waits_while_a_trial_runs_alone(tmp_path: Path) -> None:
    """A lane's collection (seconds of CPU: the suite's imports) takes a turn beside the others, so it never runs
    beside a trial that holds the machine alone; it goes on once that trial ends."""
    import threading

    from faultload.host.admission import Admission
    from faultload.suite.lanes import collection_turn

    config = types.SimpleNamespace(
        workerinput={"workercount": 2, "workerid": "gw3", "faultload_stop": str(tmp_path / "stop")},
        getoption=lambda name, default=None: str(tmp_path) if name == "faultload_workdir" else default,
    )
    held, release, collected = threading.Event(), threading.Event(), threading.Event()

    def alone() -> None:
        with Admission(tmp_path / "admission", 2).alone("size_burst"):
            held.set()
            assert release.wait(10)

    def collect() -> None:
        with collection_turn(config, {}):
            collected.set()

    threading.Thread(target=alone, daemon=True).start()
    assert held.wait(10)
    threading.Thread(target=collect, daemon=True).start()
    assert not collected.wait(0.5)  # bounded: it must still be waiting while the trial runs alone
    release.set()
    assert collected.wait(10)


def test_a_burst_takes_half_the_slots_any_other_trial_one() -> None:
    from faultload.model.router import RouterConfig
    from faultload.suite.lanes import BURST_REQUESTS, burst_share
    from tests.quality.fakes import trial

    burst = trial(BURST_REQUESTS)
    burst = dataclasses.replace(burst, router=RouterConfig(mode="immediate"))
    burst = dataclasses.replace(burst, shape=dataclasses.replace(burst.shape, arrival="burst", max_outstanding=0))
    assert burst_share(burst, 9) == 5 and burst_share(burst, 2) == 1
    capped = dataclasses.replace(burst, shape=dataclasses.replace(burst.shape, max_outstanding=BURST_REQUESTS - 1))
    spread = dataclasses.replace(burst, shape=dataclasses.replace(burst.shape, arrival="ramp", arrival_span_s=10.0))
    held = dataclasses.replace(burst, router=RouterConfig(mode="latency"))
    assert [burst_share(c, 9) for c in (capped, spread, held)] == [1, 1, 1]
