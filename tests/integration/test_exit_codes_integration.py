"""A real trial whose load worker is killed (SIGKILL, as the kernel's OOM killer would) exits 3, the rig's code.

The report names the harness error, not a violation (1). The mapping itself (``cli.exits``) is checked on values in
``tests/unit/test_exit_codes.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import psutil
import pytest

from faultload.cli.exits import EXIT_HARNESS
from tests.conftest import ROOT, cli_env, python_exe, require_target, tagged_processes, wait_until


def _load_workers(tag: str) -> list[psutil.Process]:
    """The trial's Python load workers, and its compiled clients (which a local trial starts in their place)."""
    return [
        p
        for p in tagged_processes(tag)
        if "spawn_main" in " ".join(p.cmdline()) or "faultload-client-" in " ".join(p.cmdline())
    ]


def _loading(tag: str) -> list[psutil.Process]:
    """Load workers with a TCP connection up: sending the trial's requests."""
    found = []
    for proc in _load_workers(tag):
        with contextlib.suppress(psutil.Error):
            if any(c.status == psutil.CONN_ESTABLISHED for c in proc.net_connections(kind="tcp")):
                found.append(proc)
    return found


@pytest.mark.integration
@pytest.mark.parametrize(
    ("client", "when"), [("raw-python", "before its job"), ("raw-python", "mid-load"), ("raw", "mid-load")]
)
def test_a_load_worker_killed_exits_with_the_harness_code(
    client: str, when: str, isolated_workdir: Path, tmp_path: Path
) -> None:
    """SIGKILL, as the kernel's OOM killer would: before the worker got its job (Python workers start while the
    server does) the command says so in one line; mid-load (a Python worker, or the compiled client a local
    trial runs in its place) the trial is reported with its harness error."""
    require_target("0.4.0")
    out, tag = tmp_path / "report.json", uuid.uuid4().hex
    # generations of 20 s keep every request outstanding while the worker is killed
    cmd = [
        python_exe(),
        "-m",
        "faultload.cli.main",
        "run",
        "--requests",
        "64",
        "--router-mode",
        "latency",
        "--gen-seconds",
        "20",
        "--time-scale",
        "0.05",
        "--client",
        client,
        "--quiet",
        "--max-wall",
        "120",
        "--workdir",
        str(isolated_workdir),
        "--json-out",
        str(out),
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=cli_env(tag),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        workers = wait_until(lambda: (_load_workers if when == "before its job" else _loading)(tag), timeout_s=180)
        assert workers, f"no load worker {when}"
        os.kill(workers[0].pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == EXIT_HARNESS, stderr[-3000:]
    if when == "before its job":
        assert "faultload: harness error: " in stderr and "load worker" in stderr, stderr[-3000:]
    else:
        report = json.loads(out.read_text())
        assert report["error"].startswith("load worker 0 crashed: load worker 0 exited (code -9)"), report["error"]
    assert wait_until(lambda: not tagged_processes(tag), timeout_s=15), tagged_processes(tag)
