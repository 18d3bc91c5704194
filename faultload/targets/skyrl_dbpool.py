"""Write the server's DB pool exhaustion into its log, where the harness reads it.

Runs under the target's Python (see skyrl_launch.py). SkyRL's API keeps its
SQLite connections in SQLAlchemy's default pool (5 connections + 10 overflow,
30 s timeout). When every connection is checked out, a handler waits for one;
only after 30 s does SQLAlchemy raise ``QueuePool limit ... reached``, and
0.3.0's ``retrieve_future`` swallows even that. A heartbeat that waits 9 s for
a connection and times out at the SDK's 10 s leaves no line at all, so the
harness could see *that* the server starved, not *why*.

This wraps the API module's ``create_async_engine`` so that the pool of each
engine it makes times every checkout (``_do_get``, where a checkout waits)
that found the pool exhausted (every connection out, none free);
waits of at least ``min_wait_s`` are summed and written once a second as one
WARNING record in SkyRL's own log format, which the harness's log classifier
counts as ``pool_exhausted``::

    2026-12-02 23:10:01,412 - WARNING - faultload.dbpool: DB pool exhausted: 37 checkouts waited ...

Observation only: each checkout returns (or raises) what it would have.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import time
from typing import Any, Callable

LOGGER_NAME = "faultload.dbpool"
LOG_FORMAT = "%(asctime)s - %(levelname)s - %(name)s: %(message)s"  # SkyRL's (skyrl.tinker logging)
FLUSH_INTERVAL_S = 1.0


class PoolWaits:
    """Checkouts that waited for a connection since the last flush (thread-safe: the flusher is a thread)."""

    def __init__(self, min_wait_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_wait_s = min_wait_s
        self.clock = clock
        self._lock = threading.Lock()
        self._waited = 0
        self._timed_out = 0
        self._longest = 0.0
        self._limit = ""

    def record(self, waited_s: float, timed_out: bool, limit: str) -> None:
        if waited_s < self.min_wait_s and not timed_out:
            return
        with self._lock:
            self._waited += 1
            self._timed_out += int(timed_out)
            self._longest = max(self._longest, waited_s)
            self._limit = limit

    def take_line(self, interval_s: float) -> str | None:
        """The summary of what was recorded since the last call, or None when nothing was."""
        with self._lock:
            if not self._waited:
                return None
            line = (
                f"DB pool exhausted: {self._waited} checkouts waited >= {self.min_wait_s:g} s for a connection "
                f"in the last {interval_s:g} s (longest {self._longest:.2f} s, {self._timed_out} timed out); "
                f"{self._limit}"
            )
            self._waited = self._timed_out = 0
            self._longest = 0.0
            return line


def _limit_text(pool: Any) -> str:
    return f"QueuePool size {pool.size()}, overflow {pool._max_overflow}, timeout {pool._timeout:g} s"


def _exhausted(pool: Any) -> bool:
    """Every connection the pool may open is out and none is free: this checkout will wait."""
    return pool._max_overflow > -1 and pool._overflow >= pool._max_overflow and pool._pool.empty()


def timed_checkout(pool: Any, waits: PoolWaits) -> Callable[[], Any]:
    """``pool._do_get`` (bound) timed when it has to wait; the same return value and exceptions."""
    do_get = pool._do_get

    def timed_do_get() -> Any:
        if not _exhausted(pool):
            return do_get()
        started = waits.clock()
        try:
            entry = do_get()
        except Exception:
            waits.record(waits.clock() - started, True, _limit_text(pool))
            raise
        waits.record(waits.clock() - started, False, _limit_text(pool))
        return entry

    return timed_do_get


def observing(create_engine: Callable[..., Any], waits: PoolWaits, logger: logging.Logger) -> Callable[..., Any]:
    """``create_async_engine`` whose engines' pools are timed (a pool that is not a QueuePool is said so)."""

    @functools.wraps(create_engine)
    def create_and_observe(*args: Any, **kwargs: Any) -> Any:
        engine = create_engine(*args, **kwargs)
        pool = getattr(engine, "sync_engine", engine).pool
        if all(hasattr(pool, a) for a in ("_do_get", "_max_overflow", "_overflow", "_pool", "_timeout")):
            pool._do_get = timed_checkout(pool, waits)  # the instance's, read before the class's
        else:
            logger.info("DB pool not observed: %s is not a QueuePool", type(pool).__name__)
        return engine

    return create_and_observe


def _logger() -> logging.Logger:
    logger = logging.getLogger(LOGGER_NAME)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # SkyRL's Rich handler would wrap and restyle it
    return logger


def _flush_forever(waits: PoolWaits, logger: logging.Logger) -> None:
    """Once a second, for as long as the server lives (a daemon thread ends with it)."""
    while True:
        time.sleep(FLUSH_INTERVAL_S)
        line = waits.take_line(FLUSH_INTERVAL_S)
        if line is not None:
            logger.warning(line)


def observe_pool_waits(ns: dict, min_wait_s: float) -> str:
    """Time the checkouts of every engine the API module ``ns`` creates; the applied-patch label."""
    waits = PoolWaits(min_wait_s)
    logger = _logger()
    ns["create_async_engine"] = observing(ns["create_async_engine"], waits, logger)
    threading.Thread(target=_flush_forever, args=(waits, logger), name="faultload-dbpool", daemon=True).start()
    return f"observe: DB pool checkouts waiting >= {min_wait_s:g} s"
