"""The value a load worker receives, and the value it hands back.

Both cross a process boundary (pickled), so they are plain data. A worker
owns the request indices ``[first, first + count)`` of the trial.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from faultload.model.access import Access
from faultload.model.shape import LoadShape
from faultload.model.tokens import NONCE_INDEX_BITS
from faultload.record.history import History
from faultload.record.training import TrainingLog


@dataclass(frozen=True)
class WorkerJob:
    worker: int
    base_url: str  # where the load goes (the edge proxy, or the server itself)
    source_ip: str | None  # bind outgoing sockets here (distinct 127.x.y.z per worker)
    sampling_session_id: str
    base_model: str
    first: int
    count: int
    nonce_salt: int
    shape: LoadShape
    t0: float  # trial start on the shared monotonic clock
    deadline_s: float  # stop issuing and abandon what is left after this (trial seconds)
    # "sample": the sampling client over requests [first, first + count); "train": the shape's
    # training mix (faultload.client.training), whose bodies go in this encoding (training_bodies).
    role: str = "sample"
    training_encoding: str = "proto"
    access: Access = Access()  # the server's key, extra headers and TLS trust (its repr hides the secrets)
    # the compiled client's binary, when a raw sampling job runs it (faultload.client.compiled); None: Python
    client_binary: str | None = None

    def nonce(self, index: int) -> int:
        return (self.nonce_salt << NONCE_INDEX_BITS) | index


@dataclass
class WorkerResult:
    worker: int
    history: History
    submit_hist: dict  # Histogram.to_state()
    e2e_hist: dict
    error_examples: dict[str, str] = field(default_factory=dict)  # error class -> first message
    cpu_s: float = 0.0  # this worker process's user+system CPU (its compiled client's included)
    client_cpu_s: float = 0.0  # of which the compiled client's process
    client_impl: str | None = None  # a raw sampling worker's: "compiled" or "python"
    startup_cpu_s: float = 0.0  # of which before it was ready (interpreter, imports, client set-up)
    crashed: str | None = None  # set when the worker itself failed
    training: TrainingLog | None = None  # a training worker's calls (None for a sampling worker)
    address: str | None = None  # the source address its sockets were bound to
    node: str | None = None  # the Ray node it ran on (None: a process of this machine's trial)
    clock_offset_s: float | None = None  # that node's monotonic clock minus the trial's (Ray only)
    clock_error_s: float | None = None  # the offset's bound: half the shortest measuring round trip


# Slots per worker in the shared live-counter array.
COUNTER_SLOTS = (
    "submitted",
    "accepted",
    "completed",
    "failed",
    "in_flight",
    "attempts",
    "connections_peak",
    "poll_timeouts",
)


def unfinished_result(job: WorkerJob, why: str) -> WorkerResult:
    """A worker whose result never came back: its requests as pending rows, never accepted."""
    history = History.empty(job.count)
    history["nonce"][:] = [job.nonce(job.first + i) for i in range(job.count)]
    history["worker"][:] = job.worker
    return WorkerResult(job.worker, history, {}, {}, crashed=why, address=job.source_ip)
