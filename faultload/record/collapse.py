"""A collapse as recorded: the signals the watchdog raised and its verdict (cause first, then consequences).

``faultload.run.watchdog`` raises them while a trial runs; the report shows
them and a trial bundle stores them (``to_dict(exact=True)``/``from_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

# The collapses the watchdog names (a Signal's and a CollapseVerdict's kind).
FD_EXHAUSTION = "fd_exhaustion"
ACCEPT_QUEUE_OVERFLOW = "accept_queue_overflow"
EVENT_LOOP_STALL = "event_loop_stall"
NO_PROGRESS = "no_progress"
SERVER_EXIT = "server_exit"
VERDICT_KINDS = (FD_EXHAUSTION, ACCEPT_QUEUE_OVERFLOW, EVENT_LOOP_STALL, NO_PROGRESS, SERVER_EXIT)


@dataclass(frozen=True)
class Signal:
    kind: str
    at_s: float  # onset, trial seconds
    evidence: str

    def to_dict(self, exact: bool = False) -> dict[str, Any]:
        """The report's form (``at_s`` to 0.01 s); ``exact``: unrounded, as a trial bundle keeps it."""
        return {"kind": self.kind, "at_s": self.at_s if exact else round(self.at_s, 2), "evidence": self.evidence}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Signal":
        return cls(data["kind"], float(data["at_s"]), data["evidence"])


@dataclass(frozen=True)
class CollapseVerdict:
    kind: str
    at_s: float
    evidence: list[str]
    consequences: list[Signal] = field(default_factory=list)

    def to_dict(self, exact: bool = False) -> dict[str, Any]:
        """The report's form (times to 0.01 s); ``exact``: unrounded, so :meth:`from_dict` gives it back."""
        return {
            "kind": self.kind,
            "at_s": self.at_s if exact else round(self.at_s, 2),
            "evidence": self.evidence,
            "consequences": [c.to_dict(exact) for c in self.consequences],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CollapseVerdict":
        return cls(
            data["kind"],
            float(data["at_s"]),
            list(data["evidence"]),
            [Signal.from_dict(c) for c in data.get("consequences", [])],
        )

    def line(self) -> str:
        chain = " -> ".join(
            [f"{self.kind} at t={self.at_s:.0f}s"] + [f"{c.kind} at t={c.at_s:.0f}s" for c in self.consequences]
        )
        return f"collapse: {chain}; {self.evidence[0] if self.evidence else ''}"
