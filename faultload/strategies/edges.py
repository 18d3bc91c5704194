"""Contract-edge trials: each timed rule of the target family's contract met just inside its edge.

A random draw meets a TTL's edge only by chance: a loss needs a result to
outlive the client's absence by less than the TTL the contract promises, and
a short TTL or a TTL measured from the wrong event loses it only then. Each
trial here is derived from the family's ``ServerContract`` (SDK seconds,
scaled with the trial): the client comes back ``EDGE`` of the way into the
TTL, measured from the event the contract anchors it to, and the rest of the
trial is arranged so that the same absence measured from any earlier event
(creation instead of completion, completion instead of delivery) runs past
the TTL. A correct server keeps every result; a wrong anchor or a shorter
value loses every request. A family without the TTL has no such trial
(TuFT: results kept until the server stops); a family whose TTL runs from
creation (hatchery-core) has its own.

The trials are small (``EDGE_REQUESTS``) so that a failure is its own repro,
and run before any draw on every profile that lists them (``Profile.known_examples``).
Where limits ask for it (nightly), the draws also poll just inside and just
outside each TTL (:func:`around_edges`), among faults and shapes the edge
trials do not try.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from faultload.model.family import ServerContract
from faultload.model.faults import Fault, FaultSchedule
from faultload.model.router import RouterConfig
from faultload.model.shape import LoadShape, PollBehaviour
from faultload.model.timescale import trial_s
from faultload.strategies.routers import immediate_router, router_procs
from faultload.strategies.shapes import held_at_once

# The share of a TTL the client stays away before it comes back: inside the edge by 20% of the TTL, more
# than the store's sweep interval (SkyRL: 30 s against TTLs of 300 s and 600 s), so a correct server's
# late sweep never meets the client, and a TTL 20% shorter than promised loses the result.
EDGE = 0.8
EDGE_REQUESTS = 8
# completed_ttl_edge: the generation takes this share of the completed TTL, so that creation + TTL falls
# before completion + EDGE x TTL by (COMPLETED_GEN_SHARE - (1 - EDGE)) x TTL (120 s for SkyRL's 600 s).
COMPLETED_GEN_SHARE = 0.4
# retrieved_ttl_edge: the first poll (a delivery) comes this share of the retrieved TTL before the completed
# TTL runs out, so that delivery + EDGE x retrieved TTL lies past completion + completed TTL (SkyRL: delivery at
# 510 s, the client back at 755 s, the completed clock out at 600 s): only the retrieved clock keeps the result.
DELIVERY_BEFORE_EXPIRY_SHARE = 0.3
# Nightly's draws around each TTL (around_edges): a late or abandoned poll this share of the TTL late, just
# inside (the result must still be there) or just outside (the contract allows either: kept or 404).
AROUND_EDGE_SHARES = (0.9, 1.1)
# How long the edge drops the server's answers around that delivery (SDK s each side of the first poll): the
# answer is written while the client's poll is open, and the client drops the poll without it.
BLACKHOLE_MARGIN_S = 20.0


@dataclass(frozen=True)
class EdgeTrial:
    """A contract-edge trial's parts: the load, the router, the faults."""

    shape: LoadShape
    router: RouterConfig
    faults: FaultSchedule = FaultSchedule()


def completed_ttl_edge(contract: ServerContract, time_scale: float) -> EdgeTrial | None:
    """The completed TTL, from completion: a long generation, then the first poll ``EDGE`` x TTL after it.

    Every generation takes ``COMPLETED_GEN_SHARE`` of the completed TTL (all
    at once), and every first poll waits until ``EDGE`` of the TTL after the
    results are written. A result whose TTL runs from creation (or a TTL
    shorter than ``EDGE`` of the promise) is swept before that poll: 404.
    """
    ttl = contract.completed_ttl_s
    if ttl is None:
        return None
    gen_s = COMPLETED_GEN_SHARE * ttl
    shape = LoadShape(
        requests=EDGE_REQUESTS,
        max_outstanding=EDGE_REQUESTS,
        workers=1,
        time_scale=time_scale,
        delay_polls=PollBehaviour(fraction=1.0, after_s=gen_s + EDGE * ttl),
    )
    return EdgeTrial(shape, _all_at_once(shape, gen_s))


