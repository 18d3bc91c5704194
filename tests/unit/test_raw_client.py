"""The raw client's retry policy (faultload.client.raw.RawClient), driven against a STUB server; every test
runs twice, on the Python client and on the compiled one (faultload/client/go), which must behave alike.

The server here is a TEST DOUBLE, not SkyRL: a small aiohttp app implementing
only ``/api/v1/asample`` and ``/api/v1/retrieve_future`` with behaviour
scripted per request (drop the connection, answer 408/404/400/429/5xx, hold a
poll, answer a proto or JSON result, answer the wrong nonce's tokens). It
builds results the way a real server would (the tinker proto, or 0.3.0-style
JSON) from the nonce in the prompt, so the client's integrity check runs as in
a trial. Everything runs in one event loop (``asyncio.run`` inside sync tests);
every wait is bounded and nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest
from aiohttp import web
from conftest import require_compiled_client

from faultload.client import decode
from faultload.client.compiled_run import CompiledClient
from faultload.client.counters import ACCEPTED, ATTEMPTS, COMPLETED, FAILED, IN_FLIGHT, SUBMITTED, LiveCounters
from faultload.client.endpoint import make_session
from faultload.client.job import COUNTER_SLOTS, WorkerJob
from faultload.client.raw import RawClient
from faultload.host.network import pick_free_port
from faultload.model import tokens
from faultload.model.sdk import SDK_API_KEY
from faultload.model.shape import ClientPolicy, LoadShape, PollBehaviour
from faultload.record.history import TRY_AGAIN, AttemptKind, ErrorClass, History, Outcome, server_id_key
from tests.results import json_result, proto_result

BOUND_S = 60.0  # upper bound on any one client run here (never reached when things work)
# Time scale for tests that count retries exactly: backoffs stay short, while the
# scaled client timeouts (60 s asample, 45 s poll) stay well above a loaded machine's hiccups.
SCALE = 0.05
# Backoff cap for tests that exhaust retries: min(2**n, cap) * SCALE <= 10 ms per retry.
FAST_POLICY = ClientPolicy(backoff_cap_s=0.2)


@dataclass
class StubServer:
    """TEST DOUBLE of a Tinker API server's sampling path, scripted per request.

    ``asample``/``polls``: actions consumed in order (one per HTTP request to that
    endpoint, across all requests); when a script runs out, ``asample_default`` /
    ``poll_default`` applies. Actions:

    - ``"ok"``: asample -> a new request id; poll -> the request's result
      (proto if the client asked for it, else JSON);
    - ``"drop"``: close the connection without answering;
    - an int: answer that status with ``{"detail": ...}``;
    - ``"wrong_nonce"`` / ``"truncated"`` / ``"garbage"``: a bad 200 result;
    - ``"hold"``: keep the poll open until the client drops it (bounded), then 408;
    - ``"try_again"``: a 200 JSON ``{"type": "try_again"}``, as a server whose hold ends with the SDK's
      TryAgainResponse answers (TuFT);
    - ``"barrier"``: hold polls until ``barrier`` of them are held, then answer them all (bounded wait);
    - ``"ok_then_close"`` (asample): accept, then stop listening: later polls find no server.
    """

    asample: list[Any] = field(default_factory=list)
    polls: list[Any] = field(default_factory=list)
    asample_default: Any = "ok"
    poll_default: Any = "ok"
    barrier: int = 0
    asample_delay_s: Callable[[int], float] | None = None  # by seq_id: reorders the answers
    wave: list = field(default_factory=list)
    events: list[tuple] = field(default_factory=list)
    requests: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # id -> (nonce, samples, tokens)
    delivered: set[str] = field(default_factory=set)
    held_once: set[str] = field(default_factory=set)
    hold_s: float = 10.0  # how long "hold" keeps a poll open before answering 408
    poll_accepts: list[str] = field(default_factory=list)
    remotes: set[str] = field(default_factory=set)
    peak_outstanding: int = 0
    close_now: asyncio.Event | None = None
    accepted_status: int = 200  # what a sample's acceptance is answered: SkyRL 200, TuFT 202
    uuid_ids: bool = False  # request ids as TuFT gives them (UUIDs) instead of SkyRL's integers
    api_keys: set[str] = field(default_factory=set)  # the X-API-Key headers the client sent

    @property
    def outstanding(self) -> int:
        return len(self.requests) - len(self.delivered)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/api/v1/asample", self._asample)
        app.router.add_post("/api/v1/retrieve_future", self._retrieve)
        return app

    @staticmethod
    def _drop(request: web.Request) -> web.Response:
        transport = request.transport
        if transport is not None:
            transport.abort()
        return web.Response(status=500)  # never reaches the client

    async def _asample(self, request: web.Request) -> web.StreamResponse:
        action = self.asample.pop(0) if self.asample else self.asample_default
        body = await request.json()
        self.remotes.add(request.remote or "")
        self.api_keys.add(request.headers.get("X-API-Key", ""))
        self.events.append(("asample", action))
        if action == "drop":
            return self._drop(request)
        if isinstance(action, int):
            return web.json_response({"detail": f"scripted {action}"}, status=action)
        if self.asample_delay_s is not None:
            await asyncio.sleep(self.asample_delay_s(body["seq_id"]))
        prompt = body["prompt"]["chunks"][0]["tokens"]
        nonce = tokens.nonce_of(prompt)
        assert nonce is not None, "the client must send a faultload prompt"
        rid = str(uuid.UUID(int=len(self.requests) + 1)) if self.uuid_ids else str(len(self.requests) + 1)
        self.requests[rid] = (nonce, body["num_samples"], body["sampling_params"]["max_tokens"])
        self.peak_outstanding = max(self.peak_outstanding, self.outstanding)
        if action == "ok_then_close" and self.close_now is not None:
            self.close_now.set()
        return web.json_response({"request_id": rid, "model_id": "stub"}, status=self.accepted_status)

    async def _retrieve(self, request: web.Request) -> web.StreamResponse:
        action = self.polls.pop(0) if self.polls else self.poll_default
        body = await request.json()
        rid = body["request_id"]
        n = sum(1 for e in self.events if e[0] == "poll")
        self.events.append(("poll", n, rid, action))
        self.poll_accepts.append(request.headers.get("Accept", ""))
        if action == "drop":
            return self._drop(request)
        if isinstance(action, int):
            return web.json_response({"detail": f"scripted {action}: sampling failed: boom"}, status=action)
        if rid not in self.requests:
            return web.json_response({"detail": "Future not found"}, status=404)
        if action == "try_again":
            return web.json_response({"type": "try_again", "request_id": rid, "queue_state": "active"})
        if action == "request_failed":
            return web.json_response({"type": "request_failed", "error": "backend down", "category": "user_error"})
        nonce, samples, length = self.requests[rid]
        if action == "hold_first":
            action = "hold" if rid not in self.held_once else "ok"
            self.held_once.add(rid)
        if action == "hold":
            try:
                for _ in range(int(self.hold_s * 100)):  # bounded
                    if request.transport is None or request.transport.is_closing():
                        self.events.append(("dropped", n))
                        return web.Response(status=408)
                    await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                self.events.append(("dropped", n))
                raise
            self.events.append(("never_dropped", n))
            return web.json_response({"detail": "held too long"}, status=408)
        if action == "barrier":
            # Hold polls in waves: release them all once ``barrier`` are held (bounded wait).
            released = asyncio.get_running_loop().create_future()
            self.wave.append(released)
            if len(self.wave) >= self.barrier:
                for fut in self.wave:
                    if not fut.done():
                        fut.set_result(None)
                self.wave = []
            try:
                await asyncio.wait_for(asyncio.shield(released), 5.0)
            except asyncio.TimeoutError:
                self.events.append(("barrier_timeout", n))
        if action == "wrong_nonce":
            nonce += 1
        if action == "garbage":
            return web.Response(body=b"\x08\xff\xff", content_type="application/x-protobuf")
        self.events.append(("answered", n))
        self.delivered.add(rid)
        if decode.PROTO_CONTENT_TYPE in request.headers.get("Accept", ""):
            return web.Response(
                body=proto_result(nonce, samples, length, cut=action == "truncated"),
                content_type="application/x-protobuf",
            )
        return web.Response(
            body=json_result(nonce, samples, length, cut=action == "truncated"), content_type="application/json"
        )

    def polls_seen(self) -> list[tuple]:
        return [e for e in self.events if e[0] == "poll"]


IMPLS = ("python", "compiled")
_binary: list[str | None] = [None]  # the compiled client's, while a test runs on it


@pytest.fixture(params=IMPLS, autouse=True)
def impl(request: pytest.FixtureRequest):
    """Which client the test's runs use: the Python one, or the compiled one (its binary as setup built it)."""
    _binary[0] = str(require_compiled_client()) if request.param == "compiled" else None
    yield request.param
    _binary[0] = None


