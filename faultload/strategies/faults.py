"""Strategies for fault schedules over both links: edge/backend toxics and router faults.

Fault windows are trial seconds (that is what ``Fault.start_s``/``duration_s``
mean); they are drawn as whole SDK seconds and multiplied by the time scale.
Toxic magnitudes that are times (latency, slow_close and slicer delays) are
scaled too, and bandwidth rates divided by it.

Every toxic on the edge and the backend is drawn with a direction (``stream``
downstream, upstream or both: the pair of toxics) and a toxicity: real links
fail one way or both, and the two ends then disagree about what was delivered.
Outage-like faults (:data:`OUTAGE_KINDS`) last from 5 SDK s up to
:data:`LONGEST_OUTAGE_S`, 1.2 × the completed TTL, the longest server clock a
result depends on, bounded by ``limits.max_outage_s``; the other faults by
``limits.max_fault_s``. A fault on a proxy link may be followed by a second on
the same link starting exactly when it ends (a slow link that then goes down),
and faults on the two links overlap freely.

Which faults are *fatal* (their victims may legitimately fail, so
``no_lost_results`` excuses them) is part of the generated trial:
:func:`fatal_kinds` declares what breaks a forward to the router (backend
resets, a backend proxy down, holding or cutting data, router errors,
truncated bodies, a crash). Edge faults are never fatal: the client retries
through them, and a lost result there is exactly what the suite looks for.

Process faults (``limits.process_faults``) pause the server or the router for
1 to 60 SDK s, shrinking toward 1 s at t=0, or restart the server (shrinking
toward a restart at t=0). ``server:restart`` is fatal: the old process's
in-memory futures die with it by design (the checker still holds every
request accepted after the restart to its result).
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from faultload.model.faults import OUTAGE_KINDS, PROXY_LINKS, Fault, FaultSchedule
from faultload.model.sdk import COMPLETED_TTL_S
from faultload.strategies.limits import CI, Limits

# Simplest first within each link; every toxic kind on both proxy links.
EDGE_KINDS = ("reset_peer", "down", "latency", "timeout", "slicer", "limit_data", "bandwidth", "slow_close")
BACKEND_KINDS = ("latency", "reset_peer", "down", "timeout", "limit_data", "slicer", "bandwidth", "slow_close")
ROUTER_KINDS = ("stall", "errors", "truncate", "crash")
# Faults that cut a link off rather than degrade it (OUTAGE_KINDS): they get the long windows.
# Directions, simplest first (downstream is Toxiproxy's default), and toxicities.
STREAMS = ("downstream", "upstream", "both")
TOXICITIES = (1.0, 0.5, 0.1)
# 1.2 x the longest server clock a result depends on (the completed TTL).
LONGEST_OUTAGE_S = 1.2 * COMPLETED_TTL_S
# Fault windows (SDK seconds), shortest first: degradations, and outages up to
# past the retrieved TTL (300 s) and the completed TTL (600 s).
DURATIONS_S = (5.0, 10.0, 20.0, 40.0, 60.0, 120.0)
OUTAGE_DURATIONS_S = DURATIONS_S + (240.0, 360.0, 480.0, 600.0, LONGEST_OUTAGE_S)
# Faults whose victims may fail without it being a lost result ("link:kind").
FATAL = frozenset({
    "backend:reset_peer", "backend:down", "backend:timeout", "backend:limit_data",
    "router:errors", "router:truncate", "router:crash", "server:restart",
})
PAUSE_MAX_S = 60  # SDK seconds a process pause lasts at most (GC pause, VM steal, a weight sync)


def _scaled(seconds: float, time_scale: float) -> float:
    return round(seconds * time_scale, 6)


def _starts(time_scale: float, limits: Limits) -> st.SearchStrategy[float]:
    return st.integers(0, max(0, int(limits.fault_horizon_s))).map(lambda s: _scaled(s, time_scale))


def _durations(kind: str, time_scale: float, limits: Limits) -> st.SearchStrategy[float]:
    """Shortest first, so a window shrinks toward 5 SDK s."""
    choices, bound = (OUTAGE_DURATIONS_S, limits.max_outage_s) if kind in OUTAGE_KINDS else (DURATIONS_S, limits.max_fault_s)
    durations = [d for d in choices if d <= bound] or [DURATIONS_S[0]]
    return st.sampled_from(durations).map(lambda d: _scaled(d, time_scale))


def _ms(sdk_ms: int, time_scale: float) -> int:
    return max(1, int(round(sdk_ms * time_scale)))


def _toxic_attributes(kind: str, time_scale: float) -> st.SearchStrategy[dict[str, int]]:
    if kind == "latency":
        return st.sampled_from((1000, 5000, 20000)).map(lambda ms: {"latency": _ms(ms, time_scale)})
    if kind == "timeout":
        return st.just({"timeout": 0})  # hold the data until the window ends
    if kind == "slicer":
        return st.builds(
            lambda size, delay: {"average_size": size, "delay": delay},
            st.integers(1, 1024), st.integers(0, 1000).map(lambda us: _ms(us, time_scale)),
        )
    if kind == "limit_data":
        return st.sampled_from((0, 256, 4096)).map(lambda n: {"bytes": n})  # 0: every connection cut at once
    if kind == "bandwidth":  # KB/s per SDK second: faster at a smaller scale
        return st.sampled_from((100, 10)).map(lambda rate: {"rate": max(1, int(round(rate / time_scale)))})
    if kind == "slow_close":
        return st.sampled_from((1000, 5000)).map(lambda ms: {"delay": _ms(ms, time_scale)})
    return st.just({})  # reset_peer (timeout 0: at once), down


def _fault(link: str, kind: str, attributes: st.SearchStrategy[dict[str, int]], time_scale: float,
           limits: Limits) -> st.SearchStrategy[Fault]:
    """``kind`` on ``link``; a toxic gets a direction and a toxicity.

    Every fault draws them and only toxics keep them: all faults then take as
    many choices, and the shrinker's order among them is the kinds' order."""
    toxic = link in PROXY_LINKS and kind != "down"
    direction = st.tuples(st.sampled_from(STREAMS), st.sampled_from(TOXICITIES))
    return st.builds(
        lambda attrs, stream_toxicity, start_s, duration_s: Fault(
            link, kind, attrs, *(stream_toxicity if toxic else ("downstream", 1.0)), start_s, duration_s),
        attributes, direction, _starts(time_scale, limits), _durations(kind, time_scale, limits),
    )


def _process_fault(link: str, kind: str, time_scale: float, limits: Limits) -> st.SearchStrategy[Fault]:
    """``server:pause``/``router:pause`` for 1..PAUSE_MAX_S whole SDK s, or ``server:restart`` (an instant)."""
    start = _starts(time_scale, limits)
    if kind == "restart":
        return st.builds(Fault, link=st.just(link), kind=st.just(kind), start_s=start)
    longest = max(1, min(PAUSE_MAX_S, int(limits.max_fault_s)))
    duration = st.integers(1, longest).map(lambda d: _scaled(d, time_scale))
    return st.builds(Fault, link=st.just(link), kind=st.just(kind), start_s=start, duration_s=duration)


def faults(time_scale: float = 1.0, limits: Limits = CI) -> st.SearchStrategy[Fault]:
    """One fault on one of ``limits.fault_links``. Minimal: ``edge:reset_peer`` downstream, toxicity 1,
    from t=0 for 5 SDK s (× scale): the edge proxy resets every connection for a moment."""
    options = []
    for link, kinds in (("edge", EDGE_KINDS), ("backend", BACKEND_KINDS)):
        if link in limits.fault_links:
            options += [_fault(link, kind, _toxic_attributes(kind, time_scale), time_scale, limits) for kind in kinds]
    if "router" in limits.fault_links:
        for kind in (k for k in ROUTER_KINDS if k != "crash" or limits.router_crash):
            attrs = st.sampled_from(({"status": 503}, {"status": 500})) if kind == "errors" else st.just({})
            options.append(_fault("router", kind, attrs, time_scale, limits))
    if limits.process_faults:
        links = [("server", "pause"), ("server", "restart")] + [("router", "pause")] * ("router" in limits.fault_links)
        options += [_process_fault(link, kind, time_scale, limits) for link, kind in links]
    if not options:
        return st.nothing()
    return st.one_of(*options)


def chain(drawn: list[tuple[Fault, bool]]) -> tuple[Fault, ...]:
    """The faults in order; one marked ``True`` on a proxy link starts exactly when the fault
    before it on the same link ends (its own start is dropped). Deleting that earlier fault
    leaves the later one on its own start, so a sequence shrinks to one fault where one suffices."""
    out: list[Fault] = []
    last: dict[str, Fault] = {}
    for fault, follows in drawn:
        before = last.get(fault.link)
        if follows and before is not None and fault.link in PROXY_LINKS and before.duration_s is not None:
            fault = replace(fault, start_s=before.end_s)
        out.append(fault)
        last[fault.link] = fault
    return tuple(out)


def fault_schedules(time_scale: float = 1.0, limits: Limits = CI) -> st.SearchStrategy[FaultSchedule]:
    """Up to ``limits.max_faults`` faults, each perhaps following the one before it on its link
    (:func:`chain`); faults on the two links overlap freely. Minimal: ``FaultSchedule()``."""
    if limits.max_faults <= 0 or not limits.fault_links:
        return st.just(FaultSchedule())
    drawn = st.lists(st.tuples(faults(time_scale, limits), st.booleans()), max_size=limits.max_faults)
    return drawn.map(lambda pairs: FaultSchedule(chain(pairs)))


def fatal_kinds(schedule: FaultSchedule) -> tuple[str, ...]:
    """The ``link:kind`` labels of ``schedule`` whose victims may fail (sorted, no repeats)."""
    return tuple(sorted({f"{f.link}:{f.kind}" for f in schedule.faults} & FATAL))
