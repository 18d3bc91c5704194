"""hatchery-core, the third server family: a release installed and launched by its adapter serves real trials,
judged against its own contract (a 600 s hold ending in a try-again, futures forgotten 3600 s after creation,
one sample forwarded at a time)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import leftover_dirs, require_target, run_cli

from faultload.checker.budgets import Budgets
from faultload.checker.judge import judge
from faultload.host.workspace import Workspace
from faultload.model.router import RouterConfig
from faultload.model.shape import ClientPolicy, LoadShape
from faultload.model.trial import TrialConfig
from faultload.record.history import TRY_AGAIN, AttemptKind, Outcome
from faultload.run.trial import run_trial

pytestmark = pytest.mark.integration
TARGET = "hatchery==0.3.0"
FIX = "sampling-session-answer"  # finding 11: without it no SDK can open a base-model sampling session


def _verdicts(result) -> dict:
    return {v.name: v for v in judge(result, Budgets())}


def _run(tmp_path: Path, workdir: Path, *extra: str) -> tuple[int, dict | None, str]:
    out = tmp_path / "report.json"
    run = run_cli(
        ["run", "--workdir", str(workdir), "--target", TARGET, "--requests", "16", "--json-out", str(out), *extra],
        timeout_s=300.0,
        tmpdir=tmp_path,
    )
    report = json.loads(out.read_text()) if out.exists() else None
    return run.returncode, report, run.stderr


def test_finding_11_no_sdk_opens_a_base_model_sampling_session_and_the_fix_mends_it(
    tmp_path: Path, isolated_workdir: Path
):
    """The release answers create_sampling_session with a future's envelope: one line, the server's fault (exit 1),
    before any load and with nothing left behind; with the candidate fix the real SDK opens its sampling client,
    then meets finding 12: every sample's result is JSON, which the SDK reads only as proto."""
    require_target("0.3.0", "hatchery")
    (tmp_path / "release").mkdir()
    (tmp_path / "fixed").mkdir()
    code, report, stderr = _run(tmp_path / "release", isolated_workdir)
    assert code == 1 and report is None, stderr[-2000:]
    assert "without the sampling_session_id the SDK reads" in stderr.strip().splitlines()[-1]
    assert leftover_dirs(isolated_workdir) == []
    code, report, stderr = _run(tmp_path / "fixed", isolated_workdir, "--client", "sdk", "--fix", FIX)
    assert code == 1 and report is not None, stderr[-2000:]
    verdicts = {v["name"]: v for v in report["invariants"]}
    assert report["completed"] == 0 and verdicts["accepted_requests"]["ok"] is True, verdicts["accepted_requests"]
    assert verdicts["result_integrity"]["ok"] is False and "corrupt (decode)" in verdicts["result_integrity"]["detail"]
    assert "only supports as proto" in stderr


def test_a_hatchery_release_serves_a_trial_with_every_invariant_judged(isolated_workdir: Path):
    """1,200 requests (2,400 HTTP requests, enough for the CPU budget) through the release's own local server: every
    one OK, and every invariant of a sampling trial judged and held, but two: forwards_concurrent (the immediate
    router holds no forward long enough to see a ceiling) and releases_results (too few result bytes to measure,
    and no wait past the 3600 s the registry keeps a future)."""
    require_target("0.3.0", "hatchery")
    shape = LoadShape(requests=1200, max_outstanding=100, workers=1, result_tokens=16, seed=3)
    config = TrialConfig(
        target=TARGET, shape=shape, router=RouterConfig(mode="immediate", barrier=0), drain_s=5.0, fixes=(FIX,)
    )
    result = run_trial(config, Workspace(isolated_workdir))
    assert result.error is None and result.server.get("version") == "0.3.0", (result.error, result.server)
    assert int((result.history["outcome"] == Outcome.OK).sum()) == 1200
    verdicts = _verdicts(result)
    not_held = {name: (v.ok, v.detail) for name, v in verdicts.items() if v.ok is not True}
    assert "router_holds_briefly" in not_held.pop("forwards_concurrent", (None, "router_holds_briefly"))[1]
    assert not_held.pop("releases_results", (None, ""))[0] is None
    assert not not_held, not_held
    assert leftover_dirs(isolated_workdir) == []


def test_a_poll_held_to_the_end_of_hatcherys_hold_is_answered_try_again(isolated_workdir: Path):
    """At time scale 0.005 hatchery holds a poll 3 s; the router takes 4 s a sample, one at a time, and the client
    waits 10 s per poll, so every first poll ends in hatchery's try-again after the full hold: recorded as such,
    held to the contract (polls_held) and not counted as a retry (retry_amplification)."""
    require_target("0.3.0", "hatchery")
    shape = LoadShape(
        requests=3, workers=1, result_tokens=4, seed=5, time_scale=0.005, policy=ClientPolicy(poll_timeout_s=2000.0)
    )
    router = RouterConfig(mode="latency", gen_seconds=4.0)
    config = TrialConfig(target=TARGET, shape=shape, router=router, drain_s=5.0, fixes=(FIX,))
    result = run_trial(config, Workspace(isolated_workdir))
    assert result.error is None, result.error
    assert int((result.history["outcome"] == Outcome.OK).sum()) == 3
    attempts = result.history.attempts
    try_again = (attempts["kind"] == AttemptKind.POLL) & (attempts["status"] == TRY_AGAIN)
    assert try_again.sum() >= 3, attempts["status"].tolist()
    held = (attempts["end"] - attempts["start"])[try_again]
    assert np.all(held >= 3.0 - 0.5), held.tolist()
    verdicts = _verdicts(result)
    assert verdicts["polls_held"].ok is True, verdicts["polls_held"].detail
    assert verdicts["retry_amplification"].ok is True, verdicts["retry_amplification"].detail