@dataclass
class Run:
    client: RawClient | CompiledClient
    counters: list[int]
    stub: StubServer

    @property
    def h(self) -> History:
        return self.client.history

    def row(self, name: str, i: int = 0):
        return self.client.history[name][i]

    def counter(self, slot: int) -> int:
        return self.counters[slot]


def make_job(
    base_url: str, shape: LoadShape, count: int = 1, source_ip: str | None = None, deadline_s: float = BOUND_S
) -> WorkerJob:
    return WorkerJob(
        worker=0,
        base_url=base_url,
        source_ip=source_ip,
        sampling_session_id="stub-session",
        base_model="stub",
        first=0,
        count=count,
        nonce_salt=5,
        shape=shape,
        t0=time.monotonic(),
        deadline_s=deadline_s,
    )


@contextlib.asynccontextmanager
async def serving(stub: StubServer, base_url: str | None = None):
    """The stub listening on a free port while inside; yields the URL the client is to use."""
    stub.close_now = asyncio.Event()
    runner = web.AppRunner(stub.app(), handle_signals=False, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]

    async def closer() -> None:
        await stub.close_now.wait()
        await site.stop()  # stop listening: new connections are refused
        stub.poll_default = "drop"  # and a kept-alive connection is dropped
        stub.polls.clear()

    closing = asyncio.ensure_future(closer())
    try:
        yield base_url or f"http://127.0.0.1:{port}"
    finally:
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        await runner.cleanup()


