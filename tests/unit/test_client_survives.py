"""What the SDK raises is a request's outcome, and a crashed worker still hands back its history.

TEST DOUBLES throughout, labelled where used: a stand-in for ``tinker.ServiceClient``
(raising as the real one does after its 300 s set-up window, or handing out a
sampling client whose ``sample_async`` raises), and a raw client whose result
check raises (a bug in our own code) against the stub server of
``tests/unit/test_raw_client.py``. The real SDK's set-up window is 300 real seconds,
too long for a unit test; it runs a shortened trial.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import numpy as np
import tinker

from faultload.client import sdk as sdk_client
from faultload.client import workers
from faultload.client.counters import COMPLETED, FAILED, SUBMITTED
from faultload.client.job import COUNTER_SLOTS, WorkerJob
from faultload.client.raw import RawClient
from faultload.model.shape import LoadShape
from faultload.record.history import ErrorClass, Outcome
from tests.unit.test_raw_client import SCALE, StubServer, make_job, serving

COUNT = 3


def _job() -> WorkerJob:
    shape = LoadShape(requests=COUNT, client="sdk")
    return WorkerJob(0, "http://127.0.0.1:9", None, "sess", "model", 0, COUNT, 5, shape, time.monotonic(), 30.0)


def _connection_error() -> tinker.APIConnectionError:
    """What the SDK raises once a connection error outlasts its retries (with httpx's cause, as for real)."""
    error = tinker.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/api/v1/client/config"))
    error.__cause__ = httpx.ConnectError("All connection attempts failed")
    return error


class _RefusingServiceClient:
    """TEST DOUBLE of tinker.ServiceClient whose set-up gave up (the issue's 300 s APIConnectionError)."""

    def __init__(self, **_: object) -> None:
        raise _connection_error()


class _LazyServiceClient:
    """TEST DOUBLE of tinker.ServiceClient as it is: construction sends nothing, the session holder
    is built on first use (create_sampling_client), and asking for ``holder`` again after that
    failed builds it again (another 300 s of set-up retries for the real one)."""

    def __init__(self, **_: object) -> None:
        self._session_holder = None
        self.builds = 0

    @property
    def holder(self) -> object:
        self.builds += 1
        raise _connection_error()

    def create_sampling_client(self, **_: object) -> object:
        return self.holder


class _FailingSampling:
    """TEST DOUBLE of a sampling client: each sample_async raises, or answers something unreadable."""

    def __init__(self) -> None:
        self.calls = 0

    async def sample_async(self, **_: object) -> object:
        self.calls += 1
        if self.calls == 2:
            return object()  # a "response" with no sequences: reading it raises
        raise _connection_error()


class _ServiceWithFailingSampling:
    """TEST DOUBLE of tinker.ServiceClient that sets up fine."""

    def __init__(self, **_: object) -> None:
        self.holder = None

    def create_sampling_client(self, **_: object) -> _FailingSampling:
        return _FailingSampling()


def _counters() -> list[int]:
    return [0] * len(COUNTER_SLOTS)


def test_sdk_set_up_failure_is_every_requests_outcome(monkeypatch):
    monkeypatch.setattr(sdk_client.tinker, "ServiceClient", _RefusingServiceClient)
    counters = _counters()
    client = sdk_client.prepare_sdk(_job(), counters, len(COUNTER_SLOTS))  # does not raise
    assert isinstance(client.setup_error, tinker.APIConnectionError)
    asyncio.run(client.start(time.monotonic(), lambda: False))
    h = client.history
    assert len(h) == COUNT
    assert (h["outcome"] == Outcome.REJECTED).all() and (h["error"] == ErrorClass.CONNECT).all()
    assert len(set(h["nonce"].tolist())) == COUNT and (h["server_id"] == 0).all()
    assert "APIConnectionError" in client.examples["connect"] and client.examples["connect"].startswith("sdk set-up")
    assert counters[SUBMITTED] == counters[FAILED] == COUNT


def test_a_lazy_set_up_that_failed_is_not_run_again_on_close(monkeypatch):
    monkeypatch.setattr(sdk_client.tinker, "ServiceClient", _LazyServiceClient)
    client = sdk_client.prepare_sdk(_job(), _counters(), len(COUNTER_SLOTS))
    service = client.service
    assert isinstance(client.setup_error, tinker.APIConnectionError) and service.builds == 1
    asyncio.run(client.start(time.monotonic(), lambda: False))
    assert service.builds == 1  # close() did not build the holder a second time
    assert (client.history["outcome"] == Outcome.REJECTED).all()


def test_sdk_exceptions_per_request_are_outcomes_not_a_crash(monkeypatch):
    monkeypatch.setattr(sdk_client.tinker, "ServiceClient", _ServiceWithFailingSampling)
    counters = _counters()
    client = sdk_client.prepare_sdk(_job(), counters, len(COUNTER_SLOTS))
    asyncio.run(client.start(time.monotonic(), lambda: False))
    h = client.history
    outcomes = sorted(Outcome(o) for o in h["outcome"])
    # Never accepted (no server id on the wire): the connection errors are rejections; the
    # unreadable answer is corrupt. Nothing is left pending, nothing raised out of start().
    assert outcomes == sorted([Outcome.REJECTED, Outcome.REJECTED, Outcome.CORRUPT])
    assert counters[FAILED] == COUNT and counters[COMPLETED] == 0
    assert "decode" in client.examples and "connect" in client.examples


def test_a_crashed_worker_keeps_its_clients_history(monkeypatch):
    """A bug in our own result check (TEST DOUBLE: _judge raises on the second result) crashes the
    raw worker; the worker's result still carries the history: one OK, the rest pending."""
    real_judge = RawClient._judge
    judged = []

    def judge(self, row, nonce, ctype, payload):
        judged.append(row)
        if len(judged) == 2:
            raise RuntimeError("a bug in the harness")
        return real_judge(self, row, nonce, ctype, payload)

    monkeypatch.setattr(RawClient, "_judge", judge)
    shape = LoadShape(requests=COUNT, result_tokens=8, time_scale=SCALE, max_outstanding=1)

    async def main():
        async with serving(StubServer()) as url:
            job = make_job(url, shape, COUNT)
            clients: list = []
            try:
                await asyncio.wait_for(workers._run(job, None, threading.Event().is_set, None, clients.append), 30.0)
            except Exception as exc:
                return workers._crash_result(job, clients, exc)
        raise AssertionError("the worker did not crash")

    result = asyncio.run(main())
    assert result.crashed.startswith("RuntimeError('a bug in the harness')")
    assert len(result.history) == COUNT
    assert Outcome(result.history["outcome"][judged[0]]) == Outcome.OK
    assert (result.history["outcome"] == Outcome.PENDING).sum() == COUNT - 1
    assert result.history.attempts["row"].size >= 2  # the attempt rows were frozen too
    assert np.isfinite(result.history["done"][judged[0]])
