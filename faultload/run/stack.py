"""The system under test for one or more trials: router, proxies, server.

Started once and reused across trials when their stack-level settings agree
(target, regressions, server knobs, time scale, proxies); the pytest suite
does that across Hypothesis examples. A trial may still bring its own router
mode: the router is restarted on the same port, so the server's router URL
stays valid.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

from faultload.faults.stack import FaultStack
from faultload.host import scratch
from faultload.host.network import pick_free_port
from faultload.host.workspace import Workspace
from faultload.model.access import Access, tls_for
from faultload.model.family import CONTRACTS
from faultload.model.router import RouterConfig
from faultload.model.target import TargetSpec
from faultload.model.training import DB_POOL_FDS
from faultload.model.trial import StackConfig
from faultload.router.compiled import find_router, missing_advice
from faultload.router.handle import RouterHandle, start_router
from faultload.run.monitor import snapshot
from faultload.targets import install
from faultload.targets.family import family_of
from faultload.targets.server import STOP_GRACE_S, ServerHandle, attach_url

# Fds a server has not given back for this long (none released) are kept, not draining: the stack is
# restarted then instead of at the end of the whole wait. 0.3.0 keeps ~80 after a training trial (its
# forwarding and DB pools), which the nightly shrink waited out 60 s at a time before every restart.
SETTLE_STILL_S = 10.0


def _fds(pid: int, tree: bool) -> int | None:
    snap = snapshot(pid, tree)
    return None if snap is None else snap.fds


def wait_fds_settle(
    read_fds: Callable[[], int | None],
    target: int,
    timeout_s: float,
    still_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 0.25,
) -> str | None:
    """Poll ``read_fds`` until it is at most ``target`` (None: settled; an unreadable count counts as
    settled, the process is gone), for at most ``timeout_s``, and no longer than ``still_s`` after the
    count last went down: what the reason (returned) then says."""
    started = clock()
    lowest, lowest_at = None, started
    fds = None
    for _ in range(int(timeout_s / poll_s) + 2):  # the clock bounds it; the count too, whatever the clock does
        fds, now = read_fds(), clock()
        if fds is None or fds <= target:
            return None
        if lowest is None or fds < lowest:
            lowest, lowest_at = fds, now
        if now - started >= timeout_s:
            break
        if now - lowest_at >= still_s:
            return (
                f"server fds not back at baseline: {fds} vs {target}, none released in {still_s:g}s "
                f"(after {now - started:.0f}s of {timeout_s:g}s)"
            )
        sleep(poll_s)
    return f"server fds not back at baseline after {timeout_s:g}s ({fds} vs {target})"


class Stack:
    """Router (+ Toxiproxy edge/backend proxies) + server, started together, stopped together."""

    def __init__(
        self, config: StackConfig, router_config: RouterConfig, workspace: Workspace, access: Access = Access()
    ) -> None:
        self.config = config
        self.access = access  # how a url= target is reached (its key, headers, TLS): never in the config
        self.spec: TargetSpec = config.spec
        self.workspace = workspace
        self.router_config = router_config
        self.router: RouterHandle | None = None
        self.server: ServerHandle | None = None
        self.faults: FaultStack | None = None
        self.topology: dict[str, str] = {}
        self.run_dir: Path | None = None
        self.baseline_fds: int | None = None

    def load_url_for(self, direct: bool) -> str:
        """Where a trial's load goes: the edge proxy when there is one, unless ``direct``."""
        assert self.server is not None
        return self.server.url if direct else self.topology.get("edge", self.server.url)

    def start(self) -> "Stack":
        """Start everything; on any failure stop what was started and re-raise.

        The server is spawned first, on ports chosen up front (its router URL
        is only a string in its database until the load begins), and the
        router and Toxiproxy start while it imports: a fresh stack is ready
        ~0.4 s sooner than starting them one after another.
        """
        compiled = find_router(self.workspace.tools)  # the handle keeps it: it serves every one-process config
        if compiled is None:
            raise install.InstallError(missing_advice(self.workspace.tools))  # setup, not the harness: exit 2
        self.workspace.runs.mkdir(parents=True, exist_ok=True)
        self.run_dir = scratch.make("stack-", self.workspace.runs)
        if self.config.keep_run_dir:
            scratch.keep(self.run_dir)
        try:
            server_port = self.config.server_port or pick_free_port()
            # The port the server forwards to: the backend proxy's, or the router's without proxies.
            forward_port = pick_free_port(exclude={server_port})
            self.server = self._start_server(
                server_port,
                f"http://127.0.0.1:{forward_port}",
                lambda: self._start_router_and_proxies(server_port, forward_port, compiled),
            )
            snap = snapshot(self.server.pid, self.server.tree)
            self.baseline_fds = snap.fds if snap else None
        except BaseException:
            self.close()
            raise
        return self

    def _start_router_and_proxies(self, server_port: int, forward_port: int, compiled: Path) -> None:
        # without proxies the server forwards straight to the router's port
        self.router = start_router(
            self.router_config, port=0 if self.config.proxies else forward_port, compiled=compiled
        )
        if not self.config.proxies:
            return
        self.faults = FaultStack(self.workspace.tools, self.run_dir)
        api = urlsplit(self.spec.url).netloc if self.spec.kind == "url" else f"127.0.0.1:{server_port}"
        topology = self.faults.start_proxies(
            api, f"127.0.0.1:{self.router.port}", backend_port=forward_port, exclude=frozenset({server_port})
        )
        # the edge proxy passes TLS through: the load speaks the target's scheme to it
        scheme = urlsplit(self.spec.url).scheme if self.spec.kind == "url" else "http"
        self.topology = {"edge": f"{scheme}://{topology.edge.address}", "backend": topology.backend.url}

    def _start_server(self, port: int, router_url: str, while_starting: Callable[[], None]) -> ServerHandle:
        cfg = self.config
        if self.spec.kind == "url":
            while_starting()
            return attach_url(self.spec, cfg.server_pid, tls_for(self.spec.url or "", self.access))
        targets = self.workspace.targets
        if not install.is_installed(targets, self.spec):
            raise install.InstallError(
                f"target {self.spec.text} is not installed; run `faultload setup --target {self.spec.text}`"
            )
        assert self.run_dir is not None
        return family_of(self.spec).launch(
            self.spec,
            install.target_python(targets, self.spec),
            self.run_dir,
            port,
            router_url,
            regress=cfg.regress,
            fixes=cfg.fixes,
            time_scale=cfg.time_scale,
            knobs=dataclasses.asdict(cfg.knobs),
            profile_path=Path(cfg.profile_server).resolve() if cfg.profile_server else None,
            while_starting=while_starting,
            engine=cfg.engine,
            null_backend={"seconds_per_token": cfg.engine_s_per_token} if cfg.engine == "null" else None,
        )

    def use_router(self, router_config: RouterConfig) -> None:
        """Give the next trial its own router mode (restart on the same port if it differs) and no fault window
        left from the last trial (one its heal could not end: a control call that waited out a router pause)."""
        assert self.router is not None
        if router_config != self.router.config:
            self.router.reconfigure(router_config)
        else:
            self.router.reset_faults()

    def wait_baseline(self, timeout_s: float, slack_fds: int = 2, still_s: float = SETTLE_STILL_S) -> str | None:
        """Wait (bounded) until the server's fds are back near their start-up baseline; None when they are,
        else why not (the caller restarts the stack).

        A server with the null engine may have trained: its DB pool then keeps
        its connections (``DB_POOL_FDS``), which no wait gives back. A family with a worker pool is not waited
        for: its pool, not the last trial, sets its fds (the contract's ``worker_pool_drain``), and each trial
        judges its peak from its own start.
        """
        if self.server is None or self.baseline_fds is None or CONTRACTS[self.config.spec.family].worker_pool:
            return None
        if self.config.engine == "null":
            slack_fds += DB_POOL_FDS
        pid, tree = self.server.pid, self.server.tree
        return wait_fds_settle(lambda: _fds(pid, tree), self.baseline_fds + slack_fds, timeout_s, still_s)

    def close(self, server_grace_s: float | None = None) -> list[str]:
        """Stop everything (bounded); never raises but KeyboardInterrupt; returns what failed to clean up.

        Every step runs even if one before it is interrupted (a Ctrl-C while the
        server stops still stops the router and removes the run dir).
        ``server_grace_s`` shortens the server's SIGTERM-to-SIGKILL grace: a
        server stopped mid-load waits for its in-flight forwards (seconds, with
        a latency router's queue full), which an interrupted trial does not.
        """
        errors: list[str] = []
        with contextlib.ExitStack() as steps:  # run last-in first-out
            if self.run_dir is not None and not self.config.keep_run_dir:
                steps.callback(scratch.remove, self.run_dir)
            if self.router is not None:
                steps.callback(self.router.stop)
            # Before the router: a server whose forwards fail (no router) logs and
            # stalls on each of them, and takes its whole grace to stop.
            if self.server is not None:
                steps.callback(self.server.stop, STOP_GRACE_S if server_grace_s is None else server_grace_s)
            if self.faults is not None:
                steps.callback(lambda: errors.extend(self.faults.close()))
        return errors
