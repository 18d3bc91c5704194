"""The DB pool observer (``faultload/targets/skyrl_dbpool.py``) that writes a server's pool exhaustion to its log.

The tests drive it with a test double of a QueuePool (the attributes it
reads, a ``_do_get`` that sleeps or raises) and a fake clock. The real
SQLAlchemy and aiosqlite of the 0.4.0 target venv, a real pool exhausted:
``tests/integration/test_dbpool_integration.py``.
"""

from __future__ import annotations

import pytest

from faultload.record.serverlog import classify_log
from faultload.targets import skyrl_dbpool
from faultload.targets.skyrl_dbpool import PoolWaits, observing, timed_checkout


class FakeQueue:
    def __init__(self, free: int) -> None:
        self.free = free

    def empty(self) -> bool:
        return self.free == 0


class FakePool:
    """A double of SQLAlchemy's QueuePool: only what the observer reads, and a checkout that takes ``takes_s``."""

    def __init__(self, clock: list[float], free: int, overflow: int, takes_s: float, fails: bool = False) -> None:
        self.clock, self._pool, self._overflow, self._max_overflow, self._timeout = (
            clock,
            FakeQueue(free),
            overflow,
            10,
            30.0,
        )
        self.takes_s, self.fails = takes_s, fails

    def size(self) -> int:
        return 5

    def _do_get(self) -> str:
        self.clock[0] += self.takes_s
        if self.fails:
            raise TimeoutError("QueuePool limit of size 5 overflow 10 reached")
        return "entry"


def _waits(clock: list[float], min_wait_s: float = 1.0) -> PoolWaits:
    return PoolWaits(min_wait_s, clock=lambda: clock[0])


def test_only_checkouts_that_found_the_pool_exhausted_and_waited_are_counted():
    clock = [0.0]
    waits = _waits(clock)
    assert timed_checkout(FakePool(clock, free=0, overflow=10, takes_s=4.5), waits)() == "entry"
    assert timed_checkout(FakePool(clock, free=0, overflow=10, takes_s=0.2), waits)() == "entry"  # waited, briefly
    assert timed_checkout(FakePool(clock, free=1, overflow=10, takes_s=3.0), waits)() == "entry"  # a free one
    assert timed_checkout(FakePool(clock, free=0, overflow=9, takes_s=3.0), waits)() == "entry"  # may open one more
    line = waits.take_line(1.0)
    assert line is not None and line.startswith("DB pool exhausted: 1 checkouts waited >= 1 s")
    assert "longest 4.50 s, 0 timed out" in line and "QueuePool size 5, overflow 10, timeout 30 s" in line
    assert waits.take_line(1.0) is None  # taken: the next second starts from nothing


def test_a_checkout_that_times_out_is_counted_and_still_raises():
    clock = [0.0]
    waits = _waits(clock)
    with pytest.raises(TimeoutError, match="QueuePool limit"):
        timed_checkout(FakePool(clock, free=0, overflow=10, takes_s=0.5, fails=True), waits)()
    assert "1 checkouts waited" in waits.take_line(1.0)


def test_the_observer_line_is_the_note_pool_exhausted_not_an_error():
    clock = [0.0]
    waits = _waits(clock)
    timed_checkout(FakePool(clock, free=0, overflow=10, takes_s=2.0), waits)()
    text = f"2026-12-02 23:10:01,412 - WARNING - {skyrl_dbpool.LOGGER_NAME}: {waits.take_line(1.0)}\n"
    summary = classify_log(text)
    assert list(summary.notes) == ["pool_exhausted"] and summary.clean and summary.errors == 0


def test_engines_the_api_creates_get_a_timed_pool_and_other_pools_are_said_unobserved(caplog):
    clock = [0.0]
    pool = FakePool(clock, free=0, overflow=10, takes_s=1.5)

    class Engine:
        def __init__(self, pool) -> None:
            self.sync_engine = type("SyncEngine", (), {"pool": pool})()

    logger = skyrl_dbpool.logging.getLogger("test-dbpool")
    waits = _waits(clock)
    create = observing(lambda url: Engine(pool), waits, logger)
    engine = create("sqlite+aiosqlite:///x.db")
    assert engine.sync_engine.pool is pool and pool._do_get() == "entry"
    assert "1 checkouts waited" in waits.take_line(1.0)
    with caplog.at_level("INFO", logger="test-dbpool"):
        observing(lambda url: Engine(object()), waits, logger)("sqlite://")
    assert "DB pool not observed: object is not a QueuePool" in caplog.text
