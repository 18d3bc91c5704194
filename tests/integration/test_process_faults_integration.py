"""Process faults on a real run: ``faultload run`` SIGKILLed mid-pause (``server:pause``, ``router:pause``)
leaves no process stopped, and none at all. The spec, the Pauser over real ``sleep`` processes and the
FaultRunner against a recording stand-in controller are in ``tests/unit/test_process_faults.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from conftest import TARGETS, WORKDIR, cli_env, end_tagged_run, python_exe, require_target, tagged_processes, wait_until


def _status(pid: int) -> str:
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return "gone"


def _tagged_with(tag: str, needle: str) -> list[int]:
    pids = []
    for proc in tagged_processes(tag):
        try:
            if needle in " ".join(proc.cmdline()):
                pids.append(proc.pid)
        except psutil.Error:
            pass
    return pids


@pytest.mark.integration
# CI's 30 minutes: the server's pause runs in `make test`, the router's (the same resume path) nightly
@pytest.mark.parametrize(
    "fault, needle",
    [
        ("server:pause@1+600", "skyrl_launch.py"),
        pytest.param("router:pause@1+600", "faultload.router", marks=pytest.mark.slow),
    ],
)
def test_a_run_sigkilled_mid_pause_leaves_no_stopped_process(tmp_path: Path, fault: str, needle: str) -> None:
    """SIGKILL `faultload run` while the server (or router) is SIGSTOPped: afterwards no process
    of the run is in state 'T', and none is left at all (the router's parent-death SIGTERM stays
    pending while it is stopped: the pause's resumer SIGCONTs it)."""
    require_target("0.4.0")
    cwd = tmp_path / "cwd"
    (cwd / ".faultload").mkdir(parents=True)
    (cwd / ".faultload" / "targets").symlink_to(TARGETS, target_is_directory=True)
    (cwd / ".faultload" / "tools").symlink_to(WORKDIR / "tools", target_is_directory=True)
    tag = os.urandom(16).hex()
    cmd = [
        python_exe(),
        "-m",
        "faultload.cli.main",
        "run",
        "--requests",
        "20",
        "--router-mode",
        "latency",
        "--gen-seconds",
        "1",
        "--fault",
        fault,
        "--quiet",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=cli_env(tag, cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def paused() -> list[int]:
            pids = _tagged_with(tag, needle)
            return pids if pids and all(_status(p) == psutil.STATUS_STOPPED for p in pids) else []

        pids = wait_until(paused, timeout_s=180.0, every_s=0.2)
        assert pids, f"{fault} never stopped {needle}: {[(p, _status(p)) for p in _tagged_with(tag, needle)]}"
        assert proc.poll() is None, "the run ended before it was killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        wait_until(lambda: all(_status(p) in ("gone", psutil.STATUS_ZOMBIE) for p in pids), timeout_s=30.0)
        assert [(p, _status(p)) for p in pids if _status(p) == psutil.STATUS_STOPPED] == []
        assert all(_status(p) in ("gone", psutil.STATUS_ZOMBIE) for p in pids), [(p, _status(p)) for p in pids]
        assert wait_until(lambda: not tagged_processes(tag), timeout_s=30.0), [
            " ".join(p.cmdline())[:150] for p in tagged_processes(tag)
        ]
    finally:
        end_tagged_run(proc, tag)
