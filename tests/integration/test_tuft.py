"""TuFT, the second server family: a release installed and launched by its adapter serves real trials, judged
against its own contract (a 120 s hold ending in a try-again, results kept until it stops)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import TARGETS, WORKDIR, leftover_dirs, require_built, require_target, run_cli

from faultload.checker.budgets import Budgets
from faultload.checker.judge import judge
from faultload.host.network import pick_free_port
from faultload.host.workspace import Workspace
from faultload.model.router import RouterConfig
from faultload.model.shape import ClientPolicy, LoadShape
from faultload.model.target import parse_target
from faultload.model.trial import TrialConfig
from faultload.record.history import TRY_AGAIN, AttemptKind, Outcome
from faultload.router.handle import start_router
from faultload.run.trial import run_trial
from faultload.targets import install
from faultload.targets.families.tuft import launch_tuft

pytestmark = pytest.mark.integration
TARGET = "tuft==0.2.2"


def _verdicts(result) -> dict:
    return {v.name: v for v in judge(result, Budgets())}


def test_a_tuft_release_serves_a_trial_with_every_invariant_judged(isolated_workdir: Path):
    """2,048 requests (enough for the CPU budget) through the release's own `tuft launch`: every one OK, and every
    invariant of a sampling trial judged and held — none unknown but releases_results, which TuFT's contract
    makes not applicable (no TTL: it keeps every result until it stops).

    With finding 10's fix: the release rebuilds a session's history on every sample, so its forwards trail the
    samples it accepted, and at this size forwards_concurrent's share lands either side of its 0.5 budget
    (0.41-0.59 over 6 trials of this shape; 0.92 with the fix; findings.md has the repro at 8,192)."""
    require_target("0.2.2", "tuft")
    shape = LoadShape(requests=2048, workers=2, result_tokens=16, seed=3)
    config = TrialConfig(target=TARGET, shape=shape, drain_s=5.0, fixes=("history-in-order",))
    result = run_trial(config, Workspace(isolated_workdir))
    assert result.error is None and result.server.get("version") == "0.2.2", (result.error, result.server)
    assert int((result.history["outcome"] == Outcome.OK).sum()) == 2048
    assert result.server["retrieve_futures"] is False  # TuFT's client/config does not turn it on either
    verdicts = _verdicts(result)
    not_held = {name: (v.ok, v.detail) for name, v in verdicts.items() if v.ok is not True}
    assert not_held.pop("releases_results", (None, "not applicable"))[1].startswith("not applicable")
    assert not not_held, not_held
    assert leftover_dirs(isolated_workdir) == []


def test_a_poll_held_to_the_end_of_tufts_hold_is_answered_try_again_and_is_the_long_poll_cycle(isolated_workdir: Path):
    """At time scale 0.02 TuFT holds a poll 2.4 s; the router takes 4 s and the client waits 10 s per poll, so
    each request's first poll ends in TuFT's try-again after the full hold: recorded as such, held to the
    contract (polls_held) and not counted as a retry (retry_amplification)."""
    require_target("0.2.2", "tuft")
    shape = LoadShape(
        requests=8, workers=1, result_tokens=4, seed=5, time_scale=0.02, policy=ClientPolicy(poll_timeout_s=500.0)
    )
    config = TrialConfig(target=TARGET, shape=shape, router=RouterConfig(mode="latency", gen_seconds=4.0), drain_s=5.0)
    result = run_trial(config, Workspace(isolated_workdir))
    assert result.error is None, result.error
    assert int((result.history["outcome"] == Outcome.OK).sum()) == 8
    attempts = result.history.attempts
    try_again = (attempts["kind"] == AttemptKind.POLL) & (attempts["status"] == TRY_AGAIN)
    assert try_again.sum() >= 8, attempts["status"].tolist()
    held = (attempts["end"] - attempts["start"])[try_again]
    assert np.all(held >= 2.4 - 0.5), held.tolist()
    verdicts = _verdicts(result)
    assert verdicts["polls_held"].ok is True, verdicts["polls_held"].detail
    assert verdicts["retry_amplification"].ok is True, verdicts["retry_amplification"].detail


def test_a_tuft_someone_else_started_is_judged_by_tufts_contract_when_named_so(tmp_path: Path, isolated_workdir: Path):
    """A TuFT faultload did not launch (its hold 2.4 s: 120 s at scale 0.02), loaded as a url= target at that
    scale: named ``tuft+url=``, its try-agains after the full hold are the long-poll cycle; as a bare ``url=``
    (judged as SkyRL, whose hold is 6 s at that scale) the same answers are early."""
    require_target("0.2.2", "tuft")
    spec = parse_target(TARGET)
    shape = LoadShape(
        requests=4, workers=1, result_tokens=4, seed=5, time_scale=0.02, policy=ClientPolicy(poll_timeout_s=500.0)
    )
    with start_router(RouterConfig(mode="latency", gen_seconds=4.0)) as router:
        server = launch_tuft(
            spec, install.target_python(TARGETS, spec), tmp_path, pick_free_port(), router.url, time_scale=0.02
        )
        try:
            held = {}
            for form in ("tuft+url=", "url="):
                config = TrialConfig(target=f"{form}{server.url}", shape=shape, drain_s=2.0)
                result = run_trial(config, Workspace(isolated_workdir))
                assert result.error is None, result.error
                assert int((result.history["outcome"] == Outcome.OK).sum()) == 4
                held[form] = _verdicts(result)["polls_held"]
        finally:
            server.stop()
    assert held["tuft+url="].ok is True, held["tuft+url="].detail
    assert held["url="].ok is False and "300 SDK s hold" in held["url="].detail, held["url="].detail


def _sdk_run(tmp_path: Path, workdir: Path, *extra: str) -> dict:
    out = tmp_path / "report.json"
    run = run_cli(
        [
            "run",
            "--workdir",
            str(workdir),
            "--target",
            TARGET,
            "--client",
            "sdk",
            "--requests",
            "16",
            "--json-out",
            str(out),
            *extra,
        ],
        timeout_s=420.0,
        tmpdir=tmp_path,
    )
    assert run.returncode in (0, 1), run.stderr[-2000:]
    return json.loads(out.read_text())


def test_the_sdk_its_release_pins_samples_through_it(tmp_path: Path, isolated_workdir: Path):
    require_target("0.2.2", "tuft")
    report = _sdk_run(tmp_path, isolated_workdir)
    assert report["completed"] == 16 and all(v["ok"] is not False for v in report["invariants"])


def test_finding_7_the_newest_sdk_is_refused_at_every_sample_and_its_fix_mends_it(
    tmp_path: Path, isolated_workdir: Path
):
    """tinker 0.38 sends request fields TuFT 0.2.2 validates against tinker 0.25's closed model: a 422 each;
    with the candidate fix every sample is accepted, answered and read."""
    require_target("0.2.2", "tuft")
    require_built(
        "tinker==0.38.0",
        (WORKDIR / "sdks" / "tinker-0.38.0" / "faultload-installed.json").exists(),
        "faultload setup --sdk tinker==0.38.0",
    )
    (tmp_path / "release").mkdir()
    (tmp_path / "fixed").mkdir()
    report = _sdk_run(tmp_path / "release", isolated_workdir, "--sdk", "tinker==0.38.0")
    verdicts = {v["name"]: v for v in report["invariants"]}
    assert report["completed"] == 0 and verdicts["accepted_requests"]["ok"] is False
    assert "extra_forbidden" in report["errors"]["http_4xx"]["example"]
    report = _sdk_run(tmp_path / "fixed", isolated_workdir, "--sdk", "tinker==0.38.0", "--fix", "newest-sdk-samples")
    assert report["completed"] == 16 and all(v["ok"] is not False for v in report["invariants"])


def test_what_a_tuft_launch_lacks_is_refused_before_anything_starts(tmp_path: Path, isolated_workdir: Path):
    run = run_cli(
        ["run", "--workdir", str(isolated_workdir), "--target", TARGET, "--regress", "retention"],
        timeout_s=120.0,
        tmpdir=tmp_path,
    )
    assert run.returncode == 2 and "has no regression switch 'retention'" in run.error_line(), run.stderr[-2000:]
    assert leftover_dirs(isolated_workdir) == []


def test_finding_8_a_restart_forgets_the_session_its_next_sample_is_accepted_then_lost(
    tmp_path: Path, isolated_workdir: Path
):
    """The shipped repro (a restart, then a request on the same session) reproduces; TuFT's own FILE persistence,
    the candidate fix, keeps the session across the restart."""
    require_target("0.2.2", "tuft")
    release = run_cli(
        ["replay", "--workdir", str(isolated_workdir), "restart_sessions-tuft-0.2.2"], timeout_s=300.0, tmpdir=tmp_path
    )
    assert release.returncode == 1 and "reproduced: failing now: no_lost_results" in release.stdout, (
        release.stdout[-2000:] + release.stderr[-2000:]
    )
    fixed = run_cli(
        ["replay", "--workdir", str(isolated_workdir), "restart_sessions-tuft-0.2.2", "--fix", "file-persistence"],
        timeout_s=300.0,
        tmpdir=tmp_path,
    )
    assert fixed.returncode == 0, fixed.stdout[-2000:] + fixed.stderr[-2000:]
