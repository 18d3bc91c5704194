"""What happened: one compact record per request, in numpy columns.

Each worker fills a ``History`` for its share of requests; the trial merges
them. Times are seconds since the trial's start (a shared monotonic clock),
NaN where the event never happened. The common case costs ~60 bytes per
request; nothing here holds result bodies.
"""

from __future__ import annotations

import array
import hashlib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Iterable

import numpy as np


class Outcome(IntEnum):
    """How a request ended."""

    PENDING = 0  # never finished (trial stopped first)
    OK = 1  # result received and it matched the request
    FAILED = 2  # the server reported the request failed (HTTP 400/500 with an error)
    LOST = 3  # accepted, then the server no longer knew it (404)
    GAVE_UP = 4  # accepted, and the client itself gave up (the SDK: its stuck detection); never the harness's stop
    REJECTED = 5  # asample never accepted
    CORRUPT = 6  # a result arrived but did not match the request (integrity)


class ErrorClass(IntEnum):
    """A small, stable set of error classes (the report's ``errors`` keys)."""

    NONE = 0
    CONNECT = 1  # connection refused / could not connect
    RESET = 2  # connection reset or closed mid-request
    TIMEOUT = 3  # client-side timeout
    HTTP_404 = 4
    HTTP_4XX = 5
    HTTP_5XX = 6
    SERVER_FAILED = 7  # a result that is the server's error report
    INTEGRITY = 8
    DECODE = 9
    OTHER = 10

    @property
    def key(self) -> str:
        return self.name.lower()


COLUMNS: dict[str, np.dtype] = {
    "nonce": np.dtype(np.int64),
    "server_id": np.dtype(np.int64),
    "submit_start": np.dtype(np.float64),
    "submit_end": np.dtype(np.float64),
    "done": np.dtype(np.float64),
    "result_bytes": np.dtype(np.uint32),
    "attempts": np.dtype(np.uint16),  # every HTTP attempt: submits + polls
    "submit_retries": np.dtype(np.uint16),
    "repolls": np.dtype(np.uint16),  # polls after the first
    "transport_errors": np.dtype(np.uint16),
    "worker": np.dtype(np.uint8),
    "outcome": np.dtype(np.uint8),
    "error": np.dtype(np.uint8),  # last ErrorClass seen
}


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def server_id_key(request_id: str) -> int:
    """The ``server_id`` column's value for the request id a server gave: the id itself when it is an integer
    (SkyRL's, signed 64-bit, which its log lines name), else a non-zero 62-bit digest of it (TuFT's UUIDs);
    0 means "no id" in the column."""
    try:
        value = int(request_id)
    except ValueError:
        value = None
    if value is None or not _INT64_MIN <= value <= _INT64_MAX:  # an integer past int64 is keyed as text is
        value = int.from_bytes(hashlib.blake2b(request_id.encode(), digest_size=8).digest(), "big") >> 2
    return value or 1


MAX_COUNT = 65535  # the per-request counters are uint16: they saturate, never wrap


def peak_overlap(starts: np.ndarray, ends: np.ndarray) -> int:
    """The most of the intervals ``[start, end)`` open at one time (an end at a start's time closes first)."""
    if starts.size == 0:
        return 0
    times = np.concatenate([starts, ends])
    steps = np.concatenate([np.ones(starts.size), -np.ones(ends.size)])
    order = np.lexsort((steps, times))
    return int(np.cumsum(steps[order]).max())


def bump_count(column: np.ndarray, row: int) -> None:
    """One more of a per-request count; a retry loop with no count limit may pass 65535 in a long trial."""
    if column[row] < MAX_COUNT:
        column[row] += 1


class AttemptKind(IntEnum):
    SUBMIT = 0  # an asample POST
    POLL = 1  # a retrieve_future POST
    ABANDONED = 2  # a poll the client dropped on purpose (--abandon-polls)


