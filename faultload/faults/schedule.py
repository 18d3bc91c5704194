"""Applying a FaultSchedule on time, recording what really happened, and healing.

The runner is the suite's nemesis: one asyncio task per fault sleeps until the
fault's start (relative to the trial's monotonic start), applies it, sleeps
until its end, removes it. An anchored fault (``Fault.anchor``) first polls its
event's counter (``events``: the trial hands one per event) until the K-th
event, bounded by ``events_until_s``; its start and end then count from the
moment the event was seen, and a fault whose event (or start) never came is
recorded ``not_applied`` with the reason.  Each fault yields an :class:`~faultload.record.faults.AppliedFault`
record with the times it was actually in force, so a checker can ask which
faults were active when a request failed (``FaultLog.active_at``).

``heal()`` undoes everything still active (each removal bounded, then one
Toxiproxy reset, router faults reset, a crashed router restarted and a paused
server or router resumed).  Call it
at the end of a trial, on failure and on Ctrl-C (``asyncio.run`` cancels the
main task, so a ``finally: await runner.heal()`` runs).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any, Callable, Mapping

from faultload.faults.control import FaultControlError, NotRestored, ToxiproxyControl
from faultload.faults.injectors import Injectors, RouterController, ServerController
from faultload.model.anchors import Anchor
from faultload.model.faults import PROXY_LINKS, ROUTER_TIMED_KINDS, Fault, FaultSchedule
from faultload.record.faults import AppliedFault, FaultLog

MAX_FAULTS = 1000
EVENT_POLL_S = 0.01  # how often an anchored fault reads its event's counter (a shared-memory or stat read)
# the router's control calls that are HTTP requests (pause/resume/crash are signals; restart is its own)
_ROUTER_HTTP_CALLS = ROUTER_TIMED_KINDS | {"reset_faults"}


class FaultRunner(Injectors):
    """Applies ``schedule`` through ``control`` (proxy names per link) and ``router``."""

    def __init__(
        self,
        schedule: FaultSchedule,
        control: ToxiproxyControl | None,
        proxy_names: Mapping[str, str],
        router: RouterController | None = None,
        server: ServerController | None = None,
        call_timeout_s: float = 5.0,
        restart_timeout_s: float = 240.0,
        heal_timeout_s: float = 20.0,
        until_end_s: float = 86400.0,
        clock: Callable[[], float] = time.monotonic,
        events: Mapping[str, Callable[[], int]] | None = None,
        events_until_s: float | None = None,
    ) -> None:
        self.schedule = schedule
        self.control = control
        self.proxy_names = dict(proxy_names)
        self.router = router
        self.server = server
        self.call_timeout_s = call_timeout_s
        self.restart_timeout_s = restart_timeout_s
        self.heal_timeout_s = heal_timeout_s
        self.until_end_s = until_end_s
        self.clock = clock
        self.events = dict(events or {})  # event -> its count since the load started
        self.events_until_s = until_end_s if events_until_s is None else events_until_s
        self._check()
        self._records = [AppliedFault(i, f) for i, f in enumerate(schedule.faults)]
        self._tasks: list[asyncio.Task[None]] = []
        self._down: dict[str, int] = {}
        self._crashed = 0
        self._restarting = asyncio.Lock()  # one restart of the server at a time (a second would stop the first's)
        self.trial_start: float | None = None
        self.trial_start_epoch: float | None = None

    def _check(self) -> None:
        """Fail before the trial, not in the middle of it."""
        if len(self.schedule.faults) > MAX_FAULTS:
            raise ValueError(f"schedule: {len(self.schedule.faults)} faults; at most {MAX_FAULTS}")
        for i, fault in enumerate(self.schedule.faults):
            if fault.link in PROXY_LINKS:
                if self.control is None or fault.link not in self.proxy_names:
                    raise ValueError(
                        f"schedule.faults[{i}].link: no proxy for {fault.link!r}; "
                        f"have: {', '.join(self.proxy_names) or '(none)'}"
                    )
            elif fault.link == "server":
                if self.server is None:
                    raise ValueError(f"schedule.faults[{i}].link: server fault {fault.kind!r} but no server controller")
            elif self.router is None:
                raise ValueError(f"schedule.faults[{i}].link: router fault {fault.kind!r} but no router controller")
            if fault.anchor is not None and fault.anchor.event not in self.events:
                raise ValueError(
                    f"schedule.faults[{i}].anchor: no counter of {fault.anchor.event!r} events; "
                    f"have: {', '.join(self.events) or '(none)'}"
                )

    # -- running -------------------------------------------------------------
    def start(self, trial_start: float | None = None) -> None:
        """Schedule every fault relative to ``trial_start`` (the runner's clock; default: now)."""
        if self._tasks:
            raise RuntimeError("FaultRunner already started")
        now = self.clock()
        self.trial_start = now if trial_start is None else trial_start
        self.trial_start_epoch = time.time() - (now - self.trial_start)
        self._tasks = [asyncio.create_task(self._run_one(i), name=f"fault-{i}") for i in range(len(self._records))]

    async def wait(self, timeout_s: float) -> bool:
        """Wait (bounded) until every scheduled apply/remove has happened; True if so."""
        if not self._tasks:
            return True
        done, pending = await asyncio.wait(self._tasks, timeout=timeout_s)
        return not pending

    def _now(self) -> float:
        return self.clock() - (self.trial_start or 0.0)

    async def _sleep_until(self, t: float) -> None:
        await asyncio.sleep(max(0.0, t - self._now()))

    def _seen(self, event: str) -> int:
        """The event's count so far; 0 while its counter cannot be read (it is read again)."""
        try:
            return int(self.events[event]())
        except Exception:  # a counter that fails now may answer at the next poll
            return 0

    async def _wait_event(self, index: int, anchor: Anchor) -> float | None:
        """Trial seconds when the anchor's event was seen, or None (recorded) if it did not come in time."""
        polls = int(max(0.0, self.events_until_s - self._now()) / EVENT_POLL_S) + 2
        for _ in range(polls):
            if self._seen(anchor.event) >= anchor.count:
                at = self._now()
                self._update(index, event_at_s=at)
                return at
            if self._now() >= self.events_until_s:
                break
            await asyncio.sleep(EVENT_POLL_S)
        self._update(
            index,
            not_applied=f"{anchor.to_spec()} never came by t={self.events_until_s:g}s "
            f"({self._seen(anchor.event)} seen)",
        )
        return None

    async def _run_one(self, index: int) -> None:
        fault = self._records[index].fault
        origin = 0.0
        if fault.anchor is not None:
            event_at = await self._wait_event(index, fault.anchor)
            if event_at is None:
                return
            origin = event_at
        await self._sleep_until(origin + fault.start_s)
        if not await self._apply(index):
            return
        if fault.link == "server" and fault.kind == "restart":  # an instant: in force while it ran
            await self._remove(index, by="schedule")
            return
        if fault.duration_s is None:
            return
        await self._sleep_until(origin + fault.end_s)
        await self._remove(index, by="schedule")

    def _update(self, index: int, **changes: Any) -> None:
        for key in ("applied_at_s", "removed_at_s"):
            if key in changes and changes[key] is not None:
                changes[key.replace("_s", "_epoch")] = (self.trial_start_epoch or 0.0) + changes[key]
        self._records[index] = replace(self._records[index], **changes)

    async def _apply(self, index: int) -> bool:
        fault = self._records[index].fault
        if fault.link == "server" and fault.kind == "restart":
            async with self._restarting:  # a restart drawn while another runs starts once that one is done
                return await self._apply_now(index, fault)
        return await self._apply_now(index, fault)

    async def _apply_now(self, index: int, fault: Fault) -> bool:
        self._update(index, applied_at_s=self._now())
        try:
            await self._do_apply(index, fault)
        except asyncio.CancelledError:
            raise
        except NotRestored as exc:  # it took effect and never ended: in force to the end of the trial
            self._update(index, removed_at_s=self._now(), remove_error=_one_line(exc), removed_by="schedule")
            return False
        except Exception as exc:  # recorded, never fatal to the trial
            self._update(index, error=_one_line(exc))
            return False
        return True

    async def _remove(self, index: int, by: str) -> None:
        record = self._records[index]
        if not record.applied or record.removed_at_s is not None:
            return
        error = None
        try:
            await self._do_remove(index, record.fault)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = _one_line(exc)
        self._update(index, removed_at_s=self._now(), remove_error=error, removed_by=by)

    # -- healing ---------------------------------------------------------------
    async def heal(self) -> list[str]:
        """Stop the schedule and undo everything still active, within ``heal_timeout_s``.

        Returns the errors met (empty when clean); never raises for a failed step.
        """
        errors: list[str] = []
        try:
            await asyncio.wait_for(self._heal(errors), self.heal_timeout_s)
        except asyncio.TimeoutError:
            errors.append(f"heal did not finish within {self.heal_timeout_s} s")
        return errors

    async def _heal(self, errors: list[str]) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=self.call_timeout_s)
            self._note_never_applied()
        router_active = False
        for index, record in enumerate(self._records):
            if not record.applied or record.removed_at_s is not None:
                continue
            router_active |= record.fault.link == "router" and record.fault.kind in ROUTER_TIMED_KINDS
            await self._remove(index, by="heal")
            if self._records[index].remove_error:
                errors.append(f"fault {index} ({record.fault.to_spec()}): {self._records[index].remove_error}")
        self._down.clear()
        if self.control is not None and any(f.link in PROXY_LINKS for f in self.schedule.faults):
            try:
                await self.control.areset()
            except FaultControlError as exc:
                errors.append(str(exc))
        if self.router is not None and router_active:
            try:
                await self._router_call("reset_faults")
            except Exception as exc:
                errors.append(_one_line(exc))

    def _note_never_applied(self) -> None:
        """Say why each fault the schedule never reached was not applied: the load ended first."""
        now = self._now()
        for index, record in enumerate(self._records):
            if record.applied_at_s is not None or record.not_applied is not None or record.error is not None:
                continue
            anchor = record.fault.anchor
            if anchor is None:
                why = f"the load ended (t={now:.3f}s) before its start"
            elif record.event_at_s is None:
                why = f"the load ended (t={now:.3f}s) before {anchor.to_spec()} ({self._seen(anchor.event)} seen)"
            else:
                why = (
                    f"the load ended (t={now:.3f}s) before its offset after {anchor.to_spec()} (seen at "
                    f"t={record.event_at_s:.3f}s)"
                )
            self._update(index, not_applied=why)

    # -- results -----------------------------------------------------------------
    def records(self) -> tuple[AppliedFault, ...]:
        return tuple(self._records)

    def log(self) -> FaultLog:
        return FaultLog(self.records(), self.trial_start_epoch)

    def active_at(self, t: float) -> list[Fault]:
        return self.log().active_at(t)


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if not isinstance(exc, FaultControlError) else str(exc)
    return " ".join(text.split())[:500]
