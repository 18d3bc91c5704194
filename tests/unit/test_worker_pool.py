"""Load workers spawned before their jobs exist (a trial's own stack still starting), and the job count
that spawning relies on. Real spawned worker processes; jobs of 0 requests, so no server is needed."""

from __future__ import annotations

import os
import signal
import time

import pytest

from faultload.client.job import WorkerJob
from faultload.client.workers import WorkerPool, source_ip
from faultload.model.shape import LoadShape
from faultload.model.training import TrainingMix
from faultload.model.trial import TrialConfig
from faultload.run.jobs import build_jobs, job_count


def _empty_job(worker: int) -> WorkerJob:
    return WorkerJob(
        worker=worker,
        base_url="http://127.0.0.1:9",
        source_ip=source_ip(worker),
        sampling_session_id="s",
        base_model="m",
        first=0,
        count=0,
        nonce_salt=1,
        shape=LoadShape(requests=1),
        t0=0.0,
        deadline_s=30.0,
    )


def test_early_spawned_workers_run_the_jobs_assigned_to_them_later() -> None:
    pool = WorkerPool.spawn_early(2)
    try:
        pool.assign([_empty_job(0), _empty_job(1)])
        pool.wait_ready(timeout_s=60.0)
        pool.go(time.monotonic())
        results = pool.collect(timeout_s=60.0)
    finally:
        pool.terminate()
    assert [(r.worker, r.address, r.crashed) for r in results] == [(0, "127.0.1.1", None), (1, "127.0.1.2", None)]
    assert not pool.alive()


def test_a_ctrl_c_while_early_workers_still_import_does_not_kill_them() -> None:
    """The terminal's Ctrl-C reaches the whole group, workers too, possibly before they ignore it."""
    pool = WorkerPool.spawn_early(1)
    try:
        for pid in pool.pids():
            os.kill(pid, signal.SIGINT)
        pool.assign([_empty_job(0)])
        pool.wait_ready(timeout_s=60.0)
        pool.go(time.monotonic())
        results = pool.collect(timeout_s=60.0)
    finally:
        pool.terminate()
    assert [(r.worker, r.crashed) for r in results] == [(0, None)]


def test_early_spawned_workers_never_given_a_job_end_with_the_pool() -> None:
    """A trial whose stack failed to start terminates its early workers: none is left behind."""
    pool = WorkerPool.spawn_early(2)
    pool.terminate()
    assert len(pool.processes) == 2 and not pool.alive()


def test_assign_wants_one_job_per_early_worker() -> None:
    pool = WorkerPool.spawn_early(1)
    try:
        with pytest.raises(ValueError, match="2 jobs for 1 early-spawned workers"):
            pool.assign([_empty_job(0), _empty_job(1)])
    finally:
        pool.terminate()
    assert not pool.alive()


@pytest.mark.parametrize(
    ("requests", "workers", "trainers"),
    [
        (1024, 2, 0),
        (1, 4, 0),
        (3, 2, 4),
        (0, 1, 2),
        (131_072, 7, 0),
    ],
)
def test_job_count_is_how_many_jobs_build_jobs_makes(requests: int, workers: int, trainers: int) -> None:
    training = TrainingMix(trainers=trainers, steps=1) if trainers else TrainingMix()
    config = TrialConfig("skyrl==0.4.0", LoadShape(requests=requests, workers=workers, training=training))
    assert job_count(config) == len(build_jobs(config, "http://127.0.0.1:9", "s", 1, "0.4.0"))
