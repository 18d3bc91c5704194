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

from pathlib import Path
from typing import Callable

from faultload.faults.toxiproxy import BINARY_NAME, CONTAINER_IMAGE, PINNED_VERSION, binary_version
from faultload.host.gobuild import GoBuildError, build_into, run_go

MODULE = "github.com/Shopify/toxiproxy/v2"
# A cold build (module download and compile) took ~1 min on 2 cores; the bound
# is for a slow proxy or a loaded machine, so a hung build cannot hang setup.
BUILD_TIMEOUT_S = 900.0
Log = Callable[[str], None]


class ToxiproxyBuildError(GoBuildError):
    """Toxiproxy is not there and could not be built; the message is one line saying what to do."""


def no_go_advice(target: Path) -> str:
    """The one line printed when Go is absent."""
    return (
        f"toxiproxy-server {PINNED_VERSION} is not in {target.parent} and there is no `go` to build it: "
        f"install Go (https://go.dev/dl/) and run `faultload setup` again, or put the {PINNED_VERSION} "
        f"release binary (or the one in {CONTAINER_IMAGE}) at {target}"
    )


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
    log(f"building toxiproxy-server {PINNED_VERSION} from {MODULE} into {tool_dir} (~1 min) ...")

    def build(scratch: Path) -> Path:
        _go_install(go, scratch, timeout_s)
        built = scratch / "bin" / "server"
        version = binary_version(built)
        if version != PINNED_VERSION:
            raise ToxiproxyBuildError(f"the built {built.name} reports version {version!r}, not {PINNED_VERSION}")
        return built

    target = build_into(Path(tool_dir), BINARY_NAME, build, ToxiproxyBuildError)
    log(f"installed {target}")
    return target


def _go_install(go: str, scratch: Path, timeout_s: float) -> None:
    """``go install`` the server's command into ``scratch/bin``."""
    (scratch / "bin").mkdir()
    args = ["install", "-ldflags", f"-X {MODULE}.Version={PINNED_VERSION}", f"{MODULE}/cmd/server@v{PINNED_VERSION}"]
    run_go(go, args, scratch, "toxiproxy-server", timeout_s, ToxiproxyBuildError, env={"GOBIN": str(scratch / "bin")})
