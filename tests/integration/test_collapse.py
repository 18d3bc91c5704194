"""Collapse diagnosis end to end against the real SkyRL 0.4.0 server.

20,000 requests held at once need ~40,000 server fds against its 20,000 limit:
the trial must end early with an fd_exhaustion verdict and leave nothing
behind. Capped at 8,192 outstanding the same load completes with no verdict.
(No durations are asserted; the CLI's own --max-wall bounds each run.)
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import leftover_dirs, require_target, run_cli, tagged_processes, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SHAPE = [
    "run",
    "--target",
    "skyrl==0.4.0",
    "--requests",
    "20000",
    "--workers",
    "2",
    "--router-mode",
    "barrier",
    "--quiet",
]


def test_twenty_thousand_held_requests_end_in_fd_exhaustion(tmp_path, isolated_workdir):
    require_target("0.4.0")
    out = tmp_path / "r.json"
    result = run_cli(
        [
            *SHAPE,
            "--barrier",
            "20000",
            "--max-outstanding",
            "0",
            "--max-wall",
            "600",
            "--workdir",
            str(isolated_workdir),
            "--json-out",
            str(out),
        ],
        timeout_s=900,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    report = json.loads(out.read_text())
    verdict = report["verdict"]
    assert verdict["kind"] == "fd_exhaustion"
    evidence = " | ".join(verdict["evidence"])
    assert "against its soft limit" in evidence and "Too many open files" in evidence
    assert report["stopped_early"] is True
    assert report["completed"] < report["requested"]
    assert {i["name"]: i["ok"] for i in report["invariants"]}["no_collapse"] is False
    assert wait_until(lambda: not tagged_processes(result.tag), 15.0)
    assert leftover_dirs(isolated_workdir) == []


def test_capped_at_8192_outstanding_the_same_load_completes_without_a_verdict(tmp_path, isolated_workdir):
    require_target("0.4.0")
    out = tmp_path / "r.json"
    result = run_cli(
        [
            *SHAPE,
            "--barrier",
            "8192",
            "--max-outstanding",
            "8192",
            "--max-wall",
            "600",
            "--workdir",
            str(isolated_workdir),
            "--json-out",
            str(out),
        ],
        timeout_s=900,
    )
    report = json.loads(out.read_text())
    assert report["verdict"] is None, report["verdict"]
    assert report["completed"] == 20000
    assert report["router"]["peak_in_flight"] >= 8000
    assert wait_until(lambda: not tagged_processes(result.tag), 15.0)
