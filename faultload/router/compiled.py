"""The compiled router (``router/go/``): its binary's name, finding it, building it.

The Go source answers as ``python -m faultload.router --procs 1`` does, at a
fraction of its CPU (README, "Benchmarks"); a trial's stack serves with it
whenever its router has one process. Its binary is named after a digest of its
source, so a changed source is never served by a stale binary, and two
checkouts sharing one workspace (``bench/`` A/B runs) each find their own.
``faultload setup`` builds it (Go is already needed for Toxiproxy).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable

from faultload.host.gobuild import GoBuildError, build_into, run_go

SOURCE_DIR = Path(__file__).resolve().parent / "go"
# A cold build (the standard library's net/http included) took ~30 s on 2 cores; the bound is for a loaded machine.
BUILD_TIMEOUT_S = 600.0
Log = Callable[[str], None]


class RouterBuildError(GoBuildError):
    """The compiled router is not there and could not be built; one line saying what to do."""


def binary_name(source_dir: Path = SOURCE_DIR) -> str:
    """``faultload-router-<digest of go.mod, go.sum and the .go files>``."""
    digest = hashlib.sha256()
    for path in sorted([source_dir / "go.mod", source_dir / "go.sum", *source_dir.glob("*.go")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"faultload-router-{digest.hexdigest()[:12]}"


def find_router(tool_dir: Path, source_dir: Path = SOURCE_DIR) -> Path | None:
    """The compiled router of ``source_dir`` (this checkout's by default) in ``tool_dir``, or None when it
    is not built."""
    candidate = Path(tool_dir) / binary_name(source_dir)
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def missing_advice(tool_dir: Path) -> str:
    """The one line said when a stack needs the compiled router and it is not built."""
    return (
        f"the compiled router {binary_name()} is not in {tool_dir}: run `faultload setup` "
        f"(it builds it from {SOURCE_DIR} with Go)"
    )


def ensure_router(tool_dir: Path, go: str | None, log: Log, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """``tool_dir``'s compiled router for this source, built with ``go`` when it is not there."""
    found = find_router(tool_dir)
    if found is not None:
        log(f"compiled router already at {found}")
        return found
    if go is None:
        raise RouterBuildError(
            f"the compiled router {binary_name()} is not in {tool_dir} and there is no `go` to "
            f"build it: install Go (https://go.dev/dl/) and run `faultload setup` again"
        )
    log(f"building the compiled router from {SOURCE_DIR} into {tool_dir} ...")

    def build(scratch: Path) -> Path:
        out = scratch / "faultload-router"
        run_go(
            go,
            ["build", "-trimpath", "-o", str(out), "."],
            scratch,
            "the compiled router",
            timeout_s,
            RouterBuildError,
            cwd=SOURCE_DIR,
        )
        return out

    target = build_into(Path(tool_dir), binary_name(), build, RouterBuildError)
    log(f"installed {target}")
    return target
