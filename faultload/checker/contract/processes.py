"""What a server made of a pool of processes may do to the resources it is measured by.

A server that is a process tree whose scheduler starts and ends worker processes by itself (Ray's worker
pool: idle workers started ahead of demand, ended after an idle timeout) holds, after a trial, the fds and
memory of however many workers its pool keeps then, which no request decides. Its peak per request in flight
is judged as any server's; its drain back to the baseline is not.
"""

from __future__ import annotations

from faultload.checker.contract.rules import Rule

WORKER_POOL_DRAIN = Rule(
    "worker_pool_drain",
    "a server whose contract has a worker pool (worker_pool) is not judged on its fds and RSS drained back to "
    "the baseline after the load; its peak per request in flight is judged as ever",
    "its scheduler starts and ends whole worker processes by itself (twinkle-kit on Ray: each ~40-60 fds and "
    "tens of MiB), so the drained sum over its tree is the pool's size, not what requests left behind: it "
    "settled 40-90 fds over the baseline after 64 and after 256 requests alike",
)
