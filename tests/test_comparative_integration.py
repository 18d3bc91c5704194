"""The suite's comparative property against real SkyRL 0.4.0: ``--faultload-regress rich-access-log`` is worse
than clean 0.4.0 and its repro replays on both builds; clean against clean passes.

Each session is ``pytest --pyargs faultload.suite -k comparative`` on the ci profile, in its own process
(real servers, one shared stack per build), with this checkout's pyproject (budgets, compare thresholds).
Minutes each; no duration is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, require_target, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SESSION_TIMEOUT_S = 1200


def _session(tmp_path, workdir, *options: str) -> tuple[subprocess.CompletedProcess, dict]:
    summary = tmp_path / "summary.json"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs", "faultload.suite", "-k",
         "comparative", "--faultload-profile", "ci", "--faultload-workdir", str(workdir),
         "--faultload-summary-json", str(summary), "--faultload-baseline", "skyrl==0.4.0", *options],
        capture_output=True, text=True, timeout=SESSION_TIMEOUT_S, cwd=ROOT)  # ROOT: its pyproject's settings
    assert summary.is_file(), result.stdout[-3000:] + result.stderr[-2000:]
    return result, json.loads(summary.read_text())


def test_rich_access_log_is_worse_than_clean_and_its_repro_replays_on_both(tmp_path, isolated_workdir):
    require_target("0.4.0")
    result, summary = _session(tmp_path, isolated_workdir, "--faultload-regress", "rich-access-log")
    (prop,) = summary["properties"]
    assert result.returncode == 1 and prop["violated"] == ["no_worse_than_baseline"], result.stdout[-3000:]
    repro = json.loads(open(prop["repro_path"]).read())
    assert (repro["baseline"], repro["candidate"]) == ("skyrl==0.4.0", "skyrl==0.4.0+regress=rich-access-log")
    replayed = run_cli(["replay", prop["repro_path"], "--workdir", str(isolated_workdir)], timeout_s=900)
    assert replayed.returncode in (0, 1), replayed.stderr[-2000:]
    assert ("reproduced: still worse" if replayed.returncode == 1 else "flaky:") in replayed.stdout


def test_clean_against_clean_passes(tmp_path, isolated_workdir):
    require_target("0.4.0")
    result, summary = _session(tmp_path, isolated_workdir)
    (prop,) = summary["properties"]
    assert result.returncode == 0 and prop["outcome"] == "passed" and prop["judged_trials"] > 0, \
        result.stdout[-3000:]
