"""What happened: one compact record per request, in numpy columns.

Each worker fills a ``History`` for its share of requests; the trial merges
them. Times are seconds since the trial's start (a shared monotonic clock),
NaN where the event never happened. The common case costs ~60 bytes per
request; nothing here holds result bodies.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable

import numpy as np


class Outcome(IntEnum):
    """How a request ended."""

    PENDING = 0  # never finished (trial stopped first)
    OK = 1  # result received and it matched the request
    FAILED = 2  # the server reported the request failed (HTTP 400/500 with an error)
    LOST = 3  # accepted, then the server no longer knew it (404)
    GAVE_UP = 4  # transport errors / poll limit exhausted
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


@dataclass
class History:
    """Columns of equal length, one row per request."""

    columns: dict[str, np.ndarray]

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
        return sum(col.nbytes for col in self.columns.values())

    @classmethod
    def merge(cls, parts: Iterable["History"]) -> "History":
        parts = list(parts)
        if not parts:
            return cls.empty(0)
        return cls({name: np.concatenate([p.columns[name] for p in parts]) for name in COLUMNS})

    def count(self, outcome: Outcome) -> int:
        return int(np.count_nonzero(self.columns["outcome"] == outcome))

    def save(self, path: str) -> None:
        """Write the columns as a compressed ``.npz`` for later study, at exactly ``path``.

        (Through a file object: given a name, numpy appends ``.npz`` when it is
        missing, and ``load(path)`` would then not find the file.)
        """
        with open(path, "wb") as fh:
            np.savez_compressed(fh, **self.columns)

    @classmethod
    def load(cls, path: str) -> "History":
        with np.load(path) as data:
            return cls({name: data[name] for name in COLUMNS})
