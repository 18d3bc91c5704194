"""The suite's comparative property against real SkyRL 0.4.0: ``--faultload-regress rich-access-log`` is worse
than clean 0.4.0 and its repro replays on both builds; clean against clean passes; a comparison's repeats of
one example on one shared stack are each judged against their own load's completions.

Each session is ``pytest --pyargs faultload.suite -k comparative`` on the ci profile, in its own process
(real servers, one shared stack per build), with this checkout's pyproject (budgets, compare thresholds).
Minutes each; no duration is asserted.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from faultload.checker.budgets import load_budgets
from faultload.host.workspace import Workspace
from faultload.model.router import RouterConfig
from faultload.strategies import minimal_trial_config
from faultload.suite.executor import StackExecutor
from faultload.suite.reducer import with_requests
from tests.conftest import ROOT, require_target, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SESSION_TIMEOUT_S = 1200


def _session(tmp_path, workdir, *options: str) -> tuple[subprocess.CompletedProcess, dict]:
    summary = tmp_path / "summary.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--pyargs",
            "faultload.suite",
            "-k",
            "comparative",
            "--faultload-profile",
            "ci",
            "--faultload-workdir",
            str(workdir),
            "--faultload-summary-json",
            str(summary),
            "--faultload-baseline",
            "skyrl==0.4.0",
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=SESSION_TIMEOUT_S,
        cwd=ROOT,
    )  # ROOT: its pyproject's settings
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
    assert ("reproduced: still worse" if replayed.returncode == 1 else "not reproduced:") in replayed.stdout


def test_clean_against_clean_passes(tmp_path, isolated_workdir):
    require_target("0.4.0")
    result, summary = _session(tmp_path, isolated_workdir)
    (prop,) = summary["properties"]
    assert result.returncode == 0 and prop["outcome"] == "passed" and prop["judged_trials"] > 0, result.stdout[-3000:]


def test_an_examples_repeats_on_one_stack_are_judged_against_their_own_completions(isolated_workdir):
    """The ci example whose trials of both builds once violated polls_held (128 polls "held past their
    result"): 250 requests x 2 samples, cap 100, a latency router 64 x 4 s, the same seed (so the same nonces)
    twice back to back on one shared stack, as a comparison's ABBA runs it. The second trial read the first's
    last completions (under a second before its load) as its own."""
    require_target("0.4.0")
    config = with_requests(minimal_trial_config("skyrl==0.4.0", 0.05), 250)
    config = dataclasses.replace(
        config,
        shape=dataclasses.replace(config.shape, num_samples=2, max_outstanding=100),
        router=RouterConfig(mode="latency", max_num_seqs=64, gen_seconds=4.0),
    )
    executor = StackExecutor(
        Workspace(isolated_workdir),
        load_budgets(ROOT / "pyproject.toml"),
        20.0,
        log=lambda message: None,
        keep_reports=True,
    )
    try:
        held = [next(v for v in executor.run(config).verdicts if v.name == "polls_held") for _ in range(2)]
    finally:
        executor.close()
    assert executor.stack_starts == 1 and [v.ok for v in held] == [True, True], [v.detail for v in held]
