"""How many trials this machine runs side by side: from its cores and memory and what the trials measured.

A lane is a stack of its own (server, router, Toxiproxy, ports) running one trial at a time. Lanes are bounded
by what the machine holds, measured, not fixed:

* **CPU**: ``cores × BUSY_SHARE`` over the cores one lane keeps busy while its trial runs (the trials' CPU
  seconds — server, router, load workers — over their walls, as the last session measured them and recorded in
  the workspace; :data:`DEFAULT_NEEDS` before any session did);
* **memory**: ``available × MEMORY_SHARE`` over one lane's resident memory (its server, router and the lane's
  own process at their largest);
* **open files**: the system's free file handles over one lane's open files at their most;
* and never more than ``most`` (the properties a session runs: a lane beyond them would only wait).

The lanes' trials then take turns through :mod:`faultload.host.admission`: a trial that needs the machine
runs with nothing beside it, whatever the count.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from faultload.host.admission import Admission

# The share of the machine's cores the lanes' trials may keep busy together, leaving the rest for the peaks
# of a trial's own load (a burst's first second, a stack's start-up) so its timing budgets read what they
# read alone.
BUSY_SHARE = 0.75
MEMORY_SHARE = 0.5  # of the memory available at the session's start
FILES_SHARE = 0.5  # of the system's free file handles
NEEDS_FILE = "lanes.json"
# A comparison outside the suite (faultload compare, a comparison's replay) waits this long for the machine,
# beyond the ten minutes every wait has: a nightly session's longest trial (16,384 requests) takes minutes.
COMPARISON_WAIT_S = 3600.0  # under the workspace: the last session's measured needs of one lane


@dataclass(frozen=True)
class LaneNeeds:
    """What one lane takes of the machine while its trial runs."""

    cores: float  # busy cores: its trials' CPU seconds over their walls
    rss_bytes: int  # its server's, router's and own process's resident memory, at their largest
    fds: int  # its processes' open files at their most
    trials: int = 0  # how many trials measured it (0: the defaults)


# Two ci sessions of a skyrl@PATH checkout of 0.4.0 with the fixed row's fixes on lanes, 2 cores (their
# lanes.json): a lane's trials kept 0.117 and 0.075 cores busy over their walls; its server and own process at
# most 810 MiB; its processes at most 6,163 open files (the 2,048-request trial's connections). Rounded up, for a
# machine no session has measured yet.
DEFAULT_NEEDS = LaneNeeds(cores=0.12, rss_bytes=900 * 2**20, fds=6_200)


@dataclass(frozen=True)
class Machine:
    """What this machine offers the lanes."""

    cores: int
    available_bytes: int
    free_files: int

    @classmethod
    def here(cls) -> "Machine":
        return cls(len(os.sched_getaffinity(0)), _meminfo("MemAvailable"), _free_files())


def _meminfo(field: str, path: Path = Path("/proc/meminfo")) -> int:
    for line in path.read_text().splitlines():
        name, _, rest = line.partition(":")
        if name == field:
            return int(rest.split()[0]) * 1024
    raise RuntimeError(f"{path} has no {field}")


def _free_files(path: Path = Path("/proc/sys/fs/file-nr")) -> int:
    allocated, _, most = (int(x) for x in path.read_text().split())
    return most - allocated


@dataclass(frozen=True)
class Lanes:
    """The count and why: each bound as measured."""

    count: int
    by_cpu: int
    by_memory: int
    by_files: int
    most: int
    needs: LaneNeeds

    def reason(self) -> str:
        source = f"measured over {self.needs.trials} trials" if self.needs.trials else "the defaults"
        return (
            f"{self.count} lane(s): cores allow {self.by_cpu}, memory {self.by_memory}, open files {self.by_files}, "
            f"properties {self.most} (a lane's trial: {self.needs.cores:.2f} cores, "
            f"{self.needs.rss_bytes / 2**20:.0f} MiB, {self.needs.fds} files; {source})"
        )


def lanes_for(machine: Machine, needs: LaneNeeds, most: int) -> Lanes:
    """How many lanes ``machine`` holds for lanes needing ``needs`` each, at most ``most``; at least one."""
    by_cpu = math.floor(machine.cores * BUSY_SHARE / max(needs.cores, 0.01))
    by_memory = math.floor(machine.available_bytes * MEMORY_SHARE / max(needs.rss_bytes, 1))
    by_files = math.floor(machine.free_files * FILES_SHARE / max(needs.fds, 1))
    count = max(1, min(by_cpu, by_memory, by_files, most))
    return Lanes(count, by_cpu, by_memory, by_files, most, needs)


def read_needs(workspace_root: Path) -> LaneNeeds:
    """The needs the last session recorded in the workspace, else :data:`DEFAULT_NEEDS`."""
    path = workspace_root / NEEDS_FILE
    try:
        return LaneNeeds(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return DEFAULT_NEEDS


def write_needs(workspace_root: Path, needs: LaneNeeds) -> None:
    """Record a session's measured needs for the next session's count (written whole, then moved in place)."""
    workspace_root.mkdir(parents=True, exist_ok=True)
    part = workspace_root / f"{NEEDS_FILE}.{os.getpid()}.part"
    part.write_text(json.dumps(asdict(needs), indent=2) + "\n")
    part.replace(workspace_root / NEEDS_FILE)


def machine_lanes(workspace_root: Path, most: int, stacks: int = 1) -> Lanes:
    """How many lanes this machine holds now, for the needs the last session in the workspace measured; a lane
    that keeps ``stacks`` stacks (a pull request's head and its base) needs that many times the memory (its own
    process counted each time: an upper bound), and no more cores (its trials run one after another)."""
    needs = read_needs(workspace_root)
    return lanes_for(Machine.here(), replace(needs, rss_bytes=needs.rss_bytes * stacks), most)


def admission_for(workspace_root: Path, wait_s: float, slots: int) -> Admission:
    """The machine's turns, shared by every session and comparison in the workspace; a turn waits at most
    ``wait_s`` (the asker's own time, and ten minutes more)."""
    return Admission(workspace_root / "admission", slots, timeout_s=wait_s + 600.0)
