"""Scratch folders this process made, kept in one list so an exit that skips the cleanup still removes them.

A second interrupt gives the cleanup a few seconds, then ends the process with
``os._exit`` (no ``finally``, no ``atexit``); it calls :func:`remove_all` first,
so a run stopped that way leaves no folder behind either.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

_lock = threading.Lock()
_live: set[Path] = set()


def make(prefix: str, parent: Path | str | None = None) -> Path:
    """A new empty folder (``tempfile.mkdtemp``), remembered until :func:`remove` removes it."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    with _lock:
        _live.add(path)
    return path


def remove(path: Path | str) -> None:
    """Remove a folder made by :func:`make` (and forget it); a missing folder is fine."""
    shutil.rmtree(path, ignore_errors=True)
    with _lock:
        _live.discard(Path(path))


def keep(path: Path | str) -> None:
    """Forget a folder made by :func:`make` without removing it: the user asked to keep it."""
    with _lock:
        _live.discard(Path(path))


def remove_all() -> None:
    """Remove every folder still remembered: the last step before a hard exit."""
    with _lock:
        paths = list(_live)
        _live.clear()
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
