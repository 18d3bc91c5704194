"""Building the pinned Toxiproxy server from its Go module, into a tools folder.

``faultload setup`` (and so ``make setup``) calls :func:`ensure_toxiproxy`:
no release binary needs downloading, ``go install`` fetches the module through
the Go module proxy (GOPATH, GOCACHE and GOMODCACHE stay at go's own settings,
outside the workspace, so a second workspace builds from the cache). The build
writes into a temporary folder inside the tools folder (GOBIN, and GOTMPDIR for
go's own scratch files), and the binary is moved into place only when it runs
and reports the pinned version: a failed, timed-out or interrupted build
leaves no binary, no half-written file and no temporary folder behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from faultload.faults.toxiproxy import BINARY_NAME, CONTAINER_IMAGE, PINNED_VERSION, binary_version

MODULE = "github.com/Shopify/toxiproxy/v2"
# A cold build (module download and compile) took ~1 min on 2 cores; the bound
# is for a slow proxy or a loaded machine, so a hung build cannot hang setup.
BUILD_TIMEOUT_S = 900.0
Log = Callable[[str], None]


class ToxiproxyBuildError(RuntimeError):
    """Toxiproxy is not there and could not be built; the message is one line saying what to do."""


def no_go_advice(target: Path) -> str:
    """The one line printed when Go is absent."""
    return (f"toxiproxy-server {PINNED_VERSION} is not in {target.parent} and there is no `go` to build it: "
            f"install Go (https://go.dev/dl/) and run `faultload setup` again, or put the {PINNED_VERSION} "
            f"release binary (or the one in {CONTAINER_IMAGE}) at {target}")


def ensure_toxiproxy(tool_dir: Path, go: str | None, log: Log, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """``tool_dir``'s toxiproxy-server of the pinned version, built with ``go`` when it is not there.

    ``go`` is the toolchain (:func:`faultload.faults.toxiproxy.find_go`), None
    when there is none. Raises :class:`ToxiproxyBuildError`.
    """
    target = Path(tool_dir) / BINARY_NAME
    if binary_version(target) == PINNED_VERSION:
        log(f"toxiproxy-server {PINNED_VERSION} already at {target}")
        return target
    if go is None:
        raise ToxiproxyBuildError(no_go_advice(target))
    return build_toxiproxy(Path(tool_dir), go, log, timeout_s)


def build_toxiproxy(tool_dir: Path, go: str, log: Log, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """Build the pinned toxiproxy-server into ``tool_dir``; on any failure leave nothing behind."""
    created = [p for p in (tool_dir, *tool_dir.parents) if not p.exists()]
    tool_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".toxiproxy-build-", dir=tool_dir))
    target = tool_dir / BINARY_NAME
    try:
        log(f"building toxiproxy-server {PINNED_VERSION} from {MODULE} into {tool_dir} (~1 min) ...")
        _go_install(go, scratch, timeout_s)
        built = scratch / "bin" / "server"
        version = binary_version(built)
        if version != PINNED_VERSION:
            raise ToxiproxyBuildError(f"the built {built.name} reports version {version!r}, not {PINNED_VERSION}")
        os.replace(built, target)  # same folder, so the binary appears whole or not at all
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        for folder in created:  # innermost first: only the folders this build made, and only if empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    shutil.rmtree(scratch, ignore_errors=True)
    log(f"installed {target}")
    return target


def _go_install(go: str, scratch: Path, timeout_s: float) -> None:
    """``go install`` the server's command into ``scratch/bin``; the whole process group dies on timeout or Ctrl-C."""
    (scratch / "bin").mkdir()
    (scratch / "tmp").mkdir()
    env = {**os.environ, "GOBIN": str(scratch / "bin"), "GOTMPDIR": str(scratch / "tmp"),
           "GOFLAGS": f"{os.environ.get('GOFLAGS', '')} -buildvcs=false".strip()}
    cmd = [go, "install", "-ldflags", f"-X {MODULE}.Version={PINNED_VERSION}", f"{MODULE}/cmd/server@v{PINNED_VERSION}"]
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        raise ToxiproxyBuildError(f"cannot run {go}: {exc}") from None
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ToxiproxyBuildError(f"`go install` of toxiproxy-server took over {timeout_s:.0f}s; stopped it") from None
    except BaseException:
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        tail = " | ".join(output.strip().splitlines()[-5:])
        raise ToxiproxyBuildError(f"`go install` of toxiproxy-server failed (exit {proc.returncode}): {tail}")


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL go and the compilers it started (its own session), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
