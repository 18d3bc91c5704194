"""Process faults: ``server:pause``, ``server:restart``, ``router:pause``.

Unit tier: the spec, the Pauser over real ``sleep`` processes (SIGSTOP is
real; a paused process always runs again, even when the process that paused
it is SIGKILLed), and the FaultRunner's calls against a recording stand-in
controller (a test double, labelled). The integration test
(``tests/integration/test_process_faults_integration.py``) SIGKILLs a real
``faultload run`` mid-pause and checks the real server is not left stopped.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import psutil
import pytest

from faultload.faults.control import NotRestored
from faultload.faults.schedule import FaultRunner
from faultload.host.pausing import Pauser
from faultload.model.faults import Fault, FaultSchedule, parse_fault
from faultload.record.faults import FaultLog

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------- spec


@pytest.mark.parametrize(
    "spec, expect",
    [
        ("server:pause@2+10", Fault("server", "pause", start_s=2, duration_s=10)),
        ("server:restart@5", Fault("server", "restart", start_s=5)),
        ("server:restart", Fault("server", "restart")),
        ("router:pause@1+20", Fault("router", "pause", start_s=1, duration_s=20)),
    ],
)
def test_process_fault_specs_round_trip(spec: str, expect: Fault) -> None:
    fault = parse_fault(spec)
    assert fault == expect and fault.is_process and not fault.is_toxic
    assert parse_fault(fault.to_spec()) == fault
    assert Fault.from_dict(fault.to_dict()) == fault


@pytest.mark.parametrize(
    "spec, field",
    [
        ("server:pause", "fault.duration_s"),  # a pause needs a window
        ("server:pause@3", "fault.duration_s"),
        ("router:pause@1", "fault.duration_s"),
        ("server:restart@5+3", "fault.duration_s"),  # a restart is an instant
        ("server:crash@1", "fault.kind"),
        ("server:latency:latency=5@0+1", "fault.kind"),
        ("server:pause:seconds=3@0+1", "fault.attributes"),
        ("server:pause:stream=upstream@0+1", "fault.stream/toxicity"),
        ("server:pause@0+0", "fault.duration_s"),
    ],
)
def test_bad_process_fault_specs_are_one_line(spec: str, field: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_fault(spec)
    message = str(info.value)
    assert message.startswith(field + ":") and "\n" not in message, message


def test_edge_faults_are_not_process_faults() -> None:
    assert not parse_fault("edge:down@0+1").is_process and not parse_fault("router:stall@0+1").is_process


# ---------------------------------------------------------------------------- Pauser, real processes


def _status(pid: int) -> str:
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return "gone"


def _wait_status(pid: int, wanted: set[str], timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    status = _status(pid)
    while status not in wanted and time.monotonic() < deadline:
        time.sleep(0.02)
        status = _status(pid)
    return status


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait(5)


RUNNING = {psutil.STATUS_SLEEPING, psutil.STATUS_RUNNING}


def test_pause_stops_and_resume_continues_nested_pauses_counted(sleeper) -> None:
    pauser = Pauser(lambda: [sleeper.pid], "sleeper")
    assert pauser.pause(5.0) == [sleeper.pid]
    assert _wait_status(sleeper.pid, {psutil.STATUS_STOPPED}) == psutil.STATUS_STOPPED
    pauser.pause(5.0)  # a second pause overlapping the first
    resumers = list(pauser._resumers)
    pauser.resume()  # the first ends: still paused
    assert _status(sleeper.pid) == psutil.STATUS_STOPPED and pauser.paused
    pauser.resume()
    assert _wait_status(sleeper.pid, RUNNING) in RUNNING and not pauser.paused
    assert all(r.poll() == 0 for r in resumers)  # dismissed and reaped
    pauser.resume()  # one too many: nothing happens


def test_a_pause_with_no_process_is_an_error_not_a_silent_no_op() -> None:
    with pytest.raises(RuntimeError, match="no process to pause"):
        Pauser(lambda: [], "server").pause(1.0)


def test_the_resumer_resumes_on_its_own_deadline(sleeper) -> None:
    pauser = Pauser(lambda: [sleeper.pid], "sleeper", margin_s=0.3)
    pauser.pause(0.0)
    assert _wait_status(sleeper.pid, {psutil.STATUS_STOPPED}) == psutil.STATUS_STOPPED
    assert _wait_status(sleeper.pid, RUNNING) in RUNNING  # nobody called resume()
    pauser.resume()  # the resumer is gone already: dismissing it is not an error


_PAUSE_THEN_DIE = """
import os, signal, sys, time
from faultload.host.pausing import Pauser
Pauser(lambda: [int(sys.argv[1])], "target").pause(600.0)
print("paused", flush=True)
time.sleep(600)
"""


def test_a_paused_process_runs_again_when_whoever_paused_it_is_sigkilled(sleeper) -> None:
    """The hard path out: SIGKILL of the pausing process leaves no stopped process behind."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    pauser = subprocess.Popen(
        [sys.executable, "-c", _PAUSE_THEN_DIE, str(sleeper.pid)], env=env, stdout=subprocess.PIPE
    )
    try:
        assert pauser.stdout is not None and pauser.stdout.readline() == b"paused\n"
        assert _wait_status(sleeper.pid, {psutil.STATUS_STOPPED}) == psutil.STATUS_STOPPED
        pauser.send_signal(signal.SIGKILL)
        pauser.wait(5)
        assert _wait_status(sleeper.pid, RUNNING) in RUNNING
    finally:
        pauser.kill()
        pauser.wait(5)


