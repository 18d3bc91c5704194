"""A training session's heartbeats: what the SDK needs of them is the session kept alive, not each beat.

The SDK sends one ``session_heartbeat`` every 10 s with a 10 s timeout and no
retry, ignores a failed one, and warns the user only after 120 s without an
answered one (``tinker/lib/internal_client_holder.py``); SkyRL expires a
session after 300 s without one. A correct server answers every heartbeat
it answers with 200 and never lets a session go unanswered that long; a beat
that times out under load while the session's gap stays short is invisible
to the user.
"""

from __future__ import annotations

import numpy as np

from faultload.checker.contract.rules import Allowance, Rule
from faultload.model.sdk import SDK_HEARTBEAT_TIMEOUT_S, SDK_HEARTBEAT_WARNING_S
from faultload.record.history import ErrorClass
from faultload.record.training import TrainingLog

HEARTBEATS_ANSWERED = Rule(
    "heartbeats_answered",
    "a heartbeat is answered 200 (never refused, reset or failed outside a fault), and no session goes longer "
    "than heartbeat_gap_s between answered heartbeats",
    f"the SDK warns the user after {SDK_HEARTBEAT_WARNING_S:.0f} s without an answered heartbeat and the server "
    "expires the session (SkyRL: 300 s): the training job is lost",
)
HEARTBEAT_TIMEOUT_TOLERATED = Rule(
    "heartbeat_timeout_tolerated",
    f"a heartbeat may time out at the SDK's {SDK_HEARTBEAT_TIMEOUT_S:.0f} s while its session's longest gap "
    "between answered heartbeats stays within heartbeat_gap_s",
    "the SDK ignores a failed heartbeat (no retry, no error) and sends the next one a period later; only the "
    "gap reaches the user",
)


def tolerated_timeouts(log: TrainingLog, failed: np.ndarray, gaps: dict[int, float], gap_budget_s: float) -> Allowance:
    """HEARTBEAT_TIMEOUT_TOLERATED: the ``failed`` heartbeats that timed out in a session whose longest gap
    (``gaps``: trainer -> seconds) stayed within ``gap_budget_s``."""
    kept = np.array([gaps.get(int(t), np.inf) <= gap_budget_s for t in log["trainer"]], dtype=bool)
    rows = failed & (log["error"] == ErrorClass.TIMEOUT) & kept
    n = int(rows.sum())
    note = f"{n} timed out within a short gap ({HEARTBEAT_TIMEOUT_TOLERATED.name})" if n else ""
    return Allowance(HEARTBEAT_TIMEOUT_TOLERATED, rows, note)
