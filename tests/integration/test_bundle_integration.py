"""Integration: a live trial's bundle, judged again by ``faultload check``, prints the live run's verdicts.

Two small real trials (SkyRL 0.4.0, fake router, load workers): ``make run``'s
trial at 256 requests, and the retention regression caught in ~20 s (a third
of the requests drop their first poll and re-poll 20 s later, after the
regressed server's scaled 120 s retrieved TTL: README, "Time scale and
regressions"). Nothing asserts a duration.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import require_target, run_cli

pytestmark = pytest.mark.integration

VERDICT_LINE = re.compile(r"^(\[(ok      |VIOLATED|unknown )\] |VERDICT: |  evidence: |  then: )")
RETENTION = [
    "--requests",
    "64",
    "--time-scale",
    "0.05",
    "--router-mode",
    "latency",
    "--gen-seconds",
    "2",
    "--abandon-polls",
    "0.3@400",
    "--regress",
    "retention",
]


def verdict_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if VERDICT_LINE.match(line)]


def _run_then_check(workdir: Path, bundle: Path, args: list[str]) -> tuple[list[str], list[str], int, int]:
    live = run_cli(["run", "--quiet", "--workdir", str(workdir), "--bundle", str(bundle), *args])
    assert live.returncode in (0, 1), live.stderr[-2000:]
    check = run_cli(["check", str(bundle)], timeout_s=60.0)
    assert check.stderr == "", check.stderr[-2000:]
    assert check.stdout.splitlines()[-1] == "same verdicts as stored", check.stdout
    return verdict_lines(live.stdout), verdict_lines(check.stdout), live.returncode, check.returncode


def test_check_of_a_make_run_trial_prints_its_verdicts_and_a_budget_rejudges_it(isolated_workdir, tmp_path):
    require_target("0.4.0")
    bundle = tmp_path / "run.bundle"
    live, checked, live_code, check_code = _run_then_check(isolated_workdir, bundle, ["--requests", "256"])
    assert live and checked == live
    assert (live_code, check_code) == (0, 0), live
    assert "[ok      ] bounded_fds" in "\n".join(checked)
    tight = run_cli(
        ["check", str(bundle), "--budget", "fds_per_in_flight=0", "--budget", "fds_slack=0"], timeout_s=60.0
    )
    assert tight.returncode == 1, tight.stdout + tight.stderr
    assert any(line.startswith("[VIOLATED] bounded_fds: ") for line in tight.stdout.splitlines())
    assert tight.stdout.splitlines()[-1].startswith("changed by the budgets: bounded_fds (ok -> VIOLATED)")


def test_check_of_a_failing_retention_trial_prints_the_violation_and_exits_1(isolated_workdir, tmp_path):
    require_target("0.4.0")
    live, checked, live_code, check_code = _run_then_check(isolated_workdir, tmp_path / "retention.bundle", RETENTION)
    assert live and checked == live
    assert any(line.startswith("[VIOLATED] no_lost_results: ") for line in checked), checked
    assert (live_code, check_code) == (1, 1)