def run_against_stub(
    stub: StubServer,
    shape: LoadShape | None = None,
    count: int = 1,
    source_ip: str | None = None,
    base_url: str | None = None,
    stop: Callable[[StubServer], bool] | None = None,
    deadline_s: float = BOUND_S,
) -> Run:
    shape = shape or LoadShape(requests=count, result_tokens=8, time_scale=SCALE)

    async def main() -> Run:
        async with serving(stub, base_url) as url:
            counters = [0] * len(COUNTER_SLOTS)
            job = make_job(url, shape, count, source_ip, deadline_s)
            should_stop = (lambda: stop(stub)) if stop else (lambda: False)
            if _binary[0] is not None:
                job = dataclasses.replace(job, client_binary=_binary[0])
                compiled = CompiledClient(job, counters, len(COUNTER_SLOTS), _binary[0])
                await asyncio.wait_for(compiled.start(job.t0, should_stop), BOUND_S)
                return Run(compiled, counters, stub)
            async with make_session(job) as session:
                client = RawClient(job, session, LiveCounters(counters, 0, len(COUNTER_SLOTS)))
                await asyncio.wait_for(client.run(should_stop), BOUND_S)
        return Run(client, counters, stub)

    return asyncio.run(main())


# --------------------------------------------------------------------------- the happy path


