"""The stand-in server (a test double: tests/standin_server.py).

The stand-in opens sessions and refuses every asample with a 400, as a server
whose base model is not loaded does. A real trial (and the suite) against it:
``tests/integration/test_standin_server_integration.py``. No durations are
asserted; every wait is bounded.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import psutil

from faultload.client.session import open_sampling_session, retrieve_futures_advertised
from tests.conftest import wait_until
from tests.standin_server import REJECTION, running, standin_server  # noqa: F401 - the fixture


def _post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/standin/stats", timeout=10) as resp:
        return json.loads(resp.read())


def test_the_standin_opens_a_sampling_session_and_refuses_every_asample(standin_server) -> None:
    sampler = open_sampling_session(standin_server.url, "Qwen/Qwen3-0.6B", timeout_s=10)
    assert sampler.startswith("standin-sampler-")
    body = json.dumps(
        {
            "sampling_session_id": sampler,
            "seq_id": 0,
            "num_samples": 1,
            "prompt": {"chunks": []},
            "sampling_params": {"max_tokens": 1},
        }
    ).encode()
    assert _post(f"{standin_server.url}/api/v1/asample", body) == (400, REJECTION)
    assert _post(f"{standin_server.url}/api/v1/retrieve_future", b'{"request_id": "1"}')[0] == 404
    assert _stats(standin_server.url)["/api/v1/asample"] == 1


def test_the_client_config_says_whether_the_newest_sdks_retrieve_futures_path_is_on(standin_server) -> None:
    assert retrieve_futures_advertised(standin_server.url) is False
    with running(retrieve_futures=True) as advertising:
        assert retrieve_futures_advertised(advertising.url) is True
    assert retrieve_futures_advertised(advertising.url, timeout_s=2) is None  # no answer: not said, not "off"


def test_the_standin_process_is_gone_after_its_block() -> None:
    with running() as server:
        assert psutil.pid_exists(server.pid)
        proc = psutil.Process(server.pid)
    assert wait_until(lambda: not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, timeout_s=15)
