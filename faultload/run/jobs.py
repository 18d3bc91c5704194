"""Split a trial's load into the workers' jobs (sampling shares of the requests, and the training worker's),
and start the workers that run them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from faultload.client.compiled_pool import CompiledPool, runs_compiled
from faultload.client.job import WorkerJob
from faultload.client.training_bodies import encoding_for
from faultload.client.workers import WorkerPool, source_ip
from faultload.host.workspace import Workspace
from faultload.model.access import Access
from faultload.model.sdk import sdk_version
from faultload.model.shape import LoadShape
from faultload.model.trial import TrialConfig
from faultload.targets.install import sdk_folder, sdk_installed
from faultload.targets.server import BASE_MODEL


def _split(total: int, parts: int) -> list[tuple[int, int]]:
    base, extra = divmod(total, parts)
    out, first = [], 0
    for i in range(parts):
        count = base + (1 if i < extra else 0)
        out.append((first, count))
        first += count
    return out


def build_jobs(
    config: TrialConfig,
    base_url: str,
    sampling_session_id: str,
    salt: int,
    server_version: str | None = None,
    access: Access = Access(),
    client_binary: str | None = None,
) -> list[WorkerJob]:
    """The sampling workers' jobs, and one training worker's (the next source address) when the shape trains.

    The training worker's bodies are in the encoding the server's version takes (``encoding_for``); a raw
    client's sampling jobs run ``client_binary`` (the compiled client) when given.
    """
    shape = config.shape
    jobs = [
        WorkerJob(
            worker=i,
            base_url=base_url,
            source_ip=source_ip(i),
            sampling_session_id=sampling_session_id,
            base_model=BASE_MODEL,
            first=first,
            count=count,
            nonce_salt=salt,
            shape=shape,
            t0=0.0,
            deadline_s=config.max_wall_s,
            access=access,
            client_binary=client_binary if shape.client == "raw" else None,
        )
        for i, (first, count) in enumerate(_split(shape.requests, shape.workers))
        if count > 0
    ]
    if shape.training.enabled:
        n = len(jobs)
        jobs.append(
            WorkerJob(
                worker=n,
                base_url=base_url,
                source_ip=source_ip(n),
                sampling_session_id=sampling_session_id,
                base_model=BASE_MODEL,
                first=0,
                count=0,
                nonce_salt=salt,
                shape=shape,
                t0=0.0,
                deadline_s=config.max_wall_s,
                role="train",
                training_encoding=encoding_for(server_version),
                access=access,
            )
        )
    return jobs


def job_count(config: TrialConfig) -> int:
    """How many jobs :func:`build_jobs` makes of ``config``, known before the server is up (to spawn their workers)."""
    shape = config.shape
    sampling = sum(1 for _, count in _split(shape.requests, shape.workers) if count > 0)
    return sampling + (1 if shape.training.enabled else 0)


def spawn_early_workers(pools: Callable[[list[WorkerJob]], WorkerPool], config: TrialConfig) -> WorkerPool | None:
    """The trial's local workers spawned while its own stack starts (``pools.spawn_early``; None for a pool
    factory without it, e.g. Ray's): their start-up (~0.3 s each, ~0.9 s a training worker's) overlaps the
    server's (~2.5 s), and their jobs follow once the server is up."""
    spawn_early = getattr(pools, "spawn_early", None)
    return spawn_early(job_count(config)) if spawn_early is not None else None


def start_workers(
    early: WorkerPool | None, pools: Callable[[list[WorkerJob]], WorkerPool], jobs: list[WorkerJob]
) -> WorkerPool:
    """The trial's workers started and ready: the early-spawned ones given their jobs, else ``pools(jobs)``
    started now (and terminated if starting them fails: the caller has no pool to clean up then)."""
    if early is not None:
        early.assign(jobs)
        early.wait_ready()
        return early
    pool = pools(jobs)
    try:
        pool.start()
        pool.wait_ready()
    except BaseException:
        pool.terminate()
        raise
    return pool


class _CompiledPools:
    """A local ``WorkerPool`` factory that runs a trial whose every job is the compiled client's in a
    ``CompiledPool`` (no Python worker to start); any other trial in ``pools``. No early spawn: a binary starts
    in milliseconds once its job exists."""

    def __init__(self, pools: Callable[[list[WorkerJob]], WorkerPool]) -> None:
        self._pools = pools

    def __call__(self, jobs: list[WorkerJob]) -> Any:
        return CompiledPool(jobs) if runs_compiled(jobs) else self._pools(jobs)


def pools_for_client(
    pools: Callable[[list[WorkerJob]], WorkerPool], shape: LoadShape, binary: Path | None
) -> Callable[[list[WorkerJob]], Any]:
    """``pools``, or for a local raw-client trial without trainers whose compiled client is built (``binary``)
    the factory that runs it with no Python worker."""
    local = isinstance(pools, type) and issubclass(pools, WorkerPool)
    if binary is None or shape.client != "raw" or shape.training.enabled or not local:
        return pools
    return _CompiledPools(pools)


class _SdkPools:
    """A local ``WorkerPool`` factory whose workers run the SDK release installed in ``folder``."""

    def __init__(self, pools: type[WorkerPool], folder: str) -> None:
        self._pools, self._folder = pools, folder

    def __call__(self, jobs: list[WorkerJob]) -> WorkerPool:
        return self._pools(jobs, sdk_folder=self._folder)

    def spawn_early(self, count: int) -> WorkerPool:
        return self._pools.spawn_early(count, sdk_folder=self._folder)


def pools_for_sdk(
    pools: Callable[[list[WorkerJob]], WorkerPool], shape: LoadShape, workspace: Workspace
) -> Callable[[list[WorkerJob]], WorkerPool]:
    """``pools``, with its workers running the shape's SDK release when it names one; ValueError in one line for
    a release not installed, or workers that are not this machine's processes (Ray's)."""
    if not shape.sdk:
        return pools
    version = sdk_version(shape.sdk)
    if not sdk_installed(workspace.sdks, version):
        raise ValueError(f"{shape.sdk} is not installed in {workspace.sdks} (faultload setup --sdk {shape.sdk})")
    if not isinstance(pools, type) or not issubclass(pools, WorkerPool):
        raise ValueError(f"{shape.sdk}: an SDK release of its own runs on this machine's workers only, not --ray's")
    return _SdkPools(pools, str(sdk_folder(workspace.sdks, version)))
