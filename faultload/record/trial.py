"""One trial as recorded: the one type a live run fills in and a bundle stores and loads back.

``TrialResult`` is what ``run_trial`` returns, what the checkers judge
(``checker.judge``), what the report shows and what ``store.bundle`` writes;
a loaded bundle is a ``StoredTrial`` (``store.bundle``), the same record plus
the budgets, verdicts and versions it was judged with. A load worker's own
result (``client.job.WorkerResult``) is folded in once the trial gathers it:
its history into the trial's, the rest into a ``WorkerSummary``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from faultload.model.trial import TrialConfig
from faultload.record.collapse import CollapseVerdict
from faultload.record.faults import FaultLog
from faultload.record.history import History
from faultload.record.samples import MonitorSamples
from faultload.record.serverlog import ServerLogSummary
from faultload.record.training import TrainingLog


@dataclass(frozen=True)
class WorkerSummary:
    """What a trial keeps of one load worker besides its history (merged into the trial's)."""

    worker: int
    submit_hist: dict[str, Any]  # Histogram.to_state()
    e2e_hist: dict[str, Any]
    error_examples: dict[str, str] = field(default_factory=dict)  # error class -> first message
    cpu_s: float = 0.0
    crashed: str | None = None
    address: str | None = None  # absent from a bundle written before they were kept
    node: str | None = None
    clock_offset_s: float | None = None
    clock_error_s: float | None = None
    client_impl: str | None = None  # a raw sampling worker's: "compiled" or "python"

    @classmethod
    def of(cls, worker: Any) -> "WorkerSummary":
        """From a ``WorkerResult`` (read by attribute: the client is not imported here)."""
        return cls(
            worker.worker,
            worker.submit_hist,
            worker.e2e_hist,
            dict(worker.error_examples),
            worker.cpu_s,
            worker.crashed,
            worker.address,
            worker.node,
            worker.clock_offset_s,
            worker.clock_error_s,
            getattr(worker, "client_impl", None),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WorkerSummary":
        return cls(**data)


@dataclass
class TrialResult:
    config: TrialConfig
    history: History
    workers: list[WorkerSummary] = field(default_factory=list)
    monitor: MonitorSamples | None = None
    router_stats: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    load_s: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    interrupted: bool = False
    error: str | None = None
    fault_log: FaultLog | None = None
    verdict: CollapseVerdict | None = None  # the watchdog's
    stopped_early: bool = False  # the watchdog ended the load (requests left are unfinished, not lost)
    cut_off: bool = False  # the load reached max_wall_s with requests pending (unfinished, not lost)
    # trial seconds when the harness stopped the load (collapse, Ctrl-C or wall bound); what
    # the client meets after it (resets of the requests cut off) is the harness's doing
    load_stopped_s: float | None = None
    server_log: ServerLogSummary | None = None
    start_epoch: float | None = None  # wall-clock time of the trial's t0, to place log lines
    topology: dict[str, str] = field(default_factory=dict)
    cleanup_errors: list[str] = field(default_factory=list)
    # nonce -> when the router completed it (trial seconds), for no_lost_results.
    router_completed_s: dict[int, float] = field(default_factory=dict)
    # nonce -> the router's completions of it, for the nonces it completed more than once (forwarded_once);
    # None: a bundle written before they were kept
    router_repeats: dict[int, int] | None = field(default_factory=dict)
    # phase -> wall seconds (model.trial.TRIAL_PHASES, in order, adding up to wall_s; see run_trial);
    # "judge" is added after them by checker.judge.judge, outside wall_s
    phases_s: dict[str, float] = field(default_factory=dict)
    # The training clients' calls (None: the shape has no training mix).
    training: TrainingLog | None = None
