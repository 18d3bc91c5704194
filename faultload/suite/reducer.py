"""The suite's own domain-aware reduction steps, and the order that says which failing trial is simpler.

:func:`greedy_reduce` tries these on a failure: the suite's runner on a first
failure, before Hypothesis's generic shrinker, and ``faultload shrink`` on a
failed ``faultload run``. Fewer requests first, then what makes a trial long,
then each fault, then the client, router and result.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from faultload.model.faults import FaultSchedule
from faultload.model.router import procs_for
from faultload.model.shape import ClientPolicy, PollBehaviour
from faultload.strategies.faults import fatal_kinds
from faultload.strategies.routers import immediate_router
from faultload.strategies.shapes import with_requests as shape_with_requests


def complexity(config) -> tuple:
    """Sort key of a failing trial: smaller is a simpler repro (requests first)."""
    s, r = config.shape, config.router
    return (
        repro_size(s),
        len(config.faults.faults),
        int(s.abandon_polls.fraction > 0) + int(s.delay_polls.fraction > 0),
        int(s.arrival != "burst"),
        int(s.policy != type(s.policy)()),
        int(r.mode != "immediate"),
        s.result_tokens * s.num_samples,
        s.workers,
        int(s.client == "sdk"),
        int(s.accept != "proto"),
        s.max_outstanding,
        s.abandon_polls.after_s + s.delay_polls.after_s,
    )


def repro_size(shape) -> int:
    """Requests a trial sends by design: its samples, and its trainers' forward_backward and optim_step."""
    return shape.requests + shape.training.calls


def _training_reductions(config):
    """Fewer trainers, then fewer steps, then small bodies (never none: a training failure needs a trainer)."""
    t = config.shape.training

    def mix(label, **changes):
        training = dataclasses.replace(t, **changes)
        return label, dataclasses.replace(config, shape=dataclasses.replace(config.shape, training=training))

    if not t.enabled:
        return
    if t.trainers > 1:
        yield mix("1 trainer", trainers=1)
    if t.trainers > 3:
        yield mix(f"{t.trainers // 2} trainers", trainers=t.trainers // 2)
    if t.steps > 1:
        yield mix("1 step", steps=1)
    if t.steps > 3:
        yield mix(f"{t.steps // 2} steps", steps=t.steps // 2)
    if t.datums > 1 or t.datum_tokens > 16:
        yield mix("1 datum of 16 tokens", datums=1, datum_tokens=min(16, t.datum_tokens))


def with_requests(config, requests: int):
    """``config`` with ``requests`` requests; cap, workers, waves and router processes follow.

    The shape's part is the strategies' own rule (``faultload.strategies.shapes.with_requests``:
    workers and waves no more than the requests); the cap is clamped too, so
    the shrunk trial holds no more than it sends. The barrier size stays: a
    wave the fewer requests no longer fill waits for its timeout, which is
    often what made the trial fail.
    """
    s = config.shape
    cap = min(s.max_outstanding, requests) if s.max_outstanding else 0
    shape = dataclasses.replace(shape_with_requests(s, requests), max_outstanding=cap)
    router = dataclasses.replace(config.router, procs=procs_for(min(requests, cap or requests)))
    return dataclasses.replace(config, shape=shape, router=router)


def reductions(config):
    """(label, simpler config) candidates, most valuable first; each differs from ``config``.

    Fewer requests first, then fewer trainers and steps; then what makes a trial long (late and abandoned
    polls, spread arrivals), so later candidates run faster; then each fault;
    then the client policy, the router and the result size.
    """
    s = config.shape

    def shape(label, **changes):
        return label, dataclasses.replace(config, shape=dataclasses.replace(s, **changes))

    if s.requests > 1:
        yield "1 request", with_requests(config, 1)
    if s.requests > 3:
        yield f"{s.requests // 2} requests", with_requests(config, s.requests // 2)
    yield from _training_reductions(config)
    if s.delay_polls.fraction:
        yield shape("no delayed polls", delay_polls=PollBehaviour())
    if s.abandon_polls.fraction:
        yield shape("no abandoned polls", abandon_polls=PollBehaviour())
        if s.abandon_polls.fraction < 1:
            yield shape("every request abandons", abandon_polls=PollBehaviour(1.0, s.abandon_polls.after_s))
    if s.arrival != "burst":
        yield shape("one burst", arrival="burst", arrival_span_s=0.0, arrival_waves=1)
    faults = config.faults.faults
    for i, fault in enumerate(faults):
        rest = FaultSchedule(faults[:i] + faults[i + 1 :])
        yield f"without {fault.to_spec()}", dataclasses.replace(config, faults=rest, fatal_faults=fatal_kinds(rest))
    if s.policy != ClientPolicy():
        yield shape("the SDK's poll policy", policy=ClientPolicy())
    if config.router.mode != "immediate":
        yield "immediate router", dataclasses.replace(config, router=immediate_router(s))
    if s.result_tokens > 1 or s.num_samples > 1:
        yield shape("1-token results", result_tokens=1, num_samples=1)
    if s.workers > 1:
        yield shape("1 worker", workers=1)
    if s.client == "sdk":  # the raw client's repro is easier to read (every attempt in the attempts table)
        yield shape("raw client", client="raw", sdk="")
    if s.accept != "proto":
        yield shape("proto results", accept="proto")


def greedy_reduce(
    config,
    still_fails: Callable[[object], bool | None],
    out_of_time: Callable[[], bool],
    steps: list[dict],
    allowed: Callable[[str, object], bool] = lambda label, candidate: True,
    log: Callable[[str], None] = lambda message: None,
    clock: Callable[[], float] = time.monotonic,
):
    """The simplest config found from ``config`` by taking, pass after pass, the first reduction that
    ``still_fails``; each step tried is appended to ``steps`` (step, requests, still_fails, seconds).

    ``still_fails`` runs the candidate: True keeps it, False marks the step essential (not retried on a later
    pass, but for "N requests", which differs every pass), None stops (no trial could be run). A candidate that
    does not validate is skipped and logged; ``allowed`` may skip others.
    """
    current = config
    essential: set[str] = set()
    progress = True
    while progress and not out_of_time():
        progress = False
        for label, candidate in reductions(current):
            if out_of_time():
                break
            if label in essential or not allowed(label, candidate):
                continue
            try:
                candidate.validate()
            except ValueError as exc:
                log(f"reduction {label!r} skipped: {exc}")
                continue
            started = clock()
            fails = still_fails(candidate)
            if fails is None:
                return current
            steps.append(
                {
                    "step": label,
                    "requests": candidate.shape.requests,
                    "still_fails": fails,
                    "seconds": round(clock() - started, 1),
                }
            )
            if fails:
                current = candidate
                progress = True
                break
            if "requests" not in label:
                essential.add(label)
    return current
