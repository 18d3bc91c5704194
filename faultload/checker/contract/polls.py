"""The long poll: a poll is held until the result exists or the server's hold time ends.

A correct server answers a held poll with the result as soon as it has one, and with its "not yet" only
once it has held the poll for its hold time — the family's contract (``model.family``): SkyRL answers 408
after ``RETRIEVE_FUTURE_TIMEOUT_SECONDS`` (300 SDK s), TuFT a 200 try-again (``record.history.TRY_AGAIN``)
after 120 SDK s, both scaled. The SDK's own poll timeout (45 s) is shorter, so against a correct server a
poll ends by the client's timeout, not by a "not yet".
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from faultload.checker.contract.faults import in_force_windows
from faultload.checker.contract.retention import stall_spans
from faultload.checker.contract.rules import Allowance, Rule
from faultload.checker.inputs import CheckInputs
from faultload.record.history import TRY_AGAIN, AttemptKind, ErrorClass, History

LONG_POLL_CYCLE = Rule(
    "long_poll_cycle",
    "a poll that ended by the client's own timeout, or by a 'not yet' (408, try-again) after a full hold, before the router "
    "completed its request is the long-poll cycle, not a retry the server caused",
    "a client whose poll timeout is shorter than the engine's generation re-polls each timeout by design",
)
POLL_HELD = Rule(
    "polls_held",
    "a 'not yet' (SkyRL's 408, TuFT's try-again) answers a poll only after the server held it for its hold time",
    "a server that gives up on its long-poll early multiplies every client's polls (and its own work)",
)
POLL_WOKEN = Rule(
    "polls_woken",
    "a held poll is answered once its result exists: one that ended without it (the client's timeout, a 'not yet') "
    "more than poll_wake_slack_s after the router completed its request, with no fault in force (nor its "
    "grace) and the server's loop not slower than that slack meanwhile, was never woken",
    "a lost wake-up costs every waiting client a poll timeout of latency and a re-poll, which no count "
    "budget sees while a request needs one poll more",
)

# Every server's "not yet" at a hold's end: a 408, or a 200 try-again. Either before the hold breaks POLL_HELD,
# whichever the family's contract names (a server answering the other is early all the same).
NOT_YET = (408, TRY_AGAIN)

# How much shorter than the scaled hold a "not yet" may come and still count as a full hold: the server's
# timer and the client's clock start a request apart (real seconds).
HOLD_TOLERANCE_S = 0.5


def poll_attempts(history: History) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The history's polls: (row, start, end, status)."""
    attempts = history.attempts
    polls = attempts["kind"] == AttemptKind.POLL
    return (
        attempts["row"][polls],
        attempts["start"][polls].astype(np.float64),
        attempts["end"][polls].astype(np.float64),
        attempts["status"][polls].astype(np.int64),
    )


def hold_s(inputs: CheckInputs) -> float:
    """The least a correct server holds a poll before its "not yet", in trial seconds."""
    return inputs.shape.scaled(inputs.contract.poll_hold_s) - HOLD_TOLERANCE_S


def not_yet(status: np.ndarray) -> np.ndarray:
    """Per poll status: the server's "not yet" (:data:`NOT_YET`)."""
    return np.isin(status, NOT_YET)


def early_not_yets(inputs: CheckInputs) -> Allowance:
    """POLL_HELD broken: per poll attempt (of :func:`poll_attempts`), a "not yet" after less than the hold."""
    rows, start, end, status = poll_attempts(inputs.history)
    early = not_yet(status) & (end - start < hold_s(inputs))
    note = (
        (
            f"{int(early.sum())} polls answered 'not yet' after less than the server's "
            f"{inputs.contract.poll_hold_s:g} SDK s hold"
        )
        if early.any()
        else ""
    )
    return Allowance(POLL_HELD, early, note)


def unwoken_polls(inputs: CheckInputs, slack_s: float, grace_s: float) -> Allowance:
    """POLL_WOKEN broken: per poll attempt (of :func:`poll_attempts`), one held past its result."""
    history, completed_s = inputs.history, inputs.router_completed_s
    rows, start, end, status = poll_attempts(history)
    out = np.zeros(rows.size, dtype=bool)
    if not completed_s or rows.size == 0:
        return Allowance(POLL_WOKEN, out)
    waited = (status == -int(ErrorClass.TIMEOUT)) | not_yet(status)
    since = np.maximum(_completed(completed_s, history["nonce"][rows]), start)
    out = waited & (end - since > slack_s)
    busy = [(a, b) for a, b, _ in in_force_windows(inputs, grace_s)] + stall_spans(inputs.monitor, slack_s)
    for i in np.flatnonzero(out).tolist():
        if any(a <= end[i] and b >= since[i] for a, b in busy):
            out[i] = False
    note = (
        f"{int(out.sum())} polls held more than {slack_s:g}s past their result and never answered with it"
        if out.any()
        else ""
    )
    return Allowance(POLL_WOKEN, out, note)


def long_poll_cycle(inputs: CheckInputs) -> Allowance:
    """The requests some of whose polls were the long-poll cycle; ``counts`` says how many of each one's."""
    history, completed_s = inputs.history, inputs.router_completed_s
    out = np.zeros(len(history), dtype=np.int64)
    if not completed_s or history.attempts["row"].size == 0:
        return Allowance(LONG_POLL_CYCLE, out > 0, counts=out)
    rows, start, end, status = poll_attempts(history)
    waited = (status == -int(ErrorClass.TIMEOUT)) | (not_yet(status) & (end - start >= hold_s(inputs)))
    done_at = _completed(completed_s, history["nonce"][rows])
    np.add.at(out, rows[waited & (end <= done_at)], 1)
    note = (
        (
            f"{int(out.sum())} polls that timed out before the engine had the result not counted "
            "(the client's long-poll cycle while it waits on the engine)"
        )
        if out.any()
        else ""
    )
    return Allowance(LONG_POLL_CYCLE, out > 0, note, counts=out)


def _completed(completed_s: Mapping[int, float], nonces: np.ndarray) -> np.ndarray:
    return np.array([completed_s.get(int(n), np.inf) for n in nonces.tolist()], dtype=np.float64)
