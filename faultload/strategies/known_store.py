"""Known trials of what the server's store holds: its size, and what it releases once results are past their TTLs.

A store that drops entries past a size, a forwarding pool capped below its configuration, an index that slows as
it grows (``size_burst``: 2,048 at once on every ci session; ``size_flood``: 16,384 owed at once, nightly's), and
one that keeps what it no longer owes (``release_hold``: large results, then the idle server held past its TTLs).
Random draws hold at most a few hundred requests at once and never leave the server idle past its TTLs, so only
these loads meet such stores. :mod:`faultload.strategies.known` lists them with the other known trials.
"""

from __future__ import annotations

from faultload.model.family import ServerContract
from faultload.model.faults import Fault, FaultSchedule
from faultload.model.router import RouterConfig
from faultload.model.shape import LoadShape, PollBehaviour
from faultload.strategies.routers import router_procs
from faultload.strategies.shapes import held_at_once

# size_burst, at full time (SIZE_BURST_TIME_SCALE): 2,048 requests over SIZE_BURST_SPAN_S, every generation
# SIZE_BURST_GEN_S long, so that every request accepted in the burst is still at the router when the last is
# accepted. Full time because a burst of thousands meets the server's unscaled cost per request: at 0.05 the
# client's connect timeout is 0.25 s and its poll cycle 2.25 s, and a server that accepts the burst in 4-5 s
# (TuFT 0.2.2: submit p90 4.4 s) is met by a storm of reconnects and re-polls the SDK never makes (7-14
# attempts per request, 27,000-74,000 listen overflows); the same 2,048 at full time: 2 attempts each, none.
SIZE_BURST_REQUESTS = 2048
SIZE_BURST_SPAN_S = 5.0
SIZE_BURST_GEN_S = 2 * SIZE_BURST_SPAN_S
SIZE_BURST_TIME_SCALE = 1.0


def size_burst(time_scale: float) -> LoadShape:
    """2,048 requests at once, no cap, at full time (the profile's ``time_scale`` is not used: see
    ``SIZE_BURST_TIME_SCALE``): a limit that bites only past a thousand in flight meets every ci session.

    The small random draws hold at most a few hundred requests at once; a
    store that drops entries past a size, or a forwarding pool capped below
    what its configuration says, serves them all. Small results, one
    worker, every request submitted at once (the SDK's 400 submits in
    flight), every generation ``SIZE_BURST_GEN_S`` long so that the router
    holds them together (``forwards_concurrent`` compares its peak with what
    the server owed it).
    """
    return LoadShape(
        requests=SIZE_BURST_REQUESTS,
        max_outstanding=0,
        workers=1,
        result_tokens=16,
        time_scale=SIZE_BURST_TIME_SCALE,
        arrival="ramp",
        arrival_span_s=SIZE_BURST_SPAN_S,
    )


def size_burst_router(shape: LoadShape) -> RouterConfig:
    """Every generation ``SIZE_BURST_GEN_S`` long, as many at once as there are requests."""
    return RouterConfig(
        mode="latency",
        max_num_seqs=shape.requests,
        gen_seconds=shape.scaled(SIZE_BURST_GEN_S),
        procs=router_procs(held_at_once(shape)),
    )


# size_flood: 16,384 requests in SIZE_FLOOD_WAVES waves over SIZE_FLOOD_SPAN_S (182 a second: about half of what
# the server answers on 2 cores beside the load), each first poll SIZE_FLOOD_POLL_AFTER_S after its submit, so
# that every request has been accepted and none delivered between the last submit and the first poll: 16,384
# results owed at once. At full time (SIZE_FLOOD_TIME_SCALE): at 0.05 the ramp's 90 real s are 1,800 SDK s, past
# every TTL, so a poll after the last submit would meet only expired results.
SIZE_FLOOD_REQUESTS = 16384
SIZE_FLOOD_SPAN_S = 90.0
SIZE_FLOOD_WAVES = 90
SIZE_FLOOD_POLL_AFTER_S = 120.0
SIZE_FLOOD_TIME_SCALE = 1.0


