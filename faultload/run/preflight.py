"""Fit a trial to this machine before starting it, and say what was changed.

Every process has its own open-file limit (20,000 here, not raisable), each
source IP has a fixed ephemeral port range (28,232 here), and the server
holds about two fds per request in flight (the client's connection and its
forward to the router). So a run asking for more concurrency than the
server's fd limit allows would only measure fd exhaustion: the preflight caps
the outstanding requests at what the server can hold, spreads the load over
enough worker processes (each on its own source IP) and router processes
that none nears its limit, and refuses outright when even a minimal run
cannot fit.
"""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass, field

from faultload.host.limits import machine_limits
from faultload.model.router import ROUTER_CONNECTIONS_PER_PROC, procs_for

SERVER_FDS_PER_IN_FLIGHT = 2.5  # measured ~2 on SkyRL 0.4.0, plus headroom
SERVER_FD_RESERVE = 256  # listening sockets, SQLite, logs, pools
PROCESS_FD_RESERVE = 256  # per load worker / router process
MIN_OUTSTANDING = 16


@dataclass(frozen=True)
class Fit:
    max_outstanding: int
    workers: int
    router_procs: int
    notes: list[str] = field(default_factory=list)  # what was resized and why, one line each


class DoesNotFit(ValueError):
    """Even a minimal run exceeds this machine's limits."""


def plan(requests: int, want_outstanding: int, want_workers: int, limits: dict[str, int] | None = None) -> Fit:
    """Size outstanding cap, workers and router processes for this machine.

    ``want_outstanding`` 0 means "as many as fit"; ``want_workers`` 0 means "as needed".
    The server is assumed to inherit this process's soft fd limit (it does when
    faultload launches it).
    """
    limits = limits or machine_limits()
    notes: list[str] = []
    server_soft = limits["nofile_soft"]
    server_cap = math.floor((server_soft - SERVER_FD_RESERVE) / SERVER_FDS_PER_IN_FLIGHT)
    if server_cap < MIN_OUTSTANDING:
        raise DoesNotFit(
            f"open-file limit {server_soft} leaves the server room for {max(server_cap, 0)} requests in flight "
            f"(~{SERVER_FDS_PER_IN_FLIGHT:g} fds each + {SERVER_FD_RESERVE} reserved); need at least {MIN_OUTSTANDING}: "
            "raise `ulimit -n`"
        )
    outstanding = min(want_outstanding or requests, requests)
    if outstanding > server_cap:
        notes.append(
            f"outstanding capped at {server_cap} (asked {outstanding}): the server's fd limit {server_soft} "
            f"holds ~{SERVER_FDS_PER_IN_FLIGHT:g} fds per request in flight"
        )
        outstanding = server_cap
    per_process = max(1, limits["nofile_hard"] - PROCESS_FD_RESERVE)
    per_ip = max(1, limits["ephemeral_ports"] // 2)  # keep-alive reuses ports; half left for TIME_WAIT churn
    per_worker = min(per_process, per_ip)
    need_workers = max(1, math.ceil(outstanding / per_worker))
    workers = want_workers or max(2, need_workers)
    if workers < need_workers:
        notes.append(f"workers raised to {need_workers} (asked {workers}): one holds at most {per_worker} connections")
        workers = need_workers
    router_procs = procs_for(outstanding, min(ROUTER_CONNECTIONS_PER_PROC, per_process))
    if limits["somaxconn"] < 1024:
        notes.append(
            f"net.core.somaxconn is {limits['somaxconn']}: bursts of new connections may overflow accept queues"
        )
    return Fit(outstanding, workers, router_procs, notes)


def current_limits() -> dict[str, int]:
    """The machine limits as this process sees them (soft fd limit included)."""
    limits = machine_limits()
    limits["nofile_soft"], limits["nofile_hard"] = resource.getrlimit(resource.RLIMIT_NOFILE)
    return limits
