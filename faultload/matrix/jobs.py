"""``faultload matrix --jobs N``: up to N rows at once on this machine, a comparison row with nothing beside it.

A ci row mostly waits: its trials hold requests for the contract's timers (scaled, yet seconds each) and for
its faults' windows. The machine was 13% busy on average (5 s samples, 2 cores) while the ``fixed`` row ran
beside ``retention`` and ``early-408``. Not always: beside ``early-408``'s retry storm, ``fixed``'s
2,048-request trial once read a /healthz p99 just over its budget. Rows start in the order given, so the
caller pairs a row judged on timing budgets with one that only waits (docs/guides/matrix.md).

A comparison row (``MatrixRow.baseline``) runs alone: its metrics are the two builds' timings, and a row beside
it would load some of its trials and not others. Results come back in the rows' order, as the sequential
run's. Ctrl-C (or a row that raises) cancels the running rows: each stops its session as ``run_row`` does
on its own (``matrix.run``).
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable

WAIT_S = 30.0  # one wait for a row to end; the loop itself ends when every row has a result
CANCEL_WAIT_S = 120.0  # cancelled rows stopping their sessions (run_row's _stop takes up to 90 s)


def runs_alone(row: Any) -> bool:
    """A comparison row: nothing may run beside it."""
    return getattr(row, "baseline", None) is not None


def _may_start(row: Any, running: list[Any]) -> bool:
    return not running or not (runs_alone(row) or any(runs_alone(other) for other in running))


def run_rows_at_once(rows: list[Any], run_one: Callable[..., Any], jobs: int, log: Callable[[str], None]) -> list[Any]:
    """``run_one(row, cancel=event)`` for every row, up to ``jobs`` at once, in the rows' order of starting."""
    cancel = threading.Event()
    queue = list(enumerate(rows))
    running: dict[Future, int] = {}
    results: dict[int, Any] = {}
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="matrix-row") as pool:
        try:
            while queue or running:
                while queue and len(running) < jobs and _may_start(queue[0][1], [rows[i] for i in running.values()]):
                    index, row = queue.pop(0)
                    if running:
                        log(f"row {row.name}: starts beside {', '.join(rows[i].name for i in running.values())}")
                    running[pool.submit(run_one, row, cancel=cancel)] = index
                done, _ = wait(list(running), timeout=WAIT_S, return_when=FIRST_COMPLETED)
                for future in done:
                    results[running.pop(future)] = future.result()
        except BaseException:
            cancel.set()
            wait(list(running), timeout=CANCEL_WAIT_S)
            raise
    return [results[i] for i in range(len(rows))]
