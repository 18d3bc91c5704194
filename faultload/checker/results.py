"""Did every request get its own result: ``no_lost_results``, ``result_integrity`` (``accepted_requests``: accepted.py)."""

from __future__ import annotations

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.common import ordered
from faultload.checker.contract.faults import fatal_definite_error
from faultload.checker.contract.liveness import resolution
from faultload.checker.contract.retention import (
    dropped_poll_delivered,
    expired_by_design,
    forgotten_after_creation,
    forgotten_past_cap,
    restart_forgets,
    stall_not_scaled,
)
from faultload.checker.contract.rules import Allowance, cases_of
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.checker.wording import DETAIL_ITEMS, few, what_happened
from faultload.record.history import Outcome


def check_no_lost_results(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Every request whose ``asample`` was accepted (server id != 0) ends OK, or as the contract allows.

    A 404 for an accepted id is a loss unless a retention rule of the
    contract allows it (``checker/contract/retention.py``: a poll the client
    dropped after the result existed, a stall the time scale did not shrink,
    expiry by design, a future forgotten by age or past a cap, a fatal
    restart that forgot it). A failure or a give-up
    is a loss unless a fatal fault allowed a definite error
    (``contract/faults.py``) or a fatal restart forgot the request. A request
    that never ended is lost once the contract's liveness rule says it is
    past its bound (``contract/liveness.py``, ``futures_resolve``: a fault
    never allows silence); one the user or the watchdog cut off is
    unfinished. A corrupt result arrived, so it is left to
    ``result_integrity``; a request never accepted, to ``accepted_requests``
    (with nothing accepted there is no loss to judge: unknown here, and
    ``accepted_requests`` carries the verdict). With no loss and no accepted
    request ended (every one cut off or still within its bound) the verdict
    is unknown too: nothing was seen kept.

    Figure: lost requests; budget 0.
    """
    history = inputs.history
    if len(history) == 0:
        return Verdict(ok=None, figure=None, budget=0, head="no requests in the history")
    outcome = history["outcome"]
    accepted = history["server_id"] != 0
    n_accepted = int(accepted.sum())
    rejected = int(np.count_nonzero(~accepted))
    if n_accepted == 0:  # no loss to judge; accepted_requests judges why nothing was accepted
        return Verdict(
            ok=None,
            figure=0,
            budget=0,
            head=f"0 accepted (see accepted_requests): {rejected} of {len(history)} never got a server id",
        )
    is_ok = outcome == Outcome.OK
    corrupt = accepted & (outcome == Outcome.CORRUPT)
    pending = accepted & (outcome == Outcome.PENDING)
    lost_404 = accepted & (outcome == Outcome.LOST)
    ended_badly = accepted & ~is_ok & ~corrupt & ~lost_404 & ~pending
    lost_404, notes, applied = _retention_allowed(inputs, budgets, lost_404)
    fatal, fatal_labels = fatal_definite_error(inputs, ended_badly)
    forgotten, restart_labels = restart_forgets(inputs, ended_badly | lost_404)
    explained = fatal.rows | forgotten.rows
    lost_404 &= ~forgotten.rows
    labels = fatal_labels + [label for label in restart_labels if label not in fatal_labels]
    res = resolution(inputs, budgets)
    hung = pending & res.late.rows  # open past its resolve bound: never got its result
    lost = lost_404 | (ended_badly & ~explained) | hung
    n_lost = int(lost.sum())
    if explained.any():
        notes.insert(0, f"{int(explained.sum())} ended during fatal {'/'.join(labels)} (explained)")
    stopped = pending & res.stopped.rows
    still_open = pending & ~hung & ~stopped
    notes += _left_to_others(stopped, still_open, corrupt, rejected)
    ok: bool | None = True
    if n_lost:
        ok = False
        items = [what_happened(history, int(i)) for i in ordered(history, lost)[:DETAIL_ITEMS]]
        head = f"{n_lost} lost of {n_accepted} accepted: {few(items, n_lost)}"
    elif (accepted & ~stopped & ~still_open).any():
        head = f"{int((accepted & is_ok).sum())} of {n_accepted} accepted requests OK"
    else:  # every accepted request cut off or still open: nothing was seen kept
        ok, head = None, f"none of {n_accepted} accepted requests ended within the trial"
    return Verdict(
        ok=ok,
        figure=None if ok is None else n_lost,
        budget=0,
        head=head,
        notes=tuple(note for note in notes if note),
        cases=cases_of(*applied, fatal, forgotten),
    )


def _retention_allowed(
    inputs: CheckInputs, budgets: Budgets, lost_404: np.ndarray
) -> tuple[np.ndarray, list[str], list[Allowance]]:
    """The 404s a retention rule of the contract allows taken out of ``lost_404``; each rule's note and case."""
    notes: list[str] = []
    applied: list[Allowance] = []
    for allow in (
        dropped_poll_delivered,
        stall_not_scaled,
        expired_by_design,
        forgotten_after_creation,
        forgotten_past_cap,
    ):
        allowance = allow(inputs, budgets, lost_404)
        lost_404 = lost_404 & ~allowance.rows
        notes.append(allowance.note)
        applied.append(allowance)
    return lost_404, notes, applied


def _left_to_others(stopped: np.ndarray, still_open: np.ndarray, corrupt: np.ndarray, rejected: int) -> list[str]:
    """The requests no_lost_results does not judge, each kind with who does (or that no one can)."""
    counts = (
        (int(stopped.sum()), "unfinished (trial interrupted)"),
        (int(still_open.sum()), "still open within their resolve bound (see futures_resolve)"),
        (int(corrupt.sum()), "corrupt (see result_integrity)"),
        (rejected, "never accepted (see accepted_requests)"),
    )
    return [f"{n} {what}" for n, what in counts if n]


# -- integrity -----------------------------------------------------------------------


def check_result_integrity(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Every result that arrived decoded and matched its request in every field compared: by the client, as
    each result arrives (``client/decode.py``: ``expected``, ``check``), the number of sequences; each
    sequence's tokens, logprobs and stop reason, as the router varies them (``model/tokens.py``: a choice may
    stop before ``max_tokens``, "stop", or end at it, "length"; a choice the router sent without logprobs must
    come back zero-filled, as SkyRL and TuFT's router backend fill it); the prompt logprobs and top-k prompt
    logprobs, present exactly where the request asked for them (``tokens.asks``: a few requests ask) and then
    equal to the nonce's. Not judged: ``prompt_cache_hit_tokens`` (the router has no prefix cache to report),
    a JSON answer's ``type``, and what a server drops converting the router's body (``text``, ``usage``, each
    prompt-logprob entry's ``rank`` and ``decoded_token``).

    Figure: corrupt results; budget 0. Unknown when no result arrived.
    """
    history = inputs.history
    outcome = history["outcome"]
    corrupt = outcome == Outcome.CORRUPT
    arrived = int(np.count_nonzero((outcome == Outcome.OK) | corrupt))
    if arrived == 0:
        return Verdict(ok=None, figure=None, budget=0, head=f"no result arrived to check ({len(history)} requests)")
    n_corrupt = int(corrupt.sum())
    if n_corrupt:
        idx = ordered(history, corrupt)
        items = [what_happened(history, int(i)) for i in idx[:DETAIL_ITEMS]]
        return Verdict(
            ok=False,
            figure=n_corrupt,
            budget=0,
            head=f"{n_corrupt} of {arrived} results corrupt: {few(items, n_corrupt)}",
        )
    return Verdict(ok=True, figure=0, budget=0, head=f"{arrived} results all matched their requests")
