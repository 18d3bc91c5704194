"""Strategies for fault schedules over both links: edge/backend toxics and router faults.

Fault windows are trial seconds (that is what ``Fault.start_s``/``duration_s``
mean); they are drawn as whole SDK seconds and multiplied by the time scale.
Toxic magnitudes that are times (latency, slow_close and slicer delays) are
scaled too, and bandwidth rates divided by it.

Every toxic on the edge and the backend is drawn with a direction (``stream``
downstream, upstream or both: the pair of toxics) and a toxicity: real links
fail one way or both, and the two ends then disagree about what was delivered.
Outage-like faults (:data:`OUTAGE_KINDS`) last from 5 SDK s up to just past
the longest of the target family's clocks (:func:`outage_durations`: its poll
hold and TTLs, each met just inside and just outside; SkyRL's longest is 1.2 ×
its completed TTL), bounded by ``limits.max_outage_s``; the other faults by
``limits.max_fault_s``. A fault on a proxy link may be followed by a second on
the same link starting exactly when it ends (a slow link that then goes down),
and faults on the two links overlap freely.

Which faults are *fatal* (their victims may legitimately fail, so
``no_lost_results`` excuses them) is part of the generated trial:
:func:`fatal_kinds` declares what breaks a forward to the router (backend
resets, a backend proxy down, holding or cutting data, and each router kind
its record states fatal on the router link: ``model.fault_kinds``). Edge faults are never fatal: the client retries
through them, and a lost result there is exactly what the suite looks for.

Process faults (``limits.process_faults``) pause the server or the router for
1 to 60 SDK s, shrinking toward 1 s at t=0, or restart the server (shrinking
toward a restart at t=0). ``server:restart`` is fatal: the old process's
in-memory futures die with it by design (the checker still holds every
request accepted after the restart to its result).

A fault starts at a clock time or at a protocol event (``limits.fault_anchors``,
:mod:`faultload.model.anchors`): the K-th completion, result or poll timeout,
then an offset of 0 to :data:`ANCHOR_OFFSET_MAX_S` SDK s. A race with the
protocol is then drawn on purpose, not met by chance: the **delivery race**
(:func:`delivery_races`) cuts the edge both ways (half-open) from just after a
result was delivered for longer than the retrieved TTL and shorter than the completed
TTL, so results the server wrote into the held connections (and counts
delivered) may be swept before their client gets back.

Swarm testing (Groce et al., ISSTA 2012): each schedule first draws a
non-empty subset of the enabled ``link:kind`` faults and of the start points
(:func:`swarm`) and draws its faults from that subset only, so one night meets
more combinations (and more of one kind at once) than an even mix of all
kinds in every schedule. Each fault's kind is an index into all kinds folded
onto the subset (:func:`picked`), and the subsets shrink toward everything
kept: a failing schedule then shrinks as it would without the swarm, toward
fewer faults, the first kind, clock starts at 0.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any, Callable, Sequence, TypeVar

from hypothesis import strategies as st

from faultload.model.anchors import Anchor
from faultload.model.family import ServerContract
from faultload.model.faults import (
    FATAL_FAULTS,
    OUTAGE_KINDS,
    PROXY_LINKS,
    SERVER_KINDS,
    Fault,
    FaultSchedule,
    is_process_fault,
)
from faultload.model.faults import (
    ROUTER_KINDS as _ROUTER,
)
from faultload.model.sdk import SDK_BACKOFF_CAP_S, SDK_POLL_TIMEOUT_S
from faultload.model.timescale import trial_s
from faultload.strategies.limits import CI, Limits

T = TypeVar("T")

# Simplest first within each link; every toxic kind on both proxy links.
EDGE_KINDS = ("reset_peer", "down", "latency", "timeout", "slicer", "limit_data", "bandwidth", "slow_close")
BACKEND_KINDS = ("latency", "reset_peer", "down", "timeout", "limit_data", "slicer", "bandwidth", "slow_close")
ROUTER_KINDS = tuple(kind for kind in _ROUTER if not is_process_fault("router", kind))  # router:pause: a process
PROCESS_FAULTS = tuple(f"server:{kind}" for kind in SERVER_KINDS) + tuple(
    f"router:{kind}" for kind in _ROUTER if is_process_fault("router", kind)
)
# Faults that cut a link off rather than degrade it (OUTAGE_KINDS): they get the long windows.
# Directions, simplest first (downstream is Toxiproxy's default), and toxicities.
STREAMS = ("downstream", "upstream", "both")
TOXICITIES = (1.0, 0.5, 0.1)
# Fault windows (SDK seconds), shortest first: degradations, and the short outages.
DURATIONS_S = (5.0, 10.0, 20.0, 40.0, 60.0, 120.0)
# Longer outages meet each of the family's clocks (poll hold, TTLs) this share of the way in and past it
# (outage_durations); SkyRL: 240, 360, 480, 600 and 720 SDK s.
OUTAGE_CLOCK_SHARES = (0.8, 1.2)
# Faults whose victims may fail without it being a lost result ("link:kind"): the model's, stated per kind.
FATAL = FATAL_FAULTS
PAUSE_MAX_S = 60  # SDK seconds a process pause lasts at most (GC pause, VM steal, a weight sync)
CLOCK = "clock"  # a start point that is a clock time; the others are model.anchors.ANCHOR_EVENTS
MAX_ANCHOR_COUNT = 16  # an anchored fault starts at the 1st..16th event
ANCHOR_OFFSET_MAX_S = 10  # SDK seconds after its event an anchored fault starts, at most
# The delivery race's holds: three points inside the family's race window (race_window_s).
RACE_HOLD_SHARES = (0.25, 0.5, 0.75)
RACE_MAX_RESULT = 4  # the race starts after one of the first results delivered
RACE_MAX_OFFSET_S = 2  # SDK seconds after it: "just after"


@lru_cache(maxsize=64)
def _start_at(point: str, time_scale: float, limits: Limits) -> st.SearchStrategy[tuple[Anchor | None, float]]:
    """(anchor, start or offset): a clock start within the horizon, or the 1st..16th ``point`` event and
    0..ANCHOR_OFFSET_MAX_S SDK s after it. Every point draws the same two numbers (the event's count, which a
    clock start ignores; the start, whose remainder is an anchored offset), so a swarm folding one point onto
    another shifts no later choice. Shrinks toward the first event, 0."""
    draws = st.tuples(st.integers(1, MAX_ANCHOR_COUNT), st.integers(0, max(0, int(limits.fault_horizon_s))))
    if point == CLOCK:
        return draws.map(lambda d: (None, trial_s(d[1], time_scale)))
    return draws.map(lambda d: (Anchor(point, d[0]), trial_s(d[1] % (ANCHOR_OFFSET_MAX_S + 1), time_scale)))


def _start_points(
    time_scale: float, limits: Limits, points: Sequence[str]
) -> st.SearchStrategy[tuple[Anchor | None, float]]:
    """A start at one of ``points`` (:func:`picked`); shrinks toward a clock start at 0."""
    return picked(tuple(points), start_points(limits), lambda point: _start_at(point, time_scale, limits))


def start_points(limits: Limits) -> tuple[str, ...]:
    """The start points ``limits`` allow, simplest first: clock, then its anchor events."""
    return (CLOCK, *limits.fault_anchors)


def outage_durations(contract: ServerContract | None) -> tuple[float, ...]:
    """An outage's windows (SDK s), shortest first: :data:`DURATIONS_S`, then each of ``contract``'s clocks
    (poll hold, TTLs) met :data:`OUTAGE_CLOCK_SHARES` of the way, and its longest TTL itself; a result must
    outlive the short ones, and the long ones meet each clock just inside and just outside. No contract: the
    short ones alone."""
    if contract is None:
        return DURATIONS_S
    clocks = (contract.poll_hold_s, contract.retrieved_ttl_s, contract.completed_ttl_s, contract.created_ttl_s)
    points = {round(share * clock, 3) for clock in clocks if clock is not None for share in OUTAGE_CLOCK_SHARES}
    if contract.longest_ttl_s is not None:
        points.add(contract.longest_ttl_s)
    return DURATIONS_S + tuple(sorted(p for p in points if p > DURATIONS_S[-1]))


def _durations(
    kind: str, time_scale: float, limits: Limits, contract: ServerContract | None
) -> st.SearchStrategy[float]:
    """Shortest first, so a window shrinks toward 5 SDK s."""
    choices, bound = (
        (outage_durations(contract), limits.max_outage_s) if kind in OUTAGE_KINDS else (DURATIONS_S, limits.max_fault_s)
    )
    durations = [d for d in choices if d <= bound] or [DURATIONS_S[0]]
    return st.sampled_from(durations).map(lambda d: trial_s(d, time_scale))


def _ms(sdk_ms: int, time_scale: float) -> int:
    return max(1, int(round(trial_s(sdk_ms, time_scale))))


def _toxic_attributes(kind: str, time_scale: float) -> st.SearchStrategy[dict[str, int]]:
    if kind == "latency":
        return st.sampled_from((1000, 5000, 20000)).map(lambda ms: {"latency": _ms(ms, time_scale)})
    if kind == "timeout":
        return st.just({"timeout": 0})  # hold the data until the window ends
    if kind == "slicer":
        return st.builds(
            lambda size, delay: {"average_size": size, "delay": delay},
            st.integers(1, 1024),
            st.integers(0, 1000).map(lambda us: _ms(us, time_scale)),
        )
    if kind == "limit_data":
        return st.sampled_from((0, 256, 4096)).map(lambda n: {"bytes": n})  # 0: every connection cut at once
    if kind == "bandwidth":  # KB/s per SDK second: faster at a smaller scale
        return st.sampled_from((100, 10)).map(lambda rate: {"rate": max(1, int(round(rate / time_scale)))})
    if kind == "slow_close":
        return st.sampled_from((1000, 5000)).map(lambda ms: {"delay": _ms(ms, time_scale)})
    return st.just({})  # reset_peer (timeout 0: at once), down


def _fault(
    link: str,
    kind: str,
    attributes: st.SearchStrategy[dict[str, int]],
    time_scale: float,
    limits: Limits,
    points: Sequence[str],
    contract: ServerContract | None,
) -> st.SearchStrategy[Fault]:
    """``kind`` on ``link``; a toxic gets a direction and a toxicity.

    Every fault draws them and only toxics keep them: all faults then take as
    many choices, and the shrinker's order among them is the kinds' order."""
    toxic = link in PROXY_LINKS and kind != "down"
    direction = st.tuples(st.sampled_from(STREAMS), st.sampled_from(TOXICITIES))
    return st.builds(
        lambda attrs, stream_toxicity, start, duration_s: Fault(
            link, kind, attrs, *(stream_toxicity if toxic else ("downstream", 1.0)), start[1], duration_s, start[0]
        ),
        attributes,
        direction,
        _start_points(time_scale, limits, points),
        _durations(kind, time_scale, limits, contract),
    )


def _process_fault(
    link: str, kind: str, time_scale: float, limits: Limits, points: Sequence[str]
) -> st.SearchStrategy[Fault]:
    """``server:pause``/``router:pause`` for 1..PAUSE_MAX_S whole SDK s, or ``server:restart`` (an instant)."""
    start = _start_points(time_scale, limits, points)
    if kind == "restart":
        return start.map(lambda s: Fault(link, kind, start_s=s[1], anchor=s[0]))
    longest = max(1, min(PAUSE_MAX_S, int(limits.max_fault_s)))
    duration = st.integers(1, longest).map(lambda d: trial_s(d, time_scale))
    return st.builds(lambda s, d: Fault(link, kind, start_s=s[1], duration_s=d, anchor=s[0]), start, duration)


def fault_kinds(limits: Limits) -> tuple[str, ...]:
    """The ``link:kind`` faults ``limits`` enable, simplest first (edge, backend, router, process faults)."""
    kinds = [
        f"{link}:{kind}"
        for link, kinds in (("edge", EDGE_KINDS), ("backend", BACKEND_KINDS))
        if link in limits.fault_links
        for kind in kinds
    ]
    if "router" in limits.fault_links:
        kinds += [f"router:{k}" for k in ROUTER_KINDS if k != "crash" or limits.router_crash]
    if limits.process_faults:
        kinds += [
            label for label in PROCESS_FAULTS if not label.startswith("router:") or "router" in limits.fault_links
        ]
    return tuple(kinds)


@lru_cache(maxsize=1024)  # a swarm's subset is fresh per schedule; its kinds' strategies are not
def _fault_of(
    label: str, time_scale: float, limits: Limits, points: tuple[str, ...], contract: ServerContract | None
) -> st.SearchStrategy[Fault]:
    link, kind = label.split(":")
    if is_process_fault(link, kind):
        return _process_fault(link, kind, time_scale, limits, points)
    if link == "router":
        attrs = st.sampled_from(({"status": 503}, {"status": 500})) if kind == "errors" else st.just({})
        return _fault(link, kind, attrs, time_scale, limits, points, contract)
    return _fault(link, kind, _toxic_attributes(kind, time_scale), time_scale, limits, points, contract)


def faults(
    time_scale: float = 1.0,
    limits: Limits = CI,
    kinds: Sequence[str] | None = None,
    points: Sequence[str] | None = None,
    contract: ServerContract | None = None,
) -> st.SearchStrategy[Fault]:
    """One fault of ``kinds`` (default: every ``link:kind`` ``limits`` enable) starting at one of ``points``
    (default: a clock time or any of ``limits.fault_anchors``), an outage as long as ``contract``'s clocks
    (:func:`outage_durations`). Minimal: ``edge:reset_peer`` downstream,
    toxicity 1, from t=0 for 5 SDK s (× scale): the edge proxy resets every connection for a moment."""
    every = fault_kinds(limits)
    kinds = every if kinds is None else tuple(kinds)
    points = start_points(limits) if points is None else tuple(points)
    if not kinds:
        return st.nothing()
    return picked(kinds, every, lambda label: _fault_of(label, time_scale, limits, points, contract))


def swarm(items: Sequence[T]) -> st.SearchStrategy[tuple[T, ...]]:
    """A non-empty subset of ``items`` (swarm testing): each left out with probability 1/2, all of them
    when every one was. It shrinks toward every item kept, so a schedule shrinks as if there were no swarm."""
    items = tuple(items)
    left_out = st.lists(st.booleans(), min_size=len(items), max_size=len(items))
    return left_out.map(lambda flags: tuple(x for x, out in zip(items, flags) if not out) or items)


def picked(
    subset: tuple[T, ...], every: tuple[T, ...], make: Callable[[T], st.SearchStrategy[Any]]
) -> st.SearchStrategy[Any]:
    """``make(item)`` for one item of a swarm's ``subset`` of ``every`` item: a ``one_of`` over all of them, a
    branch left out folded onto the subset. A draw of a kept item does not change when the swarm keeps more,
    so the swarm's flags shrink away one by one, and the draw then shrinks as a plain ``one_of`` would."""
    return st.one_of(*(make(item if item in subset else subset[i % len(subset)]) for i, item in enumerate(every)))


