"""Did every request get its own result: ``no_lost_results``, ``result_integrity`` (``accepted_requests``: accepted.py)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.common import (
    DETAIL_ITEMS,
    fault_windows,
    few,
    is_fatal,
    ordered,
    overlaps,
    request_spans,
    what_happened,
)
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.record.history import AttemptKind, History, Outcome

if TYPE_CHECKING:  # type-only: keeps this module cheap to import (no toxiproxy client, no psutil)
    from faultload.model.faults import Fault
    from faultload.record.samples import MonitorSamples


def check_no_lost_results(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Every request whose ``asample`` was accepted (server id != 0) ends OK.

    A 404 for an accepted id is a loss, with one exception: the request's
    first poll was abandoned on purpose and the router had completed the
    request before the client dropped that poll (``router_completed_s``). The
    server may then have answered the poll just as it was dropped; it cannot
    tell, treats the result as delivered, and keeps it for its retrieved TTL
    only; a re-poll after that TTL is answered 404 by design. A 404 for a
    result that did not exist yet when the poll was dropped is the retention
    bug and always counts. A second exception is an artefact of the time
    scale (:func:`_stall_artefacts`): the server's event loop stalled for real
    seconds, which do not scale, while the result's TTL did, and the result
    would have been at most ``retention_window_s`` SDK seconds old at full
    time. The stall itself is judged by ``healthz_latency`` and
    ``no_collapse``. A third is the server's documented expiry
    (:func:`_expired_by_design`): the result was older than
    ``expiry_window_s`` when it was answered 404. Gave up / failed / never finished
    (pending, unless the trial was interrupted) is a loss unless the request was
    in flight ([submit start, done]) while a fault of a fatal kind was in force.
    A fatal ``server:restart`` excuses a 404 too (the old process's futures die
    with it), but only for a request accepted before the restart finished and
    still held when it began: one accepted after it is judged as ever. A corrupt result arrived, so it is left to ``result_integrity``; a request
    never accepted, to ``accepted_requests`` (with nothing accepted there is
    no loss to judge: unknown here, and ``accepted_requests`` carries the verdict).
    """
    name = "no_lost_results"
    history = inputs.history
    if len(history) == 0:
        return Verdict(name, None, None, 0, "no requests in the history")
    outcome = history["outcome"]
    accepted = history["server_id"] != 0
    n_accepted = int(accepted.sum())
    rejected = int(np.count_nonzero(~accepted))
    if n_accepted == 0:  # no loss to judge; accepted_requests judges why nothing was accepted
        return Verdict(name, None, 0, 0, f"0 accepted (see accepted_requests): {rejected} of {len(history)} "
                                         "never got a server id")
    is_ok = outcome == Outcome.OK
    corrupt = accepted & (outcome == Outcome.CORRUPT)
    lost_404 = accepted & (outcome == Outcome.LOST)
    open_ = accepted & ~is_ok & ~corrupt & ~lost_404
    dropped = lost_404 & _answered_as_dropped(history, inputs.router_completed_s)
    lost_404 &= ~dropped
    stalled, stall_note = _stall_artefacts(inputs, budgets, lost_404)
    lost_404 &= ~stalled
    expired, expiry_note = _expired_by_design(inputs, budgets, lost_404)
    lost_404 &= ~expired
    unfinished = 0
    if inputs.interrupted:
        pending = open_ & (outcome == Outcome.PENDING)
        unfinished = int(pending.sum())
        open_ &= ~pending
    fatal = fault_windows(inputs.faults, lambda f: is_fatal(f, inputs.fatal_fault_kinds) and not _restart(f))
    explained, fatal_labels = overlaps(history, fatal, among=open_)
    # A restart forgets what the old process held, 404 included; what was accepted after it is judged as ever.
    restarts = fault_windows(inputs.faults, lambda f: is_fatal(f, inputs.fatal_fault_kinds) and _restart(f))
    forgotten, restart_labels = overlaps(history, restarts, among=open_ | lost_404, spans=_accepted_spans(history))
    fatal_labels += [label for label in restart_labels if label not in fatal_labels]
    lost_404 &= ~forgotten
    explained |= forgotten
    lost = lost_404 | (open_ & ~explained)
    n_lost = int(lost.sum())
    notes = []
    if int(explained.sum()):
        notes.append(f"{int(explained.sum())} ended during fatal {'/'.join(fatal_labels)} (explained)")
    if int(dropped.sum()):
        notes.append(f"{int(dropped.sum())} 404 after a poll dropped when the result was already there "
                     "(delivered as far as the server can tell; retained by design)")
    if stall_note:
        notes.append(stall_note)
    if expiry_note:
        notes.append(expiry_note)
    if unfinished:
        notes.append(f"{unfinished} unfinished (trial interrupted)")
    if int(corrupt.sum()):
        notes.append(f"{int(corrupt.sum())} corrupt (see result_integrity)")
    if rejected:
        notes.append(f"{rejected} never accepted (see accepted_requests)")
    tail = ("; " + "; ".join(notes)) if notes else ""
    if n_lost:
        idx = ordered(history, lost)
        items = [what_happened(history, int(i)) for i in idx[:DETAIL_ITEMS]]
        return Verdict(name, False, n_lost, 0, f"{n_lost} lost of {n_accepted} accepted: {few(items, n_lost)}{tail}")
    return Verdict(name, True, 0, 0, f"{int((accepted & is_ok).sum())} of {n_accepted} accepted requests OK{tail}")


