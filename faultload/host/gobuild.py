"""Running the Go toolchain for setup: a build bounded in time, and its binary moved into place whole.

Toxiproxy (``faults/toxiproxy_build.py``), the compiled router
(``router/compiled.py``) and the compiled client (``client/compiled.py``) are built this way: into a temporary folder inside the
tools folder, the binary moved into place only once it is whole and checked, so
a failed, timed-out or interrupted build leaves no binary, no half-written file
and no temporary folder behind.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
from dataclasses import dataclass
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


@dataclass(frozen=True)
class GoProgram:
    """One of faultload's own Go programs (the compiled router, the compiled client): its binary is named after
    a digest of its source, so a changed source is never run from a stale binary, and two checkouts sharing one
    workspace (``bench/`` A/B runs) each find their own."""

    stem: str  # the binary's name before the digest
    source_dir: Path
    what: str  # how messages name it
    error: type[GoBuildError]

    def binary_name(self, source_dir: Path | None = None) -> str:
        """``<stem>-<digest of go.mod, go.sum and every .go file under the source>``."""
        source = source_dir or self.source_dir
        digest = hashlib.sha256()
        for path in sorted([source / "go.mod", source / "go.sum", *source.rglob("*.go")]):
            digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
        return f"{self.stem}-{digest.hexdigest()[:12]}"

    def find(self, tool_dir: Path, source_dir: Path | None = None) -> Path | None:
        """The binary of ``source_dir`` (this checkout's by default) in ``tool_dir``; None when not built."""
        candidate = Path(tool_dir) / self.binary_name(source_dir)
        return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None

    def missing_advice(self, tool_dir: Path) -> str:
        """The one line said when it is needed and not built."""
        return (
            f"{self.what} {self.binary_name()} is not in {tool_dir}: run `faultload setup` "
            f"(it builds it from {self.source_dir} with Go)"
        )

    def ensure(self, tool_dir: Path, go: str | None, log: Callable[[str], None], timeout_s: float) -> Path:
        """``tool_dir``'s binary for this source, built with ``go`` when it is not there."""
        found = self.find(tool_dir)
        if found is not None:
            log(f"{self.what} already at {found}")
            return found
        if go is None:
            raise self.error(
                f"{self.what} {self.binary_name()} is not in {tool_dir} and there is no `go` to "
                f"build it: install Go (https://go.dev/dl/) and run `faultload setup` again"
            )
        log(f"building {self.what} from {self.source_dir} into {tool_dir} ...")

        def build(scratch: Path) -> Path:
            out = scratch / self.stem
            run_go(
                go,
                ["build", "-trimpath", "-o", str(out), "."],
                scratch,
                self.what,
                timeout_s,
                self.error,
                cwd=self.source_dir,
            )
            return out

        target = build_into(Path(tool_dir), self.binary_name(), build, self.error)
        log(f"installed {target}")
        return target
