"""The compiled router (``router/go/``): its binary's name, finding it, building it.

The Go source answers as ``python -m faultload.router --procs 1`` does, at a
fraction of its CPU (README, "Benchmarks"); a trial's stack serves with it
whenever its router has one process. Its binary is named after a digest of its
source (``host.gobuild.GoProgram``). ``faultload setup`` builds it (Go is
already needed for Toxiproxy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from faultload.host.gobuild import GoBuildError, GoProgram

SOURCE_DIR = Path(__file__).resolve().parent / "go"
# A cold build (the standard library's net/http included) took ~30 s on 2 cores; the bound is for a loaded machine.
BUILD_TIMEOUT_S = 600.0
Log = Callable[[str], None]


class RouterBuildError(GoBuildError):
    """The compiled router is not there and could not be built; one line saying what to do."""


ROUTER = GoProgram("faultload-router", SOURCE_DIR, "the compiled router", RouterBuildError)


def binary_name(source_dir: Path = SOURCE_DIR) -> str:
    """``faultload-router-<digest of go.mod, go.sum and the .go files>``."""
    return ROUTER.binary_name(source_dir)


def find_router(tool_dir: Path, source_dir: Path = SOURCE_DIR) -> Path | None:
    """The compiled router of ``source_dir`` (this checkout's by default) in ``tool_dir``, or None when it
    is not built."""
    return ROUTER.find(tool_dir, source_dir)


def missing_advice(tool_dir: Path) -> str:
    """The one line said when a stack needs the compiled router and it is not built."""
    return ROUTER.missing_advice(tool_dir)


def ensure_router(tool_dir: Path, go: str | None, log: Log, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """``tool_dir``'s compiled router for this source, built with ``go`` when it is not there."""
    return ROUTER.ensure(tool_dir, go, log, timeout_s)
