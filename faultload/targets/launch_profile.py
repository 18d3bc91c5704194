"""``--profile-server``: a cProfile of the launched server's process, written when it stops.

Runs under the target's Python, imported by each family's launcher. uvicorn catches the SIGTERM that stops the
server, shuts down, then raises the signal again; with the default handler that ends the process before a
profile could be written. While profiling, SIGTERM raises SystemExit instead, so the profile is dumped on the
way out.
"""

from __future__ import annotations

import contextlib
import cProfile
import signal
import sys
from typing import Iterator


@contextlib.contextmanager
def profiled(path: str | None) -> Iterator[None]:
    """Profile the block into ``path`` (nothing when None)."""
    if not path:
        yield
        return
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        profiler.dump_stats(path)
