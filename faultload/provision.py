"""``faultload setup``: Toxiproxy into the workspace's tools folder, then the target venvs, each only when missing.

Toxiproxy comes first: it is the quick step and the one a machine may lack a
toolchain for, so a missing Go is said in one line before minutes of target
installs. The commands are the same from the checkout (``make setup``) and
from a user's own venv: everything lands under the workspace's root.
"""

from __future__ import annotations

from typing import Callable

from faultload.faults.toxiproxy import find_go
from faultload.faults.toxiproxy_build import ToxiproxyBuildError, ensure_toxiproxy
from faultload.model.target import TargetSpec
from faultload.targets.install import InstallError, check_release_exists, ensure_target
from faultload.workspace import Workspace

Log = Callable[[str], None]


def provision(workspace: Workspace, specs: list[TargetSpec], go_named: str | None, log: Log) -> str | None:
    """Install what is missing; None when all is there, else the one-line reason setup stopped.

    ``go_named`` is the caller's ``$GO`` (None: PATH, then /usr/local/go).
    """
    try:
        for spec in specs:  # a release that does not exist is bad input: said before minutes of builds
            check_release_exists(workspace.targets, spec)
    except InstallError as exc:
        return str(exc)
    try:
        ensure_toxiproxy(workspace.tools, find_go(go_named), log)
    except ToxiproxyBuildError as exc:
        return str(exc)
    for spec in specs:
        if spec.kind == "url":
            continue
        try:
            ensure_target(workspace.targets, spec, log)
        except InstallError as exc:
            return str(exc)
    return None
