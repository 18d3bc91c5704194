"""The compiled client (``client/go/``): its binary's name, finding it, building it.

The Go source runs a raw client's job as :mod:`faultload.client.raw` does, at a
fraction of its CPU (README, "Benchmarks"); a trial's ``raw`` workers run it
whenever it is built (``raw-python`` keeps the Python one). Its binary is named
after a digest of its source (``host.gobuild.GoProgram``); ``faultload setup``
builds it beside the compiled router.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from faultload.host.gobuild import GoBuildError, GoProgram

SOURCE_DIR = Path(__file__).resolve().parent / "go"
BUILD_TIMEOUT_S = 600.0  # as the router's: a cold build of net/http on a loaded 2-core machine


class ClientBuildError(GoBuildError):
    """The compiled client is not there and could not be built; one line saying what to do."""


CLIENT = GoProgram("faultload-client", SOURCE_DIR, "the compiled client", ClientBuildError)


def find_client(tool_dir: Path) -> Path | None:
    """This checkout's compiled client in ``tool_dir``, or None when it is not built."""
    return CLIENT.find(tool_dir)


def ensure_client(tool_dir: Path, go: str | None, log: Callable[[str], None]) -> Path:
    """``tool_dir``'s compiled client for this source, built with ``go`` when it is not there."""
    return CLIENT.ensure(tool_dir, go, log, BUILD_TIMEOUT_S)