def race_window_s(contract: ServerContract | None) -> tuple[float, float] | None:
    """The delivery race's window (SDK s): past the retrieved TTL plus one sweep, so a result written into the
    held connection is swept; and under the completed TTL less the client's way back (a poll timeout, then a
    backoff), so a result never retrieved is still kept when its client returns. None for a family without
    both TTLs (no such race: SkyRL has it, 330-525 s)."""
    if contract is None or contract.retrieved_ttl_s is None or contract.completed_ttl_s is None:
        return None
    low = contract.retrieved_ttl_s + (contract.sweep_s or 0.0)
    high = contract.completed_ttl_s - SDK_POLL_TIMEOUT_S - SDK_BACKOFF_CAP_S
    return (low, high) if low < high else None


def race_durations(limits: Limits, contract: ServerContract | None) -> tuple[float, ...]:
    """The delivery race's holds (SDK s) inside ``contract``'s window that ``limits`` allow an outage; ()
    when none does."""
    window = race_window_s(contract)
    if window is None or "edge" not in limits.fault_links or "result" not in limits.fault_anchors:
        return ()
    low, high = window
    holds = (float(round(low + (high - low) * q)) for q in RACE_HOLD_SHARES)
    return tuple(d for d in holds if d <= limits.max_outage_s)


