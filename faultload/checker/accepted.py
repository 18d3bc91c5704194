"""Was every submitted request accepted: ``accepted_requests``.

A server that refuses work (``400 base model not loaded``) loses nothing it
accepted, so ``no_lost_results`` cannot see it; this can.
"""

from __future__ import annotations

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.common import event_time, ordered
from faultload.checker.contract.submits import edge_unreachable, fatal_rejection, harness_cut
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.checker.wording import DETAIL_ITEMS, few, fmt_s, one_line
from faultload.record.history import AttemptKind, ErrorClass, History, Outcome


def check_accepted_requests(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Every asample is accepted (gets a server id) unless a fatal fault was in force while it was submitted.

    Accepted: a server id, or a result arrived (a client that hides ids still
    receives results). Rejected: the client recorded that its submit ended
    without an id (``Outcome.REJECTED``: a 4xx that is not retried, or a 5xx,
    408/409/429 or transport error after the retry budget, or a 200 without a
    request id). A rejection is explained when its [submit start, submit end]
    overlapped a fault of a kind in ``fatal_fault_kinds``, and not judged when
    its submit ended after the harness stopped the load (``load_stopped_s``);
    each allowance is a rule of the contract (``checker/contract/submits.py``).
    A request pending without an id (never submitted, or its submit still
    retrying when the load ended at the wall bound, an interrupt or a
    collapse) is unfinished, not rejected. One that failed with no id and no
    rejection recorded is left out: its client (the SDK) did not say whether
    the asample or a poll failed. A client that gave up because an edge
    outage kept it from the server (``edge_unreachable``) is explained too. Nothing accepted is no excuse: a trial whose
    every asample was refused with no fatal fault in force is violated.
    Figure: unexplained rejections; budget 0. Unknown when no submit ended
    in an attributable way.
    """
    history = inputs.history
    if len(history) == 0:
        return Verdict(ok=None, figure=None, budget=0, head="no requests in the history")
    outcome = history["outcome"]
    no_id = history["server_id"] == 0
    arrived = (outcome == Outcome.OK) | (outcome == Outcome.CORRUPT)
    accepted = ~no_id | arrived
    rejected = no_id & (outcome == Outcome.REJECTED)
    unfinished = no_id & (outcome == Outcome.PENDING)
    unattributed = no_id & ~arrived & ~rejected & ~unfinished
    rejected, explained, notes = _explain_rejections(inputs, rejected, unfinished, unattributed)
    notes_said = tuple(notes)
    n_accepted = int(accepted.sum())
    judged = n_accepted + int(rejected.sum())
    if judged == 0:
        return Verdict(
            ok=None,
            figure=None,
            budget=0,
            head=f"no submit ended in a judged way ({len(history)} requests)",
            notes=notes_said,
        )
    unexplained = rejected & ~explained
    n_bad = int(unexplained.sum())
    if n_bad:
        idx = ordered(history, unexplained)
        first = [
            f"nonce {int(history['nonce'][i])} at {fmt_s(event_time(history, int(i)))}" for i in idx[:DETAIL_ITEMS]
        ]
        return Verdict(
            ok=False,
            figure=n_bad,
            budget=0,
            head=f"{n_bad} of {judged} submitted requests rejected with no fatal fault in force "
            f"({n_accepted} accepted): {_rejection_classes(inputs, unexplained)}; first "
            f"{few(first, n_bad)}",
            notes=notes_said,
        )
    return Verdict(
        ok=True, figure=0, budget=0, head=f"{n_accepted} of {judged} submitted requests accepted", notes=notes_said
    )


def _rejection_classes(inputs: CheckInputs, rows: np.ndarray) -> str:
    """How the rejected ``rows`` ended, commonest first: "400 ×16 (e.g. asample: HTTP 400: ...)".

    A class is the HTTP status of the request's last submit attempt, or its
    transport error class (``reset``, ``connect``, ...); without an attempt
    log (or a 200 whose body had no id), the request's last error class. The
    example is the client's first message of that error class when it is
    about an asample.
    """
    history = inputs.history
    idx = np.flatnonzero(rows)
    labels = _last_submit_labels(history, idx)
    counts: dict[str, int] = {}
    first_row: dict[str, int] = {}
    for i, label in zip(idx.tolist(), labels):
        counts[label] = counts.get(label, 0) + 1
        first_row.setdefault(label, i)
    examples = inputs.error_examples or {}
    items = []
    for label, count in sorted(counts.items(), key=lambda kv: -kv[1]):
        item = f"{label} ×{count}"
        example = examples.get(_error_key(int(history["error"][first_row[label]])), "")
        if example.startswith("asample"):
            item += f" (e.g. {one_line(example, 160)})"
        items.append(item)
    return few(items)


def _last_submit_labels(history: History, idx: np.ndarray) -> list[str]:
    """Per request of ``idx``: its last submit attempt's HTTP status or transport error class."""
    attempts = history.attempts
    submit = attempts["kind"] == AttemptKind.SUBMIT
    rows, status = attempts["row"][submit], attempts["status"][submit].astype(np.int64)
    # the last attempt of each row: np.unique keeps the first of the reversed order
    last_rows, at = np.unique(rows[::-1], return_index=True)
    last_status = status[::-1][at]
    where = np.searchsorted(last_rows, idx)
    labels = []
    for i, w in zip(idx.tolist(), where.tolist()):
        code = int(last_status[w]) if w < last_rows.size and last_rows[w] == i else None
        if code is None or code == 200:
            labels.append(_error_key(int(history["error"][i])))
        elif code > 0:
            labels.append(str(code))
        else:
            labels.append(_error_key(-code))
    return labels


def _error_key(code: int) -> str:
    return ErrorClass(code).key if code in ErrorClass._value2member_map_ else f"error {code}"


def _explain_rejections(
    inputs: CheckInputs, rejected: np.ndarray, unfinished: np.ndarray, unattributed: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(the rejections judged, those the contract explains, the notes saying why the rest are not judged)."""
    notes = []
    cut = harness_cut(inputs, rejected)
    if cut.count:
        notes.append(
            f"{cut.count} rejected after the harness stopped the load at {fmt_s(inputs.load_stopped_s)} (not judged)"
        )
        rejected &= ~cut.rows
    fatal, fatal_labels = fatal_rejection(inputs, rejected)
    explained = fatal.rows.copy()
    if fatal.count:
        notes.append(
            f"{fatal.count} rejected while fatal {'/'.join(fatal_labels)} was in force "
            f"(explained: {_rejection_classes(inputs, explained)})"
        )
    unreached, outage_labels = edge_unreachable(inputs, rejected & ~explained)
    if unreached.count:
        notes.append(
            f"{unreached.count} gave up unable to reach the server: their last asample attempt "
            f"failed in transport while {'/'.join(outage_labels)} cut the link (the server never "
            f"had them to refuse: {_rejection_classes(inputs, unreached.rows)})"
        )
        explained |= unreached.rows
    if unfinished.any():
        notes.append(f"{int(unfinished.sum())} unfinished (not submitted or still submitting when the load ended)")
    if unattributed.any():
        notes.append(
            f"{int(unattributed.sum())} failed with no server id recorded (the client does not say "
            "whether the asample was accepted; not judged)"
        )
    return rejected, explained, notes
