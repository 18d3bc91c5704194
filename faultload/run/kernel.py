"""Server-side evidence the kernel keeps: fd limits, accept queues, listen overflows.

Read per sample by the monitor. The accept queue comes from ``ss -ltn`` (netlink,
filtered to listening sockets in the kernel): parsing /proc/net/tcp instead
costs ~100 ms per read once tens of thousands of sockets are open.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ListenState:
    queued: int  # connections waiting in the accept queue (ss Recv-Q)
    backlog: int  # the queue's capacity (ss Send-Q), already capped by somaxconn


def fd_limits(pid: int) -> tuple[int, int] | None:
    """(soft, hard) RLIMIT_NOFILE of ``pid`` from /proc/PID/limits."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    except (OSError, ValueError):
        pass
    return None


def listen_state(port: int, ss: str | None = shutil.which("ss")) -> ListenState | None:
    """The accept queue of the TCP listener on ``port``; None when unknown."""
    if ss is None:
        return None
    try:
        out = subprocess.run(
            [ss, "-Hltn", f"sport = :{port}"], capture_output=True, text=True, timeout=2.0, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "LISTEN":
            return ListenState(int(parts[1]), int(parts[2]))
    return None


def listen_counters(path: Path = Path("/proc/net/netstat")) -> tuple[int, int] | None:
    """(ListenOverflows, ListenDrops) since boot, for this network namespace."""
    try:
        lines = [line.split() for line in path.read_text().splitlines() if line.startswith("TcpExt:")]
        names, values = lines[0], lines[1]
        table = dict(zip(names[1:], (int(v) for v in values[1:])))
        return table["ListenOverflows"], table["ListenDrops"]
    except (OSError, IndexError, KeyError, ValueError):
        return None
