"""``faultload matrix --jobs N``: up to N rows at once on this machine.

A ci row mostly waits: its trials hold requests for the contract's timers (scaled, yet seconds each) and for
its faults' windows. Which trials run beside which is not decided here but by the machine's turns
(:mod:`faultload.host.admission`), shared by every row's session and comparison in the workspace: a trial
beside others takes one slot, and a trial that needs the machine — a size trial, a comparison's (a comparison
row's are all so), a shrink — takes every slot, whichever row it belongs to. One scheduler for rows and trials:
this only starts the rows.

Results come back in the rows' order, as the sequential run's. Ctrl-C (or a row that raises) cancels the
running rows: each stops its session as ``run_row`` does on its own (``matrix.run``).
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable

WAIT_S = 30.0  # one wait for a row to end; the loop itself ends when every row has a result
CANCEL_WAIT_S = 120.0  # cancelled rows stopping their sessions (run_row's _stop takes up to 90 s)


def run_rows_at_once(rows: list[Any], run_one: Callable[..., Any], jobs: int, log: Callable[[str], None]) -> list[Any]:
    """``run_one(row, cancel=event)`` for every row, up to ``jobs`` at once, in the rows' order of starting."""
    cancel = threading.Event()
    queue = list(enumerate(rows))
    running: dict[Future, int] = {}
    results: dict[int, Any] = {}
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="matrix-row") as pool:
        try:
            while queue or running:
                while queue and len(running) < jobs:
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
