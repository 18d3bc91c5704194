"""Liveness: an accepted future resolves within a bound after whatever could hold it let go.

A request's *release* is the latest of: its acceptance, the router's
answer (its completion, or the router's own answer bound when it never
answered), the end of every fault in force between its acceptance and its end
(any link: an edge fault keeps the client away, a backend or router fault
holds or fails the forward, a paused server holds everything), and the
client's own plan (a poll it delays or drops on purpose). From its release a
correct server and an SDK-shaped client need at most one poll timeout (a poll
that was blackholed times out, the next one is answered at once) and one
backoff cap (a poll that failed in transport waits that long to retry), both
scaled, plus ``resolve_slack_s`` real seconds and the real seconds the
server's loop stalled meanwhile. A result, a 404 or a definite error all
count as ending; safety is the other invariants' to judge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.common import fault_windows
from faultload.checker.contract.retention import answered_by, overlap_s, stall_spans
from faultload.checker.contract.rules import Allowance, Rule
from faultload.checker.inputs import CheckInputs
from faultload.record.history import AttemptKind, History, Outcome

RESOLVES = Rule(
    "futures_resolve",
    "an accepted request ends (its result, a 404 or a definite error) within the resolve bound of its release; "
    "never ending is a violation whatever fault was in force",
    "a fault changes which outcome is allowed, never allows silence: a correct server answers a held poll "
    "once the router answered or failed, and a client that retries forever gets that answer",
)
HARNESS_STOPPED = Rule(
    "harness_stopped",
    "a request still open, and not yet past its resolve bound, when the user interrupted the trial or the "
    "watchdog stopped the load is indeterminate, not judged",
    "the harness cut it off: what it would have ended as is unknown (a collapse is judged by no_collapse)",
)
ROUTER_UNKNOWN = Rule(
    "router_unknown",
    "without the router's completion log (a server someone else started) a request's release is unknown: "
    "indeterminate, not judged",
    "the engine may still have been generating it; nothing says when it could have been answered",
)


@dataclass(frozen=True)
class Resolution:
    """Per accepted request: its release, when it ended (inf: never), and the bound it had."""

    accepted: np.ndarray  # bool per row
    release: np.ndarray  # trial seconds
    ended: np.ndarray  # trial seconds, inf when it never ended
    allowed_s: np.ndarray  # the bound for each row (scaled timers + slack + stall seconds)
    late: Allowance  # RESOLVES: rows that broke it
    stopped: Allowance  # HARNESS_STOPPED: open rows the harness cut off before their bound ran out
    unknown: Allowance  # ROUTER_UNKNOWN: rows whose router answer was never seen

    @property
    def indeterminate(self) -> tuple[Allowance, ...]:
        """The rows no rule could judge, each with why."""
        return (self.stopped, self.unknown)


def resolve_bound_s(inputs: CheckInputs, budgets: Budgets) -> float:
    """Seconds a correct pair needs from a request's release to its end, before stalls."""
    policy = inputs.shape.policy
    return inputs.shape.scaled(policy.poll_timeout_s + policy.backoff_cap_s) + budgets.resolve_slack_s


def resolution(inputs: CheckInputs, budgets: Budgets) -> Resolution:
    """Judge every accepted request of the history against :data:`RESOLVES`."""
    history = inputs.history
    n = len(history)
    outcome = history["outcome"]
    accepted = (history["server_id"] != 0) | (outcome == Outcome.OK) | (outcome == Outcome.CORRUPT)
    open_ = accepted & (outcome == Outcome.PENDING)
    load_end = inputs.load_stopped_s if inputs.load_stopped_s is not None else math.inf
    ended = np.where(open_ | ~np.isfinite(history["done"]), np.inf, history["done"])
    horizon = np.where(np.isfinite(ended), ended, load_end)
    release = _release(inputs, horizon)
    spans = stall_spans(inputs.monitor, budgets.healthz_p99_s)
    base = resolve_bound_s(inputs, budgets)
    allowed = np.array(
        [
            base + overlap_s(spans, r, h) if math.isfinite(r) else math.inf
            for r, h in zip(release.tolist(), horizon.tolist())
        ],
        dtype=np.float64,
    )
    unknown = accepted & (inputs.router_completed_s is None) & ~np.isfinite(ended)
    held_until_end = ~np.isfinite(release)  # a fault still in force when the load ended: nothing to judge yet
    waited = np.where(held_until_end, 0.0, np.minimum(ended, horizon) - np.where(held_until_end, 0.0, release))
    late = accepted & ~unknown & (waited > allowed)
    if inputs.interrupted and inputs.load_stopped_s is None:  # cut off at an unknown time: nothing open is late
        late &= ~open_
    # cut off by the harness before its bound ran out: what it would have ended as is unknown (one already
    # past its bound when the load stopped was late whatever came after)
    stopped = open_ & ~late if inputs.interrupted else np.zeros(n, dtype=bool)
    return Resolution(
        accepted,
        release,
        ended,
        allowed,
        Allowance(RESOLVES, late),
        Allowance(HARNESS_STOPPED, stopped),
        Allowance(ROUTER_UNKNOWN, unknown),
    )


def _release(inputs: CheckInputs, horizon: np.ndarray) -> np.ndarray:
    history = inputs.history
    submit = np.where(np.isfinite(history["submit_start"]), history["submit_start"], 0.0)
    accepted_at = np.where(np.isfinite(history["submit_end"]), history["submit_end"], submit)
    router = answered_by(inputs.router_completed_s, history)
    never_answered = accepted_at + (inputs.router_answer_bound_s or 0.0)
    release = np.maximum(accepted_at, np.where(np.isfinite(router), router, never_answered))
    for start, end, _ in fault_windows(inputs.faults):
        hit = (start <= horizon) & (end >= accepted_at)
        release = np.where(hit, np.maximum(release, end), release)
    return np.asarray(np.maximum(release, _client_ready(inputs, accepted_at)))


def _client_ready(inputs: CheckInputs, accepted_at: np.ndarray) -> np.ndarray:
    """When the client itself was ready to take the result: its first poll after its last dropped one.

    A client that delays or drops a poll on purpose is not waiting on the
    server meanwhile. Without such a poll recorded, the plan's own delay
    from acceptance (or from the drop) stands for it.
    """
    history: History = inputs.history
    shape = inputs.shape
    ready = accepted_at.copy()
    if shape.delay_polls.fraction > 0 or shape.abandon_polls.fraction > 0:
        planned = shape.scaled(max(shape.delay_polls.after_s, shape.abandon_polls.after_s))
        ready = accepted_at + planned  # the plan's own delay, until a poll says otherwise
    attempts = history.attempts
    if attempts["row"].size == 0:
        return ready
    rows, kinds = attempts["row"], attempts["kind"]
    starts, ends = attempts["start"].astype(np.float64), attempts["end"].astype(np.float64)
    dropped = np.full(len(history), -np.inf)
    np.maximum.at(dropped, rows[kinds == AttemptKind.ABANDONED], ends[kinds == AttemptKind.ABANDONED])
    first_poll = np.full(len(history), np.inf)
    polls = (kinds == AttemptKind.POLL) & (starts >= dropped[rows])
    np.minimum.at(first_poll, rows[polls], starts[polls])
    return np.where(np.isfinite(first_poll), np.maximum(accepted_at, first_poll), ready)