# ---------------------------------------------------------------------------- FaultRunner, stand-in controller


class RecordingController:
    """Test double for the server/router controller: records calls (and, given a ``probe``, what it says at
    each resume and during each restart); ``restart`` takes a moment."""

    def __init__(self, restart_error: Exception | None = None) -> None:
        self.calls: list[str] = []
        self.probe: Callable[[], object] | None = None
        self.seen: list[tuple[str, object]] = []
        self.restart_error = restart_error
        self.restarting = 0
        self.most_restarting = 0

    def pause(self, seconds: float) -> None:
        self.calls.append(f"pause {seconds:g}")

    def resume(self) -> None:
        if self.probe is not None:
            self.seen.append(("resume", self.probe()))
        self.calls.append("resume")

    async def restart(self) -> None:
        self.calls.append("restart")
        self.restarting += 1
        self.most_restarting = max(self.most_restarting, self.restarting)
        try:
            await asyncio.sleep(0.1)
        finally:
            self.restarting -= 1
        if self.restart_error is not None:
            raise self.restart_error
        if self.probe is not None:
            self.seen.append(("restart", self.probe()))
        self.calls.append("restarted")

    def reset_faults(self) -> None:
        self.calls.append("reset_faults")


def _process_fault_in_force(runner: FaultRunner) -> bool:
    """What the watchdog is told: a process fault's window in the runner's log covers infinity (not removed yet)."""
    return any(w.is_process and w.end_s == float("inf") for w in runner.log().windows())


def test_runner_pauses_resumes_and_restarts_on_schedule() -> None:
    schedule = FaultSchedule.parse(["server:pause@0+0.2", "server:restart@0.3", "router:pause@0.1+0.1"])
    server, router = RecordingController(), RecordingController()

    async def run():
        runner = FaultRunner(schedule, None, {}, router=router, server=server)
        server.probe = lambda: _process_fault_in_force(runner)  # read at the calls themselves, not at a time
        runner.start()
        assert await runner.wait(5.0)
        return runner, _process_fault_in_force(runner)

    runner, after = asyncio.run(run())
    assert server.seen == [("resume", True), ("restart", True)] and after is False
    assert server.calls == ["pause 0.2", "resume", "restart", "restarted"]
    assert router.calls == ["pause 0.1", "resume"]
    pause, restart, _ = runner.records()
    assert pause.removed_by == "schedule" and pause.error is None
    # a restart is in force from its start until the server is back
    assert restart.removed_by == "schedule" and restart.removed_at_s - restart.applied_at_s >= 0.1


def _run_restarts(specs: list[str], server: RecordingController) -> FaultRunner:
    async def run():
        runner = FaultRunner(FaultSchedule.parse(specs), None, {}, router=RecordingController(), server=server)
        runner.start()
        assert await runner.wait(5.0)
        return runner

    return asyncio.run(run())


def test_a_restart_drawn_while_another_runs_waits_for_it() -> None:
    """Two restarts 0.02 s apart: the second would stop the process the first is waiting on (so the first
    would fail as "never applied" while the server was down). They run one after the other, both applied,
    the second's window starting where the first's ended."""
    server = RecordingController()
    first, second = _run_restarts(["server:restart@0", "server:restart@0.02"], server).records()
    assert server.most_restarting == 1
    assert server.calls == ["restart", "restarted", "restart", "restarted"]
    assert first.applied and second.applied and first.error is None and second.error is None
    assert second.applied_at_s >= first.removed_at_s


def test_a_restart_that_stopped_the_server_for_good_is_in_force_to_the_end() -> None:
    """A restart whose server never answered again took effect: it is applied and never healed (the
    trial is then unjudged, not blamed on the server), not recorded as a fault that never happened."""
    server = RecordingController(restart_error=NotRestored("server did not come back"))
    (restart,) = _run_restarts(["server:restart@0"], server).records()
    assert restart.applied and restart.error is None
    assert restart.healed_at_s is None and restart.remove_error == "server did not come back"
    assert restart.active_at(1e9)
    assert FaultLog((restart,)).unhealed() == (restart,)


def test_heal_resumes_a_pause_still_in_force_and_needs_a_server_controller() -> None:
    schedule = FaultSchedule.parse(["server:pause@0+30", "router:pause@0+30"])
    server, router = RecordingController(), RecordingController()

    async def run():
        runner = FaultRunner(schedule, None, {}, router=router, server=server)
        runner.start()
        await asyncio.sleep(0.05)
        return runner, await runner.heal()

    runner, errors = asyncio.run(run())
    assert errors == [] and server.calls == ["pause 30", "resume"]
    assert router.calls == ["pause 30", "resume"]  # no reset_faults: a pause holds no router window
    assert all(r.removed_by == "heal" for r in runner.records())
    with pytest.raises(ValueError, match="no server controller"):
        FaultRunner(FaultSchedule.parse(["server:restart@1"]), None, {}, router=router)
