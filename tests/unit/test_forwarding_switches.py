"""The forwarding-path regression switches (``targets/skyrl_forwarding.py``) on stand-ins, no server.

The harness's venv has no skyrl, so each test builds a stand-in forwarding
module (registered in ``sys.modules`` for the test only) with the names the
switch patches; httpx's own ``MockTransport`` stands in for the router. A
real 0.4.0 server under each switch is the integration check (README,
"Time scale and regressions").
"""

from __future__ import annotations

import asyncio
import json
import sys
import types

import aiohttp
import httpx
import orjson
import pydantic
import pytest

from faultload.targets import skyrl_forwarding, skyrl_patches


class _StandInClient:
    """Stand-in for SkyRLTrainInferenceForwardingClient: its session attribute and config."""

    def __init__(self, max_connections: int | None) -> None:
        self.engine_config = types.SimpleNamespace(
            forwarding_inference_max_connections=max_connections, forwarding_inference_timeout_sec=2048.0
        )
        self._session = None


def _aiohttp_session(self):
    raise AssertionError("the release's aiohttp session must not be made under httpx-forwarding")


class _StandInStore:
    """Stand-in for ExternalFutureStore: the timers apply_patches scales, and its proto cache."""

    _SWEEP_INTERVAL_SECONDS, _PENDING_TTL_SECONDS, _RETRIEVED_TTL_SECONDS, _COMPLETED_TTL_SECONDS = 30, 3600, 300, 600

    def __init__(self, *, retrieved_ttl_sec=None, completed_ttl_sec=None) -> None:
        pass


def _cache_proto(self, request_id: int, proto: bytes) -> None:
    self.cached = proto


class _GeneratedSequence(pydantic.BaseModel):
    stop_reason: str
    tokens: list[int]
    logprobs: list[float]


class _SampleOutput(pydantic.BaseModel):
    sequences: list[_GeneratedSequence]
    prompt_logprobs: list[float | None] | None = None
    topk_prompt_logprobs: list[list[tuple[int, float]] | None] | None = None


@pytest.fixture
def ns(monkeypatch) -> dict:
    """A stand-in api namespace whose forwarding client lives in a stand-in module, as in 0.4.0."""
    module = types.ModuleType("standin_forwarding")
    client_cls = type(
        "SkyRLTrainInferenceForwardingClient",
        (_StandInClient,),
        {"__module__": module.__name__, "_get_session": _aiohttp_session},
    )
    module.__dict__.update(
        {
            "SkyRLTrainInferenceForwardingClient": client_cls,
            "_ROUTER_CONNECT_TIMEOUT_SECONDS": 60.0,
            "orjson": orjson,
            "serialize_sample_output": lambda *a: b"proto",
            "types": types.SimpleNamespace(GeneratedSequence=_GeneratedSequence, SampleOutput=_SampleOutput),
        }
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)
    store_cls = type("ExternalFutureStore", (_StandInStore,), {"cache_proto": _cache_proto})
    return {
        "SkyRLTrainInferenceForwardingClient": client_cls,
        "ExternalFutureStore": store_cls,
        "_serialize_proto_result": lambda request_type, result_data: b"proto",
    }


def _module(ns: dict) -> dict:
    return vars(sys.modules[ns["SkyRLTrainInferenceForwardingClient"].__module__])


def test_httpx_forwarding_makes_an_httpx_pool_like_0_3_0s(ns):
    applied = skyrl_patches.apply_patches(ns, ["httpx-forwarding"], 1.0)
    assert applied[0].startswith("httpx-forwarding:")
    client = ns["SkyRLTrainInferenceForwardingClient"](max_connections=400)
    session = client._get_session()
    assert isinstance(session, skyrl_forwarding.HttpxSession) and client._get_session() is session
    timeout = session.client.timeout
    assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (60.0, 2048.0, None, None)
    pool = session.client._transport._pool  # httpcore's pool: 0.3.0's limits, httpx's 5 s keep-alive expiry
    assert (pool._max_connections, pool._max_keepalive_connections, pool._keepalive_expiry) == (400, 100, 5.0)
    unlimited = skyrl_forwarding.httpx_client(None, 60.0, 2048.0)._transport._pool
    assert unlimited._max_connections == unlimited._max_keepalive_connections == sys.maxsize  # httpcore's "no limit"
    asyncio.run(session.close())
    assert session.closed and client._get_session() is not session  # a closed session is made again