def test_one_request_ok_proto(impl: str):
    run = run_against_stub(StubServer())
    assert isinstance(run.client, CompiledClient if impl == "compiled" else RawClient)
    assert run.row("outcome") == Outcome.OK
    assert run.row("error") == ErrorClass.NONE
    assert (run.row("attempts"), run.row("submit_retries"), run.row("repolls"), run.row("transport_errors")) == (
        2,
        0,
        0,
        0,
    )
    assert run.row("server_id") == 1
    assert run.row("result_bytes") == len(proto_result(run.row("nonce"), 1, 8))
    assert run.row("submit_start") <= run.row("submit_end") <= run.row("done")
    assert run.stub.poll_accepts == [decode.PROTO_CONTENT_TYPE]
    assert (run.counter(SUBMITTED), run.counter(ACCEPTED), run.counter(COMPLETED), run.counter(FAILED)) == (1, 1, 1, 0)
    assert run.counter(IN_FLIGHT) == 0 and run.counter(ATTEMPTS) == 2
    assert run.client.examples == {}


def test_json_accept_gets_json_and_checks_it():
    shape = LoadShape(requests=2, result_tokens=6, num_samples=2, accept="json", time_scale=SCALE)
    run = run_against_stub(StubServer(), shape, count=2)
    assert list(run.h["outcome"]) == [Outcome.OK, Outcome.OK]
    assert run.stub.poll_accepts == ["application/json", "application/json"]
    assert len({run.row("nonce", 0), run.row("nonce", 1)}) == 2


def test_source_address_is_bound():
    run = run_against_stub(StubServer(), source_ip="127.0.1.7")
    assert run.row("outcome") == Outcome.OK
    assert run.stub.remotes == {"127.0.1.7"}


def test_outstanding_cap_holds_and_every_request_completes():
    """Polls are answered in waves of 3 held polls: with a cap of 3 the stub
    sees exactly 3 requests outstanding at its peak, never more."""
    shape = LoadShape(requests=21, result_tokens=4, max_outstanding=3, time_scale=0.1)
    stub = StubServer(poll_default="barrier", barrier=3)
    run = run_against_stub(stub, shape, count=21)
    assert run.h.count(Outcome.OK) == 21
    assert stub.peak_outstanding == 3
    assert not [e for e in stub.events if e[0] == "barrier_timeout"]
    assert len(set(run.h["nonce"].tolist())) == 21
    assert run.counter(COMPLETED) == 21 and run.counter(IN_FLIGHT) == 0
    assert run.counter(ATTEMPTS) == int(run.h["attempts"].sum())


# --------------------------------------------------------------------------- asample retries


def test_dropped_asample_connection_is_retried():
    stub = StubServer(asample=["drop"])
    run = run_against_stub(stub)
    assert run.row("outcome") == Outcome.OK
    assert run.row("submit_retries") == 1
    assert run.row("transport_errors") == 1
    assert run.row("attempts") == 3  # two submits, one poll
    assert run.row("error") == ErrorClass.RESET  # the last error seen, even though it then succeeded
    assert "reset" in run.client.examples
    assert [e[1] for e in stub.events if e[0] == "asample"] == ["drop", "ok"]


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
def test_retryable_asample_status_is_retried(status):
    run = run_against_stub(StubServer(asample=[status, status]))
    assert run.row("outcome") == Outcome.OK
    assert run.row("submit_retries") == 2
    assert run.row("transport_errors") == 0


def test_bad_request_asample_is_rejected_at_once():
    run = run_against_stub(StubServer(asample=[400]))
    assert run.row("outcome") == Outcome.REJECTED
    assert (run.row("attempts"), run.row("submit_retries")) == (1, 0)
    assert run.row("error") == ErrorClass.HTTP_4XX
    assert "400" in run.client.examples["http_4xx"]
    assert run.counter(FAILED) == 1 and run.counter(ACCEPTED) == 0


