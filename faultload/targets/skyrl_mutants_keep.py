"""Mutant regressions of what a launched SkyRL server keeps: results it never releases, a sweeper that dies.

Runs under the target's Python, imported by ``skyrl_mutants`` (found the way
``skyrl_forwarding`` is). Each switch is a mistake a pull request to 0.4.0's
in-memory future store could plausibly make, and each serves every request
correctly: the store just keeps what it no longer owes. Two keep delivered
results (the sweep's rule changed), two kill the sweeper task, which
``start`` creates with no try/except around its loop, so its first exception
ends it silently (the task is referenced by the store, so asyncio never logs
"exception was never retrieved") and nothing is evicted again.

Every one patches 0.4.0's ``ExternalFutureStore``; 0.3.0 keeps futures in
SQLite and is refused by name.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Callable

if __package__:
    from .skyrl_forwarding import Need, members  # the harness's tests: a package module
else:
    from skyrl_forwarding import Need, members  # inside the target: beside this file on sys.path


def _store(ns: dict, need: Need) -> type:
    """The in-memory future store class, or the launcher's PatchError naming what this version lacks."""
    return need(ns, "ExternalFutureStore", "in-memory future store, the TTL sweep these mutants patch")


def _store_method(ns: dict, need: Need, name: str, why: str) -> tuple[type, Any]:
    store_cls = _store(ns, need)
    need(members(store_cls), name, why)
    return store_cls, getattr(store_cls, name)


def _sweep_keeping(ns: dict, need: Need, kept: Callable[[Any], bool]) -> None:
    """``_sweep`` as the release writes it, but an entry ``kept(entry)`` is never evicted."""
    store_cls, sweep = _store_method(ns, need, "_sweep", "the store's TTL sweep")

    @functools.wraps(sweep)
    def _sweep(self, now: datetime) -> None:
        aside = {request_id: entry for request_id, entry in self._entries.items() if kept(entry)}
        for request_id in aside:
            del self._entries[request_id]
        try:
            sweep(self, now)
        finally:
            self._entries.update(aside)

    store_cls._sweep = _sweep


def keep_delivered(ns: dict, need: Need) -> str:
    """The sweep skips an entry whose result was delivered ("it is the client's now; its retry must find it"):
    every delivered result is kept until the server stops."""
    _sweep_keeping(ns, need, lambda entry: entry.retrieved_at is not None)
    return "keep-delivered: the sweep never evicts a delivered result"


def evict_pending_only(ns: dict, need: Need) -> str:
    """The sweep's rule narrowed to abandoned forwards (status PENDING past the pending TTL): a completed entry,
    delivered or not, is never evicted."""
    _store(ns, need)
    pending = need(ns, "RequestStatus", "request statuses").PENDING
    _sweep_keeping(ns, need, lambda entry: entry.status != pending)
    return "evict-pending-only: the sweep evicts pending entries only"


def naive_completed_at(ns: dict, need: Need) -> str:
    """``complete`` stamps ``completed_at`` with ``datetime.now()`` (naive, no timezone): the first sweep that
    meets a completed, not yet delivered entry subtracts it from an aware ``now``, raises TypeError, and the
    sweeper task dies; nothing is evicted again."""
    store_cls, complete = _store_method(ns, need, "complete", "the store's completion")

    @functools.wraps(complete)
    async def complete_naive(self, request_id, result_data, status):
        await complete(self, request_id, result_data, status)
        entry = self._entries.get(request_id)
        if entry is not None:
            entry.completed_at = datetime.now()

    store_cls.complete = complete_naive
    return "naive-completed-at: completed_at without a timezone; the sweep meeting one raises and the sweeper dies"


def sweep_counts_bytes(ns: dict, need: Need) -> str:
    """Each sweep logs the bytes its completed results hold, ``sum(len(entry.result_proto) ...)`` over the
    entries with a ``completed_at``: a failed forward's entry is completed with its error as JSON
    (``result_proto`` None), so the first sweep after a failed forward raises TypeError and the sweeper dies."""
    store_cls, sweep = _store_method(ns, need, "_sweep", "the store's TTL sweep")
    logger = need(ns, "logger", "skyrl's logger")

    @functools.wraps(sweep)
    def _sweep(self, now: datetime) -> None:
        sweep(self, now)
        held = sum(len(entry.result_proto) for entry in self._entries.values() if entry.completed_at is not None)
        logger.debug("External future store holds %d bytes of completed results", held)

    store_cls._sweep = _sweep
    return "sweep-counts-bytes: each sweep sums its results' proto lengths; a failed forward's entry kills the sweeper"


KEEP_MUTANTS: dict[str, Callable[[dict, Need], str]] = {
    "keep-delivered": keep_delivered,
    "evict-pending-only": evict_pending_only,
    "naive-completed-at": naive_completed_at,
    "sweep-counts-bytes": sweep_counts_bytes,
}
