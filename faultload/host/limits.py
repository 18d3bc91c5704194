"""What this machine allows a trial: open files per process, the listen backlog, ephemeral ports.

Read by ``faultload doctor``, the full-size run's preflight and each Ray node's
report; here, not in the doctor, so that a Ray actor reading them loads no
router or Toxiproxy client.
"""

from __future__ import annotations

import resource
from pathlib import Path

from faultload.host.network import ephemeral_range


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def machine_limits() -> dict[str, int]:
    """The limits that size a trial: open files per process, somaxconn, ephemeral ports."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    somaxconn = int(_read("/proc/sys/net/core/somaxconn") or 0)
    low, high = ephemeral_range()
    return {"nofile_soft": soft, "nofile_hard": hard, "somaxconn": somaxconn, "ephemeral_ports": high - low + 1}
