"""``faultload matrix --jobs``: rows at once on this machine (``faultload.matrix.jobs``).

The scheduler is tested with a test double for a row's session (``Recorder.run_one``: it records which rows
run at once and ends when the test lets it); ``_wait`` and the CLI with real processes.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from faultload.compare.runner import run_comparison
from faultload.host.admission import Admission
from faultload.host.workspace import Workspace
from faultload.matrix.jobs import run_rows_at_once
from faultload.matrix.run import RowCancelled, _wait
from faultload.model.build import parse_build
from faultload.model.trial import TrialConfig

EVENT_S = 30.0  # the longest a test waits for an event of the scheduler


@dataclass(frozen=True)
class FakeRow:
    name: str
    baseline: str | None = None


class Recorder:
    """A row's session as a test double: it starts, waits for the test to release it (or for the matrix's
    cancel), and returns its name; it records the rows running beside each other."""

    def __init__(self, fail: str | None = None) -> None:
        self.lock = threading.Lock()
        self.running: set[str] = set()
        self.overlaps: list[tuple[str, frozenset[str]]] = []
        self.most_at_once = 0
        self.release = threading.Event()
        self.cancelled: list[str] = []
        self.fail = fail

    def run_one(self, row: FakeRow, cancel: threading.Event) -> str:
        with self.lock:
            self.overlaps.append((row.name, frozenset(self.running)))
            self.running.add(row.name)
            self.most_at_once = max(self.most_at_once, len(self.running))
        try:
            if row.name == self.fail:
                raise RuntimeError(f"harness error in {row.name}")
            deadline = time.monotonic() + EVENT_S
            while not self.release.wait(0.01) and time.monotonic() < deadline:
                if cancel.is_set():
                    self.cancelled.append(row.name)
                    raise RowCancelled
            return row.name
        finally:
            with self.lock:
                self.running.discard(row.name)


def test_rows_run_up_to_jobs_at_once_and_come_back_in_their_order() -> None:
    recorder = Recorder()
    rows = [FakeRow(n) for n in ("a", "b", "c", "d", "e")]
    recorder.release.set()
    assert run_rows_at_once(rows, recorder.run_one, 2, lambda m: None) == ["a", "b", "c", "d", "e"]
    assert recorder.most_at_once <= 2


def test_two_rows_are_running_at_once() -> None:
    recorder = Recorder()
    lines: list[str] = []
    result: list[list[str]] = []
    thread = threading.Thread(
        target=lambda: result.append(run_rows_at_once([FakeRow("a"), FakeRow("b")], recorder.run_one, 2, lines.append))
    )
    thread.start()
    deadline = time.monotonic() + EVENT_S
    while len(recorder.running) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert recorder.running == {"a", "b"}
    recorder.release.set()
    thread.join(EVENT_S)
    assert result == [["a", "b"]]
    assert lines == ["row b: starts beside a"]


def test_a_comparison_row_starts_as_any_row_its_trials_take_the_machine_alone(tmp_path: Path) -> None:
    """Rows start by count only: which trials run beside which is the machine's turns' to decide, so a comparison
    row starts beside others and each of its trials holds every slot (faultload.compare.runner)."""
    recorder = Recorder()
    recorder.release.set()
    rows = [FakeRow("a"), FakeRow("compare", baseline="skyrl==0.4.0"), FakeRow("c")]
    assert run_rows_at_once(rows, recorder.run_one, 3, lambda m: None) == ["a", "compare", "c"]

    seen = []

    def fake_trial(config, workspace):  # TEST DOUBLE of run_trial: records the machine's turns, runs nothing
        seen.append(Admission(tmp_path, 2).running())
        raise KeyboardInterrupt

    build = parse_build("skyrl==0.4.0", "--baseline")
    with pytest.raises(KeyboardInterrupt):
        run_comparison(
            TrialConfig(target="skyrl==0.4.0"),
            {"baseline": build, "candidate": build},
            1,
            Workspace(tmp_path / "fl"),
            None,
            run=fake_trial,
            admission=Admission(tmp_path, 2),
        )
    assert seen == [["comparison trial 1/2 (alone)"] * 2]


def test_a_row_that_raises_cancels_the_others_and_the_error_reaches_the_caller() -> None:
    recorder = Recorder(fail="b")
    with pytest.raises(RuntimeError, match="harness error in b"):
        run_rows_at_once([FakeRow("a"), FakeRow("b")], recorder.run_one, 2, lambda m: None)
    assert recorder.cancelled == ["a"]
    assert recorder.running == set()


def test_a_cancelled_row_stops_waiting_for_its_session() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    cancel = threading.Event()
    cancel.set()
    try:
        with pytest.raises(RowCancelled):
            _wait(proc, 60.0, cancel)
        with pytest.raises(subprocess.TimeoutExpired):
            _wait(proc, 0.1, None)
    finally:
        proc.kill()
        proc.wait(10)


def test_cli_refuses_jobs_with_ray_and_jobs_below_1_with_exit_2() -> None:
    faultload = str(Path(sys.executable).with_name("faultload"))
    both = subprocess.run(
        [faultload, "matrix", "--jobs", "2", "--ray", "127.0.0.2:6379"], capture_output=True, text=True, timeout=60
    )
    assert both.returncode == 2
    assert both.stderr.splitlines() == [
        "faultload: error: --jobs: rows at once on this machine, or --ray: over a cluster's nodes, not both"
    ]
    zero = subprocess.run([faultload, "matrix", "--jobs", "0"], capture_output=True, text=True, timeout=60)
    assert zero.returncode == 2
    assert zero.stderr.splitlines() == ["faultload: error: --jobs: expected a whole number >= 1, got '0'"]