# One row per HTTP attempt (~13 bytes): which request, what, when, and how it ended:
# the HTTP status, or minus the ErrorClass of a transport error, or TRY_AGAIN.
# A poll answered 200 with the SDK's TryAgainResponse (``{"type": "try_again"}``): the server's "not yet" at
# the end of its hold (TuFT's; SkyRL's is a 408), recorded apart from a 200 that carried a result.
TRY_AGAIN = 1200
ATTEMPT_COLUMNS: dict[str, np.dtype] = {
    "row": np.dtype(np.int32),
    "kind": np.dtype(np.uint8),
    "start": np.dtype(np.float32),
    "end": np.dtype(np.float32),
    "status": np.dtype(np.int16),
}
_ARRAY_CODES = {"row": "i", "kind": "B", "start": "f", "end": "f", "status": "h"}


class AttemptRecorder:
    """Appends attempts into typed arrays (no Python object per attempt)."""

    def __init__(self) -> None:
        self._cols: dict[str, array.array[Any]] = {name: array.array(code) for name, code in _ARRAY_CODES.items()}

    def add(self, row: int, kind: AttemptKind, start: float, end: float, status: int) -> None:
        c = self._cols
        c["row"].append(row)
        c["kind"].append(kind)
        c["start"].append(start)
        c["end"].append(end)
        c["status"].append(status)

    def columns(self) -> dict[str, np.ndarray]:
        return {name: np.frombuffer(col, dtype=ATTEMPT_COLUMNS[name]).copy() for name, col in self._cols.items()}


def empty_attempts() -> dict[str, np.ndarray]:
    return {name: np.zeros(0, dtype=dtype) for name, dtype in ATTEMPT_COLUMNS.items()}


@dataclass
class History:
    """Columns of equal length, one row per request; and one row per HTTP attempt."""

    columns: dict[str, np.ndarray]
    attempts: dict[str, np.ndarray] = field(default_factory=empty_attempts)

    @classmethod
    def empty(cls, size: int) -> "History":
        cols = {name: np.zeros(size, dtype=dtype) for name, dtype in COLUMNS.items()}
        for name in ("submit_start", "submit_end", "done"):
            cols[name][:] = np.nan
        cols["server_id"][:] = 0
        return cls(cols)

    def __len__(self) -> int:
        return len(self.columns["nonce"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @property
    def nbytes(self) -> int:
        return sum(col.nbytes for col in self.columns.values()) + sum(c.nbytes for c in self.attempts.values())

    @classmethod
    def merge(cls, parts: Iterable["History"]) -> "History":
        """Concatenate workers' histories; attempt rows are re-pointed at the merged rows."""
        parts = list(parts)
        if not parts:
            return cls.empty(0)
        columns = {name: np.concatenate([p.columns[name] for p in parts]) for name in COLUMNS}
        offsets = np.cumsum([0] + [len(p) for p in parts[:-1]])
        attempts = {name: np.concatenate([p.attempts[name] for p in parts]) for name in ATTEMPT_COLUMNS}
        attempts["row"] = np.concatenate([p.attempts["row"] + off for p, off in zip(parts, offsets)]).astype(np.int32)
        return cls(columns, attempts)

    def peak_in_flight(self) -> int:
        """The client's exact peak of sample requests in flight: from its submit's start to its end (an unfinished
        one to the trial's end). Exact where the monitor's 0.5 s samples miss a short peak."""
        started = np.isfinite(self.columns["submit_start"])
        done = self.columns["done"][started]
        return peak_overlap(self.columns["submit_start"][started], np.where(np.isfinite(done), done, np.inf))

    def count(self, outcome: Outcome) -> int:
        return int(np.count_nonzero(self.columns["outcome"] == outcome))

    def save(self, path: str) -> None:
        """Write the columns as a compressed ``.npz`` for later study, at exactly ``path``.

        (Through a file object: given a name, numpy appends ``.npz`` when it is
        missing, and ``load(path)`` would then not find the file.)
        """
        # Any: numpy's stub would read a str-keyed dict of arrays as maybe filling its allow_pickle (numpy >= 2.1)
        arrays: dict[str, Any] = {**self.columns, **{f"attempt_{name}": col for name, col in self.attempts.items()}}
        with open(path, "wb") as fh:
            np.savez_compressed(fh, **arrays)

    @classmethod
    def load(cls, path: str) -> "History":
        with np.load(path) as data:
            attempts = (
                {name: data[f"attempt_{name}"] for name in ATTEMPT_COLUMNS}
                if "attempt_row" in data.files
                else empty_attempts()
            )
            return cls({name: data[name] for name in COLUMNS}, attempts)