def _post(handler) -> tuple[int, str, bytes]:
    async def go():
        session = skyrl_forwarding.HttpxSession(httpx.AsyncClient(transport=httpx.MockTransport(handler)))
        try:
            async with session.post("http://router/v1/completions", json={"n": 1}, headers={"X-Session-ID": "s"}) as r:
                return r.status, r.headers.get("content-type"), await r.read()
        finally:
            await session.close()

    return asyncio.run(go())


def test_httpx_session_answers_like_an_aiohttp_response():
    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content) == {"n": 1} and request.headers["X-Session-ID"] == "s"
        return httpx.Response(503, content=b'{"choices": []}', headers={"content-type": "application/json"})

    assert _post(handler) == (503, "application/json", b'{"choices": []}')


@pytest.mark.parametrize(
    "raised, caught_as",
    [
        (httpx.ConnectError("refused"), aiohttp.ClientConnectorError),  # the release retries these once
        (httpx.ConnectTimeout("slow accept"), aiohttp.ConnectionTimeoutError),
        (httpx.ReadTimeout("no answer"), aiohttp.SocketTimeoutError),  # the release's read-timeout message
        (httpx.ReadError("reset"), httpx.ReadError),  # not retried, like aiohttp's read errors
    ],
)
def test_httpx_errors_reach_the_release_as_the_aiohttp_errors_it_handles(raised, caught_as):
    def handler(request: httpx.Request) -> httpx.Response:
        raise raised

    with pytest.raises(caught_as) as info:
        _post(handler)
    assert str(raised) in str(info.value)


def test_json_decode_swaps_orjson_for_the_standard_library(ns):
    skyrl_patches.apply_patches(ns, ["json-decode"], 1.0)
    decoder = _module(ns)["orjson"]
    assert decoder.loads is json.loads and decoder.loads(b'{"choices": [{"token_ids": [1, 2]}]}')["choices"]
    for bad in (b"<html>502</html>", b"\xff\xfe{"):  # 0.3.0 caught ValueError: bad JSON and bad UTF-8 alike
        with pytest.raises(decoder.JSONDecodeError):
            decoder.loads(bad)


def test_proto_per_poll_keeps_json_and_caches_no_proto(ns):
    skyrl_patches.apply_patches(ns, ["proto-per-poll"], 1.0)
    result = _module(ns)["serialize_sample_output"]([("stop", [1, 2], [-0.5, -0.25])], None, None)
    assert isinstance(result, pydantic.BaseModel)  # so the store keeps model_dump_json(), not bytes
    assert json.loads(result.model_dump_json())["sequences"][0] == {
        "stop_reason": "stop",
        "tokens": [1, 2],
        "logprobs": [-0.5, -0.25],
    }
    store = ns["ExternalFutureStore"]()
    store.cache_proto(1, b"proto")
    assert not hasattr(store, "cached")


@pytest.mark.parametrize(
    "name, remove, message",
    [
        ("httpx-forwarding", "client", "no 'SkyRLTrainInferenceForwardingClient'"),
        ("httpx-forwarding", "_get_session", "no '_get_session' .*forwards through httpx already"),
        ("json-decode", "orjson", "no 'orjson'"),
        ("proto-per-poll", "serialize_sample_output", "no 'serialize_sample_output'"),
        ("proto-per-poll", "_serialize_proto_result", "no '_serialize_proto_result'"),
        ("proto-per-poll", "cache_proto", "no 'cache_proto'"),
    ],
)
def test_a_version_without_the_patch_point_is_refused(ns, name, remove, message):
    """0.3.0 has none of them: httpx already, stdlib json, no proto, no in-memory store."""
    client_cls = ns["SkyRLTrainInferenceForwardingClient"]
    if remove == "client":
        del ns["SkyRLTrainInferenceForwardingClient"]
    elif remove == "_get_session":
        del client_cls._get_session
    elif remove == "cache_proto":
        del ns["ExternalFutureStore"].cache_proto
    elif remove in ns:
        del ns[remove]
    else:
        del _module(ns)[remove]
    with pytest.raises(skyrl_patches.PatchError, match=message):
        skyrl_patches.apply_patches(ns, [name], 1.0)
