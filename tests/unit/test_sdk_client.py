"""The real-SDK client's per-request records: error mapping and the wire hook's row mapping.

Test doubles where said: ``httpx.MockTransport`` stands in for
the SDK's own transport (pyqwest) under :class:`RecordingTransport`, and
exceptions are built by hand. Real trials (``faultload run --client sdk``
against the real SkyRL 0.4.0, the real tinker SDK and real Toxiproxy) are in
``tests/integration/test_sdk_client_integration.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import numpy as np
import pytest
import tinker
from conftest import run_cli
from tinker._client import AsyncTinker

from faultload.client import sdk_timers
from faultload.client.job import WorkerJob
from faultload.client.sdk import final_outcome, socket_count
from faultload.client.sdk_wire import (
    RecordingTransport,
    SdkWire,
    attempt_kind,
    classify_exception,
    installed,
    recording_client_class,
    status_error,
)
from faultload.model import tokens
from faultload.model.shape import LoadShape
from faultload.record.history import AttemptKind, ErrorClass, History, Outcome

SALT = 7
FIRST = 100
COUNT = 4
BASE = "http://127.0.0.1:9"


def _job(count: int = COUNT, first: int = FIRST, time_scale: float = 1.0) -> WorkerJob:
    shape = LoadShape(requests=first + count, time_scale=time_scale, client="sdk")
    return WorkerJob(0, BASE, None, "sess", "model", first, count, SALT, shape, 0.0, 60.0)


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.5
        return self.t


def _wire(job: WorkerJob | None = None) -> tuple[SdkWire, History, dict, list]:
    job = job or _job()
    history = History.empty(job.count)
    examples: dict[str, str] = {}
    counted: list[tuple[int, int]] = []
    wire = SdkWire(job, history, examples, lambda slot, d: counted.append((slot, d)), _Clock())
    return wire, history, examples, counted


def _sample_body(job: WorkerJob, row: int, spaced: bool = True) -> bytes:
    """An asample body shaped like the SDK's (pydantic JSON) for ``row``."""
    body = {
        "sampling_session_id": "sess",
        "seq_id": 3,
        "num_samples": 1,
        "type": "sample",
        "prompt": {"chunks": [{"tokens": tokens.prompt_tokens(job.nonce(job.first + row), 2), "type": "encoded_text"}]},
        "sampling_params": {"max_tokens": 4, "temperature": 1.0, "stop": None},
    }
    return json.dumps(body, separators=(", ", ": ") if spaced else (",", ":")).encode()


def _request(path: str, body: bytes = b"{}") -> httpx.Request:
    return httpx.Request("POST", BASE + path, content=body)


def _status_exc(status: int, path: str) -> tinker.APIStatusError:
    response = httpx.Response(status, request=_request(path), json={"detail": "x"})
    return tinker.APIStatusError("status", response=response, body=None)


