"""Known trials: loads that once exposed an upstream bug, or that an invariant needs, run before any random draw.

Random shapes may not make the load a known bug needs in one run (a nightly
run draws 40 trials per property out of a very large space). The profiles
that ask for them (``Profile.known_examples``) give these trials to their
properties as Hypothesis explicit examples (``@example``), on every row of the
matrix alike, clean or regressed. Each one is plain data, names the fix it
guards (or the invariant it lets judge), and states what it measured on
clean 0.4.0 and under the regression. Those of what the server's store holds
(its size, its releases past the TTLs) are in :mod:`faultload.strategies.known_store`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

from faultload.model.anchors import Anchor
from faultload.model.family import CONTRACTS, ServerContract
from faultload.model.faults import Fault, FaultSchedule
from faultload.model.router import RouterConfig
from faultload.model.sdk import SDK_KEEPALIVE_EXPIRY_S, SDK_POLL_TIMEOUT_S
from faultload.model.shape import LoadShape, PollBehaviour
from faultload.model.target import parse_target
from faultload.model.training import TrainingMix
from faultload.model.trial import TrialConfig
from faultload.strategies.edges import EDGE_TRIALS
from faultload.strategies.faults import fatal_kinds
from faultload.strategies.known_store import (
    release_faults,
    release_hold,
    release_hold_s,
    size_burst,
    size_burst_router,
    size_flood,
)
from faultload.strategies.limits import Limits
from faultload.strategies.routers import immediate_router, router_fits, router_procs
from faultload.strategies.shapes import held_at_once
from faultload.strategies.trials import engine_for, proxies_for


def completion_burst(time_scale: float) -> LoadShape:
    """6,000 requests through one worker, 400 outstanding, every first poll 0.1 SDK s before the idle expiry.

    Guards uvicorn's keep-alive and backlog fix (``--regress keepalive``): the
    client reuses connections just before its own 5 s idle expiry while the
    regressed server closes them at 5 s, so polls are reset on a healthy
    network (``retry_amplification``'s unprovoked resets). The race needs
    *completion bursts*: the router (:func:`completion_burst_router`) finishes
    256 generations at once every 20 SDK s. Our reading (not proven): a burst
    of polls returns, a burst of submits follows, and the pool then sits idle
    until those requests' first polls 4.9 SDK s later. Measured: with the
    immediate router the same load flows evenly and nothing is reset (0
    resets under ``--regress keepalive``, in the suite and with ``faultload
    run --router-mode immediate`` alike); with this router, in the suite on
    the nightly profile, ``--regress keepalive`` reset 4 and 16 polls (two
    sessions) and clean 0.4.0 none; halving the requests or dropping the
    late polls resets nothing, so it does not shrink.
    Also 12,000+ HTTP requests without a fault, enough for ``bounded_cpu`` to
    judge the server's CPU per request (``--regress rich-access-log``). The
    cap keeps the server's queueing under the scaled 45 s poll timeout, so
    clean 0.4.0 makes no extra attempt. The load goes straight to the server
    (``direct_edge``), as ``faultload run`` sends it. Measured at time scale
    0.05 (``faultload run --requests 6000 --workers 1 --delay-polls 1@4.9
    --max-outstanding 400``, whose default router is this one: latency,
    256 slots, 1.0 s): clean 0.4.0 0 resets, 2.0 attempts per request, 0.81
    ms CPU per HTTP request; ``--regress keepalive`` 13, 7 and 3 resets in
    three runs (with 1,000 outstanding: 53, but clean 0.4.0 then makes 2.75
    attempts per request against a budget of 3); ``--regress
    rich-access-log`` 1.39 ms against clean's 0.81: nearly twice, yet under
    the CPU budget, which must also clear clean trials with larger results
    (see faultload/checker/budgets.py).
    """
    return LoadShape(
        requests=6000,
        max_outstanding=400,
        workers=1,
        time_scale=time_scale,
        delay_polls=PollBehaviour(fraction=1.0, after_s=SDK_KEEPALIVE_EXPIRY_S - 0.1),
    )


def completion_burst_router(shape: LoadShape) -> RouterConfig:
    """vLLM's default 256 slots, 20 SDK s per generation (1.0 s at 0.05: ``faultload run``'s default router).

    Results complete in bursts of 256, the load the keep-alive race needs
    (an immediate router spreads completions evenly and resets nothing).
    """
    return RouterConfig(
        mode="latency", max_num_seqs=256, gen_seconds=shape.scaled(20.0), procs=router_procs(held_at_once(shape))
    )


def cpu_sample(time_scale: float) -> LoadShape:
    """1,200 small requests, no fault, 100 outstanding: the fewest that let ``bounded_cpu`` judge.

    ``bounded_cpu`` is unknown below ``cpu_min_requests`` (2,000) HTTP
    requests, since an idle loop's and the drain's fixed cost dominate a small
    trial; the ci profile draws at most 256 requests, so without this trial
    no ci row would ever judge it. 1,200 requests make at least 2,400 HTTP
    requests (a submit and a poll each) plus the /healthz probes. 100 held at
    once is ``Limits.max_faithful_held`` at time scale 0.05 with small results
    (the server's queued work fits a quarter of the scaled poll timeout), so
    clean 0.4.0 makes no extra attempt: at 200 held it made 92-99 poll
    timeouts a run, at 100 none, in the same 4.2-4.4 s of load. Immediate
    router: the server's own cost per request, not the router's latency, is
    what is measured.
    """
    return LoadShape(requests=1200, max_outstanding=100, workers=1, result_tokens=64, time_scale=time_scale)


def training_waves(time_scale: float) -> LoadShape:
    """Four waves of 512 samples beside 32 trainers (16 forward_backward + optim_step each, 512 of each in all).

    The mix that first reproduced SkyRL's SQLite QueuePool exhaustion (fixed
    upstream in #2097): sampling, training and every trainer's heartbeat share
    one API process, one DB pool and one SQLite file. Judged by
    ``training_futures`` and ``heartbeats_answered``; needs the null engine.
    """
    return LoadShape(
        requests=2048,
        max_outstanding=2000,
        workers=1,
        result_tokens=64,
        time_scale=time_scale,
        arrival="waves",
        arrival_waves=4,
        arrival_span_s=40.0,
        training=TrainingMix(trainers=32, steps=16, datums=4, datum_tokens=128),
    )


# half_open_delivery, in SDK seconds: each result is written while its first poll is held (the client gives
# that poll up at SDK_POLL_TIMEOUT_S), into an edge that went half-open after every poll was held. The edge
# heals over a poll timeout after the retrieved TTL and a sweep have passed since the write, and early enough
# that the client is back before the completed TTL: the raw client within a poll timeout and a backoff cap;
# the real SDK, whose backoff sleeps are not scaled, at 553 SDK s (measured at time scale 0.05).
HALF_OPEN_GEN_S = SDK_POLL_TIMEOUT_S - 5.0
HALF_OPEN_START_S = HALF_OPEN_GEN_S - 10.0
HALF_OPEN_OUTAGE_S = 400.0


def half_open_delivery(time_scale: float) -> LoadShape:
    """8 requests whose results are written into a half-open edge (finding 5, ``--fix retain-until-expiry``).

    SkyRL 0.4.0 starts a result's short retrieved TTL (300 s) when
    ``retrieve_future`` has built the response, though the bytes may reach no
    client: here the edge blackholes both directions (Toxiproxy ``timeout``
    0) from just before the results are written for ``HALF_OPEN_OUTAGE_S``:
    past the retrieved TTL, short of the completed TTL (600 s). The client's
    re-polls go nowhere meanwhile; the server sweeps the results it believes
    delivered, and the first re-poll after the edge heals gets 404, though a
    result nobody had polled would have been kept 600 s
    (:func:`half_open_faults`). Measured at time scale 0.05 (``faultload
    run`` with the same trial): clean 0.4.0 lost 8 of 8 every run, with the
    fix none.
    """
    return LoadShape(requests=8, max_outstanding=8, workers=1, time_scale=time_scale)


def half_open_router(shape: LoadShape) -> RouterConfig:
    """Every generation ``HALF_OPEN_GEN_S`` long, all at once: the results are written at a known time."""
    return RouterConfig(
        mode="latency",
        max_num_seqs=max(shape.requests, 1),
        gen_seconds=shape.scaled(HALF_OPEN_GEN_S),
        procs=router_procs(held_at_once(shape)),
    )


def half_open_faults(shape: LoadShape) -> FaultSchedule:
    """The edge half-open (``timeout=0`` both ways: nothing passes, nothing closes) over the results' writes."""
    return FaultSchedule(
        (
            Fault(
                "edge",
                "timeout",
                {"timeout": 0},
                stream="both",
                start_s=shape.scaled(HALF_OPEN_START_S),
                duration_s=shape.scaled(HALF_OPEN_OUTAGE_S),
            ),
        )
    )


# restart_reuse, in SDK seconds: the server restarts just after the first wave's generations (its 8th
# completion, so every one of them was accepted, however slow the family's submits); the second wave arrives
# when a server start-up (the family's ``restart_s``, real seconds) has passed, or retries its submits until the
# server is back; every first poll waits RESTART_POLL_AFTER_WAVE_S past the second wave, so the first wave asks
# for its pre-restart ids after the second wave holds the new process's first ids, and the second wave still
# polls before its results' completed TTL.
RESTART_AT_S = 2.0
RESTART_WAVE_S = 300.0
RESTART_WAVE_REQUESTS = 8
# The shortest completed TTL any family promises (SkyRL's 600 s); the others keep a result longer.
SHORTEST_COMPLETED_TTL_S = min(c.completed_ttl_s for c in CONTRACTS.values() if c.completed_ttl_s is not None)
RESTART_POLL_AFTER_WAVE_S = SHORTEST_COMPLETED_TTL_S - 150.0 - RESTART_WAVE_S
assert 0 < RESTART_POLL_AFTER_WAVE_S < SHORTEST_COMPLETED_TTL_S - RESTART_WAVE_S


def restart_reuse(time_scale: float) -> LoadShape:
    """Two waves of 8 requests, a ``server:restart`` between them, every first poll late.

    What a correct server may do with an id accepted before a restart is
    answer 404 (``restart_forgets``); an id the next process hands out again
    gives the first wave's late polls the second wave's results
    (``--regress id-reuse-after-restart``: ``result_integrity``), and an
    unknown id answered 500 keeps the first wave retrying (``--regress
    500-for-unknown``). A restart is a process fault, drawn on nightly only
    and rarely next to the second wave's arrival, so these two regressions
    need this trial to be met at all. The waves as for a server that starts in
    15 s; ``restart_waves`` fits them to the target's family.
    """
    return LoadShape(
        requests=2 * RESTART_WAVE_REQUESTS,
        max_outstanding=2 * RESTART_WAVE_REQUESTS,
        workers=1,
        time_scale=time_scale,
        arrival="waves",
        arrival_waves=2,
        arrival_span_s=2 * RESTART_WAVE_S,
        delay_polls=PollBehaviour(fraction=1.0, after_s=RESTART_WAVE_S + RESTART_POLL_AFTER_WAVE_S),
    )


def restart_waves(shape: LoadShape, contract: ServerContract) -> LoadShape | None:
    """``restart_reuse``'s second wave after the family's start-up (``restart_s`` real seconds), its first polls
    as long after that; None when those polls would come past the family's completed TTL."""
    wave_s = max(RESTART_WAVE_S, contract.restart_s / shape.time_scale)
    polls_s = wave_s + RESTART_POLL_AFTER_WAVE_S
    if contract.completed_ttl_s is not None and polls_s >= contract.completed_ttl_s:
        return None
    return dataclasses.replace(
        shape, arrival_span_s=2 * wave_s, delay_polls=PollBehaviour(fraction=1.0, after_s=polls_s)
    )


def restart_faults(shape: LoadShape) -> FaultSchedule:
    """``server:restart`` ``RESTART_AT_S`` SDK s after the first wave's last generation."""
    anchor = Anchor("completion", RESTART_WAVE_REQUESTS)
    return FaultSchedule((Fault("server", "restart", start_s=shape.scaled(RESTART_AT_S), anchor=anchor),))


KNOWN_SHAPES: dict[str, Callable[[float], LoadShape]] = {
    "size_burst": size_burst,
    "size_flood": size_flood,
    "completion_burst": completion_burst,
    "cpu_sample": cpu_sample,
    "training_waves": training_waves,
    "half_open_delivery": half_open_delivery,
    "restart_reuse": restart_reuse,
    "release_hold": release_hold,
}
# Every known trial's name: the loads above and in known_store.py, and the contract-edge trials derived from the family's contract.
KNOWN_NAMES = tuple(KNOWN_SHAPES) + tuple(EDGE_TRIALS)
# The router each known trial needs (default: the immediate router).
KNOWN_ROUTERS: dict[str, Callable[[LoadShape], RouterConfig]] = {
    "size_burst": size_burst_router,
    "completion_burst": completion_burst_router,
    "half_open_delivery": half_open_router,
}
# The faults a known trial needs (default: none, and the load then bypasses the edge proxy).
KNOWN_FAULTS: dict[str, Callable[[LoadShape], FaultSchedule]] = {
    "half_open_delivery": half_open_faults,
    "restart_reuse": restart_faults,
    "release_hold": release_faults,
}
# The post-load hold a known trial needs (real seconds; default none), None when the family cannot run it.
KNOWN_HOLDS: dict[str, Callable[[LoadShape, ServerContract], float | None]] = {"release_hold": release_hold_s}
# A known trial's shape fitted to the target's family (None: the family cannot keep the trial's rule in it).
KNOWN_FITS: dict[str, Callable[[LoadShape, ServerContract], LoadShape | None]] = {"restart_reuse": restart_waves}


def known_trial_config(
    name: str, target: str, time_scale: float, regress: Iterable[str], limits: Limits
) -> TrialConfig | None:
    """The known trial ``name`` as a ``TrialConfig`` that fits the suite's shared stack for ``limits``; None for a
    contract-edge trial (``strategies.edges``) whose rule ``target``'s family does not have, a hold past TTLs it
    does not have, a router the family cannot serve within ``limits`` (a burst of generations, each long,
    through a server that forwards one at a time), or a late poll or hold past ``limits``' wall (twinkle-kit's
    86,400 s TTL: its release hold is 75 minutes at time scale 0.05)."""
    contract = CONTRACTS[parse_target(target).family]
    if name in EDGE_TRIALS:
        edge = EDGE_TRIALS[name](contract, time_scale)
        if edge is None:
            return None
        shape, router, faults = edge.shape, edge.router, edge.faults
    elif name in KNOWN_SHAPES:
        fitted = KNOWN_FITS.get(name, lambda shape, _: shape)(KNOWN_SHAPES[name](time_scale), contract)
        if fitted is None:
            return None
        shape = fitted
        router = KNOWN_ROUTERS.get(name, immediate_router)(shape)
        faults = KNOWN_FAULTS[name](shape) if name in KNOWN_FAULTS else FaultSchedule()
    else:
        raise ValueError(f"unknown known-bug trial {name!r}; known: {', '.join(KNOWN_NAMES)}")
    hold = KNOWN_HOLDS[name](shape, contract) if name in KNOWN_HOLDS else 0.0
    if hold is None or not router_fits(shape, router, limits, contract):
        return None
    if hold + shape.scaled(_latest_poll_s(shape)) > limits.max_wall_real_s:
        return None
    return TrialConfig(
        target=target,
        shape=shape,
        router=router,
        regress=tuple(regress),
        faults=faults,
        fatal_faults=fatal_kinds(faults),
        proxies=proxies_for(limits),
        max_wall_s=limits.max_wall_real_s,
        drain_s=limits.drain_real_s,
        direct_edge=not faults.faults,
        engine="null" if shape.training.enabled else engine_for(limits),
        hold_s=hold,
    )


def _latest_poll_s(shape: LoadShape) -> float:
    """How long after its submit (SDK s) the trial's latest first poll comes: a delayed or abandoned one's."""
    return max((p.after_s for p in (shape.delay_polls, shape.abandon_polls) if p.fraction > 0), default=0.0)
