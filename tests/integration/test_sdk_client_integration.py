"""``faultload run --client sdk`` against the real SkyRL 0.4.0, the real tinker SDK and real Toxiproxy.

The client's per-request records on test doubles (error mapping, the wire hook's row mapping) are in
``tests/unit/test_sdk_client.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import WORKDIR, require_built, require_target, run_cli

from faultload.record.history import AttemptKind, History


def _sdk_run(tmp_path: Path, workdir: Path, *extra: str) -> tuple[dict, History]:
    out, hist = tmp_path / "report.json", tmp_path / "history.npz"
    run = run_cli(
        [
            "run",
            "--workdir",
            str(workdir),
            "--client",
            "sdk",
            "--requests",
            "16",
            "--json-out",
            str(out),
            "--history",
            str(hist),
            *extra,
        ],
        timeout_s=420.0,
        tmpdir=tmp_path,
    )
    assert run.returncode in (0, 1), run.stderr[-2000:]
    report = json.loads(out.read_text())
    return report, History.load(str(hist))


def _verdicts(report: dict) -> dict[str, dict]:
    return {v["name"]: v for v in report["invariants"]}


@pytest.mark.integration
@pytest.mark.parametrize("fault", [None, "edge:reset_peer@0+1"], ids=["no-fault", "edge-reset"])
def test_sdk_trial_is_judged(tmp_path: Path, isolated_workdir: Path, fault: str | None):
    require_target("0.4.0")
    report, h = _sdk_run(tmp_path, isolated_workdir, *(["--fault", fault] if fault else []))
    assert report["error"] is None and report["config"]["shape"]["client"] == "sdk"
    verdicts = _verdicts(report)
    # Judged, not unknown: the SDK's request ids and attempts were recorded.
    assert verdicts["no_lost_results"]["ok"] in (True, False), verdicts["no_lost_results"]
    assert verdicts["retry_amplification"]["ok"] in (True, False), verdicts["retry_amplification"]
    accepted = h["server_id"] != 0
    assert int(accepted.sum()) == report["requested"] - report["outcomes"]["rejected"] > 0
    assert len(np.unique(h["server_id"][accepted])) == int(accepted.sum())
    assert report["attempts"]["http_attempts"] > 0 and h.attempts["row"].size == int(h["attempts"].sum())
    polls = h.attempts["kind"] == AttemptKind.POLL
    assert set(h.attempts["row"][polls].tolist()) == set(np.flatnonzero(accepted).tolist())
    if fault is None:
        assert report["completed"] == 16
        assert verdicts["no_lost_results"]["ok"] is True and verdicts["retry_amplification"]["ok"] is True
        assert int(h["transport_errors"].sum()) == 0
    else:
        # The resets were seen on the wire, per request, and classified.
        assert int(h["transport_errors"].sum()) > 0 and int(h["submit_retries"].sum()) > 0
        assert set(report["errors"]) & {"reset", "connect"}, report["errors"]
        assert report["faults"]["applied"][0]["requests_with_errors"] > 0


@pytest.mark.integration
def test_finding_6_the_newest_sdk_fails_every_sample_of_the_release_and_its_fix_mends_it(
    tmp_path: Path, isolated_workdir: Path
):
    """tinker 0.38 asserts that asample's answer carries one sequence id per sample; SkyRL 0.4.0 sends none."""
    require_target("0.4.0")
    require_built(
        "tinker==0.38.0",
        (WORKDIR / "sdks" / "tinker-0.38.0" / "faultload-installed.json").exists(),
        "faultload setup --sdk tinker==0.38.0",
    )
    (tmp_path / "release").mkdir()
    (tmp_path / "fixed").mkdir()
    report, _ = _sdk_run(tmp_path / "release", isolated_workdir, "--sdk", "tinker==0.38.0")
    assert report["client"] == {"kind": "sdk", "sdk": "tinker==0.38.0", "impl": None}
    assert _verdicts(report)["result_integrity"]["ok"] is False and report["completed"] == 0
    assert "asample promises always carry sample_sequence_ids" in report["errors"]["decode"]["example"]
    report, _ = _sdk_run(
        tmp_path / "fixed", isolated_workdir, "--sdk", "tinker==0.38.0", "--fix", "sample-sequence-ids"
    )
    assert report["completed"] == 16 and all(v["ok"] is not False for v in report["invariants"])
