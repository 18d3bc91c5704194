"""Exit codes tell the server's fault (1) from the rig's (3): one source (``cli.exits``), every command.

The mapping is checked on values; then a real trial whose load worker is killed mid-load (SIGKILL, as the
kernel's OOM killer would) must exit 3 with the report naming the harness error, not 1.
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

from faultload.cli.exits import EXIT_FAILED, EXIT_HARNESS, EXIT_OK, compare_exit, matrix_exit, trial_exit
from tests.conftest import ROOT, cli_env, python_exe, require_target, tagged_processes, wait_until


@pytest.mark.parametrize(
    ("violated", "harness", "incomplete", "code"),
    [
        (False, False, False, EXIT_OK),
        (True, False, False, EXIT_FAILED),
        (True, True, True, EXIT_HARNESS),
        (False, True, True, EXIT_HARNESS),
        (False, False, True, EXIT_FAILED),
    ],
)
def test_a_violation_is_the_servers_and_a_harness_error_the_rigs_whatever_it_saw(violated, harness, incomplete, code):
    assert trial_exit(violated, harness, incomplete) == code


def _row(as_expected: bool, result: str) -> dict:
    return {"as_expected": as_expected, "result": result}


def test_a_matrix_row_not_as_expected_is_a_finding_and_a_row_not_judged_the_rigs() -> None:
    assert matrix_exit([_row(True, "clean"), _row(True, "caught")]) == EXIT_OK
    assert matrix_exit([_row(False, "error"), _row(True, "clean")]) == EXIT_HARNESS
    assert matrix_exit([_row(False, "error"), _row(False, "clean")]) == EXIT_FAILED


def test_a_comparison_with_a_trial_that_failed_to_run_is_the_rigs_unless_a_metric_is_worse() -> None:
    failed_trial = [{"error": "a load worker crashed"}]
    assert compare_exit({"ok": True, "worse": [], "unknown": [], "trials": [{}]}) == EXIT_OK
    assert compare_exit({"ok": False, "worse": [], "unknown": ["e2e_p99_s"], "trials": failed_trial}) == EXIT_HARNESS
    assert compare_exit({"ok": False, "worse": ["e2e_p99_s"], "unknown": [], "trials": failed_trial}) == EXIT_FAILED
    assert compare_exit({"ok": False, "worse": [], "unknown": ["e2e_p99_s"], "trials": [{}]}) == EXIT_FAILED


def _load_workers(tag: str) -> list[psutil.Process]:
    return [p for p in tagged_processes(tag) if "spawn_main" in " ".join(p.cmdline())]


def _loading(tag: str) -> list[psutil.Process]:
    """Load workers with a TCP connection up: sending the trial's requests."""
    found = []
    for proc in _load_workers(tag):
        with contextlib.suppress(psutil.Error):
            if any(c.status == psutil.CONN_ESTABLISHED for c in proc.net_connections(kind="tcp")):
                found.append(proc)
    return found


@pytest.mark.integration
@pytest.mark.parametrize("when", ["before its job", "mid-load"])
def test_a_load_worker_killed_exits_with_the_harness_code(when, isolated_workdir: Path, tmp_path: Path) -> None:
    """SIGKILL, as the kernel's OOM killer would: before the worker got its job (workers start while the
    server does) the command says so in one line; mid-load the trial is reported with its harness error."""
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


def test_every_commands_help_lists_the_exit_codes() -> None:
    import argparse

    from faultload.cli.exits import EXIT_CODES, epilog
    from faultload.cli.parser import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name, parser in sub.choices.items():
        assert parser.format_help().rstrip().endswith(epilog().rstrip()), name
    assert all(f"  {code:<4}" in epilog() for code in EXIT_CODES)