def test_persistent_refusal_on_submit_is_retried_for_the_window_then_rejected():
    """Nothing listens: as the SDK's execute_with_retries, the asample is retried until the
    (scaled) retry window has passed, then REJECTED (never accepted) with a CONNECT error."""
    policy = ClientPolicy(backoff_cap_s=0.2, submit_retry_window_s=2.0)  # 0.1 s at SCALE
    shape = LoadShape(requests=1, result_tokens=8, time_scale=SCALE, policy=policy)
    dead = f"http://127.0.0.1:{pick_free_port()}"
    run = run_against_stub(StubServer(), shape, base_url=dead)
    assert run.row("outcome") == Outcome.REJECTED
    assert run.row("error") == ErrorClass.CONNECT
    assert run.row("transport_errors") == run.row("attempts") == run.row("submit_retries") + 1
    assert run.row("attempts") >= 2
    # It gave up only once the window had passed (the window is a lower bound, not a timing).
    assert run.h.attempts["end"][-1] - run.row("submit_start") >= shape.scaled(policy.submit_retry_window_s) - 1e-3
    assert np.isnan(run.row("done"))


def test_asample_transport_errors_past_16_tries_are_retried_within_the_window():
    """The SDK has no count limit on asample retries, only its 300 s window: 20 dropped
    connections in a row, then accepted."""
    shape = LoadShape(requests=1, result_tokens=8, time_scale=SCALE, policy=FAST_POLICY)
    run = run_against_stub(StubServer(asample=["drop"] * 20), shape)
    assert run.row("outcome") == Outcome.OK
    assert (run.row("submit_retries"), run.row("transport_errors")) == (20, 20)


def test_asample_still_retrying_at_the_deadline_is_pending():
    """Refused until the trial's wall bound, inside the SDK's window: unfinished, not rejected."""
    shape = LoadShape(requests=1, result_tokens=8, time_scale=SCALE, policy=FAST_POLICY)  # window: 15 s
    dead = f"http://127.0.0.1:{pick_free_port()}"
    run = run_against_stub(StubServer(), shape, base_url=dead, deadline_s=0.5)
    assert run.row("outcome") == Outcome.PENDING
    assert run.row("server_id") == 0 and run.row("transport_errors") >= 1
    assert np.isnan(run.row("done"))
    assert run.counter(FAILED) == 0 and run.counter(IN_FLIGHT) == 0


# --------------------------------------------------------------------------- retrieve_future


def test_408_twice_then_result():
    stub = StubServer(polls=[408, 408])
    run = run_against_stub(stub)
    assert run.row("outcome") == Outcome.OK
    assert run.row("repolls") == 2
    assert run.row("attempts") == 4
    assert run.row("error") == ErrorClass.NONE  # a 408 is the server's "not yet", not an error
    assert len(stub.polls_seen()) == 3


def test_a_200_try_again_is_repolled_at_once_as_the_sdk_does():
    """The SDK's TryAgainResponse (a 200 JSON ``{"type": "try_again"}``) is the server's "not yet", not a result:
    polled again at once, with the bare-400 budget left as it was (only a 408 re-opens it)."""
    stub = StubServer(polls=["try_again", "try_again"])
    run = run_against_stub(stub)
    assert run.row("outcome") == Outcome.OK and run.row("error") == ErrorClass.NONE
    assert run.row("repolls") == 2 and len(stub.polls_seen()) == 3
    failing = run_against_stub(StubServer(polls=[400, "try_again", 400, 400, 400]))
    assert failing.row("outcome") == Outcome.FAILED  # 3 bare 400s re-polled, the 4th fails: try_again reset nothing


def test_a_200_reporting_the_request_failed_ends_it_failed_as_the_sdk_raises():
    """hatchery's answer after a sample's third failed attempt: a 200 JSON with ``error`` (``RequestFailedResponse``),
    which the SDK raises as ``RequestFailedError``: a definite failure, never judged as a corrupt result."""
    run = run_against_stub(StubServer(polls=["try_again", "request_failed"]))
    assert run.row("outcome") == Outcome.FAILED and run.row("error") == ErrorClass.SERVER_FAILED
    assert run.row("repolls") == 1 and run.row("result_bytes") == 0


