"""The suite's properties: which invariants each asserts, what it steers by, what it draws.

Plain values and small functions of them (no trial runs here): a
:class:`Property` per test of ``faultload/suite/test_properties.py``, the
profile's limits narrowed for it, and the known trials it runs first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from faultload.checker.compose import CHECKERS
from faultload.model.target import parse_target, serves_training
from faultload.strategies.known import known_trial_config
from faultload.suite import comparative
from faultload.suite.profiles import Profile

# Every invariant every trial is judged by: the checkers' and the watchdog's (judge.collapse_verdict). A trial
# that trained is judged by the training checkers too (TRAINING); a violation of one fails any property.
ALL = tuple(name for name, _ in CHECKERS) + ("no_collapse",)


@dataclass(frozen=True)
class Property:
    """One property: which invariants it asserts, which figures it steers toward, what it draws."""

    name: str
    invariants: tuple[str, ...]  # () = every invariant
    steers_by: tuple[str, ...]  # invariants whose verdict figure Hypothesis steers toward (hypothesis.target)
    # Changes to the profile's faultload.strategies.Limits for this property (e.g. storms=False);
    # max_result_wait_s only ever lowers the profile's.
    limits: tuple[tuple[str, Any], ...] = ()
    weight: float = 1.0  # multiplies the profile's examples and time per property
    known: tuple[str, ...] = ()  # known-bug trials (faultload.strategies.known) run first when the profile asks
    # Runs each example on the baseline build too (faultload.suite.comparative): no example has fewer than
    # its MIN_REQUESTS, and an example that left its verdict unknown fails the property (never a pass).
    comparative: bool = False


def known_configs(profile: Profile, prop: Property, target: str, regress: tuple[str, ...]) -> list:
    """The property's known-bug trials as TrialConfigs, or none when the profile does not run them."""
    if profile.confirm:
        return []
    limits = property_limits(profile, prop, target)
    configs = [
        known_trial_config(name, target, profile.time_scale, regress, limits)
        for name in prop.known
        if name in profile.known_examples
    ]
    return [config for config in configs if config is not None]  # None: a trial the target's family cannot run


def property_limits(profile: Profile, prop: Property, target: str | None = None):
    """The profile's limits with the property's restrictions (no storms, shorter result waits).

    A ``url=`` target is a server someone else started, with its own backend:
    only the edge (client to server) is ours to break, so only edge faults are drawn. A target whose family
    serves sampling only (TuFT) draws no trainers.
    """
    limits = profile.limits
    changes = dict(prop.limits)
    spec = parse_target(target) if target is not None else None
    if spec is not None and spec.kind == "url":
        changes["fault_links"] = tuple(link for link in limits.fault_links if link == "edge")
    if spec is not None and not serves_training(spec):
        changes.update(min_trainers=0, max_trainers=0)
    if "max_result_wait_s" in changes:
        changes["max_result_wait_s"] = min(limits.max_result_wait_s, changes["max_result_wait_s"])
    return limits.replace(**changes) if changes else limits


def property_examples(profile: Profile, prop: Property) -> int:
    """The examples a property draws: the profile's times its weight; the comparative property's own count."""
    if prop.comparative:
        return max(1, profile.compare_examples)
    return max(1, int(round(profile.max_examples * prop.weight)))


def checked(prop: Property | None) -> tuple[str, ...]:
    """The invariants a property asserts (all of them for the combined property)."""
    return prop.invariants if prop is not None and prop.invariants else ALL


def target_figure(figures: dict[str, Any], invariant: str) -> float | None:
    """The figure ``invariant``'s verdict judged (what Hypothesis steers by), or None when it had none."""
    block = figures.get(invariant)
    value = block.get("figure") if isinstance(block, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


# The suite's properties (one per test in test_properties.py); here, not there, so that code outside
# a pytest collection (bench/shrink_time.py) can name one: test_properties.py is collected, not imported.
LOST = Property(
    "no_lost_results",
    ("no_lost_results", "accepted_requests", "futures_resolve"),
    ("no_lost_results", "accepted_requests", "futures_resolve"),
    # 1: its trials are the longest (every one re-polls after a timer landmark: 20.6 s each on ci against 3.5
    # for result_integrity's), and on lanes a property's examples run one after another on its own lane, so the
    # session ends when its longest lane does.
    weight=1.0,
    limits=(("late_polls", True), ("router_modes", ("latency", "barrier"))),
    known=("completed_ttl_edge", "retrieved_ttl_edge", "created_ttl_edge", "half_open_delivery", "restart_reuse"),
)
# 2: the properties whose draws make short trials (on ci 8.4, 5.6, 7.9 and 6.3 s each, against no_lost_results'
# 21 and health's 23: those two wait on timer landmarks and /healthz under load) draw twice the examples, so on
# lanes they end about when the longest do.
SHORT_TRIALS_WEIGHT = 2.0
INTEGRITY = Property("result_integrity", ("result_integrity",), ("result_integrity",), weight=SHORT_TRIALS_WEIGHT)
RESOURCES = Property(
    "bounded_resources",
    ("bounded_fds", "bounded_rss", "bounded_cpu", "releases_results", "forwards_concurrent"),
    ("bounded_fds", "bounded_rss", "bounded_cpu"),
    known=("completion_burst", "cpu_sample", "size_burst", "release_hold"),
)
HEALTH = Property("health", ("healthz_latency", "no_collapse"), ("healthz_latency",))
RETRIES = Property(
    "bounded_retries",
    ("retry_amplification", "unprovoked_resets", "polls_held", "forwarded_once"),
    ("retry_amplification", "unprovoked_resets", "polls_held", "forwarded_once"),
    limits=(("storms", False), ("max_result_wait_s", 60.0)),
    known=("completion_burst",),
    weight=SHORT_TRIALS_WEIGHT,
)
SERVER_LOG = Property("clean_server_log", ("clean_server_log",), ("clean_server_log",), weight=SHORT_TRIALS_WEIGHT)
COMBINED = Property(
    "all_invariants",
    (),
    ("no_lost_results", "bounded_fds", "bounded_rss", "healthz_latency"),
    limits=(("storms", False), ("max_result_wait_s", 60.0)),
    known=("size_flood",),
    weight=SHORT_TRIALS_WEIGHT,
)
COMPARATIVE = Property(
    "comparative",
    (comparative.INVARIANT,),
    (comparative.INVARIANT,),
    limits=comparative.LIMITS,
    weight=comparative.WEIGHT,
    comparative=True,
)
# Every example trains beside its samples (the profile must draw training: nightly; ci draws none, so the
# property is skipped there). clean_server_log too: QueuePool timeouts and DB-lock errors are the server's
# own errors (the observer's pool_exhausted waits are notes, not errors: 0.4.0 waits so too).
TRAINING = Property(
    "training",
    ("training_futures", "heartbeats_answered", "clean_server_log"),
    ("training_futures", "heartbeats_answered", "clean_server_log"),
    limits=(("min_trainers", 1),),
    known=("training_waves",),
)
PROPERTIES = (LOST, INTEGRITY, RESOURCES, HEALTH, RETRIES, SERVER_LOG, TRAINING, COMBINED, COMPARATIVE)
