"""Run a coroutine on the fastest event loop available."""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine, TypeVar

try:
    import uvloop
except ImportError:  # it is a dependency, but a harness without it still runs, on asyncio's loop
    uvloop = None

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """uvloop's run when installed (it roughly halves the loop's CPU per request), else asyncio's."""
    if uvloop is None:
        return asyncio.run(coro)
    return uvloop.run(coro)