def test_a_try_again_is_recorded_as_the_servers_not_yet_apart_from_a_result():
    """The attempt log keeps a try-again as TRY_AGAIN, which the polls checker judges as a hold's end."""
    run = run_against_stub(StubServer(polls=["try_again", "try_again"]))
    attempts = run.client.history.attempts
    polls = attempts["status"][attempts["kind"] == AttemptKind.POLL].tolist()
    assert polls == [TRY_AGAIN, TRY_AGAIN, 200]


def test_a_202_with_a_uuid_request_id_is_accepted_and_polled_by_that_id_with_the_sdks_key():
    """TuFT's asample: 202 and a UUID. Any 2xx is an acceptance (as the SDK), the id is polled as given, the
    history keeps its non-zero key, and every call carries the X-API-Key the SDK would send."""
    stub = StubServer(accepted_status=202, uuid_ids=True)
    run = run_against_stub(stub, count=3)
    assert [run.client.history["outcome"][i] for i in range(3)] == [Outcome.OK] * 3
    ids = sorted(stub.requests)
    assert sorted(e[2] for e in stub.polls_seen()) == ids and all("-" in rid for rid in ids)
    assert sorted(run.client.history["server_id"].tolist()) == sorted(server_id_key(rid) for rid in ids)
    assert all(key != 0 for key in run.client.history["server_id"].tolist())
    assert stub.api_keys == {SDK_API_KEY}


def test_5xx_is_repolled():
    run = run_against_stub(StubServer(polls=[500, 503]))
    assert run.row("outcome") == Outcome.OK
    assert run.row("repolls") == 2
    assert run.row("error") == ErrorClass.HTTP_5XX


def test_404_is_a_lost_result():
    stub = StubServer(polls=[404])
    run = run_against_stub(stub)
    assert run.row("outcome") == Outcome.LOST
    assert run.row("error") == ErrorClass.HTTP_404
    assert ErrorClass.HTTP_404.key == "http_404" and "404" in run.client.examples["http_404"]
    assert len(stub.polls_seen()) == 1  # final: never re-polled
    assert run.counter(FAILED) == 1 and run.counter(COMPLETED) == 0


def test_400_with_error_detail_fails_after_the_bad_request_budget():
    stub = StubServer(poll_default=400)
    run = run_against_stub(stub)
    assert run.row("outcome") == Outcome.FAILED
    assert run.row("repolls") == 3  # the SDK's _MAX_BAD_REQUEST_RETRIES
    assert len(stub.polls_seen()) == 4
    assert run.row("error") == ErrorClass.SERVER_FAILED
    assert "sampling failed: boom" in run.client.examples["server_failed"]


def test_400_then_result_within_budget_is_ok():
    run = run_against_stub(StubServer(polls=[400, 400, 400]))
    assert run.row("outcome") == Outcome.OK
    assert run.row("repolls") == 3


def test_408_resets_the_bad_request_budget():
    """As the SDK: a 408 is a successful round trip and re-opens the bare-400 budget."""
    stub = StubServer(polls=[400, 400, 400, 408, 400, 400])
    run = run_against_stub(stub)
    assert run.row("outcome") == Outcome.OK
    assert len(stub.polls_seen()) == 7


def test_429_on_poll_backs_off_and_repolls():
    """The SDK maps a 429 from retrieve_future to retry-with-backoff, not to a failure."""
    stub = StubServer(polls=[429, 429])
    run = run_against_stub(stub)
    assert run.row("outcome") == Outcome.OK
    assert run.row("repolls") == 2
    assert len(stub.polls_seen()) == 3


def test_dropped_poll_connection_is_repolled():
    stub = StubServer(polls=["drop"])
    run = run_against_stub(stub)
    assert run.row("outcome") == Outcome.OK
    assert (run.row("repolls"), run.row("transport_errors")) == (1, 1)
    assert run.row("error") == ErrorClass.RESET


