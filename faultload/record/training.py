"""What the training clients did: one row per training call, in numpy columns.

A row is one create_model, forward_backward or optim_step (submitted, its
future awaited and its result checked) or one session_heartbeat. Times are
trial seconds (the shared clock), NaN where the event never happened. The
outcome reuses the sampling history's ``Outcome`` and ``ErrorClass``, so a lost
or corrupted training future reads as a sample's would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Iterable, Mapping

import numpy as np

from faultload.record.history import ErrorClass, Outcome


class TrainingOp(IntEnum):
    CREATE_MODEL = 0
    FORWARD_BACKWARD = 1
    OPTIM_STEP = 2
    HEARTBEAT = 3

    @property
    def key(self) -> str:
        return self.name.lower()


TRAINING_COLUMNS: dict[str, np.dtype] = {
    "op": np.dtype(np.uint8),
    "trainer": np.dtype(np.uint16),
    "step": np.dtype(np.uint32),
    "start": np.dtype(np.float64),  # the call's first byte
    "accepted": np.dtype(np.float64),  # its future's id received (heartbeats: = done)
    "done": np.dtype(np.float64),  # its result (or the heartbeat's answer) received and checked
    "attempts": np.dtype(np.uint16),  # HTTP attempts: submits + polls
    "outcome": np.dtype(np.uint8),
    "error": np.dtype(np.uint8),  # last ErrorClass seen
    "status": np.dtype(np.int16),  # last HTTP status (0: none)
}


class TrainingRecorder:
    """Rows appended as a client ends each call (a few thousand per trial: Python lists are enough)."""

    def __init__(self) -> None:
        self._rows: list[tuple[Any, ...]] = []
        self.examples: dict[str, str] = {}  # "op:error" -> first message

    def add(
        self,
        op: TrainingOp,
        trainer: int,
        step: int,
        start: float,
        accepted: float,
        done: float,
        attempts: int,
        outcome: Outcome,
        error: ErrorClass = ErrorClass.NONE,
        status: int = 0,
        message: str = "",
    ) -> None:
        self._rows.append((op, trainer, step, start, accepted, done, min(attempts, 65535), outcome, error, status))
        if error != ErrorClass.NONE and message:
            self.examples.setdefault(f"{op.key}:{error.key}", message[:400])

    def log(self) -> "TrainingLog":
        return TrainingLog.from_rows(self._rows, self.examples)


@dataclass
class TrainingLog:
    """Columns of equal length (``TRAINING_COLUMNS``), plus the first error message per op and class."""

    columns: dict[str, np.ndarray]
    examples: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_rows(cls, rows: list[tuple[Any, ...]], examples: Mapping[str, str] | None = None) -> "TrainingLog":
        names = list(TRAINING_COLUMNS)
        cols = {name: np.array([r[i] for r in rows], dtype=TRAINING_COLUMNS[name]) for i, name in enumerate(names)}
        return cls(cols, dict(examples or {}))

    @classmethod
    def empty(cls) -> "TrainingLog":
        return cls.from_rows([])

    def __len__(self) -> int:
        return len(self.columns["op"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @classmethod
    def merge(cls, parts: Iterable["TrainingLog"]) -> "TrainingLog":
        parts = list(parts)
        if not parts:
            return cls.empty()
        examples: dict[str, str] = {}
        for part in parts:
            for key, text in part.examples.items():
                examples.setdefault(key, text)
        return cls({name: np.concatenate([p.columns[name] for p in parts]) for name in TRAINING_COLUMNS}, examples)

    def of(self, op: TrainingOp) -> np.ndarray:
        """A boolean mask of ``op``'s rows."""
        return np.asarray(self.columns["op"] == op)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: each column a list (NaN as null), exact for :meth:`from_dict`."""
        out: dict[str, Any] = {}
        for name, col in self.columns.items():
            out[name] = [None if v != v else v for v in col.tolist()] if col.dtype.kind == "f" else col.tolist()
        return {"columns": out, "examples": dict(self.examples)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrainingLog":
        cols = data["columns"]
        unknown = sorted(set(cols) - set(TRAINING_COLUMNS))
        if unknown:
            raise ValueError(f"training log: unknown column(s) {', '.join(unknown)}")
        out = {}
        for name, dtype in TRAINING_COLUMNS.items():
            values = cols.get(name, [])
            if dtype.kind == "f":
                values = [np.nan if v is None else v for v in values]
            out[name] = np.array(values, dtype=dtype)
        if len({len(c) for c in out.values()}) > 1:
            raise ValueError("training log: columns of different lengths")
        return cls(out, dict(data.get("examples", {})))


def summarize(log: TrainingLog) -> dict[str, Any]:
    """The report's ``training`` section: per op, requested/completed/failed/lost/corrupt/unfinished and latency."""
    out: dict[str, Any] = {}
    outcome = log["outcome"]
    for op in TrainingOp:
        mask = log.of(op)
        rows = outcome[mask]
        latency = (log["done"] - log["start"])[mask & (outcome == Outcome.OK)]
        errors = log["error"][mask]
        out[op.key] = {
            "requested": int(mask.sum()),
            "completed": int((rows == Outcome.OK).sum()),
            "failed": int(np.isin(rows, (Outcome.FAILED, Outcome.REJECTED)).sum()),
            "lost": int(np.isin(rows, (Outcome.LOST, Outcome.GAVE_UP)).sum()),
            "corrupt": int((rows == Outcome.CORRUPT).sum()),
            "unfinished": int((rows == Outcome.PENDING).sum()),
            "errors": {
                ErrorClass(int(e)).key: int(n) for e, n in zip(*np.unique(errors[errors > 0], return_counts=True))
            },
            "latency_s": _percentiles(latency),
        }
    return out


def _percentiles(values: np.ndarray) -> dict[str, float | None]:
    if values.size == 0:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(values.max())}
