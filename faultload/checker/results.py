"""Did every request get its own result: ``no_lost_results``, ``accepted_requests``, ``result_integrity``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.common import (
    DETAIL_ITEMS,
    event_time,
    fault_windows,
    few,
    fmt_s,
    is_fatal,
    one_line,
    ordered,
    overlaps,
    request_spans,
    what_happened,
)
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.model.faults import OUTAGE_KINDS
from faultload.record.history import AttemptKind, ErrorClass, History, Outcome

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
    (a held response arrives when the fault ends) — to the 404. A result the
    router never completed has no known age and is not excused.
    """
    out = np.zeros(len(inputs.history), dtype=bool)
    window = budgets.expiry_window_s * inputs.shape.time_scale
    completed_s = inputs.router_completed_s or {}
    if not lost_404.any() or not completed_s:
        return out, ""
    history = inputs.history
    held = fault_windows(inputs.faults, lambda f: f.link in ("backend", "router"))
    youngest = math.inf
    for i in np.flatnonzero(lost_404).tolist():
        stored = completed_s.get(int(history["nonce"][i]))
        answered = float(history["done"][i])
        if stored is None or not math.isfinite(answered):
            continue
        stored = max([stored] + [end for start, end, _ in held if start <= stored <= end])
        if answered - stored > window:
            out[i] = True
            youngest = min(youngest, answered - stored)
    if not out.any():
        return out, ""
    return out, (f"{int(out.sum())} 404 for results older than the server's expiry when polled (the youngest "
                 f"{youngest / inputs.shape.time_scale:.0f} SDK s > expiry_window_s {budgets.expiry_window_s:g}; "
                 "expired by design, not lost)")


def _first_fault_overlapped(history: History, windows: list[tuple[float, float, Fault]]) -> np.ndarray:
    """Per request, the start of the earliest fault window its [submit, done] span overlapped (inf: none)."""
    start, end = request_spans(history)
    first = np.full(len(history), np.inf)
    for w_start, w_end, _ in windows:
        hit = (start <= w_end) & (end >= w_start)
        first = np.where(hit, np.minimum(first, max(w_start, 0.0)), first)
    return np.maximum(first, start)


# -- accepted requests -----------------------------------------------------------------

def check_accepted_requests(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Every asample is accepted (gets a server id) unless a fatal fault was in force while it was submitted.

    Accepted: a server id, or a result arrived (a client that hides ids still
    receives results). Rejected: the client recorded that its submit ended
    without an id (``Outcome.REJECTED``: a 4xx that is not retried, or a 5xx,
    408/409/429 or transport error after the retry budget, or a 200 without a
    request id). A rejection is explained when its [submit start, submit end]
    overlapped a fault of a kind in ``fatal_fault_kinds``, and not judged when
    its submit ended after the harness stopped the load (``load_stopped_s``).
    A request pending without an id (never submitted, or its submit still
    retrying when the load ended at the wall bound, an interrupt or a
    collapse) is unfinished, not rejected. One that failed with no id and no
    rejection recorded is left out: its client (the SDK) did not say whether
    the asample or a poll failed. A client that gave up because an edge
    outage kept it from the server (:func:`_never_reached`) is explained too. Nothing accepted is no excuse: a trial whose
    every asample was refused with no fatal fault in force is violated.
    Figure: unexplained rejections; budget 0. Unknown when no submit ended
    in an attributable way.
    """
    name = "accepted_requests"
    history = inputs.history
    if len(history) == 0:
        return Verdict(name, None, None, 0, "no requests in the history")
    outcome = history["outcome"]
    no_id = history["server_id"] == 0
    arrived = (outcome == Outcome.OK) | (outcome == Outcome.CORRUPT)
    accepted = ~no_id | arrived
    rejected = no_id & (outcome == Outcome.REJECTED)
    unfinished = no_id & (outcome == Outcome.PENDING)
    unattributed = no_id & ~arrived & ~rejected & ~unfinished
    notes = []
    if inputs.load_stopped_s is not None:
        cut = rejected & (history["submit_end"] > inputs.load_stopped_s)
        if cut.any():
            notes.append(f"{int(cut.sum())} rejected after the harness stopped the load at "
                         f"{fmt_s(inputs.load_stopped_s)} (not judged)")
            rejected &= ~cut
    fatal = fault_windows(inputs.faults, lambda f: is_fatal(f, inputs.fatal_fault_kinds))
    explained, fatal_labels = overlaps(history, fatal, among=rejected, spans=request_spans(history, "submit_end"))
    if explained.any():
        notes.append(f"{int(explained.sum())} rejected while fatal {'/'.join(fatal_labels)} was in force "
                     f"(explained: {_rejection_classes(inputs, explained)})")
    unreached, outage_labels = _never_reached(inputs, rejected & ~explained)
    if unreached.any():
        notes.append(f"{int(unreached.sum())} gave up unable to reach the server: their last asample attempt "
                     f"failed in transport while {'/'.join(outage_labels)} cut the link (the server never "
                     f"had them to refuse: {_rejection_classes(inputs, unreached)})")
        explained |= unreached
    if unfinished.any():
        notes.append(f"{int(unfinished.sum())} unfinished (not submitted or still submitting when the load ended)")
    if unattributed.any():
        notes.append(f"{int(unattributed.sum())} failed with no server id recorded (the client does not say "
                     "whether the asample was accepted; not judged)")
    tail = ("; " + "; ".join(notes)) if notes else ""
    n_accepted = int(accepted.sum())
    judged = n_accepted + int(rejected.sum())
    if judged == 0:
        return Verdict(name, None, None, 0, f"no submit ended in a judged way ({len(history)} requests){tail}")
    unexplained = rejected & ~explained
    n_bad = int(unexplained.sum())
    if n_bad:
        idx = ordered(history, unexplained)
        first = [f"nonce {int(history['nonce'][i])} at {fmt_s(event_time(history, int(i)))}"
                 for i in idx[:DETAIL_ITEMS]]
        return Verdict(name, False, n_bad, 0,
                       f"{n_bad} of {judged} submitted requests rejected with no fatal fault in force "
                       f"({n_accepted} accepted): {_rejection_classes(inputs, unexplained)}; first "
                       f"{few(first, n_bad)}{tail}")
    return Verdict(name, True, 0, 0, f"{n_accepted} of {judged} submitted requests accepted{tail}")


_TRANSPORT = (ErrorClass.CONNECT, ErrorClass.RESET, ErrorClass.TIMEOUT)


def _never_reached(inputs: CheckInputs, among: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Rejections the client gave up on because an edge outage cut it off from the server.

    A client retries a failing asample for its retry window (the SDK: 300 s)
    and then gives up; an edge outage (:data:`OUTAGE_KINDS`) longer than that
    makes it give up without the server ever seeing the request. Excused only
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
        return np.zeros(len(history), dtype=bool), []
    end = history["submit_end"].astype(np.float64)
    start = end - inputs.shape.policy.backoff_cap_s * inputs.shape.time_scale
    attempts = history.attempts
    if attempts["row"].size:
        submits = attempts["kind"] == AttemptKind.SUBMIT
        last = np.full(len(history), -1, dtype=np.int64)
        np.maximum.at(last, attempts["row"][submits], np.flatnonzero(submits))  # attempts are logged in order
        has = last >= 0
        start = np.where(has, attempts["start"][np.maximum(last, 0)].astype(np.float64), start)
        end = np.where(has, np.maximum(end, attempts["end"][np.maximum(last, 0)].astype(np.float64)), end)
    return overlaps(history, outages, among=rows, spans=(start, end))


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
