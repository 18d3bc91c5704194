"""Strategies for fault schedules over both links: edge/backend toxics and router faults.

Fault windows are trial seconds (that is what ``Fault.start_s``/``duration_s``
mean); they are drawn as whole SDK seconds and multiplied by the time scale.
Toxic magnitudes that are times (latency, slicer delay) are scaled too.

Which faults are *fatal* (their victims may legitimately fail, so
``no_lost_results`` excuses them) is part of the generated trial:
:func:`fatal_kinds` declares what breaks a forward to the router (backend
resets, a backend proxy down or holding data, router errors, truncated
bodies, a crash). Edge faults are never fatal: the client retries through them,
and a lost result there is exactly what the suite looks for. Edge windows are
bounded by ``limits.max_fault_s`` (60 SDK s by default), well inside the
SDK's 16 connection retries (about 400 SDK s of backoff).

Process faults (``limits.process_faults``) pause the server or the router for
1 to 60 SDK s, shrinking toward 1 s at t=0, or restart the server (shrinking
toward a restart at t=0). ``server:restart`` is fatal: the old process's
in-memory futures die with it by design (the checker still holds every
request accepted after the restart to its result).
"""

from __future__ import annotations

from hypothesis import strategies as st

from faultload.model.faults import Fault, FaultSchedule
from faultload.strategies.limits import CI, Limits

# Simplest first within each link.
EDGE_KINDS = ("reset_peer", "down", "latency", "timeout", "slicer")
BACKEND_KINDS = ("latency", "reset_peer", "down")
ROUTER_KINDS = ("stall", "errors", "truncate", "crash")
# Fault windows (SDK seconds), shortest first.
DURATIONS_S = (5.0, 10.0, 20.0, 40.0, 60.0, 120.0)
# Faults whose victims may fail without it being a lost result ("link:kind").
FATAL = frozenset({
    "backend:reset_peer", "backend:down", "backend:timeout", "backend:limit_data",
    "router:errors", "router:truncate", "router:crash", "server:restart",
})
PAUSE_MAX_S = 60  # SDK seconds a process pause lasts at most (GC pause, VM steal, a weight sync)


def _window(time_scale: float, limits: Limits):
    durations = [d for d in DURATIONS_S if d <= limits.max_fault_s] or [DURATIONS_S[0]]
    start = st.integers(0, max(0, int(limits.fault_horizon_s))).map(lambda s: round(s * time_scale, 6))
    duration = st.sampled_from(durations).map(lambda d: round(d * time_scale, 6))
    return start, duration


def _ms(sdk_ms: int, time_scale: float) -> int:
    return max(1, int(round(sdk_ms * time_scale)))


def _toxic(link: str, kind: str, time_scale: float, limits: Limits) -> st.SearchStrategy[Fault]:
    start, duration = _window(time_scale, limits)
    if kind == "latency":
        attrs = st.sampled_from((1000, 5000, 20000)).map(lambda ms: {"latency": _ms(ms, time_scale)})
    elif kind == "timeout":
        attrs = st.just({"timeout": 0})  # hold the data until the window ends
    elif kind == "slicer":
        attrs = st.builds(
            lambda size, delay: {"average_size": size, "delay": delay},
            st.integers(1, 1024), st.integers(0, 1000).map(lambda us: _ms(us, time_scale)),
        )
    else:  # reset_peer, down
        attrs = st.just({})
    return st.builds(Fault, link=st.just(link), kind=st.just(kind), attributes=attrs, start_s=start, duration_s=duration)


def _router_fault(kind: str, time_scale: float, limits: Limits) -> st.SearchStrategy[Fault]:
    start, duration = _window(time_scale, limits)
    attrs = st.sampled_from(({"status": 503}, {"status": 500})) if kind == "errors" else st.just({})
    return st.builds(Fault, link=st.just("router"), kind=st.just(kind), attributes=attrs, start_s=start, duration_s=duration)


def _process_fault(link: str, kind: str, time_scale: float, limits: Limits) -> st.SearchStrategy[Fault]:
    """``server:pause``/``router:pause`` for 1..PAUSE_MAX_S whole SDK s, or ``server:restart`` (an instant)."""
    start, _ = _window(time_scale, limits)
    if kind == "restart":
        return st.builds(Fault, link=st.just(link), kind=st.just(kind), start_s=start)
    longest = max(1, min(PAUSE_MAX_S, int(limits.max_fault_s)))
    duration = st.integers(1, longest).map(lambda d: round(d * time_scale, 6))
    return st.builds(Fault, link=st.just(link), kind=st.just(kind), start_s=start, duration_s=duration)


def faults(time_scale: float = 1.0, limits: Limits = CI) -> st.SearchStrategy[Fault]:
    """One fault on one of ``limits.fault_links``. Minimal: ``edge:reset_peer`` from t=0 for
    5 SDK s (× scale): the edge proxy resets every connection for a moment."""
    options = []
    for link, kinds in (("edge", EDGE_KINDS), ("backend", BACKEND_KINDS)):
        if link in limits.fault_links:
            options += [_toxic(link, kind, time_scale, limits) for kind in kinds]
    if "router" in limits.fault_links:
        kinds = [k for k in ROUTER_KINDS if k != "crash" or limits.router_crash]
        options += [_router_fault(kind, time_scale, limits) for kind in kinds]
    if limits.process_faults:
        links = [("server", "pause"), ("server", "restart")] + [("router", "pause")] * ("router" in limits.fault_links)
        options += [_process_fault(link, kind, time_scale, limits) for link, kind in links]
    if not options:
        return st.nothing()
    return st.one_of(*options)


def fault_schedules(time_scale: float = 1.0, limits: Limits = CI) -> st.SearchStrategy[FaultSchedule]:
    """Up to ``limits.max_faults`` faults. Minimal: ``FaultSchedule()`` (no faults)."""
    if limits.max_faults <= 0 or not limits.fault_links:
        return st.just(FaultSchedule())
    return st.lists(faults(time_scale, limits), max_size=limits.max_faults).map(lambda fs: FaultSchedule(tuple(fs)))


def fatal_kinds(schedule: FaultSchedule) -> tuple[str, ...]:
    """The ``link:kind`` labels of ``schedule`` whose victims may fail (sorted, no repeats)."""
    return tuple(sorted({f"{f.link}:{f.kind}" for f in schedule.faults} & FATAL))
