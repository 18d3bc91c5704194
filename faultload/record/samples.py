"""What the monitor saw, as recorded data: process snapshots, sample columns and /healthz probes.

``faultload.run.monitor`` takes them while a trial runs; the checker judges
them and a trial bundle stores them (``to_dict``/``from_dict``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np

SAMPLE_FIELDS = (
    "t",
    "rss",
    "fds",
    "cpu_s",
    "router_received",
    "router_completed",
    "router_in_flight",
    "client_completed",
    "client_failed",
    "client_in_flight",
    "accept_queue",
    "listen_backlog",
    "listen_overflows",
    "listen_drops",
    "client_connections_peak",  # the workers' most open connections so far (summed per-worker peaks)
    # The server's engine subprocess (SkyRL's engine loop with the null backend, or the sleeper): the training
    # path's own process. Absent from older bundles' samples.
    "engine_fds",
    "engine_cpu_s",
)


@dataclass
class ProcessSnapshot:
    rss: int
    fds: int
    cpu_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "ProcessSnapshot | None":
        return None if data is None else cls(int(data["rss"]), int(data["fds"]), float(data["cpu_s"]))


@dataclass
class MonitorSamples:
    """What the monitor saw: process/progress samples and health probes."""

    samples: dict[str, np.ndarray]
    healthz_t: np.ndarray
    healthz_latency_s: np.ndarray
    healthz_ok: np.ndarray
    baseline: ProcessSnapshot | None = None
    drained: ProcessSnapshot | None = None
    fd_limit: tuple[int, int] | None = None  # the server's own (soft, hard) RLIMIT_NOFILE
    notes: list[str] = field(default_factory=list)

    @property
    def healthz_failures(self) -> int:
        return int(np.count_nonzero(~self.healthz_ok))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (columns as lists), for a trial bundle; :meth:`from_dict` is its inverse."""
        return {
            "samples": {name: col.tolist() for name, col in self.samples.items()},
            "healthz_t": self.healthz_t.tolist(),
            "healthz_latency_s": self.healthz_latency_s.tolist(),
            "healthz_ok": self.healthz_ok.tolist(),
            "baseline": self.baseline.to_dict() if self.baseline else None,
            "drained": self.drained.to_dict() if self.drained else None,
            "fd_limit": list(self.fd_limit) if self.fd_limit else None,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MonitorSamples":
        def floats(values: Any) -> np.ndarray:
            return np.asarray(values, dtype=np.float64)

        return cls(
            samples={name: floats(col) for name, col in data["samples"].items()},
            healthz_t=floats(data["healthz_t"]),
            healthz_latency_s=floats(data["healthz_latency_s"]),
            healthz_ok=np.asarray(data["healthz_ok"], dtype=bool),
            baseline=ProcessSnapshot.from_dict(data["baseline"]),
            drained=ProcessSnapshot.from_dict(data["drained"]),
            fd_limit=tuple(data["fd_limit"]) if data["fd_limit"] else None,
            notes=list(data["notes"]),
        )