def _caused(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


# --------------------------------------------------------------------------- status and exception mapping


@pytest.mark.parametrize(
    "kind, status, expected",
    [
        (AttemptKind.SUBMIT, 200, None),
        (AttemptKind.SUBMIT, 400, ErrorClass.HTTP_4XX),
        (AttemptKind.SUBMIT, 404, ErrorClass.HTTP_4XX),
        (AttemptKind.SUBMIT, 429, ErrorClass.HTTP_4XX),
        (AttemptKind.SUBMIT, 503, ErrorClass.HTTP_5XX),
        (AttemptKind.POLL, 200, None),
        (AttemptKind.POLL, 408, None),
        (AttemptKind.POLL, 400, ErrorClass.SERVER_FAILED),
        (AttemptKind.POLL, 404, ErrorClass.HTTP_404),
        (AttemptKind.POLL, 410, ErrorClass.HTTP_4XX),
        (AttemptKind.POLL, 500, ErrorClass.HTTP_5XX),
    ],
)
def test_status_error_is_what_the_raw_client_notes(kind, status, expected):
    assert status_error(kind, status) == expected


def test_attempt_kind_by_path():
    assert attempt_kind("/api/v1/asample") == AttemptKind.SUBMIT
    assert attempt_kind("/prefix/api/v1/retrieve_future") == AttemptKind.POLL
    assert attempt_kind("/api/v1/session_heartbeat") is None


def _exceptions():
    req = _request("/api/v1/retrieve_future")
    return [
        ("connect timeout", httpx.ConnectTimeout("timed out", request=req), ErrorClass.TIMEOUT),
        ("read timeout", httpx.ReadTimeout("timed out", request=req), ErrorClass.TIMEOUT),
        ("sdk timeout", tinker.APITimeoutError(request=req), ErrorClass.TIMEOUT),
        (
            "sdk wraps a refused connect",
            _caused(
                tinker.APIConnectionError(request=req),
                _caused(
                    httpx.ConnectError("error sending request: Connection refused (os error 111)", request=req),
                    ConnectionRefusedError(111, "refused"),
                ),
            ),
            ErrorClass.CONNECT,
        ),
        (
            "pyqwest refused, message only",
            httpx.ConnectError("client error (Connect): tcp connect error: Connection refused (os error 111)"),
            ErrorClass.CONNECT,
        ),
        (
            "pyqwest reset as a ConnectError",
            httpx.ConnectError("connection error: Connection reset by peer (os error 104)"),
            ErrorClass.RESET,
        ),
        ("write error on a reset", httpx.WriteError("connection error: Connection reset by peer"), ErrorClass.RESET),
        (
            "closed mid-answer",
            httpx.RemoteProtocolError("connection closed before message completed"),
            ErrorClass.RESET,
        ),
        (
            "os reset under the sdk",
            _caused(tinker.APIConnectionError(request=req), ConnectionResetError(104, "reset")),
            ErrorClass.RESET,
        ),
        (
            "poll 404 wrapped by the sdk",
            _caused(ValueError("Error retrieving result"), _status_exc(404, "/api/v1/retrieve_future")),
            ErrorClass.HTTP_404,
        ),
        (
            "poll bare 400 budget spent",
            _caused(ValueError("exceeded 3 retries"), _status_exc(400, "/api/v1/retrieve_future")),
            ErrorClass.SERVER_FAILED,
        ),
        ("asample 400", _status_exc(400, "/api/v1/asample"), ErrorClass.HTTP_4XX),
        ("asample 503", _status_exc(503, "/api/v1/asample"), ErrorClass.HTTP_5XX),
        (
            "server's failure report",
            tinker.RequestFailedError("Request failed: boom", "1", None),
            ErrorClass.SERVER_FAILED,
        ),
        ("proto decode", _caused(ValueError("Proto deserialization failed"), RuntimeError("x")), ErrorClass.OTHER),
        ("local protocol", httpx.LocalProtocolError("bad header"), ErrorClass.DECODE),
    ]


@pytest.mark.parametrize("label, exc, expected", _exceptions(), ids=[e[0] for e in _exceptions()])
def test_classify_exception(label, exc, expected):
    assert classify_exception(exc) == expected


def test_classify_exception_survives_a_cause_loop():
    a, b = ValueError("a"), ValueError("b")
    a.__cause__, b.__cause__ = b, a
    assert classify_exception(a) == ErrorClass.OTHER


@pytest.mark.parametrize(
    "error, accepted, expected",
    [
        (ErrorClass.HTTP_4XX, False, Outcome.REJECTED),
        (ErrorClass.RESET, False, Outcome.REJECTED),
        (ErrorClass.HTTP_404, True, Outcome.LOST),
        (ErrorClass.RESET, True, Outcome.GAVE_UP),
        (ErrorClass.CONNECT, True, Outcome.GAVE_UP),
        (ErrorClass.TIMEOUT, True, Outcome.GAVE_UP),
        (ErrorClass.DECODE, True, Outcome.CORRUPT),
        (ErrorClass.SERVER_FAILED, True, Outcome.FAILED),
        (ErrorClass.HTTP_5XX, True, Outcome.FAILED),
        (ErrorClass.OTHER, True, Outcome.FAILED),
    ],
)
def test_final_outcome(error, accepted, expected):
    assert final_outcome(error, accepted) == expected


# --------------------------------------------------------------------------- the wire's row mapping


@pytest.mark.parametrize("spaced", [True, False])
def test_sample_body_maps_to_its_row(spaced):
    job = _job()
    wire, *_ = _wire(job)
    for row in range(COUNT):
        assert wire.row_of_sample(_sample_body(job, row, spaced)) == row


def test_foreign_or_out_of_range_sample_bodies_map_to_no_row():
    job = _job()
    wire, *_ = _wire(job)
    other_trial = dataclasses.replace(job, nonce_salt=SALT + 1)
    assert wire.row_of_sample(_sample_body(other_trial, 0)) is None
    beyond = dataclasses.replace(job, first=FIRST + COUNT)  # another worker's rows
    assert wire.row_of_sample(_sample_body(beyond, 0)) is None
    assert wire.row_of_sample(b'{"prompt": {"chunks": [{"tokens": [1, 2, 3]}]}}') is None
    assert wire.row_of_sample(b"not json at all") is None


def test_a_whole_request_on_the_wire_fills_the_raw_clients_columns():
    job = _job()
    wire, h, examples, counted = _wire(job)
    row = 2
    assert wire.begin(row, AttemptKind.SUBMIT)
    wire.failed(row, AttemptKind.SUBMIT, wire.now(), httpx.WriteError("Connection reset by peer"))
    assert wire.begin(row, AttemptKind.SUBMIT)
    wire.answered(row, AttemptKind.SUBMIT, wire.now(), 200, b'{"future_id":"-5","request_id":"-5"}', 30)
    assert int(h["server_id"][row]) == -5
    assert wire.row_of_poll(b'{"request_id": "-5", "allow_metadata_only": true}') == row
    assert wire.row_of_poll(b'{"request_id": "6"}') is None
    assert wire.begin(row, AttemptKind.POLL)
    wire.answered(row, AttemptKind.POLL, wire.now(), 408, b'{"detail":"Timeout"}', 20)
    assert wire.begin(row, AttemptKind.POLL)
    wire.answered(row, AttemptKind.POLL, wire.now(), 200, b"", 523)

    assert int(h["attempts"][row]) == 4
    assert int(h["submit_retries"][row]) == 1
    assert int(h["repolls"][row]) == 1
    assert int(h["transport_errors"][row]) == 1
    assert int(h["result_bytes"][row]) == 523
    assert ErrorClass(int(h["error"][row])) == ErrorClass.RESET  # the last error seen, as the raw client keeps it
    assert np.isfinite(h["submit_end"][row])
    assert "reset" in examples and examples["reset"].startswith("asample: WriteError")
    assert counted.count((1, 1)) == 1  # ACCEPTED once
    assert counted.count((5, 1)) == 4  # ATTEMPTS per attempt
    cols = wire.close()
    assert cols["row"].tolist() == [row] * 4
    assert cols["kind"].tolist() == [AttemptKind.SUBMIT, AttemptKind.SUBMIT, AttemptKind.POLL, AttemptKind.POLL]
    assert cols["status"].tolist() == [-int(ErrorClass.RESET), 200, 408, 200]
    assert all(s < e for s, e in zip(cols["start"], cols["end"]))
    # Untouched rows stay as the raw client leaves a request that never started.
    assert int(h["attempts"][0]) == 0 and int(h["server_id"][0]) == 0


def test_http_errors_are_noted_like_the_raw_client():
    wire, h, examples, _ = _wire()
    wire.begin(0, AttemptKind.SUBMIT)
    wire.answered(0, AttemptKind.SUBMIT, 0.0, 400, b'{"detail":"max_tokens is currently required"}', 40)
    assert int(h["server_id"][0]) == 0
    assert ErrorClass(int(h["error"][0])) == ErrorClass.HTTP_4XX and "HTTP 400" in examples["http_4xx"]
    wire.begin(1, AttemptKind.SUBMIT)
    wire.answered(1, AttemptKind.SUBMIT, 0.0, 200, b'{"status":"pending"}', 20)  # no id: the server's bug
    assert int(h["server_id"][1]) == 0 and ErrorClass(int(h["error"][1])) == ErrorClass.DECODE


def test_nothing_is_recorded_after_close():
    wire, h, _, _ = _wire()
    wire.begin(0, AttemptKind.SUBMIT)
    cols = wire.close()
    assert not wire.begin(0, AttemptKind.SUBMIT)
    wire.answered(0, AttemptKind.SUBMIT, 0.0, 200, b'{"request_id":"9"}', 10)
    wire.failed(0, AttemptKind.SUBMIT, 0.0, httpx.ReadError("x"))
    assert int(h["attempts"][0]) == 1 and int(h["server_id"][0]) == 0 and cols["row"].size == 0


# --------------------------------------------------------------------------- the transport wrapper


class _Body(httpx.AsyncByteStream):
    """Test double: a body read as a stream, as pyqwest hands it over."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    async def __aiter__(self):
        yield self._data[:100]
        yield self._data[100:]


class _BrokenStream(httpx.AsyncByteStream):
    """Test double: a body that breaks after its first chunk, as a reset mid-answer does."""

    async def __aiter__(self):
        yield b"partial"
        raise httpx.ReadError("connection reset by peer")


def _fake_server(job: WorkerJob, seen_timeouts: list):
    """Test double for the SDK's transport: answers asample with an id (a body already read),
    polls with a streamed body (or one that breaks); refuses the connect of row 3's asample."""

    def handler(request: httpx.Request) -> httpx.Response:
        seen_timeouts.append(dict(request.extensions.get("timeout") or {}))
        if request.url.path.endswith("asample"):
            nonce = tokens.nonce_of(json.loads(request.content)["prompt"]["chunks"][0]["tokens"])
            if nonce == job.nonce(job.first + 3):
                raise httpx.ConnectError("Connection refused (os error 111)", request=request)
            return httpx.Response(200, json={"request_id": str(-nonce), "status": "pending"})
        if request.url.path.endswith("retrieve_future"):
            if json.loads(request.content)["request_id"] == str(-job.nonce(job.first + 1)):
                return httpx.Response(200, stream=_BrokenStream())
            return httpx.Response(200, stream=_Body(b"x" * 300), headers={"content-type": "application/x-protobuf"})
        if request.url.path.endswith("session_heartbeat"):
            return httpx.Response(200, json={})
        return httpx.Response(404)

    return httpx.MockTransport(handler)


def test_recording_transport_records_what_the_sdk_meets():
    job = _job(time_scale=0.05)
    wire, h, examples, _ = _wire(job)
    timeouts: list = []

    async def go():
        base = recording_client_class(httpx.AsyncClient, wire, job.shape.time_scale)
        async with base(transport=_fake_server(job, timeouts), timeout=httpx.Timeout(60, connect=5)) as client:
            for row in (0, 1):
                r = await client.post(BASE + "/api/v1/asample", content=_sample_body(job, row))
                assert r.status_code == 200
            r = await client.post(
                BASE + "/api/v1/retrieve_future", content=b'{"request_id":"%d"}' % -job.nonce(job.first), timeout=45
            )
            assert len(r.content) == 300
            with pytest.raises(httpx.ReadError):
                await client.post(
                    BASE + "/api/v1/retrieve_future", content=b'{"request_id":"%d"}' % -job.nonce(job.first + 1)
                )
            await client.post(BASE + "/api/v1/session_heartbeat", content=b"{}")  # not a request's attempt
            with pytest.raises(httpx.ConnectError):
                await client.post(BASE + "/api/v1/asample", content=_sample_body(job, 3))

    asyncio.run(go())
    cols = wire.close()
    assert int(h["server_id"][0]) == -job.nonce(job.first) and int(h["server_id"][1]) == -job.nonce(job.first + 1)
    assert h["attempts"].tolist() == [2, 2, 0, 1]
    assert h["transport_errors"].tolist() == [0, 1, 0, 1]
    assert int(h["result_bytes"][0]) == 300
    assert ErrorClass(int(h["error"][1])) == ErrorClass.RESET and ErrorClass(int(h["error"][3])) == ErrorClass.CONNECT
    assert cols["status"].tolist() == [200, 200, 200, -int(ErrorClass.RESET), -int(ErrorClass.CONNECT)]
    assert wire.unmapped == 0
    # Timeouts scaled by the time scale, as every other timer is: 60 s -> 3 s, the poll's 45 s -> 2.25 s.
    assert timeouts[0]["read"] == pytest.approx(3.0) and timeouts[0]["connect"] == pytest.approx(0.25)
    assert timeouts[2]["read"] == pytest.approx(2.25)
    assert "connect" in examples and "reset" in examples


def test_installed_swaps_the_sdks_client_class_and_restores_it():
    from tinker import _base_client

    original = _base_client.AsyncHttpxClientWrapper
    wire, *_ = _wire()
    with installed(wire, 1.0):
        swapped = _base_client.AsyncHttpxClientWrapper
        assert swapped is not original and issubclass(swapped, original)

        async def build():
            client = AsyncTinker(base_url=BASE, api_key="tml-x")  # the SDK builds its own httpx client
            try:
                assert isinstance(client._client._transport, RecordingTransport)
            finally:
                await client.close()

        asyncio.run(build())
    assert _base_client.AsyncHttpxClientWrapper is original


@pytest.mark.parametrize("scale", [1.0, 0.05])
def test_the_sdks_idle_connection_expiry_is_scaled_like_the_servers_keep_alive(scale: float, monkeypatch):
    """At 0.05 the server keeps an idle connection 3.75 s: the SDK's idle expiry scales alike, on either of
    its transports (httpx's 5 s, pyqwest's 90 s), so their order is full time's (the nightly profile saw
    resets on reused connections before this was scaled)."""
    wire, *_ = _wire()
    built: dict = {}
    real = sdk_timers.pyqwest.HTTPTransport
    monkeypatch.setattr(sdk_timers.pyqwest, "HTTPTransport", lambda **kw: built.update(kw) or real(**kw))

    async def inner_transport(use_pyqwest: bool):
        config = tinker.types.ClientConfigResponse(use_pyqwest_transport=use_pyqwest)  # the server's choice
        client = AsyncTinker(base_url=BASE, api_key="tml-x", _client_config=config)
        try:
            return client._client._transport._inner
        finally:
            await client.close()

    with installed(wire, scale):
        pool = asyncio.run(inner_transport(False))._pool  # httpx's transport, its httpcore pool
        asyncio.run(inner_transport(True))
    assert pool._keepalive_expiry == pytest.approx(5.0 * scale) and pool._max_keepalive_connections == 20
    assert built["pool_idle_timeout"] == pytest.approx(90.0 * scale)  # pyqwest's default, which the SDK keeps
    assert sdk_timers.PYQWEST_IDLE_TIMEOUT_S == 90.0
    assert sdk_timers.pyqwest.HTTPTransport is not real  # the spy is still there: installed put back what it found


def test_socket_count_sees_this_processs_sockets():
    before = socket_count()
    a, b = socket.socketpair()
    try:
        assert before >= 0 and socket_count() == before + 2
    finally:
        a.close()
        b.close()


def test_wire_bookkeeping_is_cheap_next_to_the_sdk():
    """The hook must not dominate the client's CPU: the SDK itself costs ~1 ms per request here
    (measured: 2.8 s of worker CPU for 1,000 requests, start-up included). A loose bound, in CPU
    time, so a slow shared machine does not fail it."""
    n = 2000
    job = _job(count=n, first=0)
    wire, *_ = _wire(job)
    bodies = [_sample_body(job, row) for row in range(n)]
    started = time.process_time()
    for row, body in enumerate(bodies):
        r = wire.row_of_sample(body)
        wire.begin(r, AttemptKind.SUBMIT)
        wire.answered(r, AttemptKind.SUBMIT, 0.0, 200, b'{"request_id":"-%d"}' % (row + 1), 20)
        p = wire.row_of_poll(b'{"request_id":"-%d"}' % (row + 1))
        wire.begin(p, AttemptKind.POLL)
        wire.answered(p, AttemptKind.POLL, 0.0, 200, b"", 500)
    per_request = (time.process_time() - started) / n
    assert per_request < 2e-4  # 0.2 ms: a fifth of the SDK's own cost; measured ~7 µs


# --------------------------------------------------------------------------- what the CLI refuses


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--accept", "json"], "accept json needs client raw"),
        (["--abandon-polls", "0.5@45"], "delayed or abandoned polls need client raw"),
    ],
)
def test_cli_refuses_what_the_sdk_cannot_do(tmp_path: Path, isolated_workdir: Path, flags: list[str], needle: str):
    run = run_cli(
        ["run", "--workdir", str(isolated_workdir), "--client", "sdk", "--requests", "4", *flags],
        timeout_s=120.0,
        tmpdir=tmp_path,
    )
    assert run.returncode == 2, run.stderr[-2000:]
    assert needle in run.error_line() and "Traceback" not in run.stderr
    assert not (isolated_workdir / "runs").exists() or not list((isolated_workdir / "runs").iterdir())


