"""The Tinker futures contract: what a correct server may answer at each point, the one place its rules live.

A trial's history (submits, acceptance and id, each poll and its answer with
times, the router's completions, fault windows per link, restarts) is
replayed against these rules; the invariants are views of what they find.
Every allowance a checker makes is a :class:`~faultload.checker.contract.rules.Rule`
here, with its reason and a test of a history that breaks it and one that
does not (``tests/unit/test_contract.py``). A rule never makes silence right: a
fault changes which outcome is allowed, and liveness is judged for every
accepted request (``futures_resolve``).

- ``retention``: how long a result stays retrievable (which 404s are allowed);
- ``faults``: what a fatal fault allows (a definite error, never silence),
  and what any fault's own link does while it is in force;
- ``submits``: which asamples may be refused;
- ``liveness``: an accepted future resolves within a bound of its release;
- ``polls``: a poll is held until the result or the hold time;
- ``forwards``: an accepted sample reaches the router once, and at once;
- ``heartbeats``: a training session is kept alive (the gap, not each beat);
- ``processes``: what a server made of a worker pool is not judged on (its drain).
"""

from __future__ import annotations

from faultload.checker.contract.faults import FATAL_DEFINITE_ERROR, FAULT_IN_FORCE, FAULT_NOT_HEALED, NO_FAULT_COST
from faultload.checker.contract.forwards import (
    FORWARD_PATH_FAULT,
    FORWARDED_ONCE,
    FORWARDS_AT_ONCE,
    FORWARDS_BY_DESIGN,
    RETRIED_FORWARD,
    ROUTER_HOLDS_BRIEFLY,
)
from faultload.checker.contract.heartbeats import HEARTBEAT_TIMEOUT_TOLERATED, HEARTBEATS_ANSWERED
from faultload.checker.contract.liveness import HARNESS_STOPPED, RESOLVES, ROUTER_UNKNOWN
from faultload.checker.contract.polls import LONG_POLL_CYCLE, POLL_HELD, POLL_WOKEN
from faultload.checker.contract.processes import WORKER_POOL_DRAIN
from faultload.checker.contract.retention import (
    DROPPED_POLL,
    EXPIRED_BY_DESIGN,
    FORGOTTEN_AFTER_CREATION,
    FORGOTTEN_PAST_CAP,
    RESTART_FORGETS,
    STALL_NOT_SCALED,
    SWEEP_ON_REGISTRATION,
)
from faultload.checker.contract.rules import Allowance, Rule
from faultload.checker.contract.submits import EDGE_UNREACHABLE, FATAL_REJECTION, HARNESS_CUT

RULES: tuple[Rule, ...] = (
    DROPPED_POLL,
    STALL_NOT_SCALED,
    EXPIRED_BY_DESIGN,
    FORGOTTEN_AFTER_CREATION,
    FORGOTTEN_PAST_CAP,
    SWEEP_ON_REGISTRATION,
    WORKER_POOL_DRAIN,
    RESTART_FORGETS,
    FATAL_DEFINITE_ERROR,
    FAULT_IN_FORCE,
    FAULT_NOT_HEALED,
    NO_FAULT_COST,
    FATAL_REJECTION,
    EDGE_UNREACHABLE,
    HARNESS_CUT,
    RESOLVES,
    HARNESS_STOPPED,
    ROUTER_UNKNOWN,
    LONG_POLL_CYCLE,
    POLL_HELD,
    POLL_WOKEN,
    FORWARDED_ONCE,
    RETRIED_FORWARD,
    FORWARDS_AT_ONCE,
    FORWARDS_BY_DESIGN,
    FORWARD_PATH_FAULT,
    ROUTER_HOLDS_BRIEFLY,
    HEARTBEATS_ANSWERED,
    HEARTBEAT_TIMEOUT_TOLERATED,
)

__all__ = ["RULES", "Allowance", "Rule"]
