"""``faultload setup``: the compiled router and client and Toxiproxy into the workspace's tools folder and the target venvs,
each only when missing.

A missing Go (with no Toxiproxy or compiled router built) is said in one line before minutes of
target installs. Otherwise the Go builds (the compiled router and client, then Toxiproxy: ``make test`` starts
its unit tier once Toxiproxy is there, so the other two are there too; the Go compiler's CPU) run
beside the installs (pip's downloads), and the target venvs install side by
side once the torch they share is there (one after another, torch, 0.4.0
and 0.3.0 took 116 + 99 + 88 s on the 2-core machine). The commands are the
same from the checkout (``make setup``) and from a user's own venv:
everything lands under the workspace's root.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from faultload.client.compiled import ensure_client
from faultload.faults.toxiproxy import find_go
from faultload.faults.toxiproxy_build import ensure_toxiproxy
from faultload.host.gobuild import GoBuildError
from faultload.host.workspace import Workspace
from faultload.model.target import TargetSpec
from faultload.router.compiled import ensure_router
from faultload.targets.install import InstallError, check_release_exists, ensure_shared_torch, ensure_target

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
    go = find_go(go_named)
    targets = [spec for spec in specs if spec.kind != "url"]
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="faultload-setup") as pool:
        tools = pool.submit(_ensure_tools, workspace.tools, go, log)
        if go is None:  # nothing to build with: answered at once, and said before any install starts
            reason = _failure(tools)
            if reason:
                return reason
        installs = pool.submit(_ensure_targets, workspace.targets, targets, log)
        return _failure(tools) or _failure(installs)


def _ensure_tools(tool_dir: Path, go: str | None, log: Log) -> None:
    """The compiled router and client, then Toxiproxy (whose binary ``make test`` waits for)."""
    ensure_router(tool_dir, go, log)
    ensure_client(tool_dir, go, log)
    ensure_toxiproxy(tool_dir, go, log)


def _ensure_targets(targets_dir: Path, specs: list[TargetSpec], log: Log) -> None:
    """Torch once, then every target venv side by side; raises the first failure in ``specs`` order
    (after every install has ended)."""
    if not specs:
        return
    ensure_shared_torch(targets_dir, log)
    with ThreadPoolExecutor(max_workers=len(specs), thread_name_prefix="faultload-target") as pool:
        futures = [pool.submit(ensure_target, targets_dir, spec, log) for spec in specs]
    for future in futures:
        future.result()


def _failure(future: Future) -> str | None:
    """A setup step's one-line reason it failed, None when it did not."""
    try:
        future.result()
    except (GoBuildError, InstallError) as exc:
        return str(exc)
    return None
