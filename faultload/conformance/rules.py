"""The conformance table's rows: each a rule of the Tinker futures contract, the trial that meets it on any
family, and the invariants whose verdicts say whether the family kept it.

Each trial is built from the target's family contract (its hold, its TTLs, what it forwards at once), as the
suite's own known trials are, so that the same row asks each family the same question in its own terms; a
family whose contract has no such rule gets "not applicable" with the reason, never a pass.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from faultload.model.family import CONTRACTS, ServerContract
from faultload.model.faults import Fault, FaultSchedule
from faultload.model.router import RouterConfig
from faultload.model.sdk import SDK_POLL_TIMEOUT_S
from faultload.model.shape import ClientPolicy, LoadShape, PollBehaviour
from faultload.model.target import parse_target
from faultload.model.trial import TrialConfig
from faultload.strategies.edges import EDGE_TRIALS
from faultload.strategies.faults import fatal_kinds
from faultload.strategies.known import KNOWN_SHAPES, half_open_faults, half_open_router, known_trial_config
from faultload.strategies.limits import CI
from faultload.strategies.routers import immediate_router

# Trials of the table: every link may be faulted (the proxies are on), the ci profile's bounds otherwise.
LIMITS = CI
# The hold trial's router takes this share of the family's hold per sample: every first poll ends in the hold.
HOLD_GEN_SHARE = 1.2
HOLD_REQUESTS = 2
FAILURE_REQUESTS = 16
SIZE_REQUESTS = 4096
# A result is asked for this long (SDK s) after the size trial's submits began: all of them accepted by then.
SIZE_POLL_AFTER_S = 60.0

# A cell's status.
KEPT, BROKEN, NOT_APPLICABLE, NOT_JUDGED, HARNESS = "kept", "broken", "not applicable", "not judged", "harness error"
STATUSES = (KEPT, BROKEN, NOT_APPLICABLE, NOT_JUDGED, HARNESS)


@dataclass(frozen=True)
class Skip:
    """A row not asked of a target: not applicable (its contract has no such rule) or not judged (the trial
    cannot be served by it within the table's bounds), with the reason."""

    status: str
    reason: str


Builder = Callable[[str, float], "list[TrialConfig] | Skip"]


@dataclass(frozen=True)
class ConformanceRule:
    """One row: its name, the rule in a sentence, the invariants that judge it, and its trials for a target at a
    time scale (or the reason the target's family has no such rule)."""

    name: str
    asks: str
    invariants: tuple[str, ...]
    trials: Builder


def _contract(target: str) -> ServerContract:
    return CONTRACTS[parse_target(target).family]


def _unservable(name: str, target: str) -> Skip:
    at_once = _contract(target).forwards_at_once
    return Skip(
        NOT_JUDGED,
        f"the {name} trial does not fit the table's time bounds: its router needs more generations at once than "
        f"the {at_once} this family forwards at a time, or its late polls and hold outlast the trial's wall",
    )


def _known(name: str) -> Builder:
    def build(target: str, time_scale: float) -> list[TrialConfig] | Skip:
        config = known_trial_config(name, target, time_scale, (), LIMITS)
        return [config] if config is not None else _unservable(name, target)

    return build


def _edges(target: str, time_scale: float) -> list[TrialConfig] | Skip:
    contract = _contract(target)
    names = [name for name, edge in EDGE_TRIALS.items() if edge(contract, time_scale) is not None]
    if not names:
        return Skip(NOT_APPLICABLE, "its contract has no TTL: it keeps every result until it stops")
    configs = [known_trial_config(name, target, time_scale, (), LIMITS) for name in names]
    if any(config is None for config in configs):
        return _unservable(", ".join(names), target)
    return [config for config in configs if config is not None]


def _plain(target: str, shape: LoadShape, router: RouterConfig, faults: FaultSchedule = FaultSchedule()) -> TrialConfig:
    return TrialConfig(
        target=target,
        shape=shape,
        router=router,
        faults=faults,
        fatal_faults=fatal_kinds(faults),
        proxies="on" if faults.faults else "off",
        direct_edge=not faults.faults,
        max_wall_s=LIMITS.max_wall_real_s,
        drain_s=LIMITS.drain_real_s,
    )


def _half_open(target: str, time_scale: float) -> list[TrialConfig] | Skip:
    """The suite's half-open delivery trial; for a family that forwards k at a time, k requests (the window over
    the results' writes holds for one as for eight)."""
    config = known_trial_config("half_open_delivery", target, time_scale, (), LIMITS)
    at_once = _contract(target).forwards_at_once
    if config is not None or not at_once:
        return [config] if config is not None else _unservable("half_open_delivery", target)
    shape = KNOWN_SHAPES["half_open_delivery"](time_scale)
    shape = dataclasses.replace(shape, requests=at_once, max_outstanding=min(shape.max_outstanding or at_once, at_once))
    return [_plain(target, shape, half_open_router(shape), half_open_faults(shape))]


def _session(target: str, time_scale: float) -> list[TrialConfig] | Skip:
    shape = LoadShape(requests=1, workers=1, result_tokens=4, time_scale=time_scale)
    return [_plain(target, shape, immediate_router(shape))]


def _sdk_reads(target: str, time_scale: float) -> list[TrialConfig] | Skip:
    shape = LoadShape(requests=8, workers=1, result_tokens=8, time_scale=time_scale, client="sdk")
    return [_plain(target, shape, immediate_router(shape))]


def _held(target: str, time_scale: float) -> list[TrialConfig] | Skip:
    hold = _contract(target).poll_hold_s
    policy = ClientPolicy(poll_timeout_s=4 * HOLD_GEN_SHARE * hold)  # the client outwaits every hold
    shape = LoadShape(requests=HOLD_REQUESTS, workers=1, result_tokens=4, time_scale=time_scale, policy=policy)
    router = RouterConfig(mode="latency", max_num_seqs=HOLD_REQUESTS, gen_seconds=shape.scaled(HOLD_GEN_SHARE * hold))
    return [_plain(target, shape, router)]


def _failure(target: str, time_scale: float) -> list[TrialConfig] | Skip:
    shape = LoadShape(requests=FAILURE_REQUESTS, workers=1, result_tokens=4, time_scale=time_scale)
    errors = Fault("router", "errors", start_s=0.0)  # every forward fails, for the whole trial
    return [_plain(target, shape, immediate_router(shape), FaultSchedule((errors,)))]


def _size(target: str, time_scale: float) -> list[TrialConfig] | Skip:
    """4,096 accepted at once, every first poll after all are in. The client waits the SDK's poll timeout in real
    seconds (45 s, not 45 x the scale): answering 4,096 polls takes CPU seconds the time scale does not shrink,
    and a scaled client that gives up on each poll after 2.25 s re-polls a busy server into a storm of its own
    making (hatchery-core at 0.05: 110,386 polls, 2,786 never answered; SkyRL's cheaper polls kept up)."""
    late = PollBehaviour(fraction=1.0, after_s=SIZE_POLL_AFTER_S)
    patient = ClientPolicy(poll_timeout_s=SDK_POLL_TIMEOUT_S / time_scale)
    shape = LoadShape(
        requests=SIZE_REQUESTS,
        max_outstanding=SIZE_REQUESTS,
        workers=2,
        result_tokens=16,
        time_scale=time_scale,
        policy=patient,
    )
    shape = dataclasses.replace(shape, delay_polls=late)
    return [_plain(target, shape, immediate_router(shape))]


RULES: tuple[ConformanceRule, ...] = (
    ConformanceRule(
        "sdk_opens_a_sampling_session",
        "the SDK's create_sampling_session answer carries the sampling session's id",
        (),
        _session,
    ),
    ConformanceRule(
        "sdk_reads_results",
        "the real SDK reads every sample's result",
        # accepted_requests too: an SDK that cannot even submit (its client set-up refused) reads no result
        ("no_lost_results", "result_integrity", "accepted_requests"),
        _sdk_reads,
    ),
    ConformanceRule(
        "retained_past_a_lost_delivery",
        "a result whose delivery was lost on a half-open connection is still there when the client asks again",
        ("no_lost_results",),
        _half_open,
    ),
    ConformanceRule(
        "ttls_as_promised",
        "a result is kept for each TTL of the contract, measured from the event the contract names",
        ("no_lost_results",),
        _edges,
    ),
    ConformanceRule(
        "polls_held",
        "a poll for a result not ready is held the contract's hold, then answered with its 'not yet'",
        ("polls_held", "futures_resolve"),
        _held,
    ),
    ConformanceRule(
        "definite_error_after_backend_failure",
        "a sample whose every forward fails ends in a definite error, never in silence",
        ("futures_resolve", "no_lost_results"),
        _failure,
    ),
    ConformanceRule(
        "restart",
        "across a restart, a new request is served and no old id answers another request's result",
        ("accepted_requests", "no_lost_results", "result_integrity"),
        _known("restart_reuse"),
    ),
    ConformanceRule(
        "kept_under_size",
        f"{SIZE_REQUESTS:,} results accepted at once are all there when asked for",
        ("no_lost_results", "futures_resolve"),
        _size,
    ),
    ConformanceRule(
        "cost_per_request",
        "the server's CPU per HTTP request, against the family's own budget",
        ("bounded_cpu",),
        _known("cpu_sample"),
    ),
)
RULE_NAMES = tuple(rule.name for rule in RULES)
