"""Split a trial's load into the workers' jobs: sampling shares of the requests, and the training worker's."""

from __future__ import annotations

from faultload.client.job import WorkerJob
from faultload.client.training_bodies import encoding_for
from faultload.client.workers import source_ip
from faultload.model.trial import TrialConfig
from faultload.targets.server import BASE_MODEL


def _split(total: int, parts: int) -> list[tuple[int, int]]:
    base, extra = divmod(total, parts)
    out, first = [], 0
    for i in range(parts):
        count = base + (1 if i < extra else 0)
        out.append((first, count))
        first += count
    return out


def build_jobs(config: TrialConfig, base_url: str, sampling_session_id: str, salt: int,
               server_version: str | None = None) -> list[WorkerJob]:
    """The sampling workers' jobs, and one training worker's (the next source address) when the shape trains.

    The training worker's bodies are in the encoding the server's version takes (``encoding_for``).
    """
    shape = config.shape
    jobs = [
        WorkerJob(
            worker=i, base_url=base_url, source_ip=source_ip(i), sampling_session_id=sampling_session_id,
            base_model=BASE_MODEL, first=first, count=count, nonce_salt=salt, shape=shape, t0=0.0,
            deadline_s=config.max_wall_s,
        )
        for i, (first, count) in enumerate(_split(shape.requests, shape.workers))
        if count > 0
    ]
    if shape.training.enabled:
        n = len(jobs)
        jobs.append(WorkerJob(
            worker=n, base_url=base_url, source_ip=source_ip(n), sampling_session_id=sampling_session_id,
            base_model=BASE_MODEL, first=0, count=0, nonce_salt=salt, shape=shape, t0=0.0,
            deadline_s=config.max_wall_s, role="train", training_encoding=encoding_for(server_version)))
    return jobs