def retrieved_ttl_edge(contract: ServerContract, time_scale: float) -> EdgeTrial | None:
    """The retrieved TTL, from delivery: a delivery late in the completed TTL that the client never reads.

    Results are written at once; every first poll comes ``DELIVERY_BEFORE_EXPIRY_SHARE``
    of the retrieved TTL before the completed TTL ends, while the edge drops
    the server's answers (Toxiproxy ``timeout`` 0 downstream): the server
    answers, the client drops its poll and comes back ``EDGE`` of the
    retrieved TTL later, past the completed TTL. Only a retrieved TTL that
    runs from that delivery and is as long as promised still holds the
    result; a clock from completion, or a shorter TTL, answers 404.
    """
    retrieved, completed = contract.retrieved_ttl_s, contract.completed_ttl_s
    if retrieved is None or completed is None:
        return None
    delivery_s = max(0.0, completed - DELIVERY_BEFORE_EXPIRY_SHARE * retrieved)
    shape = LoadShape(
        requests=EDGE_REQUESTS,
        max_outstanding=EDGE_REQUESTS,
        workers=1,
        time_scale=time_scale,
        delay_polls=PollBehaviour(fraction=1.0, after_s=delivery_s),
        abandon_polls=PollBehaviour(fraction=1.0, after_s=EDGE * retrieved),
    )
    blackhole = Fault(
        "edge",
        "timeout",
        {"timeout": 0},
        stream="downstream",
        start_s=trial_s(delivery_s - BLACKHOLE_MARGIN_S, time_scale),
        duration_s=trial_s(2 * BLACKHOLE_MARGIN_S, time_scale),
    )
    return EdgeTrial(shape, _all_at_once(shape, 0.0), FaultSchedule((blackhole,)))


def created_ttl_edge(contract: ServerContract, time_scale: float) -> EdgeTrial | None:
    """The created TTL, from creation: results written at once, every first poll ``EDGE`` x TTL after submit.

    The only clock a family with a created TTL promises (hatchery-core: its registry forgets a future 3600 s
    after creating it, done or not) has no earlier event to be measured from: this trial meets a TTL shorter
    than promised, which answers 404.
    """
    ttl = contract.created_ttl_s
    if ttl is None:
        return None
    shape = LoadShape(
        requests=EDGE_REQUESTS,
        max_outstanding=EDGE_REQUESTS,
        workers=1,
        time_scale=time_scale,
        delay_polls=PollBehaviour(fraction=1.0, after_s=EDGE * ttl),
    )
    return EdgeTrial(shape, _all_at_once(shape, 0.0))


def around_edges(contract: ServerContract) -> tuple[float, ...]:
    """Poll delays (SDK s) just inside and just outside each of the family's TTLs, for the draws to meet them
    wherever the rest of a trial puts them; the contract model judges each (a 404 inside a TTL from the event
    it runs from is a loss, outside it is allowed). None for a family without TTLs."""
    ttls = [
        ttl for ttl in (contract.retrieved_ttl_s, contract.completed_ttl_s, contract.created_ttl_s) if ttl is not None
    ]
    return tuple(sorted(share * ttl for ttl in ttls for share in AROUND_EDGE_SHARES))


def _all_at_once(shape: LoadShape, gen_s: float) -> RouterConfig:
    """Every generation ``gen_s`` SDK s long, all at once (the immediate router when 0)."""
    if gen_s <= 0:
        return immediate_router(shape)
    return RouterConfig(
        mode="latency",
        max_num_seqs=shape.requests,
        gen_seconds=shape.scaled(gen_s),
        procs=router_procs(held_at_once(shape)),
    )


# The edge trials by name, each from the family's contract and the time scale (None: the family has no such rule).
EDGE_TRIALS: dict[str, Callable[[ServerContract, float], EdgeTrial | None]] = {
    "completed_ttl_edge": completed_ttl_edge,
    "retrieved_ttl_edge": retrieved_ttl_edge,
    "created_ttl_edge": created_ttl_edge,
}
