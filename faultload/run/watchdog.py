"""Recognise a server collapse while the trial runs, name it, and say when to stop.

A collapsed server does not answer; waiting out every client timeout (45 s
polls, 300 s forwards, 16 retries) takes tens of minutes and teaches nothing.
The watchdog reads the monitor's samples as they arrive and raises *signals*,
each with an onset time and one line of evidence:

- ``fd_exhaustion``: the server's open fds within ``fd_fraction`` of its own
  soft RLIMIT_NOFILE (or "Too many open files" in its log);
- ``accept_queue_overflow``: the listen queue pinned at its backlog while the
  kernel's ListenOverflows rise, for ``accept_window_s``;
- ``event_loop_stall``: every /healthz probe failing or slower than
  ``stall_latency_s`` for ``stall_window_s``;
- ``no_progress``: requests outstanding, yet neither the client nor the router
  completed or received anything for ``no_progress_window_s``. A collapse is
  the server's: while an injected fault outside the server process (edge,
  backend or router link: :data:`EXPLAINING_LINKS`) is in force and the
  server's own ``/healthz`` answers fine, the fault explains the idleness and
  the window does not run. It restarts when the last such fault heals, and
  then lasts ``reconnect_s`` longer (a client may sit out an HTTP timeout and
  a backoff sleep after a partition before it tries again);
- ``server_exit``: the server process is gone.

Once a signal fires the watchdog keeps watching for ``confirm_s`` to collect
what follows, then asks the trial to stop. The verdict names the signal with
the earliest onset as the cause and lists the others, in time order, as
consequences. Pure logic over numbers (the fault windows come in as values,
:meth:`Watchdog.observe_faults`): unit-tested on synthetic samples.

The server's own signals (fds, accept queue, ``/healthz``, exit) are never
excused by a fault: the /healthz probe and the listen queue are the server's,
not the client's side of a proxy, so an edge fault cannot pin the one or fail
the other.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from faultload.host.settings import read_faultload_table
from faultload.model.watchdog import FaultWindow, WatchdogLimits
from faultload.record.collapse import (
    ACCEPT_QUEUE_OVERFLOW,
    EVENT_LOOP_STALL,
    FD_EXHAUSTION,
    NO_PROGRESS,
    SERVER_EXIT,
    CollapseVerdict,
    Signal,
)

# Faults outside the server process, on the path of the work: each can stop
# progress while the server itself is well (its health is judged apart).
EXPLAINING_LINKS = ("edge", "backend", "router")


class _Window:
    """Tracks since when a condition has held continuously."""

    def __init__(self) -> None:
        self.since: float | None = None

    def update(self, t: float, holds: bool) -> float | None:
        if not holds:
            self.since = None
        elif self.since is None:
            self.since = t
        return self.since


class Watchdog:
    """Feed it samples in time order; ask ``should_stop`` and ``verdict``."""

    def __init__(
        self,
        limits: WatchdogLimits,
        fd_limit: tuple[int, int] | None,
        faults: tuple[FaultWindow, ...] = (),
        reconnect_s: float = 0.0,
    ) -> None:
        limits.validate()
        if not 0 <= reconnect_s < float("inf"):
            raise ValueError("watchdog reconnect_s must be >= 0 and finite")
        self.limits = limits
        self.reconnect_s = reconnect_s
        self._faults = tuple(faults)
        self._healthy = True  # the latest /healthz probe answered in time (none yet: nothing says otherwise)
        self._excused_since: float | None = None  # the first sample of the stretch a fault explains
        self._idle_needs_s = limits.no_progress_window_s
        self._idle_note = ""
        self.fd_soft = fd_limit[0] if fd_limit else None
        self.signals: dict[str, Signal] = {}
        self._fired_at: dict[str, float] = {}  # when each signal was recognised (>= its onset)
        self._now = 0.0
        self._stall = _Window()
        self._accept = _Window()
        self._last_progress: tuple | None = None
        self._last_progress_t = 0.0
        self._peak_fds = 0
        self._accept_peak = 0
        self._overflow_start: int | None = None

    def _raise(self, kind: str, at_s: float, evidence: str) -> None:
        if kind not in self.signals:
            self.signals[kind] = Signal(kind, at_s, evidence)
            self._fired_at[kind] = max(self._now, at_s)

    def observe_sample(
        self,
        t: float,
        fds: int,
        accept_queue: int,
        backlog: int,
        overflows: int,
        client_in_flight: int,
        progress: tuple,
        server_alive: bool,
    ) -> None:
        """One monitor sample. ``progress`` is any tuple of counters that grows while work gets done."""
        lim = self.limits
        self._now = max(self._now, t)
        if not server_alive:
            self._raise(SERVER_EXIT, t, f"server process gone at t={t:.1f}s")
            return
        if fds >= 0:
            self._peak_fds = max(self._peak_fds, fds)
            if self.fd_soft and fds >= lim.fd_fraction * self.fd_soft:
                self._raise(
                    FD_EXHAUSTION,
                    t,
                    f"server fds {fds} >= {lim.fd_fraction:.0%} of its limit {self.fd_soft} at t={t:.1f}s",
                )
        if overflows >= 0 and self._overflow_start is None:
            self._overflow_start = overflows
        pinned = backlog > 0 and accept_queue >= backlog
        rising = overflows >= 0 and self._overflow_start is not None and overflows > self._overflow_start
        self._accept_peak = max(self._accept_peak, accept_queue)
        since = self._accept.update(t, pinned and rising)
        if since is not None and t - since >= lim.accept_window_s:
            self._raise(
                ACCEPT_QUEUE_OVERFLOW,
                since,
                f"accept queue {accept_queue}/{backlog} pinned since t={since:.1f}s, ListenOverflows +{overflows - (self._overflow_start or 0)}",
            )
        self._check_progress(t, client_in_flight, progress)
        if self._process_fault_at(t):
            self._excuse(t)

    def _check_progress(self, t: float, client_in_flight: int, progress: tuple) -> None:
        explained = self._explained(t)
        if self._last_progress is None or progress != self._last_progress or client_in_flight <= 0 or explained:
            self._last_progress = progress
            self._last_progress_t = t  # the onset of any idle stretch that follows
            self._idle_needs_s, self._idle_note = self.limits.no_progress_window_s, ""
            if not explained:
                self._excused_since = None
            elif self._excused_since is None:
                self._excused_since = t
            return
        if self._excused_since is not None:  # the excuse just ended: the window runs from the heal
            self._restart_after_heal(t)
        if t - self._last_progress_t >= self._idle_needs_s:
            since = self._last_progress_t
            self._raise(
                NO_PROGRESS,
                since,
                f"{client_in_flight} requests outstanding, nothing completed or received from "
                f"t={since:.1f}s{self._idle_note} to t={t:.1f}s",
            )

    def _explained(self, t: float) -> bool:
        """Does a fault explain no progress at ``t``: one outside the server in force, the server healthy."""
        return self._healthy and any(w.link in EXPLAINING_LINKS and w.covers(t) for w in self._faults)

    def _restart_after_heal(self, t: float) -> None:
        """Idle since the last explaining fault healed (if one did, not the server's health turning bad)."""
        assert self._excused_since is not None
        since, self._excused_since = self._excused_since, None
        healed = [w for w in self._faults if w.link in EXPLAINING_LINKS and since <= w.end_s <= t]
        if not healed:
            return
        last = max(healed, key=lambda w: w.end_s)
        self._last_progress_t = last.end_s
        self._idle_needs_s = self.limits.no_progress_window_s + self.reconnect_s
        self._idle_note = f" (when fault {last.label()} healed)"

    def observe_faults(self, windows: tuple[FaultWindow, ...]) -> None:
        """The faults injected so far, as they really were applied and removed (replaces the last call's)."""
        self._faults = tuple(windows)

    def observe_probe(self, t: float, latency_s: float, ok: bool) -> None:
        """One /healthz probe."""
        lim = self.limits
        self._now = max(self._now, t)
        bad = (not ok) or latency_s > lim.stall_latency_s
        self._healthy = not bad
        since = self._stall.update(t, bad)
        if since is not None and t - since >= lim.stall_window_s:
            self._raise(
                EVENT_LOOP_STALL,
                since,
                f"/healthz failing or slower than {lim.stall_latency_s:g}s from t={since:.1f}s to t={t:.1f}s",
            )
        if self._process_fault_at(t):
            self._excuse(t)

    def _process_fault_at(self, t: float) -> bool:
        return any(w.is_process and w.covers(t) for w in self._faults)

    def _excuse(self, t: float) -> None:
        """An injected process fault (a paused or restarting server, a paused router) explains the
        silence at ``t``: the stall, accept-queue and progress windows start again from there."""
        self._stall.since = None
        self._accept.since = None
        self._last_progress_t = max(self._last_progress_t, t)

    def observe_log(self, kind: str, at_s: float, evidence: str) -> None:
        """A signal read from the server's log (e.g. fd exhaustion from 'Too many open files')."""
        self._raise(kind, at_s, evidence)

    def first_signal(self) -> Signal | None:
        return min(self.signals.values(), key=lambda s: s.at_s) if self.signals else None

    def should_stop(self, now_s: float) -> bool:
        """True once a signal has fired and ``confirm_s`` has passed since (or the server is gone)."""
        if SERVER_EXIT in self.signals:
            return True
        if not self._fired_at:
            return False
        return now_s - min(self._fired_at.values()) >= self.limits.confirm_s

    def verdict(self, extra_evidence: list[str] | None = None) -> CollapseVerdict | None:
        """The first cause in time and its consequences; None when nothing fired."""
        ordered = sorted(self.signals.values(), key=lambda s: s.at_s)
        if not ordered:
            return None
        cause = ordered[0]
        evidence = [cause.evidence]
        if cause.kind == FD_EXHAUSTION and self.fd_soft:
            evidence.append(f"server fd peak {self._peak_fds} against its soft limit {self.fd_soft}")
        evidence += extra_evidence or []
        return CollapseVerdict(cause.kind, cause.at_s, evidence, ordered[1:])


def load_watchdog_limits(pyproject: Path | None) -> WatchdogLimits:
    """Defaults, replaced key by key by ``[tool.faultload.watchdog]`` of ``pyproject``."""
    table = read_faultload_table(pyproject, "watchdog")
    known = {f.name for f in dataclasses.fields(WatchdogLimits)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(
            f"{pyproject} [tool.faultload.watchdog]: unknown key {unknown[0]!r}; known: {', '.join(sorted(known))}"
        )
    try:
        limits = WatchdogLimits(**{k: float(v) for k, v in table.items()})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{pyproject} [tool.faultload.watchdog]: {exc}") from None
    limits.validate()
    return limits