def size_flood(time_scale: float) -> LoadShape:
    """16,384 results owed at once, at full time (the profile's ``time_scale`` is not used: see
    ``SIZE_FLOOD_TIME_SCALE``): a store that drops entries past a size, an index that slows as it grows,
    a sweep that costs more per entry held, met at sixteen times ``size_burst``'s count.

    The polls come after the submits, so the server holds 16,384 futures but not
    16,384 connections (held polls and forwards at once would need ~2.5 fds each,
    past one process's 20,000): the router answers at once, each result waits in
    the server's store for its poll.
    """
    return LoadShape(
        requests=SIZE_FLOOD_REQUESTS,
        max_outstanding=0,
        workers=1,
        result_tokens=16,
        time_scale=SIZE_FLOOD_TIME_SCALE,
        arrival="waves",
        arrival_span_s=SIZE_FLOOD_SPAN_S,
        arrival_waves=SIZE_FLOOD_WAVES,
        delay_polls=PollBehaviour(fraction=1.0, after_s=SIZE_FLOOD_POLL_AFTER_S),
    )


# release_hold, in SDK seconds: 256 results of 32,768 tokens (256 KiB of proto each, 64 MiB in all, at most 8 MiB
# in flight), arriving at a rate that ramps up over RELEASE_RAMP_S (request i at RELEASE_RAMP_S x sqrt(i/256)),
# so that the router's 503s over the first RELEASE_ERRORS_S fail the first two forwards only and the next request
# arrives 3.7 SDK s after they stop (a request failed just after a fault window's end is judged a loss: with a
# 20 s window over a 100 s ramp one was, 0.1 s past it); a quarter of first polls RELEASE_POLL_DELAY_S late;
# then the idle server is held past the family's longest TTL and a sweep.
RELEASE_RESULT_TOKENS = 32768
RELEASE_RAMP_S = 200.0
RELEASE_ERRORS_S = 14.0
RELEASE_POLL_DELAY_S = 40.0
RELEASE_HOLD_MARGIN_S = 2.0  # real seconds past the release's due time: four of the monitor's samples


def release_hold(time_scale: float) -> LoadShape:
    """256 large results, then the idle server held past its TTLs: does it release what it no longer owes
    (``releases_results``)?

    A store that keeps delivered results (``--regress keep-delivered``,
    ``evict-pending-only``) or whose sweeper task died (``naive-completed-at``:
    the sweep meeting a completed, undelivered result raises; the late first
    polls make sure one is there; ``sweep-counts-bytes``: the sweep evicting
    a failed forward's result raises; the router's errors at the start make
    those) answers every request correctly and keeps them all. Results large
    enough that 64 MiB of them stand out of the RSS's noise.
    Measured at time scale 0.05 (``bench/release_rss.py --requests 256
    --result-tokens 32768 --max-outstanding 32 --time-scale 0.05``, glibc's
    mmap threshold held: ``targets/families/skyrl.py``): clean 0.4.0 held 0.12 MiB per MiB
    delivered, a store that never evicts 1.12.
    """
    return LoadShape(
        requests=256,
        max_outstanding=32,
        workers=1,
        result_tokens=RELEASE_RESULT_TOKENS,
        time_scale=time_scale,
        arrival="ramp",
        arrival_span_s=RELEASE_RAMP_S,
        delay_polls=PollBehaviour(fraction=0.25, after_s=RELEASE_POLL_DELAY_S),
    )


def release_faults(shape: LoadShape) -> FaultSchedule:
    """The router answers 503 from the start for ``RELEASE_ERRORS_S`` SDK s: some forwards fail (FAILED)."""
    return FaultSchedule((Fault("router", "errors", start_s=0.0, duration_s=shape.scaled(RELEASE_ERRORS_S)),))


def release_hold_s(shape: LoadShape, contract: ServerContract) -> float | None:
    """The post-load hold: the family's longest TTL and a sweep interval, scaled, and a margin (real s); None
    for a family with no TTL (it keeps every result by its contract: no trial) or whose sweep waits for new
    registrations (``releases_results`` does not judge it: no trial)."""
    ttl = contract.longest_ttl_s
    if ttl is None or contract.sweep_registrations:  # no TTL, or a sweep a trial's own requests never trigger
        return None
    return shape.scaled(ttl + (contract.sweep_s or 0.0)) + RELEASE_HOLD_MARGIN_S
