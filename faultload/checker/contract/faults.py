"""What a fault allows: a definite error for what it hit, never silence.

A fault kind the shape declares fatal (``--fatal-fault``: the backend down,
the router erroring or crashing, ...) may make a correct server fail the
requests it hit, and a client may give up on them; it never lets a request
go unanswered (that is :data:`~faultload.checker.contract.liveness.RESOLVES`'s).
"""

from __future__ import annotations

import numpy as np

from faultload.checker.common import fault_windows, is_fatal, overlaps
from faultload.checker.contract.retention import is_restart
from faultload.checker.contract.rules import Allowance, Rule
from faultload.checker.inputs import CheckInputs
from faultload.record.history import Outcome

FATAL_DEFINITE_ERROR = Rule(
    "fatal_definite_error",
    "an accepted request in flight while a fault declared fatal was in force may end in a definite error "
    "(failed, or given up by its client), never in silence",
    "the fault destroyed what the request needed; a correct server says so instead of answering nothing")

# How an accepted request may end under a fatal fault: definitely, not with a result (PENDING is silence).
DEFINITE_ERRORS = (Outcome.FAILED, Outcome.GAVE_UP, Outcome.REJECTED)


def fatal_definite_error(inputs: CheckInputs, among: np.ndarray) -> tuple[Allowance, list[str]]:
    """Rows of ``among`` that ended in a definite error while a fatal fault (not a restart) was in force,
    and the labels of those faults."""
    history = inputs.history
    definite = among & np.isin(history["outcome"], np.array(DEFINITE_ERRORS, dtype=history["outcome"].dtype))
    fatal = fault_windows(inputs.faults, lambda f: is_fatal(f, inputs.fatal_fault_kinds) and not is_restart(f))
    hit, labels = overlaps(history, fatal, among=definite)
    return Allowance(FATAL_DEFINITE_ERROR, hit), labels
