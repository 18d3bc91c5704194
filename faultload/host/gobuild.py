"""Running the Go toolchain for setup: a build bounded in time, and its binary moved into place whole.

Toxiproxy (``faults/toxiproxy_build.py``) and the compiled router
(``router/compiled.py``) are built this way: into a temporary folder inside the
tools folder, the binary moved into place only once it is whole and checked, so
a failed, timed-out or interrupted build leaves no binary, no half-written file
and no temporary folder behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Callable

from faultload.host import scratch as scratch_dirs
from faultload.host.processes import child_environment


class GoBuildError(RuntimeError):
    """A Go build failed or could not start; the message is one line saying what happened."""


def build_into(tool_dir: Path, name: str, build: Callable[[Path], Path], error: type[GoBuildError]) -> Path:
    """``build(scratch)`` returns a file it made inside ``scratch``; it becomes ``tool_dir/name``.

    On any failure (``build`` raising, an interrupt) nothing is left: neither the
    scratch folder nor the folders above ``tool_dir`` this call made.
    """
    tool_dir = Path(tool_dir).absolute()  # go runs in its source folder: every path it is given is absolute
    created = [p for p in (tool_dir, *tool_dir.parents) if not p.exists()]
    tool_dir.mkdir(parents=True, exist_ok=True)
    scratch = scratch_dirs.make(f".{name}-build-", tool_dir)
    target = tool_dir / name
    try:
        built = build(scratch)
        if not built.is_file():
            raise error(f"the build of {name} made no binary")
        os.replace(built, target)  # same folder, so the binary appears whole or not at all
    except BaseException:
        scratch_dirs.remove(scratch)
        for folder in created:  # innermost first: only the folders this build made, and only if empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    scratch_dirs.remove(scratch)
    return target


def run_go(
    go: str,
    args: list[str],
    scratch: Path,
    what: str,
    timeout_s: float,
    error: type[GoBuildError],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """``go args`` with go's scratch files in ``scratch/tmp``; the whole process group dies on timeout or Ctrl-C."""
    (scratch / "tmp").mkdir(exist_ok=True)
    inherited = child_environment()
    full_env = {
        **inherited,
        "GOTMPDIR": str(scratch / "tmp"),
        "GOFLAGS": f"{inherited.get('GOFLAGS', '')} -buildvcs=false".strip(),
        **(env or {}),
    }
    try:
        proc = subprocess.Popen(
            [go, *args],
            env=full_env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        raise error(f"cannot run {go}: {exc}") from None
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise error(f"`go {args[0]}` of {what} took over {timeout_s:.0f}s; stopped it") from None
    except BaseException:
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        tail = " | ".join(output.strip().splitlines()[-5:])
        raise error(f"`go {args[0]}` of {what} failed (exit {proc.returncode}): {tail}")


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL go and the compilers it started (its own session), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