def delivery_races(
    time_scale: float = 1.0, limits: Limits = CI, contract: ServerContract | None = None
) -> st.SearchStrategy[Fault]:
    """The edge half-open (``timeout`` 0 both ways: a blackhole of responses alone lets the client's re-polls
    through, and each restarts the retrieved TTL) from 0..RACE_MAX_OFFSET_S SDK s after
    the 1st..RACE_MAX_RESULT-th result a client received, for one of :func:`race_durations`."""
    durations = race_durations(limits, contract)
    if not durations:
        return st.nothing()
    return st.builds(
        lambda k, offset, hold: Fault(
            "edge",
            "timeout",
            {"timeout": 0},
            stream="both",
            start_s=trial_s(offset, time_scale),
            duration_s=trial_s(hold, time_scale),
            anchor=Anchor("result", k),
        ),
        st.integers(1, RACE_MAX_RESULT),
        st.integers(0, RACE_MAX_OFFSET_S),
        st.sampled_from(durations),
    )


def is_delivery_race(fault: Fault, time_scale: float, contract: ServerContract) -> bool:
    """The edge half-open (``timeout`` both ways) longer than ``contract``'s retrieved TTL and shorter than its
    completed TTL (scaled): a result written into it may be swept before its client returns (finding 5)."""
    hold = (fault.duration_s or 0.0) / time_scale
    retrieved, completed = contract.retrieved_ttl_s, contract.completed_ttl_s
    return (
        (fault.link, fault.kind) == ("edge", "timeout")
        and fault.stream == "both"
        and retrieved is not None
        and completed is not None
        and retrieved < hold < completed
    )


