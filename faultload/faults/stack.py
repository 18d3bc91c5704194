"""The fault side of one trial: a Toxiproxy server, the edge/backend proxies, a running schedule.

The trial itself is synchronous; ``FaultRunner`` is asyncio. The runner gets
an event loop of its own in a thread, so applying a fault never waits on the
trial's loop and vice versa. That thread lives as long as the FaultStack, not
one schedule: a router restarted by a ``router:crash`` fault is forked from
it, and the restarted router's parent-death signal (PR_SET_PDEATHSIG) follows
the *thread* that forked it, so ending the thread after each trial killed the
router (a server respawned by ``server:restart`` is forked from it too). ``close()`` heals (removes every toxic, re-enables proxies,
resets/restarts the router), deletes the proxies and stops the server,
bounded in time, and is safe to call on any path out.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Callable, Mapping

from faultload.faults.control import ToxiproxyControl
from faultload.faults.schedule import FaultRunner, RouterController, ServerController
from faultload.faults.topology import Topology, create_topology, teardown
from faultload.faults.toxiproxy import ToxiproxyServer, find_toxiproxy
from faultload.model.faults import FaultSchedule
from faultload.record.faults import FaultLog

_LOOP_START_TIMEOUT_S = 5.0


class FaultStack:
    def __init__(self, tool_dir: Path, log_dir: Path, seed: int | None = None) -> None:
        binary = find_toxiproxy(tool_dir)
        if binary is None:
            raise RuntimeError(f"toxiproxy-server not found in {tool_dir} or PATH; run `faultload setup`")
        self.server = ToxiproxyServer(binary, log_dir, seed=seed)
        self.control: ToxiproxyControl | None = None
        self.topology: Topology | None = None
        self.runner: FaultRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._healed = True
        self._closed = False

    def start_proxies(
        self,
        api_upstream: str,
        router_upstream: str,
        backend_port: int | None = None,
        exclude: frozenset[int] = frozenset(),
    ) -> Topology:
        """Start toxiproxy and create ``edge`` -> API server, ``backend`` -> router (on ``backend_port`` if given;
        the edge on none of ``exclude``)."""
        self.server.start()
        self.control = self.server.control()
        self.topology = create_topology(
            self.control, api_upstream, router_upstream, backend_port=backend_port, exclude=exclude
        )
        return self.topology

    def start_schedule(
        self,
        schedule: FaultSchedule,
        router: RouterController | None,
        t0: float,
        server: ServerController | None = None,
        events: Mapping[str, Callable[[], int]] | None = None,
        events_until_s: float | None = None,
    ) -> None:
        """Run ``schedule`` relative to ``t0`` (time.monotonic) in the stack's own loop thread; an anchored
        fault waits for its event on ``events`` (counts since the load began) until ``events_until_s``."""
        self.runner = None
        self._healed = True
        if not schedule.faults:
            return
        names = self.topology.names if self.topology else {}
        self.runner = FaultRunner(
            schedule, self.control, names, router=router, server=server, events=events, events_until_s=events_until_s
        )
        self._ensure_loop()
        assert self._loop is not None
        self._healed = False
        asyncio.run_coroutine_threadsafe(self._start(t0), self._loop).result(_LOOP_START_TIMEOUT_S)

    def _ensure_loop(self) -> None:
        """Start the loop thread once; it is reused by every schedule until :meth:`close`."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            return
        ready = threading.Event()

        def loop_main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=loop_main, name="faultload-faults", daemon=True)
        self._thread.start()
        if not ready.wait(_LOOP_START_TIMEOUT_S):
            raise RuntimeError("fault scheduler thread did not start")

    async def _start(self, t0: float) -> None:
        assert self.runner is not None
        self.runner.start(trial_start=t0)

    def log(self) -> FaultLog | None:
        return self.runner.log() if self.runner else None

    def stop_schedule(self) -> list[str]:
        """Heal the running schedule; the proxies and the loop thread stay. Idempotent."""
        errors: list[str] = []
        if self.runner is not None and self._loop is not None and not self._healed:
            self._healed = True
            future = asyncio.run_coroutine_threadsafe(self.runner.heal(), self._loop)
            try:
                errors += future.result(self.runner.heal_timeout_s + 5.0)
            except Exception as exc:  # a heal that cannot finish must not stop the teardown
                errors.append(f"heal: {exc!r}")
        return errors

    def _stop_loop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._loop = self._thread = None

    def close(self) -> list[str]:
        """Heal, tear down, stop; never raises; returns what failed. Idempotent."""
        if self._closed:
            return []
        self._closed = True
        errors = self.stop_schedule()
        self._stop_loop()
        return errors + teardown(self.control, self.server)
