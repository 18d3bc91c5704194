"""What a fault allows: a definite error for what it hit, never silence.

A fault kind the shape declares fatal (``--fatal-fault``: the backend down,
the router erroring or crashing, ...) may make a correct server fail the
requests it hit, and a client may give up on them; it never lets a request
go unanswered (that is :data:`~faultload.checker.contract.liveness.RESOLVES`'s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from faultload.checker.common import fault_windows, is_fatal, overlaps
from faultload.checker.contract.retention import is_restart
from faultload.checker.contract.rules import Allowance, Rule
from faultload.checker.inputs import CheckInputs
from faultload.record.history import Outcome

if TYPE_CHECKING:  # type-only: keeps this module cheap to import
    from faultload.model.faults import Fault

FATAL_DEFINITE_ERROR = Rule(
    "fatal_definite_error",
    "an accepted request in flight while a fault declared fatal was in force may end in a definite error "
    "(failed, or given up by its client), never in silence",
    "the fault destroyed what the request needed; a correct server says so instead of answering nothing",
)

FAULT_IN_FORCE = Rule(
    "fault_in_force",
    "what a fault's own link does while it is in force, or within its grace after it (an attempt reset or "
    "refused, a request retried, an error line logged, /healthz slow or failing, a training call refused, "
    "a heartbeat failed), is the fault's; a result lost, corrupted or never answered never is",
    "a fault breaks connections and makes the server log and retry; a correct server recovers within the "
    "grace (log_fault_grace_s for log lines and resets, healthz_fault_recovery_s for /healthz)",
)
FAULT_NOT_HEALED = Rule(
    "fault_not_healed",
    "a fault whose removal failed is in force until the load ended (its window never closes), and the trial "
    "is no test of the server: faultload run reports a harness error, the suite leaves the trial unjudged "
    "(its example rejected, reported)",
    "the injector may still hold it (Toxiproxy's control port can hang removing a toxic under traffic, "
    "Shopify/toxiproxy#558): what it held after its planned end is the injector's doing, not the server's",
)
NO_FAULT_COST = Rule(
    "no_fault_cost",
    "CPU per request is not judged for a trial in which a fault took effect",
    "a fault makes the server fail, log and retry: work the CPU budget, stated for a healthy network, does not cover",
)

# How an accepted request may end under a fatal fault: definitely, not with a result (PENDING is silence).
DEFINITE_ERRORS = (Outcome.FAILED, Outcome.GAVE_UP, Outcome.REJECTED)


def in_force_windows(inputs: CheckInputs, grace_s: float = 0.0) -> list[tuple[float, float, Fault]]:
    """FAULT_IN_FORCE's windows: (start, end + ``grace_s``, fault) for each fault that took effect."""
    return fault_windows(inputs.faults, grace_s=grace_s)


def fatal_windows(inputs: CheckInputs, restarts: bool = True) -> list[tuple[float, float, Fault]]:
    """The windows of the faults the shape declares fatal (a restart's too, unless ``restarts`` is False)."""
    return fault_windows(
        inputs.faults, lambda f: is_fatal(f, inputs.fatal_fault_kinds) and (restarts or not is_restart(f))
    )


def fatal_definite_error(inputs: CheckInputs, among: np.ndarray) -> tuple[Allowance, list[str]]:
    """Rows of ``among`` that ended in a definite error while a fatal fault (not a restart) was in force,
    and the labels of those faults."""
    history = inputs.history
    definite = among & np.isin(history["outcome"], np.array(DEFINITE_ERRORS, dtype=history["outcome"].dtype))
    hit, labels = overlaps(history, fatal_windows(inputs, restarts=False), among=definite)
    return Allowance(FATAL_DEFINITE_ERROR, hit), labels