# --------------------------------------------------------------------------- whose error it is


class _Sequence:
    """Test double: one sample as the SDK hands it back."""

    def __init__(self, tokens_np, logprobs_np, stop_reason: str = "length") -> None:
        self.tokens_np, self.logprobs_np, self.stop_reason = tokens_np, logprobs_np, stop_reason


class _Sampling:
    """Test double for the SDK's sampling client: answers every request with its own result, or with samples
    that carry no arrays (``readable=False``, what a server that left the logprobs out would give)."""

    def __init__(self, job: WorkerJob, readable: bool = True) -> None:
        self.job, self.readable, self.rows = job, readable, 0

    async def sample_async(
        self, prompt, num_samples, sampling_params, include_prompt_logprobs=False, topk_prompt_logprobs=0
    ):
        from faultload.client import decode

        nonce = self.job.nonce(self.job.first + self.rows)
        self.rows += 1
        if not self.readable:
            return type("Response", (), {"sequences": [_Sequence(None, None)]})()
        want = decode.expected(nonce, num_samples, self.job.shape.result_tokens)
        topk = None if want.topk is None else SimpleNamespace(token_ids=want.topk[0], logprobs=want.topk[1])
        return SimpleNamespace(
            sequences=[_Sequence(s.tokens, s.logprobs, s.stop_reason) for s in want.sequences],
            prompt_logprobs_np=want.prompt_logprobs,
            topk_prompt_logprobs_np=topk,
        )