def _restart(fault: Fault) -> bool:
    return fault.link == "server" and fault.kind == "restart"


def _accepted_spans(history: History) -> tuple[np.ndarray, np.ndarray]:
    """[accepted (submit end), done] per request: held by the server from the one to the other."""
    start, _ = request_spans(history)
    accepted = np.where(np.isfinite(history["submit_end"]), history["submit_end"], start)
    end = np.where(np.isfinite(history["done"]), history["done"], np.inf)
    return accepted, end


def _answered_as_dropped(history: History, completed_s: Mapping[int, float] | None) -> np.ndarray:
    """Rows whose abandoned poll was dropped at or after the router completed the request."""
    out = np.zeros(len(history), dtype=bool)
    attempts = history.attempts
    if not completed_s or attempts["row"].size == 0:
        return out
    abandoned = attempts["kind"] == AttemptKind.ABANDONED
    nonces = history["nonce"]
    for row, dropped_at in zip(attempts["row"][abandoned].tolist(), attempts["end"][abandoned].tolist()):
        done_at = completed_s.get(int(nonces[row]))
        if done_at is not None and done_at <= dropped_at:
            out[row] = True
    return out


def stall_spans(monitor: MonitorSamples | None, slow_s: float) -> list[tuple[float, float]]:
    """Trial-second intervals the server's event loop was stalled, merged.

    /healthz does no work, so a probe that failed or took longer than
    ``slow_s`` waited on a stalled loop for [its start, its start + latency].
    """
    if monitor is None or monitor.healthz_latency_s.size == 0:
        return []
    t = np.asarray(monitor.healthz_t, dtype=np.float64)
    latency = np.asarray(monitor.healthz_latency_s, dtype=np.float64)
    bad = (~np.asarray(monitor.healthz_ok, dtype=bool)) | (latency > slow_s)
    spans: list[tuple[float, float]] = []
    for start, took in sorted(zip(t[bad].tolist(), latency[bad].tolist())):
        end = start + (took if math.isfinite(took) else 0.0)
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def _overlap_s(spans: list[tuple[float, float]], start: float, end: float) -> float:
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)


def _stall_artefacts(inputs: CheckInputs, budgets: Budgets, lost_404: np.ndarray) -> tuple[np.ndarray, str]:
    """404s explained by a server stall that the time scale did not shrink, and a note saying so.

    At time scale s the server's TTLs are s times shorter, but a stalled event
    loop stalls for real seconds. A result completed by the router at c and
    answered 404 at d lived L = d - c trial seconds, S of them inside a stall
    (:func:`stall_spans`); at full time it would have lived (L - S) / s + S
    SDK seconds. When that is within ``retention_window_s`` (the least a
    correct server keeps a result) and L is not, the scale made the loss. Such
    a trial cannot tell a correct server from one keeping results for less
    than the window; trials without a stall can. c is the router's completion
    time; a request the router never completed (its forward failed under a
    fault, and the server stored the failure as its result) takes the start
    of the first fault window it overlapped, the earliest its failure can
    have been stored (so L is never shorter than it was). At s >= 1 nothing
    is excused.
    """
    out = np.zeros(len(inputs.history), dtype=bool)
    scale = inputs.shape.time_scale
    if scale >= 1.0 or not lost_404.any():
        return out, ""
    spans = stall_spans(inputs.monitor, budgets.healthz_p99_s)
    if not spans:
        return out, ""
    history = inputs.history
    completed_s = inputs.router_completed_s or {}
    failed_at = _first_fault_overlapped(history, fault_windows(inputs.faults))
    window = budgets.retention_window_s
    worst_stall = 0.0
    for i in np.flatnonzero(lost_404).tolist():
        done_at = completed_s.get(int(history["nonce"][i]), failed_at[i] if math.isfinite(failed_at[i]) else None)
        answered = float(history["done"][i])
        if done_at is None or not math.isfinite(answered) or answered <= done_at:
            continue
        lived = answered - done_at
        stalled = _overlap_s(spans, done_at, answered)
        if lived > window * scale and (lived - stalled) / scale + stalled <= window:
            out[i] = True
            worst_stall = max(worst_stall, stalled)
    if not out.any():
        return out, ""
    return out, (f"{int(out.sum())} 404 after a server stall of up to {worst_stall:.1f} real s, which the time "
                 f"scale does not shrink (each result at most {window:g} SDK s old at full time; "
                 "the stall is judged by healthz_latency/no_collapse)")


