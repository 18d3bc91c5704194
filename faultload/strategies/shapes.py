"""Strategies for the load side: ``LoadShape`` and its parts.

Every strategy here shrinks toward the simplest case; the minimal example of
each is stated in its docstring (and checked by ``tests/unit/test_strategies.py``
with ``hypothesis.find(strategy, lambda x: True)``). Alternatives of
``st.one_of`` are listed simplest first, integers are drawn with the simple end
as the lower bound, and ``sampled_from`` lists start with the simplest value.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from faultload.model.family import ServerContract
from faultload.model.sdk import (
    SDK_BACKOFF_CAP_S,
    SDK_KEEPALIVE_EXPIRY_S,
    SDK_POLL_TIMEOUT_S,
)
from faultload.model.shape import ClientPolicy, LoadShape, PollBehaviour
from faultload.model.training import TrainingMix
from faultload.strategies.limits import CI, Limits

# Where a late poll is interesting by the SDK's own timers (SDK seconds): just
# past its poll timeout, past timeout + backoff cap (what the SDK does after a
# timeout); the family's landmarks come next (ServerContract.poll_landmarks_s);
# and last, just under the SDK's idle-connection expiry, where a connection
# reused after an idle wait meets a server keep-alive as short as that expiry
# (the keep-alive race; last, so shrinking prefers the others).
SDK_POLL_LANDMARKS_S = (SDK_POLL_TIMEOUT_S, SDK_POLL_TIMEOUT_S + SDK_BACKOFF_CAP_S)
KEEPALIVE_RACE_S = SDK_KEEPALIVE_EXPIRY_S - 0.1
# Fractions of requests a poll behaviour applies to: "all" first (the repro
# with the fewest moving parts: every request does the same thing).
POLL_FRACTIONS = (1.0, 0.5, 0.25, 0.1)
# A retry storm's client poll timeout (SDK seconds), mildest first. Not below
# 5 s: at time scale 0.05 that is a 0.25 s HTTP timeout, and a shorter one
# times out answers a loaded 2-core server is already sending (each then
# re-polled after backoff, without end as the SDK does: a storm the client
# made, not the server).
STORM_POLL_TIMEOUTS_S = (15.0, 10.0, 5.0)
# Requests above which a shape must cap what is outstanding (the server holds
# ~2 fds per request in flight; one process may open 20,000).
MAX_UNCAPPED = 4096
BYTES_PER_RESULT_TOKEN = 16  # a JSON-sized token id + logprob, for the in-flight memory bound
_CLIENT_SLOTS = 20  # clients() draws from this many equally likely slots


def request_counts(max_requests: int = CI.max_requests) -> st.SearchStrategy[int]:
    """Requests in a trial. Minimal: 1."""
    return st.integers(1, max(1, max_requests))


def result_sizes(max_tokens: int = CI.max_result_tokens) -> st.SearchStrategy[int]:
    """Tokens per sample. Minimal: 1."""
    return st.integers(1, max(1, max_tokens))


def sample_counts(max_samples: int = CI.max_num_samples) -> st.SearchStrategy[int]:
    """Samples per request (``num_samples``). Minimal: 1."""
    return st.integers(1, max(1, max_samples))


def outstanding_caps(requests: int) -> st.SearchStrategy[int]:
    """``max_outstanding`` for ``requests``. Minimal: 0 (no cap: one burst) when
    ``requests`` <= MAX_UNCAPPED, else MAX_UNCAPPED (the largest cap allowed).

    Drawn caps lie in [min(requests, 16), requests]: a cap of 1 turns a load
    test into a serial one.
    """
    if requests <= MAX_UNCAPPED:
        return st.one_of(st.just(0), st.integers(min(requests, 16), requests))
    low = 16
    return st.integers(0, MAX_UNCAPPED - low).map(lambda k: MAX_UNCAPPED - k)


def faithful_cap(requests: int, max_outstanding: int, max_held: int) -> int:
    """``max_outstanding`` lowered so that at most ``max_held`` requests are held at once.

    Unchanged when it already holds no more (including no cap with
    ``requests`` <= ``max_held``); else ``max_held``. See
    ``Limits.max_faithful_held`` for why a trial must not hold more.
    """
    held = held_count(requests, max_outstanding)
    return max_outstanding if held <= max_held else max(1, max_held)


def wall_fitting_requests(
    requests: int, max_outstanding: int, late: tuple[PollBehaviour, ...], time_scale: float, limits: Limits
) -> int:
    """``requests`` lowered so that the rounds through the cap fit half the trial's wall bound.

    Each request holds a slot of the cap for about 1 SDK s plus its late
    polls' expected wait (fraction × after_s each); the requests go through
    in ceil(requests / held) rounds. Past half of ``limits.max_wall_real_s``
    the trial would be cut off by its own bound (the nightly row drew 7,919
    requests, 36 held, half of them re-polled 418 SDK s late: ~2,300 s).
    Never below one round (the requests held at once).
    """
    held = held_count(requests, max_outstanding)
    slot_s = (
        1.0 + sum(p.fraction * p.after_s for p in late)
    ) * time_scale  # > 0: time_scale > 0 (not rounded: a divisor)
    return rounds_fitting(requests, held, held, slot_s, limits)


def rounds_fitting(requests: int, held: int, per_round: int, round_s: float, limits: Limits) -> int:
    """``requests`` lowered to whole rounds of ``per_round`` taking ``round_s`` each within half the
    trial's wall bound; never below ``held`` (the requests held at once)."""
    rounds = max(1, int(0.5 * limits.max_wall_real_s // round_s))
    return min(requests, max(held, rounds * per_round))


def poll_landmarks(contract: ServerContract | None = None) -> tuple[float, ...]:
    """The late-poll delays the draws prefer (SDK s), simplest first: the SDK's timers, then the family's
    own (``contract.poll_landmarks_s``; none without a contract), then the keep-alive race."""
    return SDK_POLL_LANDMARKS_S + (contract.poll_landmarks_s if contract else ()) + (KEEPALIVE_RACE_S,)


def poll_behaviours(
    max_after_s: float = CI.max_poll_after_s,
    always: bool = False,
    around_edges: tuple[float, ...] = (),
    landmarks: tuple[float, ...] | None = None,
) -> st.SearchStrategy[PollBehaviour]:
    """A fraction of requests whose first poll is late or abandoned, ``after_s`` SDK seconds.

    Minimal: ``PollBehaviour()`` (no request affected). The minimal *affected*
    behaviour is ``PollBehaviour(1.0, 45.0)``: every request, just past the
    SDK's poll timeout. ``after_s`` comes from the timer ``landmarks``
    (:func:`poll_landmarks`; the SDK's alone when None) or any whole second up to ``max_after_s``.
    ``always``: only affected behaviours, from the landmarks only (minimal
    ``PollBehaviour(1.0, 45.0)``): for properties about results outliving polls.
    ``around_edges``: more landmarks, after the others (shrinking prefers those):
    the family's TTLs met just inside and just outside
    (:func:`faultload.strategies.edges.around_edges`).
    """
    landmarks = [x for x in (poll_landmarks() if landmarks is None else landmarks) + around_edges if x <= max_after_s]
    if max_after_s < 1:
        return st.just(PollBehaviour())
    if always and landmarks:
        after = st.sampled_from(landmarks)
    elif landmarks:
        after = st.one_of(st.sampled_from(landmarks), st.integers(1, int(max_after_s)).map(float))
    else:
        after = st.integers(1, int(max_after_s)).map(float)
    affected = st.builds(PollBehaviour, fraction=st.sampled_from(POLL_FRACTIONS), after_s=after)
    return affected if always else st.one_of(st.just(PollBehaviour()), affected)


def client_policies(storms: bool = True) -> st.SearchStrategy[ClientPolicy]:
    """The SDK's sampling policy, or a retry storm: a short client poll timeout.

    Minimal: ``ClientPolicy()`` (tinker 0.25's constants). A storm keeps the
    SDK's backoff and retry counts and drops the poll timeout to 15, 10 or 5
    SDK seconds, so every request still waiting re-polls, all at once.
    """
    if not storms:
        return st.just(ClientPolicy())
    storm = st.sampled_from(STORM_POLL_TIMEOUTS_S).map(lambda t: ClientPolicy(poll_timeout_s=t))
    return st.one_of(st.just(ClientPolicy()), storm)


def arrivals(requests: int, limits: Limits = CI) -> st.SearchStrategy[tuple[str, float, int]]:
    """(arrival, arrival_span_s, arrival_waves). Minimal: ``("burst", 0.0, 1)``: one burst.

    Waves: 2-8 waves over the span; ramp: a rate rising linearly over it;
    poisson: a constant random rate over it. Spans are whole SDK seconds in
    [1, max_arrival_span_s].
    """
    kinds = [a for a in limits.arrivals if a != "burst"]
    burst = st.just(("burst", 0.0, 1))
    if not kinds or requests < 2 or limits.max_arrival_span_s < 1:
        return burst
    span = st.integers(1, int(limits.max_arrival_span_s)).map(float)
    options = []
    if "waves" in kinds:
        options.append(st.tuples(st.just("waves"), span, st.integers(2, max(2, min(8, requests)))))
    for kind in ("ramp", "poisson"):
        if kind in kinds:
            options.append(st.tuples(st.just(kind), span, st.just(1)))
    return st.one_of(burst, *options)


def _max_tokens(limits: Limits, held: int, num_samples: int) -> int:
    per_token = held * num_samples * BYTES_PER_RESULT_TOKEN
    return max(1, min(limits.max_result_tokens, limits.max_in_flight_result_bytes // max(1, per_token)))


def sdk_allowed(limits: Limits) -> bool:
    """Whether ``limits`` leave room for a shape the real SDK client can run.

    The SDK polls as it decides (no late or abandoned polls: ``late_polls``
    demands them) and asks for proto results only.
    """
    return limits.sdk_fraction > 0 and not limits.late_polls and "proto" in limits.accepts


def clients(limits: Limits = CI) -> st.SearchStrategy[str]:
    """Which client runs the load: ``"raw"``, or ``"sdk"`` (the real tinker SDK) for about
    ``limits.sdk_fraction`` of draws where :func:`sdk_allowed`. Minimal: ``"raw"``."""
    if not sdk_allowed(limits):
        return st.just("raw")
    # sampled_from picks about uniformly (integers() leans toward its lower end) and
    # shrinks toward the first element: raw. The share is rounded to 1/20.
    sdk = max(1, min(_CLIENT_SLOTS, round(limits.sdk_fraction * _CLIENT_SLOTS)))
    return st.sampled_from(("raw",) * (_CLIENT_SLOTS - sdk) + ("sdk",) * sdk)


@st.composite
def load_shapes(
    draw,
    time_scale: float = 1.0,
    limits: Limits = CI,
    sdk: bool = True,
    around_edges: tuple[float, ...] = (),
    contract: ServerContract | None = None,
) -> LoadShape:
    """A whole ``LoadShape`` at ``time_scale``, within ``limits``.

    The client is the real SDK for about ``limits.sdk_fraction`` of shapes
    (:func:`clients`; never when ``sdk`` is False), and an SDK shape is what
    the SDK can run: one burst, on-time polls, the SDK's policy and proto
    results, whatever was drawn for those.

    Minimal: ``LoadShape(requests=1, result_tokens=1, num_samples=1,
    max_outstanding=0, workers=1, client="raw", accept="proto",
    time_scale=time_scale, seed=0)`` with no delayed or abandoned polls, the
    SDK's policy and one burst (see :data:`MINIMAL_SHAPE` in
    ``strategies``). Result tokens are bounded so that the results held
    at once stay under ``limits.max_in_flight_result_bytes``; a delayed first
    poll plus an abandoned-poll re-poll stay under ``limits.max_poll_after_s``;
    the requests held at once are capped at ``limits.max_faithful_held`` for
    the drawn policy's poll timeout and result size (:func:`faithful_cap`),
    late and abandoned polls come at the SDK's and ``contract``'s landmarks (:func:`poll_landmarks`) or
    ``around_edges`` (:func:`poll_behaviours`),
    so the server's unscaled work fits the scaled timers; and the requests
    then go through the cap within half the trial's wall bound
    (:func:`wall_fitting_requests`).
    """
    requests = draw(request_counts(limits.max_requests))
    max_outstanding = draw(outstanding_caps(requests))
    num_samples = draw(sample_counts(limits.max_num_samples))
    held = held_count(requests, max_outstanding)
    result_tokens = draw(result_sizes(_max_tokens(limits, held, num_samples)))
    arrival, span, waves = draw(arrivals(requests, limits))
    landmarks = poll_landmarks(contract)
    abandon = draw(
        poll_behaviours(limits.max_poll_after_s, limits.late_polls, around_edges=around_edges, landmarks=landmarks)
    )
    delay = draw(
        poll_behaviours(limits.max_poll_after_s - abandon.after_s, around_edges=around_edges, landmarks=landmarks)
    )
    policy = draw(client_policies(limits.storms))
    workers = draw(st.integers(1, max(1, min(limits.max_workers, requests))))
    accept = draw(st.sampled_from(limits.accepts))
    seed = draw(st.integers(0, 255))
    training = draw(training_mixes(limits))
    # Drawn last, after everything it may override, so an SDK shape takes as many
    # choices as a raw one and shrinking prefers raw (Hypothesis orders by length first).
    client = draw(clients(limits if sdk else limits.replace(sdk_fraction=0.0)))
    if client == "sdk":  # only what the real SDK can run (LoadShape.validate)
        arrival, span, waves = "burst", 0.0, 1
        abandon = delay = PollBehaviour()
        policy, accept = ClientPolicy(), "proto"
    result_kib = result_tokens * num_samples * BYTES_PER_RESULT_TOKEN / 1024
    max_held = limits.max_faithful_held(policy.poll_timeout_s, time_scale, result_kib)
    max_outstanding = faithful_cap(requests, max_outstanding, max_held)
    shape = LoadShape(
        requests=requests,
        result_tokens=result_tokens,
        num_samples=num_samples,
        max_outstanding=max_outstanding,
        workers=workers,
        client=client,
        accept=accept,
        time_scale=time_scale,
        delay_polls=delay,
        abandon_polls=abandon,
        policy=policy,
        seed=seed,
        arrival=arrival,
        arrival_span_s=span,
        arrival_waves=waves,
        training=training,
    )
    return with_requests(shape, wall_fitting_requests(requests, max_outstanding, (abandon, delay), time_scale, limits))


def training_mixes(limits: Limits) -> st.SearchStrategy[TrainingMix]:
    """None, light or heavy training beside the samples, shrinking toward none (or the lightest allowed).

    Light: 1-4 trainers of 1-4 steps, 1-4 data of 16-256 tokens. Heavy: 8 up
    to ``limits.max_trainers`` trainers of 4-16 steps, 4-8 data of 128-2,048
    tokens (the 4-wave known trial is 32 x 16 of 4 x 128). Nothing when
    ``limits.max_trainers`` is 0 (the ci profile).
    """
    if limits.max_trainers <= 0:
        return st.just(TrainingMix())
    top = limits.max_trainers
    light = st.builds(
        TrainingMix,
        trainers=st.integers(max(1, limits.min_trainers), min(4, top)),
        steps=st.integers(1, 4),
        datums=st.integers(1, 4),
        datum_tokens=st.integers(16, 256),
    )
    options = [light]
    if top >= 8:
        options.append(
            st.builds(
                TrainingMix,
                trainers=st.integers(8, top),
                steps=st.integers(4, 16),
                datums=st.integers(4, 8),
                datum_tokens=st.integers(128, 2048),
            )
        )
    if limits.min_trainers <= 0:
        options.insert(0, st.just(TrainingMix()))
    return st.one_of(*options)


def minimal_shape(time_scale: float = 1.0) -> LoadShape:
    """What :func:`load_shapes` shrinks to."""
    return LoadShape(
        requests=1,
        result_tokens=1,
        num_samples=1,
        max_outstanding=0,
        workers=1,
        client="raw",
        accept="proto",
        time_scale=time_scale,
        delay_polls=PollBehaviour(),
        abandon_polls=PollBehaviour(),
        policy=ClientPolicy(),
        seed=0,
        arrival="burst",
        arrival_span_s=0.0,
        arrival_waves=1,
    )


def held_count(requests: int, max_outstanding: int) -> int:
    """Requests the server may hold at once: the cap, or all of them (0 = no cap)."""
    return min(requests, max_outstanding or requests)


def with_requests(shape: LoadShape, requests: int) -> LoadShape:
    """``shape`` with ``requests`` requests (workers and arrival waves no more than the requests)."""
    waves = min(shape.arrival_waves, requests) if shape.arrival == "waves" else shape.arrival_waves
    return dataclasses.replace(shape, requests=requests, workers=min(shape.workers, requests), arrival_waves=waves)


def held_at_once(shape: LoadShape) -> int:
    """Requests the server may hold at once under ``shape`` (its cap, or all of them)."""
    return held_count(shape.requests, shape.max_outstanding)