def test_poll_transport_errors_past_16_tries_are_repolled_until_the_result():
    """The SDK's retrieve loop retries connection errors without a count limit: 20 dropped
    polls in a row (more than the 16 an older raw client allowed), then the result."""
    shape = LoadShape(requests=1, result_tokens=8, time_scale=SCALE, policy=FAST_POLICY)
    run = run_against_stub(StubServer(polls=["drop"] * 20), shape)
    assert run.row("outcome") == Outcome.OK
    assert (run.row("repolls"), run.row("transport_errors")) == (20, 20)
    assert run.counter(COMPLETED) == 1


def test_persistent_refusal_while_polling_is_pending_at_the_deadline():
    """The stub accepts the asample and then stops listening: every poll fails to connect, and
    the client keeps re-polling (with backoff) until the trial's wall bound: PENDING, not GAVE_UP."""
    shape = LoadShape(requests=1, result_tokens=8, time_scale=SCALE, policy=FAST_POLICY)
    stub = StubServer(asample=["ok_then_close"])
    run = run_against_stub(stub, shape, deadline_s=2.0)
    assert run.row("outcome") == Outcome.PENDING
    assert run.row("server_id") == 1
    assert run.row("error") == ErrorClass.CONNECT
    assert run.row("transport_errors") >= 2 and run.row("repolls") == run.row("transport_errors") - 1
    assert np.isnan(run.row("done"))
    assert run.counter(FAILED) == 0 and run.counter(COMPLETED) == 0


def test_stop_while_repolling_after_transport_errors_is_pending():
    """Told to stop after 20 dropped polls (the client is still re-polling): PENDING, no done time."""
    shape = LoadShape(requests=1, result_tokens=8, time_scale=SCALE, policy=FAST_POLICY)
    stub = StubServer(poll_default="drop")
    run = run_against_stub(stub, shape, stop=lambda s: len(s.polls_seen()) >= 20)
    assert run.row("outcome") == Outcome.PENDING
    assert run.row("transport_errors") >= 17
    assert np.isnan(run.row("done"))
    assert run.counter(FAILED) == 0 and run.counter(IN_FLIGHT) == 0


def test_wrong_nonce_is_corrupt():
    run = run_against_stub(StubServer(polls=["wrong_nonce"]))
    assert run.row("outcome") == Outcome.CORRUPT
    assert run.row("error") == ErrorClass.INTEGRITY
    message = run.client.examples["integrity"]
    assert "do not match" in message and str(run.row("nonce")) in message
    assert run.counter(FAILED) == 1


def test_truncated_result_is_corrupt():
    run = run_against_stub(StubServer(polls=["truncated"]))
    assert run.row("outcome") == Outcome.CORRUPT
    assert "7 tokens, expected 8" in run.client.examples["integrity"]


def test_undecodable_result_is_corrupt_decode():
    run = run_against_stub(StubServer(polls=["garbage"]))
    assert run.row("outcome") == Outcome.CORRUPT
    assert run.row("error") == ErrorClass.DECODE


def test_unknown_4xx_on_poll_fails():
    run = run_against_stub(StubServer(polls=[403]))
    assert run.row("outcome") == Outcome.FAILED
    assert run.row("error") == ErrorClass.HTTP_4XX


# --------------------------------------------------------------------------- abandoned / delayed polls


def test_abandoned_first_poll_is_dropped_then_repolled():
    shape = LoadShape(requests=1, result_tokens=8, time_scale=SCALE, abandon_polls=PollBehaviour(1.0, 1.0))
    stub = StubServer(polls=["hold"])
    run = run_against_stub(stub, shape)
    assert run.row("outcome") == Outcome.OK
    kinds = [e[0] if e[0] != "poll" else f"poll{e[1]}" for e in stub.events if e[0] != "asample"]
    # The stub saw poll 0, saw its connection drop before it answered, then poll 1, answered.
    assert kinds == ["poll0", "dropped", "poll1", "answered"], stub.events
    assert run.row("repolls") == 1
    assert run.row("transport_errors") == 0  # an abandon is the client's choice, not a fault


