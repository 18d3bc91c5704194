"""The collapse watchdog's limits (when a server counts as collapsed) and the fault windows it is handed.

``faultload.run.watchdog`` applies them.
"""

from __future__ import annotations

from dataclasses import dataclass

from faultload.model.faults import is_process_fault


@dataclass(frozen=True)
class WatchdogLimits:
    """When the watchdog calls a collapse (``[tool.faultload.watchdog]``; each key's meaning: :data:`WATCHDOG_KEYS`)."""

    fd_fraction: float = 0.97
    stall_latency_s: float = 5.0
    stall_window_s: float = 30.0
    no_progress_window_s: float = 30.0
    accept_window_s: float = 10.0
    confirm_s: float = 20.0  # keep watching this long after the first signal, for consequences

    def validate(self) -> None:
        if not 0 < self.fd_fraction <= 1:
            raise ValueError("watchdog fd_fraction must be in (0, 1]")
        for name in ("stall_latency_s", "stall_window_s", "no_progress_window_s", "accept_window_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"watchdog {name} must be > 0")
        if self.confirm_s < 0:
            raise ValueError("watchdog confirm_s must be >= 0")


# What each [tool.faultload.watchdog] key means (the settings reference is written from it).
WATCHDOG_KEYS = {
    "fd_fraction": "fd exhaustion: the server's open fds reached this share of its soft RLIMIT_NOFILE",
    "stall_latency_s": "an event-loop stall: every /healthz probe failing or slower than this (real s)...",
    "stall_window_s": "...for this long (real s)",
    "no_progress_window_s": "no progress: requests outstanding, yet neither the client nor the router completed "
    "or received anything for this long (real s; planned client waits extend it)",
    "accept_window_s": "accept-queue overflow: the listen queue pinned at its backlog while the kernel's "
    "ListenOverflows rise, for this long (real s)",
    "confirm_s": "after the first signal, keep watching this long (real s) for its consequences",
}


@dataclass(frozen=True)
class FaultWindow:
    """One injected fault as the watchdog sees it: in force from ``start_s`` to ``end_s``.

    Trial seconds; ``end_s`` is ``inf`` while it has not healed. ``link`` and
    ``kind`` say whether it can explain a lack of progress and name it in the evidence.
    """

    start_s: float
    end_s: float
    link: str
    kind: str

    def covers(self, t: float) -> bool:
        return self.start_s <= t <= self.end_s

    def label(self) -> str:
        return f"{self.link}:{self.kind}"

    @property
    def is_process(self) -> bool:
        return is_process_fault(self.link, self.kind)
