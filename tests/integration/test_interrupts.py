"""Interrupting `faultload run` and `pytest faultload` mid-load, end to end, real server.

Each signal is sent as its usual sender sends it: SIGINT and SIGHUP to the whole
process group (a terminal's Ctrl-C and hang-up), SIGTERM to the one process
(``kill``, ``timeout``, CI). The run is started in a session of its own with
the three signals at their default disposition (a test runner started as a
background job would otherwise hand SIGINT down ignored, and faultload keeps an
ignored signal ignored). Each run carries a unique tag in its environment
(inherited by every process it starts), has a private workdir and TMPDIR, and
must leave none of them behind: no tagged process, no run dir, no
``faultload-router-*`` dir. How fast it ends is measured by
``bench/interrupt_latency.py``, never asserted here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import psutil
import pytest
from conftest import (
    ROOT,
    cli_env,
    default_signals,
    leftover_dirs,
    python_exe,
    require_target,
    tagged_processes,
    wait_until,
)

from faultload.client.compiled import CLIENT

COMPILED_CLIENT = CLIENT.binary_name()  # this checkout's compiled client, as the trial runs it

pytestmark = pytest.mark.integration

# Latency router at 64 results/s: ~47 s uninterrupted.
REQUESTS = 3000
RUN_ARGS = [
    "--target",
    "skyrl==0.4.0",
    "--requests",
    str(REQUESTS),
    "--router-mode",
    "latency",
    "--max-num-seqs",
    "64",
    "--gen-seconds",
    "1",
    "--max-outstanding",
    "512",
    "--time-scale",
    "0.1",
    "--max-wall",
    "120",
]
START_TIMEOUT_S = 240.0
EXIT_TIMEOUT_S = 60.0


class Started:
    """A command in its own session, its stderr read line by line (so a full pipe never blocks it)."""

    def __init__(self, args: list[str], tmp_path: Path) -> None:
        self.tag = uuid.uuid4().hex
        self.tmpdir = tmp_path / "tmp"
        self.tmpdir.mkdir()
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [python_exe(), *args],
            cwd=ROOT,
            env=cli_env(self.tag, self.tmpdir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=default_signals,
        )
        self.stdout = ""
        self._readers = [
            threading.Thread(target=self._read_err, daemon=True),
            threading.Thread(target=self._read_out, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def _read_out(self) -> None:
        self.stdout = self.proc.stdout.read()

    def saw(self, needle: str) -> bool:
        return any(needle in line for line in list(self.lines))

    def send(self, sig: int, group: bool) -> None:
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)

    def wait(self) -> int:
        try:
            code = self.proc.wait(EXIT_TIMEOUT_S)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for reader in self._readers:
            reader.join(10.0)
        return code

    def stderr(self) -> str:
        return "\n".join(self.lines)[-3000:]

    def assert_nothing_left(self, workdir: Path) -> None:
        left = wait_until(lambda: not tagged_processes(self.tag), timeout_s=15.0)
        assert left, f"processes left behind: {[p.cmdline() for p in tagged_processes(self.tag)]}"
        assert leftover_dirs(workdir) == []
        assert [p.name for p in self.tmpdir.iterdir() if p.name.startswith("faultload-router-")] == []


def _load_running(run: Started) -> bool:
    """A progress line with requests in flight (the load workers are sending), or the run ended."""
    return run.proc.poll() is not None or any(
        "completed" in line and "in-flight 0 " not in line for line in list(run.lines) if line.startswith("[")
    )


def _start_run(tmp_path: Path, workdir: Path) -> tuple[Started, Path]:
    require_target("0.4.0")
    json_out = tmp_path / "report.json"
    run = Started(
        ["-m", "faultload.cli.main", "run", "--workdir", str(workdir), *RUN_ARGS, "--json-out", str(json_out)], tmp_path
    )
    assert wait_until(lambda: _load_running(run), timeout_s=START_TIMEOUT_S, every_s=0.2), run.stderr()
    assert run.proc.poll() is None, f"the run ended before the signal: {run.stderr()}"
    return run, json_out


# CI's 30 minutes: one signal of each path runs in `make test`, the others nightly (`make test-all`)
@pytest.mark.parametrize(
    "sig, group",
    [(signal.SIGINT, True), (signal.SIGTERM, False), pytest.param(signal.SIGHUP, True, marks=pytest.mark.slow)],
    ids=["SIGINT-group", "SIGTERM", "SIGHUP-group"],
)
def test_one_signal_ends_the_run_with_its_partial_report(tmp_path: Path, isolated_workdir: Path, sig, group):
    run, json_out = _start_run(tmp_path, isolated_workdir)
    run.send(sig, group)
    code = run.wait()
    assert code == 130, (code, run.stderr())
    report = json.loads(json_out.read_text())
    assert report["interrupted"] is True
    assert report["requested"] == REQUESTS and report["completed"] < REQUESTS
    assert "INTERRUPTED: partial report" in run.stdout
    assert run.saw(f"{signal.Signals(sig).name}: stopping")
    assert "Traceback" not in run.stderr()
    run.assert_nothing_left(isolated_workdir)


def test_second_ctrl_c_ends_it_at_once_and_leaves_nothing(tmp_path: Path, isolated_workdir: Path):
    run, _ = _start_run(tmp_path, isolated_workdir)
    run.send(signal.SIGINT, group=True)
    assert wait_until(lambda: run.saw("SIGINT: stopping") or run.proc.poll() is not None, timeout_s=10.0), run.stderr()
    run.send(signal.SIGINT, group=True)
    code = run.wait()
    assert code == 130, (code, run.stderr())
    assert run.saw("SIGINT again: killed"), run.stderr()  # the second one came while it was still cleaning up
    run.assert_nothing_left(isolated_workdir)


def _trial_running(run: Started) -> bool:
    """The suite's stack is up and a trial's load workers (spawned processes, or the compiled clients a local
    raw trial starts in their place) are running, or pytest ended."""
    if run.proc.poll() is not None:
        return True
    server = workers = False
    for proc in tagged_processes(run.tag):
        try:
            cmdline = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        server = server or "skyrl_launch.py" in cmdline
        workers = workers or "multiprocessing.spawn" in cmdline or COMPILED_CLIENT in cmdline
    return server and workers


# CI's 30 minutes: one signal of each path runs in `make test`, the others nightly (`make test-all`)
@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, pytest.param(signal.SIGHUP, marks=pytest.mark.slow)], ids=["SIGTERM", "SIGHUP"]
)
def test_suite_session_closes_its_stack_on_a_signal(tmp_path: Path, isolated_workdir: Path, sig):
    require_target("0.4.0")
    run = Started(
        [
            "-m",
            "pytest",
            "faultload",
            "-p",
            "no:cacheprovider",
            "-q",
            "--faultload-profile",
            "ci",
            "--faultload-target",
            "skyrl==0.4.0",
            "--faultload-workdir",
            str(isolated_workdir),
        ],
        tmp_path,
    )
    assert wait_until(lambda: _trial_running(run), timeout_s=START_TIMEOUT_S, every_s=0.2), run.stderr()
    assert run.proc.poll() is None, f"the session ended before the signal: {run.stdout[-2000:]}"
    run.send(sig, group=sig == signal.SIGHUP)
    code = run.wait()
    assert code == pytest.ExitCode.INTERRUPTED, (code, run.stdout[-2000:], run.stderr())
    run.assert_nothing_left(isolated_workdir)
