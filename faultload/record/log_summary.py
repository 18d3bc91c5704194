"""What a server log's classification found, as data: its error classes and faultload's own notes.

Built by :mod:`faultload.record.serverlog`; stored in bundles (``to_dict(exact=True)``) and read back.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

NO_REQUEST_ID = np.iinfo(np.int64).min
# What faultload's own observers write into the server's log (targets/skyrl_dbpool.py): evidence the report and
# the training invariants cite, kept apart from the errors (``notes``): the server wrote no error (README).
NOTE_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pool_exhausted", re.compile(r"DB pool exhausted: \d+ checkouts waited")),
)


@dataclass(frozen=True, eq=False)
class LogClass:
    """One class of error records: how many, an example, and when (epoch seconds)."""

    name: str
    count: int
    example: str
    first_ts: float | None
    last_ts: float | None
    first_time: str | None  # as printed in the log
    last_time: str | None
    times: np.ndarray  # epoch seconds of every timestamped occurrence, in log order
    untimed: int  # occurrences without a timestamp
    # The ``request_id=N`` each timestamped occurrence names (aligned with
    # ``times``; NO_REQUEST_ID where it names none), so an error can be tied
    # to the request it failed, not only to the time it was written.
    request_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    # How coarse the log's times are: each is the start of an interval this long (1.0 for a format that prints
    # whole seconds, as twinkle-kit's), so an error written "at 12:00:01" may have happened until 12:00:01.999
    resolution_s: float = 0.001

    def to_dict(self, exact: bool = False) -> dict[str, Any]:
        """The report's form; ``exact`` adds every occurrence's time and request id (a trial bundle's form)."""
        out = {
            "name": self.name,
            "count": self.count,
            "example": self.example,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "first_time": self.first_time,
            "last_time": self.last_time,
            "untimed": self.untimed,
            "resolution_s": self.resolution_s,
        }
        if exact:
            out.update(times=self.times.tolist(), request_ids=self.request_ids.tolist())
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LogClass":
        """The inverse of ``to_dict(exact=True)``."""
        return cls(
            name=data["name"],
            count=data["count"],
            example=data["example"],
            first_ts=data["first_ts"],
            last_ts=data["last_ts"],
            first_time=data["first_time"],
            last_time=data["last_time"],
            times=np.asarray(data["times"], dtype=np.float64),
            untimed=data["untimed"],
            request_ids=np.asarray(data["request_ids"], dtype=np.int64),
            resolution_s=data.get("resolution_s", 0.001),  # bundles written before it: milliseconds
        )


@dataclass(frozen=True, eq=False)
class ServerLogSummary:
    """What :func:`classify_log` found; ``classes`` in order of first appearance."""

    lines: int
    records: int  # timestamped log records
    warnings: int  # WARNING records that are not errors
    classes: dict[str, LogClass] = field(default_factory=dict)
    first_ts: float | None = None
    last_ts: float | None = None
    notes: dict[str, LogClass] = field(default_factory=dict)  # NOTE_CLASSES seen: not errors

    @property
    def errors(self) -> int:
        return sum(c.count for c in self.classes.values())

    def last_error_epoch_by_request(self) -> dict[int, float]:
        """request id -> epoch seconds of the last error line naming it (a failed forward is logged as it fails)."""
        out: dict[int, float] = {}
        for c in self.classes.values():
            if c.request_ids.size != c.times.size:
                continue
            for rid, ts in zip(c.request_ids.tolist(), c.times.tolist()):
                if rid != NO_REQUEST_ID and ts > out.get(rid, -math.inf):
                    out[rid] = ts
        return out

    @property
    def clean(self) -> bool:
        return not self.classes

    def to_dict(self, exact: bool = False) -> dict[str, Any]:
        """The report's form; ``exact``: with each class's times, so :meth:`from_dict` gives it back."""
        return {
            "lines": self.lines,
            "records": self.records,
            "warnings": self.warnings,
            "errors": self.errors,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "classes": [c.to_dict(exact) for c in self.classes.values()],
            "notes": [c.to_dict(exact) for c in self.notes.values()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ServerLogSummary":
        """The inverse of ``to_dict(exact=True)`` (``errors`` is derived, not read). A bundle written while
        ``pool_exhausted`` was an error class has it among its classes: it is read as the note it now is."""
        classes = {c["name"]: LogClass.from_dict(c) for c in data["classes"]}
        notes = {c["name"]: LogClass.from_dict(c) for c in data.get("notes", [])}
        notes.update({name: classes.pop(name) for name, _ in NOTE_CLASSES if name in classes})
        return cls(data["lines"], data["records"], data["warnings"], classes, data["first_ts"], data["last_ts"], notes)
