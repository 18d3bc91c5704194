"""A worker's slots in the shared live-counter array: what the progress line and the watchdog read while the load runs.

Both clients (raw and SDK) count into it; the parent reads the whole array
(``faultload.client.workers``). ``array=None`` counts nothing (a unit test's client).
"""

from __future__ import annotations

from typing import Any


class LiveCounters:
    """This worker's slots in the shared live-counter array (or a local stand-in)."""

    def __init__(self, array: Any, worker: int, slots: int) -> None:
        self._a = array
        self._base = worker * slots

    def add(self, slot: int, delta: int = 1) -> None:
        if self._a is not None:
            self._a[self._base + slot] += delta

    def set(self, slot: int, value: int) -> None:
        if self._a is not None:
            self._a[self._base + slot] = value


# (the order of faultload.client.job.COUNTER_SLOTS; POLL_TIMEOUTS: a poll's own client timeout ran out, what a
# fault anchored at poll_timeout waits for)
SUBMITTED, ACCEPTED, COMPLETED, FAILED, IN_FLIGHT, ATTEMPTS, CONNECTIONS_PEAK, POLL_TIMEOUTS = range(8)