def chain(drawn: list[tuple[Fault, bool]]) -> tuple[Fault, ...]:
    """The faults in order; one marked ``True`` on a proxy link starts exactly when the fault
    before it on the same link ends (its own start is dropped). Deleting that earlier fault
    leaves the later one on its own start, so a sequence shrinks to one fault where one suffices."""
    out: list[Fault] = []
    last: dict[str, Fault] = {}
    for fault, follows in drawn:
        before = last.get(fault.link)
        if follows and before is not None and fault.link in PROXY_LINKS and before.duration_s is not None:
            fault = replace(fault, start_s=before.end_s, anchor=before.anchor)  # from the same origin
        out.append(fault)
        last[fault.link] = fault
    return tuple(out)


def fault_schedules(
    time_scale: float = 1.0, limits: Limits = CI, contract: ServerContract | None = None
) -> st.SearchStrategy[FaultSchedule]:
    """Up to ``limits.max_faults`` faults, each perhaps following the one before it on its link
    (:func:`chain`); faults on the two links overlap freely; outages and the delivery race as long as the
    target family's ``contract`` makes interesting (none: the short windows only). Minimal: ``FaultSchedule()``."""
    if limits.max_faults <= 0 or not fault_kinds(limits):
        return st.just(FaultSchedule())
    return _swarm_schedules(time_scale, limits, contract)


@st.composite
def _swarm_schedules(
    draw: st.DrawFn, time_scale: float, limits: Limits, contract: ServerContract | None
) -> FaultSchedule:
    """The swarm's kinds and start points first; then, when ``edge:timeout`` is among those kinds and the
    limits allow it, perhaps a delivery race first; then the faults, from the swarm only."""
    kinds = draw(swarm(fault_kinds(limits)))
    points = draw(swarm(start_points(limits)))
    race = "edge:timeout" in kinds and bool(race_durations(limits, contract)) and draw(st.booleans())
    drawn = [(draw(delivery_races(time_scale, limits, contract)), False)] if race else []
    one = st.tuples(faults(time_scale, limits, kinds, points, contract), st.booleans())
    drawn += draw(st.lists(one, max_size=limits.max_faults - len(drawn)))
    return FaultSchedule(chain(drawn))


def fatal_kinds(schedule: FaultSchedule) -> tuple[str, ...]:
    """The ``link:kind`` labels of ``schedule`` whose victims may fail (sorted, no repeats)."""
    return tuple(sorted({f"{f.link}:{f.kind}" for f in schedule.faults} & FATAL))
