"""Which asamples a correct server may refuse: the rules that allow a rejection.

Nothing accepted is no excuse: a server that refuses work with no fault in
force loses nothing it accepted, and ``accepted_requests`` judges it.
"""

from __future__ import annotations

import numpy as np

from faultload.checker.common import fault_windows, is_fatal, overlaps, request_spans
from faultload.checker.contract.rules import Allowance, Rule
from faultload.checker.inputs import CheckInputs
from faultload.model.faults import OUTAGE_KINDS
from faultload.record.history import AttemptKind, ErrorClass

FATAL_REJECTION = Rule(
    "fatal_rejection",
    "an asample submitted while a fault declared fatal was in force may be rejected",
    "the fault took what the server needs to accept work (its backend, its router); refusing says so",
)
EDGE_UNREACHABLE = Rule(
    "edge_unreachable",
    "a client may give up on an asample whose last attempt failed in transport while an edge outage cut "
    "it off from the server",
    "the server never had the request to refuse: the client's retry window ran out while the link was down",
)
HARNESS_CUT = Rule(
    "harness_cut",
    "an asample rejected after the harness stopped the load is not judged",
    "the harness cut it off (a collapse called, Ctrl-C): what the server would have answered is unknown",
)

_TRANSPORT = (ErrorClass.CONNECT, ErrorClass.RESET, ErrorClass.TIMEOUT)


def harness_cut(inputs: CheckInputs, among: np.ndarray) -> Allowance:
    """Rejections of ``among`` whose submit ended after the harness stopped the load."""
    stopped = inputs.load_stopped_s
    cut = among & (inputs.history["submit_end"] > stopped) if stopped is not None else np.zeros_like(among)
    return Allowance(HARNESS_CUT, cut)


def fatal_rejection(inputs: CheckInputs, among: np.ndarray) -> tuple[Allowance, list[str]]:
    """Rejections of ``among`` whose [submit start, submit end] overlapped a fatal fault, and its labels."""
    history = inputs.history
    fatal = fault_windows(inputs.faults, lambda f: is_fatal(f, inputs.fatal_fault_kinds))
    hit, labels = overlaps(history, fatal, among=among, spans=request_spans(history, "submit_end"))
    return Allowance(FATAL_REJECTION, hit), labels


def edge_unreachable(inputs: CheckInputs, among: np.ndarray) -> tuple[Allowance, list[str]]:
    """Rejections of ``among`` the client gave up on because an edge outage cut it off from the server.

    A client retries a failing asample for its retry window (the SDK: 300 s)
    and then gives up; an edge outage (:data:`OUTAGE_KINDS`) longer than that
    makes it give up without the server ever seeing the request. Allowed only
    when the request ended in a transport error (connect, reset, timeout —
    never an HTTP status: that is the server answering) and its last asample
    attempt overlapped the outage; without an attempt log (the SDK client),
    the last ``backoff_cap_s`` (scaled) before it gave up stands for that
    attempt. A rejection whose last attempt came after the link healed is the
    server's, and still counts.
    """
    history = inputs.history
    rows = among & np.isin(history["error"], np.array(_TRANSPORT, dtype=history["error"].dtype))
    outages = fault_windows(inputs.faults, lambda f: f.link == "edge" and f.kind in OUTAGE_KINDS)
    if not rows.any() or not outages:
        return Allowance.none(EDGE_UNREACHABLE, len(history)), []
    end = history["submit_end"].astype(np.float64)
    start = end - inputs.shape.scaled(inputs.shape.policy.backoff_cap_s)
    attempts = history.attempts
    if attempts["row"].size:
        submits = attempts["kind"] == AttemptKind.SUBMIT
        last = np.full(len(history), -1, dtype=np.int64)
        np.maximum.at(last, attempts["row"][submits], np.flatnonzero(submits))  # attempts are logged in order
        has = last >= 0
        start = np.where(has, attempts["start"][np.maximum(last, 0)].astype(np.float64), start)
        end = np.where(has, np.maximum(end, attempts["end"][np.maximum(last, 0)].astype(np.float64)), end)
    hit, labels = overlaps(history, outages, among=rows, spans=(start, end))
    return Allowance(EDGE_UNREACHABLE, hit), labels
