"""How the router answers, as a plain frozen value.

Built by the parent (strategies, CLI, trial config) without starting a
router, so this module imports nothing heavy (no aiohttp, numpy or psutil).
"""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass
from typing import Any

MODES = ("barrier", "latency", "immediate")
MAX_FAULT_S = 86_400.0
MAX_PROCS = 64
# Connections one router process holds at most (the per-process open-file limit is 20,000):
# one process per 8,000 requests held at once, the rule the CLI, the preflight and the strategies share.
ROUTER_CONNECTIONS_PER_PROC = 8000
SHUTDOWN_S = 1.0  # the router's graceful shutdown; the handle waits a few seconds beyond it
# the trial's "load over, nothing in flight" to each router process: close its keep-alive connections
CLOSE_IDLE_SIGNAL = signal.SIGUSR1


def procs_for(held: int, per_proc: int = ROUTER_CONNECTIONS_PER_PROC) -> int:
    """Router processes for ``held`` requests at once (at least one)."""
    return max(1, math.ceil(held / per_proc))


def is_int(x: Any) -> bool:
    """An int that is not a bool (JSON values and config fields alike)."""
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class RouterConfig:
    """How the router answers; plain data (``dataclasses.asdict`` round-trips)."""

    mode: str = "latency"  # "barrier" | "latency" | "immediate"
    barrier: int = 0  # wave size N in barrier mode
    barrier_timeout_s: float = 60.0
    max_num_seqs: int = 256
    gen_seconds: float = 1.0
    procs: int = 1

    def validate(self) -> None:
        """Raise ValueError with one line naming the first bad field."""
        if self.mode not in MODES:
            _bad("mode", f"must be one of {', '.join(MODES)} (got {self.mode!r})")
        _check_int("barrier", self.barrier, 0, 1_000_000)
        if self.mode == "barrier" and self.barrier < 1:
            _bad("barrier", f"must be >= 1 in barrier mode (got {self.barrier})")
        _check_float("barrier_timeout_s", self.barrier_timeout_s, 0.0, MAX_FAULT_S, open_low=True)
        _check_int("max_num_seqs", self.max_num_seqs, 1, 1_000_000)
        _check_float("gen_seconds", self.gen_seconds, 0.0, 3600.0)
        _check_int("procs", self.procs, 1, MAX_PROCS)

    def answer_bound_s(self, requests: int) -> float:
        """The longest this router holds one of ``requests`` before answering it, without faults (seconds).

        Latency mode runs ``max_num_seqs`` at once, ``gen_seconds`` each, so a
        request may queue behind every other; a barrier wave is released when
        full or at its timeout; the immediate router answers at once.
        """
        if self.mode == "latency":
            return self.gen_seconds * max(1, -(-requests // self.max_num_seqs))
        if self.mode == "barrier":
            return self.barrier_timeout_s
        return 0.0

    def least_hold_s(self) -> float | None:
        """The least this router holds a forward before answering it (seconds): latency mode its generation
        time, the immediate router none; None for a barrier (a wave waits until it fills)."""
        if self.mode == "latency":
            return self.gen_seconds
        if self.mode == "barrier":
            return None
        return 0.0

    def to_argv(self) -> list[str]:
        """CLI flags that reproduce this config."""
        return [
            "--mode", self.mode,
            "--barrier", str(self.barrier),
            "--barrier-timeout", repr(float(self.barrier_timeout_s)),
            "--max-num-seqs", str(self.max_num_seqs),
            "--gen-seconds", repr(float(self.gen_seconds)),
            "--procs", str(self.procs),
        ]  # fmt: skip


def _bad(field: str, why: str) -> None:
    raise ValueError(f"RouterConfig.{field}: {why}")


def _check_int(field: str, value: Any, lo: int, hi: int) -> None:
    if not is_int(value):
        _bad(field, f"must be an int (got {value!r})")
    if not lo <= value <= hi:
        _bad(field, f"must be in [{lo}, {hi}] (got {value})")


def _check_float(field: str, value: Any, lo: float, hi: float, open_low: bool = False) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        _bad(field, f"must be a finite number (got {value!r})")
    if value < lo or value > hi or (open_low and value == lo):
        low = f"({lo}" if open_low else f"[{lo}"
        _bad(field, f"must be in {low}, {hi}] (got {value})")
