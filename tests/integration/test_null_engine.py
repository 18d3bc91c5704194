"""SkyRL's own engine loop with faultload's null backend (``faultload/targets/skyrl_engine.py``), on the real releases.

Training requests go through the real API, the real engine loop (its DB
polling, batching and result rows) and the null backend, whose outputs are
the documented function of the request: ``logprobs[i] = -((t_i * 7 + i * 13) %
10000) / 10000``. 0.4.0 is driven by the real tinker SDK (proto bodies);
0.3.0 takes only JSON bodies, which SDK 0.25 no longer sends, so it is driven
over plain HTTP.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from conftest import TARGETS, require_target, wait_until

from faultload.client.sdk import close_service
from faultload.host.network import pick_free_port
from faultload.model.target import parse_target
from faultload.targets import install
from faultload.targets.families.skyrl import launch_skyrl
from faultload.targets.server import BASE_MODEL, ServerHandle, ServerStartError

pytestmark = pytest.mark.integration


def expected_logprobs(targets: list[int]) -> list[float]:
    return [-((t * 7 + i * 13) % 10000) / 10000 for i, t in enumerate(targets)]


def _launch(tmp_path: Path, version: str, **kwargs) -> ServerHandle:
    require_target(version)
    spec = parse_target(f"skyrl=={version}")
    return launch_skyrl(
        spec, install.target_python(TARGETS, spec), tmp_path, pick_free_port(), "http://127.0.0.1:9", **kwargs
    )


def _engine(handle: ServerHandle) -> psutil.Process:
    (engine,) = [p for p in psutil.Process(handle.pid).children() if any("skyrl_engine.py" in a for a in p.cmdline())]
    return engine


def _post(url: str, body: dict) -> tuple[int, object]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()[:300]


def test_the_sdk_trains_through_the_real_engine_on_0_4_0(tmp_path: Path):
    tinker = pytest.importorskip("tinker")
    handle = _launch(tmp_path, "0.4.0", engine="null")
    service = None
    try:
        assert _engine(handle).is_running()
        service = tinker.ServiceClient(base_url=handle.url, api_key="tml-faultload")
        trainer = service.create_lora_training_client(base_model=BASE_MODEL, rank=8)
        targets = [[2, 3, 4, 5], [9000, 17, 1]]
        data = [
            tinker.types.Datum(
                model_input=tinker.types.ModelInput.from_ints([1] * len(t)), loss_fn_inputs={"target_tokens": t}
            )
            for t in targets
        ]
        out = trainer.forward_backward(data, "cross_entropy").result(timeout=60)
        got = [list(o["logprobs"].tolist()) for o in out.loss_fn_outputs]
        assert got == [pytest.approx(expected_logprobs(t), abs=1e-6) for t in targets]
        assert out.metrics["num_tokens:sum"] == 7.0
        step = trainer.optim_step(tinker.types.AdamParams(learning_rate=3e-4)).result(timeout=60)
        assert step.metrics == {"skyrl.ai/learning_rate": pytest.approx(3e-4)}
    finally:
        if service is not None:
            close_service(service)
        handle.stop()
    log = (tmp_path / "server.log").read_text()
    assert "faultload-engine: null backend" in log
    assert "process_batch_requests(forward_backward" in log  # SkyRL's engine loop batched it


def test_raw_json_training_and_a_heartbeat_through_the_real_engine_on_0_3_0(tmp_path: Path):
    handle = _launch(tmp_path, "0.3.0", engine="null")
    try:
        api = f"{handle.url}/api/v1/"
        status, session = _post(api + "create_session", {"tags": [], "sdk_version": "0.25.0", "type": "create_session"})
        assert status == 200
        status, model = _post(
            api + "create_model",
            {"session_id": session["session_id"], "base_model": BASE_MODEL, "lora_config": {"rank": 8}},
        )
        assert status == 200
        assert _post(api + "retrieve_future", {"request_id": model["request_id"]})[0] == 200
        datum = {
            "model_input": {"chunks": [{"type": "encoded_text", "tokens": [1, 2, 3]}]},
            "loss_fn_inputs": {"target_tokens": {"data": [40, 41, 42]}},
        }
        status, future = _post(
            api + "forward_backward",
            {"model_id": model["model_id"], "forward_backward_input": {"data": [datum], "loss_fn": "cross_entropy"}},
        )
        assert status == 200
        status, result = _post(api + "retrieve_future", {"request_id": future["request_id"]})
        assert status == 200
        assert result["loss_fn_outputs"][0]["logprobs"]["data"] == pytest.approx(expected_logprobs([40, 41, 42]))
        assert (
            _post(api + "session_heartbeat", {"session_id": session["session_id"], "type": "session_heartbeat"})[0]
            == 200
        )
    finally:
        handle.stop()


def test_the_engine_ends_when_its_api_server_is_killed_alone(tmp_path: Path):
    handle = _launch(tmp_path, "0.4.0", engine="null")
    try:
        engine = _engine(handle)
        os.kill(handle.pid, signal.SIGKILL)  # the API process only, not its group
        assert wait_until(lambda: not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE, timeout_s=20.0)
    finally:
        handle.stop()


def test_an_unknown_engine_is_refused_by_the_launcher(tmp_path: Path):
    with pytest.raises(ServerStartError, match="unknown engine 'gpu'"):
        _launch(tmp_path, "0.4.0", engine="gpu")