def test_abandon_fraction_zero_never_abandons():
    shape = LoadShape(requests=3, result_tokens=8, time_scale=SCALE, abandon_polls=PollBehaviour(0.0, 1.0))
    run = run_against_stub(StubServer(), shape, count=3)
    assert run.h.count(Outcome.OK) == 3
    assert int(run.h["repolls"].sum()) == 0


def test_delayed_first_poll_still_completes():
    shape = LoadShape(requests=2, result_tokens=8, time_scale=SCALE, delay_polls=PollBehaviour(1.0, 2.0))
    run = run_against_stub(StubServer(), shape, count=2)
    assert run.h.count(Outcome.OK) == 2
    assert int(run.h["repolls"].sum()) == 0


# --------------------------------------------------------------------------- stopping early


def test_stop_keeps_partial_history():
    """Polls are held open; once the stub has seen every first poll the client is told to stop:
    run() returns, and the unfinished requests stay PENDING with no done time."""
    shape = LoadShape(requests=4, result_tokens=8, time_scale=1.0)
    stub = StubServer(poll_default="hold")
    run = run_against_stub(stub, shape, count=4, stop=lambda s: len(s.polls_seen()) >= 4)
    assert run.h.count(Outcome.PENDING) == 4
    assert np.isnan(run.h["done"]).all()
    assert (run.h["server_id"] > 0).all()  # accepted before the stop
    assert run.counter(IN_FLIGHT) == 0


def _abandoned_nonces(seed: int, reverse: bool) -> set[int]:
    count = 12
    # Poll timeout 9 s; a first poll not abandoned (dropped by the client at 0.25 s) is held
    # 3 s and answered 408, so only abandoned polls show up as dropped.
    shape = LoadShape(requests=count, result_tokens=4, time_scale=0.2, seed=seed, abandon_polls=PollBehaviour(0.5, 0.2))
    delay = (lambda seq: 0.05 * (count - seq)) if reverse else (lambda seq: 0.0)
    stub = StubServer(poll_default="hold_first", asample_delay_s=delay, hold_s=3.0)
    run = run_against_stub(stub, shape, count=count)
    assert run.h.count(Outcome.OK) == count
    dropped = {e[1] for e in stub.events if e[0] == "dropped"}
    polls = {e[1]: e[2] for e in stub.polls_seen()}
    return {stub.requests[polls[n]][0] for n in dropped}


def test_which_polls_are_abandoned_depends_on_the_seed_not_on_timing():
    """A repro must replay the same poll behaviour: the requests whose first poll is abandoned
    are a function of (seed, request), not of the order the server happened to answer in."""
    forward = _abandoned_nonces(seed=11, reverse=False)
    assert 0 < len(forward) < 12
    assert _abandoned_nonces(seed=11, reverse=True) == forward


@pytest.mark.parametrize("fraction", [0.0, 0.3, 1.0])
def test_poll_plan_fractions(fraction):
    """The planned share of delayed/abandoned first polls matches the shape's fractions."""
    shape = LoadShape(
        requests=1,
        time_scale=0.5,
        seed=9,
        delay_polls=PollBehaviour(fraction, 4.0),
        abandon_polls=PollBehaviour(fraction, 1.0),
    )
    client = RawClient(make_job("http://127.0.0.1:1", shape), None, LiveCounters(None, 0, len(COUNTER_SLOTS)))
    plans = [client._first_poll_plan(nonce) for nonce in range(20_000)]
    delayed = np.array([d for d, _ in plans])
    abandoned = np.array([a for _, a in plans])
    assert set(np.unique(delayed).tolist()) <= {0.0, 2.0}  # 4 SDK seconds at time scale 0.5
    assert np.mean(delayed > 0) == pytest.approx(fraction, abs=0.015)
    assert np.mean(abandoned) == pytest.approx(fraction, abs=0.015)
    if 0 < fraction < 1:  # the two choices are independent of each other
        both = np.mean((delayed > 0) & abandoned)
        assert both == pytest.approx(fraction * fraction, abs=0.015)
    assert [client._first_poll_plan(n) for n in range(50)] == plans[:50]  # fixed by (seed, request)
