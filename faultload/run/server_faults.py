"""Process faults on the server under test: ``server:pause`` and ``server:restart``.

The fault runner calls these from its own loop thread. A restart stops the
server (SIGTERM, a short grace, SIGKILL), spawns the same launcher on the same
port *from that thread* (the new server's parent-death signal follows the
thread that forked it, and the runner's thread lives as long as the stack),
then waits for ``/healthz`` off the loop. The ``ServerHandle`` is updated in
place, so the monitor, the watchdog and the drain follow the new pid; while
the restart runs the handle says ``restarting``, which the watchdog does not
call an exit. Futures the old process held in memory die with it by design:
``server:restart`` is a fatal fault for requests in flight across it, and
nothing accepted after it may be lost.
"""

from __future__ import annotations

import asyncio

from faultload.faults.control import NotRestored
from faultload.targets.server import STARTUP_TIMEOUT_S, ServerHandle, wait_healthy

RESTART_GRACE_S = 3.0  # SIGTERM to SIGKILL: a restart, not a drain


class ServerFaults:
    """The runner's ``ServerController`` over one launched server."""

    def __init__(
        self, server: ServerHandle, grace_s: float = RESTART_GRACE_S, startup_timeout_s: float = STARTUP_TIMEOUT_S
    ) -> None:
        self.server = server
        self.grace_s = grace_s
        self.startup_timeout_s = startup_timeout_s

    def pause(self, seconds: float) -> None:
        """SIGSTOP the API server process (resumed at the latest ``seconds`` + a margin later)."""
        self.server.pauser().pause(seconds)

    def resume(self) -> None:
        self.server.pauser().resume()

    async def restart(self) -> None:
        """Stop the server and start it again on its port; return once it answers ``/healthz``.
        Raise ``NotRestored`` if it was stopped and did not answer again."""
        server = self.server
        server.restarting = True
        try:
            await asyncio.to_thread(server.stop, self.grace_s)
            server.respawn()  # here, in the runner's long-lived thread (see the module docstring)
            healthy = await asyncio.to_thread(wait_healthy, server.url, self.startup_timeout_s, server.process)
        finally:
            server.restarting = False
        if not healthy:
            tail = server.log_tail(3).replace("\n", " | ")
            raise NotRestored(f"server did not come back on {server.url} within {self.startup_timeout_s:.0f} s: {tail}")
