"""The compiled client run with no Python worker (``client.compiled_pool``), and when a trial runs it that way.

Against the STUB server of ``test_raw_client`` (a TEST DOUBLE of a Tinker API server's sampling path), served
from a thread of its own while the pool runs as a trial runs it: start, go, wait, collect.
"""

from __future__ import annotations

import asyncio
import dataclasses
import glob
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from conftest import require_compiled_client
from test_raw_client import StubServer, make_job, serving

from faultload.client.compiled_pool import CompiledPool, runs_compiled
from faultload.client.compiled_run import CompiledClientError
from faultload.client.workers import WorkerPool
from faultload.model.shape import LoadShape
from faultload.model.training import TrainingMix
from faultload.record.history import Outcome
from faultload.run.jobs import pools_for_client

BOUND_S = 60.0


class ServedStub:
    """The stub listening from a thread of its own (its own event loop) while inside."""

    def __init__(self, stub: StubServer) -> None:
        self.stub, self.url = stub, ""
        self._ready, self._done = threading.Event(), None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    async def _serve(self) -> None:
        self._done = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        async with serving(self.stub) as url:
            self.url = url
            self._ready.set()
            await self._done.wait()

    def __enter__(self) -> "ServedStub":
        self._thread.start()
        assert self._ready.wait(BOUND_S)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._done.set)
        self._thread.join(BOUND_S)


def _jobs(url: str, binary: Path, shape: LoadShape, counts: list[int]) -> list:
    jobs, first = [], 0
    for worker, count in enumerate(counts):
        job = make_job(url, shape, count)
        jobs.append(dataclasses.replace(job, worker=worker, first=first, client_binary=str(binary)))
        first += count
    return jobs


def _run(pool: CompiledPool, stop_when=lambda pool: False) -> list:
    pool.start()
    pool.go(time.monotonic())
    deadline = time.monotonic() + BOUND_S
    stopped = False
    while not pool.finished() and time.monotonic() < deadline:
        pool.poll(0.05)
        if not stopped and stop_when(pool):
            pool.stop()
            stopped = True
    return pool.collect(timeout_s=BOUND_S)


def test_a_pool_of_compiled_clients_runs_every_request_and_hands_back_each_history() -> None:
    binary = require_compiled_client()
    shape = LoadShape(requests=10, result_tokens=8, time_scale=0.05, workers=2)
    with ServedStub(StubServer()) as served:
        pool = CompiledPool(_jobs(served.url, binary, shape, [6, 4]))
        results = _run(pool)
    assert [r.worker for r in results] == [0, 1]
    assert [len(r.history) for r in results] == [6, 4]
    for r in results:
        assert r.crashed is None and r.client_impl == "compiled" and 0 < r.startup_cpu_s < r.cpu_s
        assert (r.history["outcome"] == Outcome.OK).all()
    nonces = np.concatenate([r.history["nonce"] for r in results])
    assert len(set(nonces.tolist())) == 10
    assert pool.live()["completed"] == 10 and pool.live()["in_flight"] == 0
    assert not [p for p in pool.pids() if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]


def test_stop_leaves_what_is_unfinished_pending_and_the_processes_gone() -> None:
    binary = require_compiled_client()
    shape = LoadShape(requests=4, result_tokens=8, time_scale=1.0)
    with ServedStub(StubServer(poll_default="hold")) as served:
        pool = CompiledPool(_jobs(served.url, binary, shape, [4]))
        results = _run(pool, stop_when=lambda p: p.live()["accepted"] == 4)
    assert results[0].history.count(Outcome.PENDING) == 4
    assert (results[0].history["server_id"] > 0).all()
    assert pool.live()["in_flight"] == 0


def test_a_binary_that_does_not_start_is_one_error_and_leaves_nothing(tmp_path: Path) -> None:
    fake = tmp_path / "faultload-client-broken"
    fake.write_text("#!/bin/sh\necho 'faultload-client: error: broken on purpose' >&2\nexit 2\n")
    fake.chmod(0o755)
    before = set(glob.glob(f"{tempfile.gettempdir()}/faultload-client-*"))
    pool = CompiledPool(_jobs("http://127.0.0.1:1", fake, LoadShape(requests=2), [1, 1]))
    with pytest.raises(CompiledClientError, match="broken on purpose"):
        pool.start()
    assert set(glob.glob(f"{tempfile.gettempdir()}/faultload-client-*")) == before


def test_only_a_local_raw_trial_without_trainers_with_the_binary_built_runs_in_the_pool(tmp_path: Path) -> None:
    binary = tmp_path / "faultload-client-x"
    raw = LoadShape(requests=2)
    assert pools_for_client(WorkerPool, raw, binary) is not WorkerPool
    assert pools_for_client(WorkerPool, raw, None) is WorkerPool
    assert pools_for_client(WorkerPool, LoadShape(requests=2, client="raw-python"), binary) is WorkerPool
    training = LoadShape(requests=2, training=TrainingMix(trainers=1, steps=1))
    assert pools_for_client(WorkerPool, training, binary) is WorkerPool
    ray_pools = lambda jobs: None  # noqa: E731 (a Ray pool factory: left alone)
    assert pools_for_client(ray_pools, raw, binary) is ray_pools
    jobs = _jobs("http://127.0.0.1:1", binary, raw, [1, 1])
    assert runs_compiled(jobs) and not runs_compiled([dataclasses.replace(jobs[0], client_binary=None)])