def _expired_by_design(inputs: CheckInputs, budgets: Budgets, lost_404: np.ndarray) -> tuple[np.ndarray, str]:
    """404s for results older than ``expiry_window_s`` when answered, and a note saying so.

    A correct server may drop a completed result its client has not come
    back for within its completed TTL (SkyRL 0.4.0: 600 s, longer than its
    retrieved TTL, so whether or not a poll delivered it). A partition longer
    than that keeps the client away until the result is gone: the loss is the
    server's documented expiry, not a retention bug. The age is a lower
    bound: from the latest the server can have stored the result — the
    router's completion, or the end of a backend/router fault in force then
    (a held response arrives when the fault ends) — to the 404. A failed
    forward is a result too (SkyRL 0.4.0 stores the failure with the same
    completed TTL): its age runs from the server's last error line naming its
    request id, plus ``LOGGED_STORE_SLACK_S`` (the failure is stored just
    after it is logged). A result with neither has no known age and is not
    excused.
    """
    out = np.zeros(len(inputs.history), dtype=bool)
    window = budgets.expiry_window_s * inputs.shape.time_scale
    if not lost_404.any():
        return out, ""
    completed_s = inputs.router_completed_s or {}
    failed_s = _logged_failures_s(inputs)  # only for a trial with 404s: it reads every error line
    if not (completed_s or failed_s):
        return out, ""
    history = inputs.history
    held = fault_windows(inputs.faults, lambda f: f.link in ("backend", "router"))
    youngest = math.inf
    for i in np.flatnonzero(lost_404).tolist():
        stored = completed_s.get(int(history["nonce"][i]))
        answered = float(history["done"][i])
        if stored is not None:
            stored = max([stored] + [end for start, end, _ in held if start <= stored <= end])
        elif int(history["server_id"][i]) in failed_s:
            stored = failed_s[int(history["server_id"][i])] + LOGGED_STORE_SLACK_S
        if stored is None or not math.isfinite(answered):
            continue
        if answered - stored > window:
            out[i] = True
            youngest = min(youngest, answered - stored)
    if not out.any():
        return out, ""
    return out, (f"{int(out.sum())} 404 for results older than the server's expiry when polled (the youngest "
                 f"{youngest / inputs.shape.time_scale:.0f} SDK s > expiry_window_s {budgets.expiry_window_s:g}; "
                 "expired by design, not lost)")


# Real seconds between a failed forward's error line and its failure being stored (the same coroutine logs,
# then stores; generous, so an age from it stays a lower bound).
LOGGED_STORE_SLACK_S = 1.0


def _logged_failures_s(inputs: CheckInputs) -> dict[int, float]:
    """server request id -> trial seconds of the last server error line naming it (empty without a log or start)."""
    start = inputs.trial_start_epoch
    if start is None and inputs.faults is not None:
        start = inputs.faults.trial_start_epoch
    if inputs.server_log is None or start is None:
        return {}
    return {rid: ts - start for rid, ts in inputs.server_log.last_error_epoch_by_request().items()}


def _first_fault_overlapped(history: History, windows: list[tuple[float, float, Fault]]) -> np.ndarray:
    """Per request, the start of the earliest fault window its [submit, done] span overlapped (inf: none)."""
    start, end = request_spans(history)
    first = np.full(len(history), np.inf)
    for w_start, w_end, _ in windows:
        hit = (start <= w_end) & (end >= w_start)
        first = np.where(hit, np.minimum(first, max(w_start, 0.0)), first)
    return np.maximum(first, start)


# -- integrity -----------------------------------------------------------------------

def check_result_integrity(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """No result arrived that did not match its request (wrong tokens, truncated, undecodable)."""
    name = "result_integrity"
    history = inputs.history
    outcome = history["outcome"]
    corrupt = outcome == Outcome.CORRUPT
    arrived = int(np.count_nonzero((outcome == Outcome.OK) | corrupt))
    if arrived == 0:
        return Verdict(name, None, None, 0, f"no result arrived to check ({len(history)} requests)")
    n_corrupt = int(corrupt.sum())
    if n_corrupt:
        idx = ordered(history, corrupt)
        items = [what_happened(history, int(i)) for i in idx[:DETAIL_ITEMS]]
        return Verdict(name, False, n_corrupt, 0, f"{n_corrupt} of {arrived} results corrupt: {few(items, n_corrupt)}")
    return Verdict(name, True, 0, 0, f"{arrived} results all matched their requests")
