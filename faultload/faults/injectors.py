"""How each way of injecting a fault applies it and heals it: one pair of methods per way.

:data:`faultload.model.fault_kinds.INJECTORS` names the ways (a Toxiproxy toxic, a process paused or
restarted, a call the router's own timer ends, a proxy disabled, the router crashed); every kind names its
own (``FaultKind.injected_by``), and :class:`Injectors` holds one apply and one remove for each, in
``_APPLY`` and ``_REMOVE``. The fault runner (:mod:`faultload.faults.schedule`) is an ``Injectors``: it
decides when, these decide how. Also here: the controllers the runner drives, as protocols.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Awaitable, Mapping, Protocol, Sequence

from faultload.faults.control import FaultControlError, ToxiproxyControl
from faultload.model.faults import KIND, Fault

# the router's control calls that are HTTP requests (pause/resume/crash are signals; restart is its own)
_ROUTER_HTTP_CALLS = frozenset({"timed_fault", "reset_faults"})


class RouterController(Protocol):
    """What the runner needs from the fake router.  Methods may be sync (and then
    must return promptly; timed_fault/reset_faults, HTTP calls, run in a
    thread) or async (bounded by the runner's call timeout).
    ``timed_fault`` opens one timed router kind's window (``model.fault_kinds``: ``router_timed``) with the
    kind's attributes in their stated order; ``seconds`` may be the runner's ``until_end_s`` for a fault
    lasting to the end; ``reset_faults()`` must end every such window early."""

    def timed_fault(self, kind: str, seconds: float, *attributes: Any) -> Awaitable[None] | None: ...
    def crash(self) -> Awaitable[None] | None: ...
    def restart(self) -> Awaitable[None] | None: ...
    def reset_faults(self) -> Awaitable[None] | None: ...
    def pause(self, seconds: float) -> Awaitable[None] | None: ...
    def resume(self) -> Awaitable[None] | None: ...


class ServerController(Protocol):
    """What the runner needs for process faults on the server: ``pause``/``resume`` (SIGSTOP/SIGCONT,
    nested pauses counted by the controller) and ``restart`` (async: bounded by ``restart_timeout_s``)."""

    def pause(self, seconds: float) -> Awaitable[None] | None: ...
    def resume(self) -> Awaitable[None] | None: ...
    def restart(self) -> Awaitable[None] | None: ...


def toxic_names(index: int, fault: Fault) -> tuple[tuple[str, str], ...]:
    """(toxic name, Toxiproxy stream) per toxic of ``fault``: one, or the pair for ``stream=both``.

    Names are unique within a schedule and readable in Toxiproxy's log."""
    return tuple((f"fl{index}_{fault.kind}_{stream}", stream) for stream in fault.streams)


class Injectors:
    """The apply and remove of each way of injecting, and the calls they make (mixed into the fault runner)."""

    control: ToxiproxyControl | None
    proxy_names: Mapping[str, str]
    router: RouterController | None
    server: ServerController | None
    call_timeout_s: float
    restart_timeout_s: float
    until_end_s: float
    _down: dict[str, int]
    _crashed: int

    async def _do_apply(self, index: int, fault: Fault) -> None:
        """Apply ``fault`` the way its kind is injected (``FaultKind.injected_by``)."""
        seconds = fault.duration_s if fault.duration_s is not None else self.until_end_s
        await self._APPLY[KIND[fault.kind].injected_by](self, index, fault, seconds)

    async def _apply_process(self, index: int, fault: Fault, seconds: float) -> None:
        if fault.link == "server":
            await self._call(self.server, "server", fault.kind, *((seconds,) if fault.kind == "pause" else ()))
        else:
            await self._router_call(fault.kind, seconds)

    async def _apply_toxic(self, index: int, fault: Fault, seconds: float) -> None:
        await self._add_toxics(index, fault)

    async def _apply_proxy_down(self, index: int, fault: Fault, seconds: float) -> None:
        self._down[fault.link] = self._down.get(fault.link, 0) + 1
        if self._down[fault.link] == 1:
            await self._control().adisable(self.proxy_names[fault.link])

    async def _apply_router_crash(self, index: int, fault: Fault, seconds: float) -> None:
        self._crashed += 1
        if self._crashed == 1:
            await self._router_call("crash")

    async def _apply_router_timed(self, index: int, fault: Fault, seconds: float) -> None:
        """The router's own timer ends it; its attributes, required then optional, in their stated order."""
        names = KIND[fault.kind].attribute_names
        await self._router_call("timed_fault", fault.kind, seconds, *(fault.attr(name) for name in names))

    async def _do_remove(self, index: int, fault: Fault) -> None:
        """Heal ``fault`` the way its kind is injected; a router-timed one ended on the router's own timer."""
        await self._REMOVE[KIND[fault.kind].injected_by](self, index, fault)

    async def _remove_process(self, index: int, fault: Fault) -> None:
        if fault.kind == "pause":  # a restart is an instant: nothing to heal
            await self._call(self.server if fault.link == "server" else self.router, fault.link, "resume")

    async def _remove_toxic(self, index: int, fault: Fault) -> None:
        await self._remove_toxics(toxic_names(index, fault), self.proxy_names[fault.link])

    async def _remove_proxy_down(self, index: int, fault: Fault) -> None:
        self._down[fault.link] = max(0, self._down.get(fault.link, 0) - 1)
        if self._down[fault.link] == 0:
            await self._control().aenable(self.proxy_names[fault.link])

    async def _remove_router_crash(self, index: int, fault: Fault) -> None:
        self._crashed = max(0, self._crashed - 1)
        if self._crashed == 0:
            await self._router_call("restart")

    async def _remove_router_timed(self, index: int, fault: Fault) -> None:
        return None

    # One (apply, remove) pair per way a kind is injected (faultload.model.fault_kinds.INJECTORS).
    _APPLY = {
        "toxic": _apply_toxic,
        "process": _apply_process,
        "router_timed": _apply_router_timed,
        "proxy_down": _apply_proxy_down,
        "router_crash": _apply_router_crash,
    }
    _REMOVE = {
        "toxic": _remove_toxic,
        "process": _remove_process,
        "router_timed": _remove_router_timed,
        "proxy_down": _remove_proxy_down,
        "router_crash": _remove_router_crash,
    }

    async def _add_toxics(self, index: int, fault: Fault) -> None:
        """Add each toxic of ``fault``; if one fails, take back those already added, so a
        failed apply (recorded, never removed by the schedule) leaves no half of a pair behind."""
        proxy, added = self.proxy_names[fault.link], []
        for name, stream in toxic_names(index, fault):
            try:
                await self._control().aadd_toxic(
                    proxy, name, fault.kind, dict(fault.attributes), stream, fault.toxicity
                )
            except FaultControlError:
                await self._remove_toxics(added, proxy, quiet=True)
                raise
            added.append((name, stream))

    async def _remove_toxics(self, names: Sequence[tuple[str, str]], proxy: str, quiet: bool = False) -> None:
        """Remove every named toxic, each tried even if another fails; the first failure is raised unless ``quiet``."""
        failure: FaultControlError | None = None
        for name, _stream in names:
            try:
                await self._control().aremove_toxic(proxy, name)
            except FaultControlError as exc:
                failure = failure or exc
        if failure is not None and not quiet:
            raise failure

    def _control(self) -> ToxiproxyControl:
        if self.control is None:
            raise FaultControlError("no toxiproxy control")
        return self.control

    async def _router_call(self, method: str, *args: Any) -> None:
        await self._call(self.router, "router", method, *args)

    async def _call(self, target: Any, name: str, method: str, *args: Any) -> None:
        if target is None:
            raise FaultControlError(f"no {name} controller")
        timeout = self.restart_timeout_s if method == "restart" else self.call_timeout_s
        function = getattr(target, method)
        if name == "router" and method in _ROUTER_HTTP_CALLS and not inspect.iscoroutinefunction(function):
            # a sync HTTP call to a paused router blocks until its socket timeout: in a thread it delays only
            # itself, not the loop (which must still resume the router on time)
            result = asyncio.to_thread(function, *args)
        else:
            result = function(*args)
        if inspect.isawaitable(result):
            try:
                await asyncio.wait_for(result, timeout)
            except asyncio.TimeoutError:
                raise FaultControlError(f"{name}.{method} did not finish within {timeout} s") from None
