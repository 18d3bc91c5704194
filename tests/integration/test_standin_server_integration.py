"""A real trial, and the suite, against the stand-in server (a test double: tests/standin_server.py).

The stand-in opens sessions and refuses every asample with a 400, as a server whose base model is not loaded does.
A trial against it must be *violated* by ``accepted_requests`` — not passed as "every invariant ok or unknown" with
only the exit code noticing. No durations are asserted; every wait is bounded. The stand-in itself is checked in
``tests/unit/test_standin_server.py``.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import leftover_dirs, run_cli, tagged_processes, wait_until
from tests.standin_server import standin_server  # noqa: F401 - the fixture

REQUESTS = 16


def _stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/standin/stats", timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.integration
def test_a_trial_against_a_server_refusing_every_asample_violates_accepted_requests(
    standin_server, isolated_workdir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    run = run_cli(
        [
            "run",
            "--target",
            standin_server.target,
            "--server-pid",
            str(standin_server.pid),
            "--requests",
            str(REQUESTS),
            "--quiet",
            "--max-wall",
            "120",
            "--workdir",
            str(isolated_workdir),
            "--json-out",
            str(out),
        ],
        timeout_s=300,
        tmpdir=tmpdir,
    )
    assert out.is_file(), run.stderr[-3000:]
    report = json.loads(out.read_text())
    verdicts = {v["name"]: v for v in report["invariants"]}
    accepted = verdicts["accepted_requests"]
    # an invariant is violated, not only the exit code: and it names the class and the server's words
    assert accepted["ok"] is False and accepted["figure"] == REQUESTS and accepted["budget"] == 0, accepted
    assert (
        f"{REQUESTS} of {REQUESTS} submitted requests rejected with no fatal fault in force (0 accepted): "
        f"400 ×{REQUESTS} (e.g. asample: HTTP 400: " in accepted["detail"]
    )
    assert "base model not loaded" in accepted["detail"]
    assert verdicts["no_lost_results"]["ok"] is None
    assert verdicts["no_lost_results"]["detail"].startswith("0 accepted (see accepted_requests)")
    assert run.returncode == 1, run.stderr[-3000:]
    assert "[VIOLATED] accepted_requests" in run.stdout
    assert _stats(standin_server.url)["/api/v1/asample"] == REQUESTS  # the load reached it, no retries
    # nothing left behind: no process of the run, no run directory, no temp dir; the url= server untouched
    assert wait_until(lambda: not tagged_processes(run.tag), timeout_s=15), tagged_processes(run.tag)
    assert leftover_dirs(isolated_workdir) == []
    assert sorted(p.name for p in tmpdir.iterdir()) == []
    assert psutil.pid_exists(standin_server.pid)


@pytest.mark.integration
def test_the_suite_fails_on_a_server_refusing_every_asample_naming_accepted_requests(
    standin_server, isolated_workdir: Path, tmp_path: Path
) -> None:
    """`pytest faultload --faultload-target url=... --faultload-profile ci` against the stand-in fails,
    and the failure names the invariant (not a harness error, not 'not judged')."""
    summary = tmp_path / "summary.json"
    run = run_cli(
        [
            "faultload/suite",
            "-p",
            "no:cacheprovider",
            "-q",
            "-x",
            "--faultload-profile",
            "ci",
            "--faultload-target",
            standin_server.target,
            "--faultload-workdir",
            str(isolated_workdir),
            "--faultload-summary-json",
            str(summary),
        ],
        timeout_s=600,
        prefix=["-m", "pytest"],
    )
    assert run.returncode == 1, run.stdout[-3000:]
    assert "accepted_requests violated" in run.stdout
    data = json.loads(summary.read_text())
    failed = [p for p in data["properties"] if p["outcome"] == "failed"]
    assert failed and failed[0]["violated"] == ["accepted_requests"] and failed[0]["error"] is None, failed
    assert data["invariants"]["accepted_requests"]["judged"] >= 1
    assert wait_until(lambda: not tagged_processes(run.tag), timeout_s=15), tagged_processes(run.tag)
