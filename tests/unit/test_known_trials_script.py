"""scripts/known_trials.py --list: which of a profile's known trials a family runs, asked of no server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "known_trials.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_each_family_is_offered_the_known_trials_its_contract_has():
    def listed(target: str, *fix: str) -> dict[str, str]:
        done = _run("--target", target, "--list", *fix)
        assert done.returncode == 0, done.stderr
        return dict(line.split(": ", 1) for line in done.stdout.splitlines())

    hatchery = listed("hatchery==0.3.0", "--fix", "sampling-session-answer")
    assert hatchery["created_ttl_edge"].startswith("runs") and hatchery["size_flood"].startswith("runs")
    assert all(hatchery[name].startswith("skipped") for name in ("completed_ttl_edge", "retrieved_ttl_edge"))
    assert hatchery["completion_burst"] == "skipped (not servable by the family's contract)"  # one forward at a time
    skyrl = listed("skyrl==0.4.0")
    assert skyrl["retrieved_ttl_edge"].startswith("runs") and skyrl["created_ttl_edge"].startswith("skipped")


def test_a_fix_the_family_lacks_is_one_line_and_exit_2():
    done = _run("--target", "tuft==0.2.2", "--list", "--fix", "sampling-session-answer")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == "known_trials: tuft==0.2.2 has no fix switch 'sampling-session-answer'"


def test_only_runs_the_trials_it_names_and_refuses_a_name_no_trial_has():
    done = _run("--target", "twinkle==0.5.1", "--list", "--only", "size_flood")
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert done.returncode == 0 and lines["size_flood"].startswith("runs"), done.stderr
    assert lines["restart_reuse"] == "skipped (not in --only)"
    refused = _run("--target", "twinkle==0.5.1", "--list", "--only", "size_flood,nope")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip() == "known_trials: --only names no known trial of nightly: nope"
