"""A trial's load workers as Ray actors, behind the local ``WorkerPool``'s interface.

The trial starts, watches, stops and collects them exactly as it does local
processes. What differs, and how:

- **Clock.** A worker stamps its history relative to the ``t0`` it is given,
  on its own node's monotonic clock. Each actor's offset from the driver's
  clock is measured before the load (``CLOCK_SAMPLES`` round trips; the one
  with the shortest round trip wins, its offset = the actor's reading minus
  the round trip's midpoint, error at most half that round trip), and the
  actor gets ``t0 + offset``: its history is then on the trial's clock.
  Both are in the report (``workers[].clock_offset_s``/``clock_error_s``).
- **Live counters.** A thread asks every actor for its counters every
  ``LIVE_EVERY_S``; ``live()`` returns the last answers.
- **A dead actor or node.** Its result never comes: the pool hands back its
  requests as ``unfinished`` rows (pending, never accepted as far as the
  trial knows) and names the worker and node in ``crashed``.
- **Clean-up.** ``terminate`` kills every actor the pool started; Ray also
  kills them if this driver dies (they are owned by it, not detached).
"""

from __future__ import annotations

import threading
import time
from types import ModuleType
from typing import Any

import numpy as np

from faultload.client.job import COUNTER_SLOTS, WorkerJob, WorkerResult, unfinished_result
from faultload.cluster.actor import LoadWorker
from faultload.cluster.nodes import Node, pinned

READY_TIMEOUT_S = 120.0  # an actor's process start-up and client set-up on a busy node
CLOCK_SAMPLES = 5
LIVE_EVERY_S = 0.5
LIVE_TIMEOUT_S = 2.0
ACTOR_CONCURRENCY = 4  # run, live and stop at once


class RayWorkerPool:
    """Start, watch, stop and collect a trial's load workers on Ray actors, one per job."""

    def __init__(self, ray: ModuleType, placed: list[tuple[WorkerJob, Node]]) -> None:
        self._ray = ray
        self.jobs = [job for job, _ in placed]
        self.nodes = [node for _, node in placed]
        self.actors: list[Any] = []
        self.results: list[WorkerResult] = []
        self.clock_offsets_s = [0.0] * len(placed)
        self.clock_errors_s = [float("nan")] * len(placed)
        self._ready_refs: list[Any] = []
        self._run_refs: dict[Any, int] = {}
        self._pids: list[int] = []
        self._live = np.zeros((len(placed), len(COUNTER_SLOTS)), dtype=np.int64)
        self.live_errors: dict[int, str] = {}  # actor index -> the first error reading its live counters
        self._live_stop = threading.Event()
        self._live_thread: threading.Thread | None = None

    def start(self) -> None:
        actor_cls = self._ray.remote(LoadWorker)
        for job, node in zip(self.jobs, self.nodes):
            actor = actor_cls.options(
                **pinned(self._ray, node.node_id),
                max_concurrency=ACTOR_CONCURRENCY,
                name=f"faultload-worker-{job.nonce_salt}-{job.worker}",
            ).remote(job)
            self.actors.append(actor)
        self._ready_refs = [actor.prepare.remote() for actor in self.actors]

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        ready, _ = self._ray.wait(self._ready_refs, num_returns=len(self._ready_refs), timeout=timeout_s)
        if len(ready) < len(self._ready_refs):
            raise RuntimeError(
                f"only {len(ready)}/{len(self.actors)} load workers started on the Ray cluster in {timeout_s:.0f}s"
            )
        try:
            self._pids = self._ray.get(self._ready_refs)
        except Exception as exc:  # RayActorError: an actor died starting
            raise RuntimeError(f"a load worker died starting on the Ray cluster: {_first_line(exc)}") from None
        for i, actor in enumerate(self.actors):
            self.clock_offsets_s[i], self.clock_errors_s[i] = self._clock_offset(actor)

    def _clock_offset(self, actor: Any) -> tuple[float, float]:
        best = (0.0, float("inf"))
        for _ in range(CLOCK_SAMPLES):
            sent = time.monotonic()
            theirs = self._ray.get(actor.clock.remote(), timeout=LIVE_TIMEOUT_S * 5)
            back = time.monotonic()
            if (back - sent) / 2 < best[1]:
                best = (theirs - (sent + back) / 2, (back - sent) / 2)
        return best

    def go(self, t0: float) -> None:
        for i, actor in enumerate(self.actors):
            self._run_refs[actor.run.remote(t0 + self.clock_offsets_s[i])] = i
        self._live_thread = threading.Thread(target=self._live_loop, name="faultload-ray-live", daemon=True)
        self._live_thread.start()

    def _live_loop(self) -> None:
        while not self._live_stop.wait(LIVE_EVERY_S):
            refs = [actor.live.remote() for actor in self.actors]
            ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=LIVE_TIMEOUT_S)
            for i, ref in enumerate(refs):
                if ref in ready:
                    try:
                        self._live[i] = self._ray.get(ref)
                    except Exception as exc:  # a dead actor keeps its last counters; its run's result says why
                        self.live_errors.setdefault(i, _first_line(exc))

    def live(self) -> dict[str, int]:
        """Totals of the actors' last reported counters."""
        return dict(zip(COUNTER_SLOTS, (int(v) for v in self._live.sum(axis=0))))

    def stop(self) -> None:
        for actor in self.actors:
            actor.stop.remote()

    def alive(self) -> bool:
        return bool(self._run_refs)

    def poll(self, timeout_s: float) -> None:
        """Take the results of the runs that ended (a dead actor's as its unfinished requests)."""
        if not self._run_refs:
            time.sleep(timeout_s)
            return
        ready, _ = self._ray.wait(list(self._run_refs), num_returns=1, timeout=timeout_s)
        for ref in ready:
            self._take(ref)

    def _take(self, ref: Any) -> None:
        i = self._run_refs.pop(ref)
        job, node = self.jobs[i], self.nodes[i]
        try:
            result = self._ray.get(ref)
        except Exception as exc:  # RayActorError / ActorDiedError / a lost node
            seen = f" (its live counters first failed: {self.live_errors[i]})" if i in self.live_errors else ""
            result = unfinished_result(job, f"on node {node.address}: the actor died: {_first_line(exc)}{seen}")
        result.node = node.address
        result.clock_offset_s, result.clock_error_s = self.clock_offsets_s[i], self.clock_errors_s[i]
        self.results.append(result)

    def finished(self) -> bool:
        return len(self.results) >= len(self.actors)

    def collect(self, timeout_s: float) -> list[WorkerResult]:
        """Gather each run's result (bounded); a run still out at the deadline counts as its actor's death."""
        deadline = time.monotonic() + timeout_s
        while not self.finished() and time.monotonic() < deadline:
            self.poll(0.5)
        for ref in list(self._run_refs):  # their actors are killed below
            i = self._run_refs.pop(ref)
            result = unfinished_result(
                self.jobs[i], f"on node {self.nodes[i].address}: no result in {timeout_s:.0f}s after the stop"
            )
            result.node = self.nodes[i].address
            self.results.append(result)
        self.terminate()
        return sorted(self.results, key=lambda r: r.worker)

    def terminate(self) -> None:
        """Kill every actor this pool started (idempotent)."""
        self._live_stop.set()
        if self._live_thread is not None:
            self._live_thread.join(timeout=LIVE_TIMEOUT_S + 1.0)
        for actor in self.actors:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # already dead
                pass

    def pids(self) -> list[int]:
        return list(self._pids)


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__