def _sdk_client(readable: bool = True):
    from faultload.client.counters import LiveCounters
    from faultload.client.sdk import SdkClient

    job = dataclasses.replace(_job(count=3), t0=time.monotonic())
    client = SdkClient(job, LiveCounters(None, 0, 0))
    client.sampling = _Sampling(job, readable)
    return client


def test_a_bug_in_the_harness_judging_an_sdk_result_is_a_harness_error_not_the_servers_verdict(monkeypatch):
    """An exception raised by faultload's own check of a result ends the run (the trial reports a harness
    error), as the raw client's would; it is never recorded as the server's CORRUPT/DECODE."""
    from faultload.client import decode

    client = _sdk_client()
    asyncio.run(client.run(lambda: False))
    assert list(client.history["outcome"]) == [Outcome.OK] * 3  # the double answers correctly

    def broken_check(*args, **kwargs):
        raise KeyError("a checker bug")

    monkeypatch.setattr(decode, "check", broken_check)
    client = _sdk_client()
    with pytest.raises(KeyError, match="a checker bug"):
        asyncio.run(client.run(lambda: False))
    assert Outcome.CORRUPT not in set(client.history["outcome"])


def test_a_result_the_server_sent_without_arrays_is_the_servers_decode_error():
    client = _sdk_client(readable=False)
    asyncio.run(client.run(lambda: False))
    assert list(client.history["outcome"]) == [Outcome.CORRUPT] * 3
    assert list(client.history["error"]) == [ErrorClass.DECODE] * 3
