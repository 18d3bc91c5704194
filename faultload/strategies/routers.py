"""Strategies for the fake vLLM router: how long results take, and in what waves.

Generation times and barrier timeouts are drawn in SDK seconds and multiplied
by the time scale, so "a result takes 40 s" means the same against the SDK's
45 s poll timeout at every scale.
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

from faultload.model.family import ServerContract
from faultload.model.router import RouterConfig, procs_for
from faultload.model.shape import LoadShape
from faultload.model.timescale import trial_s
from faultload.strategies.limits import CI, Limits
from faultload.strategies.shapes import held_at_once, rounds_fitting

# Generation time of one request (SDK seconds), fastest first.
GEN_SECONDS_SDK = (1.0, 5.0, 20.0, 40.0, 80.0)
# Router-wide generation slots (vLLM's max_num_seqs), the default first.
MAX_NUM_SEQS = (256, 1024, 64, 16, 4, 1)
# Barrier timeouts (SDK seconds), shortest first.
BARRIER_TIMEOUTS_SDK = (20.0, 40.0, 80.0, 160.0)


def router_procs(held: int) -> int:
    """Router processes for ``held`` requests at once: the one rule (faultload.model.router.procs_for)."""
    return procs_for(held)


def immediate_router(shape: LoadShape) -> RouterConfig:
    """The simplest router: answers at once."""
    return RouterConfig(mode="immediate", barrier=0, procs=router_procs(held_at_once(shape)))


def _generating_at_once(seqs: int, contract: ServerContract | None) -> int:
    """How many generations run at once: the router's slots, or fewer when the server forwards fewer at a time by
    design (its contract's ``forwards_at_once``)."""
    at_once = contract.forwards_at_once if contract is not None else None
    return min(seqs, at_once) if at_once else seqs


def router_fits(shape: LoadShape, router: RouterConfig, limits: Limits, contract: ServerContract | None) -> bool:
    """Whether ``router`` serves ``shape`` within ``limits`` through a server that forwards at most its contract's
    ``forwards_at_once`` at a time: a barrier wave no larger, a latency router's queue within the wait and wall
    bounds at that many generations at once. A server that forwards every sample at once (no such limit) is
    served by every router the trials name (they were measured on it)."""
    at_once = contract.forwards_at_once if contract is not None else None
    if not at_once or router.mode == "immediate":
        return True
    if router.mode == "barrier":
        return router.barrier <= at_once
    wait_budget = trial_s(limits.max_result_wait_s, shape.time_scale)
    seqs = _generating_at_once(router.max_num_seqs, contract)
    return _latency_fits(shape.requests, held_at_once(shape), seqs, router.gen_seconds, wait_budget, limits)


@st.composite
def latency_routers(
    draw, shape: LoadShape, limits: Limits = CI, contract: ServerContract | None = None
) -> RouterConfig:
    """``max_num_seqs`` slots, each generation ``gen_seconds`` long.

    Minimal: ``RouterConfig(mode="latency", max_num_seqs=256, gen_seconds=1 SDK s
    × scale)``. Only combinations whose queue keeps a request's wait under
    ``limits.max_result_wait_s`` and the whole load under
    ``limits.max_router_real_s`` are drawn, counting the generations a server of
    ``contract`` lets run at once; when none does, a server that forwards a few at
    a time by design gets the immediate router.
    """
    scale = shape.time_scale
    held = held_at_once(shape)
    wait_budget = trial_s(limits.max_result_wait_s, scale)
    feasible = []
    for gen_sdk in GEN_SECONDS_SDK:
        gen = trial_s(gen_sdk, scale)
        seqs = [
            s
            for s in MAX_NUM_SEQS
            if _latency_fits(shape.requests, held, _generating_at_once(s, contract), gen, wait_budget, limits)
        ]
        if seqs:
            feasible.append((gen, seqs))
    if not feasible and contract is not None and contract.forwards_at_once:
        return immediate_router(shape)
    if not feasible:  # nothing fits: the fastest generation with every request in its own slot
        gen = trial_s(GEN_SECONDS_SDK[0], scale)
        return RouterConfig(mode="latency", max_num_seqs=max(held, 1), gen_seconds=gen, procs=router_procs(held))
    gen, seqs = draw(st.sampled_from(feasible))
    max_num_seqs = draw(st.sampled_from(seqs))
    return RouterConfig(mode="latency", max_num_seqs=max_num_seqs, gen_seconds=gen, procs=router_procs(held))


def _latency_fits(requests: int, held: int, seqs: int, gen: float, wait_budget: float, limits: Limits) -> bool:
    rounds_held = math.ceil(held / seqs)
    rounds_all = math.ceil(requests / seqs)
    return rounds_held * gen <= wait_budget and rounds_all * gen <= limits.max_router_real_s


@st.composite
def barrier_routers(
    draw, shape: LoadShape, limits: Limits = CI, contract: ServerContract | None = None
) -> RouterConfig:
    """Results released in waves of ``barrier`` requests (or after ``barrier_timeout_s``).

    Minimal: one wave of every request held at once (``barrier`` = the cap, or
    all requests) with the shortest timeout that fits (20 SDK s × scale). A wave
    is never larger than a server of ``contract`` forwards at once by design
    (a larger one would wait out every timeout).
    """
    scale = shape.time_scale
    held = _generating_at_once(held_at_once(shape), contract)
    timeouts = [t for t in BARRIER_TIMEOUTS_SDK if t <= limits.max_result_wait_s] or [BARRIER_TIMEOUTS_SDK[0]]
    smaller = draw(st.integers(0, held - 1))
    timeout = trial_s(draw(st.sampled_from(timeouts)), scale)
    procs = router_procs(held_at_once(shape))
    return RouterConfig(mode="barrier", barrier=held - smaller, barrier_timeout_s=timeout, procs=procs)


def barrier_fitting_requests(shape: LoadShape, router: RouterConfig, limits: Limits) -> int:
    """``shape.requests`` lowered so that every barrier wave timing out still fits half the trial's wall bound.

    A barrier releases a wave when ``barrier`` requests wait or its timeout
    passes. Requests holding their slot of the cap for a late poll are not at
    the router, so waves then wait out the timeout: the nightly row replayed
    8,192 requests through a barrier of 58 with a 4 s timeout, ~4.2 s per
    wave, 590 s per trial. Never below the requests held at once.
    """
    if router.mode != "barrier" or router.barrier <= 0 or router.barrier_timeout_s <= 0:
        return shape.requests
    return rounds_fitting(shape.requests, held_at_once(shape), router.barrier, router.barrier_timeout_s, limits)


def router_configs(
    shape: LoadShape, limits: Limits = CI, contract: ServerContract | None = None
) -> st.SearchStrategy[RouterConfig]:
    """Immediate, latency or barrier router for ``shape`` (those of ``limits.router_modes``), each fitting a
    server of ``contract`` (its ``forwards_at_once``).

    Minimal: the immediate router (``RouterConfig(mode="immediate", barrier=0,
    procs=1)`` for shapes under 8,000 held); without it, the minimal latency router.
    """
    options = {
        "immediate": st.just(immediate_router(shape)),
        "latency": latency_routers(shape, limits, contract),
        "barrier": barrier_routers(shape, limits, contract),
    }
    return st.one_of(*[options[m] for m in limits.router_modes])
