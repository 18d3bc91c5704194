"""Training traffic beside sampling through ``faultload run``, against the real SkyRL 0.4.0 and its own engine loop.

The trainers' forward_backward and optim_step go through the real API, SkyRL's
engine loop and faultload's null backend; their results are checked against
the request; heartbeats run on the SDK's period (scaled: 1 s at time scale 0.1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import require_target, run_cli

pytestmark = pytest.mark.integration


def _run(workdir: Path, tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "report.json"
    result = run_cli(
        ["run", "--workdir", str(workdir), "--requests", "64", "--quiet", "--json-out", str(out), *args],
        timeout_s=240.0,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(out.read_text())


def test_trainers_beside_samples_are_judged_and_reported(isolated_workdir: Path, tmp_path: Path):
    require_target("0.4.0")
    pytest.importorskip("matplotlib")
    plot = tmp_path / "timeline.png"
    # 2 ms per target token: a 4 x 128-token forward_backward takes the engine ~1 s, so heartbeats fall due.
    report = _run(
        isolated_workdir,
        tmp_path,
        "--trainers",
        "4x3",
        "--time-scale",
        "0.1",
        "--plot",
        str(plot),
        "--engine-seconds-per-token",
        "0.002",
    )
    training = report["training"]
    assert training["forward_backward"]["requested"] == 12 == training["forward_backward"]["completed"]
    assert training["optim_step"]["completed"] == 12 and training["create_model"]["completed"] == 4
    assert training["heartbeat"]["requested"] >= 4 and training["heartbeat"]["failed"] == 0
    assert training["forward_backward"]["latency_s"]["p50"] >= 0.5  # the engine's compute time is felt
    assert training["cpu_s"]["training_client_s"] > 0 and training["cpu_s"]["engine_s"] is not None
    assert training["engine"]["fds_peak"] > 0
    verdicts = {v["name"]: v for v in report["invariants"]}
    assert verdicts["training_futures"]["ok"] is True, verdicts["training_futures"]
    assert verdicts["heartbeats_answered"]["ok"] is True, verdicts["heartbeats_answered"]
    assert report["config"]["engine"] == "null"
    assert plot.stat().st_size > 10_000


def test_a_run_without_trainers_has_no_training_verdicts_and_the_sleeper_engine(isolated_workdir: Path, tmp_path: Path):
    require_target("0.4.0")
    report = _run(isolated_workdir, tmp_path)
    assert report["training"] is None
    assert not {"training_futures", "heartbeats_answered"} & {v["name"] for v in report["invariants"]}
    assert report["config"]["engine"] == "sleeper"
