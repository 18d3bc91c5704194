"""The keep-alive regression shows as connection resets the server provoked, against real SkyRL 0.4.0.

Under ``--regress keepalive`` the server's keep-alive equals the client's own
idle expiry (5 s, scaled to 0.25 s at time scale 0.05), so a connection the
client reuses just before its expiry can be closed by the server as the
request arrives: a reset on a healthy network. Every first poll waits 4.9 SDK
seconds (just under the expiry) and one worker carries 6,000 requests, so the
client reuses connections near their expiry while busy. The clean server
(75 s keep-alive) resets none. No durations are asserted.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import require_target, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SHAPE = [
    "run",
    "--target",
    "skyrl==0.4.0",
    "--time-scale",
    "0.05",
    "--requests",
    "6000",
    "--workers",
    "1",
    "--delay-polls",
    "1@4.9",
    "--quiet",
    "--max-wall",
    "300",
]


def _run(tmp_path, workdir, *extra: str) -> dict:
    out = tmp_path / "r.json"
    result = run_cli([*SHAPE, *extra, "--workdir", str(workdir), "--json-out", str(out)], timeout_s=600)
    assert out.is_file(), result.stderr[-2000:]
    return json.loads(out.read_text())


def _reset_verdict(report: dict) -> dict:
    return {i["name"]: i for i in report["invariants"]}["unprovoked_resets"]


def test_keepalive_regression_resets_connections_and_is_caught(tmp_path, isolated_workdir):
    require_target("0.4.0")
    report = _run(tmp_path, isolated_workdir, "--regress", "keepalive")
    assert report["errors"].get("reset", {}).get("count", 0) > 0, report["errors"]
    verdict = _reset_verdict(report)
    assert verdict["ok"] is False and "reset or refused with no fault in force" in verdict["detail"]


def test_clean_server_resets_nothing_under_the_same_load(tmp_path, isolated_workdir):
    require_target("0.4.0")
    report = _run(tmp_path, isolated_workdir)
    assert report["errors"].get("reset", {}).get("count", 0) == 0, report["errors"]
    verdict = _reset_verdict(report)
    assert verdict["ok"] is True and verdict["figure"] == 0, verdict
