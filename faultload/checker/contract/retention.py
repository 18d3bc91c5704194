"""How long a correct server keeps a result: the rules that allow a 404 for an accepted request.

A result stays retrievable for the retention window from the last moment
the server could have believed it delivered, and for the expiry window from
its completion whatever happened; a 404 inside both is a loss. A write the
kernel accepted into a connection the client never read from (a blackholed
response) is not a delivery the client could have believed: only a poll the
client itself dropped lets the server count a result as delivered.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping

import numpy as np

from faultload.checker.budgets import Budgets, expiry_s, retention_s
from faultload.checker.common import fault_windows, is_fatal, overlaps, request_spans
from faultload.checker.contract.rules import Allowance, Rule
from faultload.checker.inputs import CheckInputs
from faultload.record.history import AttemptKind, History, Outcome
from faultload.record.training import TrainingOp

if TYPE_CHECKING:  # type-only: keeps this module cheap to import (no toxiproxy client, no psutil)
    from faultload.model.faults import Fault
    from faultload.record.samples import MonitorSamples

DROPPED_POLL = Rule(
    "dropped_poll_delivered",
    "a 404 may answer a request whose poll the client itself dropped at or after the router had completed it "
    "(or at most drop_notice_slack_s before), once the retention window has passed since that poll began",
    "the server may have answered the dropped poll just as it was dropped; it cannot tell, treats the result "
    "as delivered and keeps it for its retrieved TTL only (finding 2) — measured from that delivery, which came "
    "no earlier than the poll that carried it: a 404 sooner is a retrieved TTL shorter than promised, or one "
    "measured from an earlier event. The server sees a drop only once the close has crossed the edge proxy "
    "and reached its loop, so a result completed just after the drop may still go out on the dead connection",
)
STALL_NOT_SCALED = Rule(
    "stall_not_scaled",
    "a 404 may answer a result that, at full time, would have been at most the retention window old",
    "a stalled event loop stalls for real seconds, which the time scale does not shrink, while the TTLs "
    "shrink; the stall itself is judged by healthz_latency and no_collapse",
)
EXPIRED_BY_DESIGN = Rule(
    "expired_by_design",
    "a 404 may answer a result older than the expiry window when it was asked for, unless a poll the client "
    "dropped after the result existed began within the retention window before it",
    "the server documents that a result nobody came back for expires (SkyRL 0.4.0: 600 s); a result it "
    "believes delivered is kept its retrieved TTL from that delivery instead (300 s), even past the expiry",
)
FORGOTTEN_AFTER_CREATION = Rule(
    "forgotten_after_creation",
    "a 404 may answer a request asked for more than the family's created TTL after the server accepted it",
    "a server that forgets a future a fixed time after creating it, done, delivered or not (hatchery-core: its "
    "registry's 3600 s), promises nothing past that; the age runs from the submit's answer, the latest the "
    "server can have created the future, so it is never longer than it was",
)
FORGOTTEN_PAST_CAP = Rule(
    "forgotten_past_cap",
    "a 404 may answer a request when the family's cap of futures (max_futures) or more were submitted after the "
    "server accepted it",
    "a server that keeps at most so many futures forgets its oldest past the cap (hatchery-core: 100,000); the "
    "count is of this trial's own submits begun after the acceptance, a lower bound of the futures created "
    "after it",
)
SWEEP_ON_REGISTRATION = Rule(
    "sweep_on_registration",
    "a server that forgets expired futures only at every N-th registration (sweep_registrations) owes nothing "
    "back until N futures were registered after the release was due, which no trial's own requests are: "
    "releases_results is not judged",
    "its sweep is not on a timer (hatchery-core: every 1000th registration): a quiet server keeps what expired "
    "until new work arrives, by design; what it keeps after a sweep is judged as ever",
)
RESTART_FORGETS = Rule(
    "restart_forgets",
    "a fatal server:restart may forget (404, or never answer) a request accepted before the restart "
    "finished and still held when it began",
    "futures live in the old process's memory; what was accepted after the restart is judged as ever",
)

# Real seconds between a failed forward's error line and its failure being stored (the same coroutine logs,
# then stores; generous, so an age from it stays a lower bound).
LOGGED_STORE_SLACK_S = 1.0


def dropped_poll_starts(inputs: CheckInputs, notice_s: float) -> np.ndarray:
    """Per request, trial seconds the latest poll the client dropped at or after the router completed it (or
    ``notice_s`` before: the server had not seen the drop yet) began (NaN: none): the earliest moment the server
    can have believed the result delivered by it."""
    history, completed_s = inputs.history, inputs.router_completed_s
    out = np.full(len(history), np.nan)
    attempts = history.attempts
    if completed_s and attempts["row"].size:
        abandoned = attempts["kind"] == AttemptKind.ABANDONED
        nonces = history["nonce"]
        for row, began, dropped_at in zip(
            attempts["row"][abandoned].tolist(),
            attempts["start"][abandoned].tolist(),
            attempts["end"][abandoned].tolist(),
        ):
            done_at = completed_s.get(int(nonces[row]))
            if done_at is not None and done_at <= dropped_at + notice_s and not began <= out[row]:
                out[row] = began
    return out


def _within_retention(inputs: CheckInputs, budgets: Budgets, began: np.ndarray) -> np.ndarray:
    """Requests answered sooner than the retention window after a dropped poll that may have delivered them
    (``began``: :func:`dropped_poll_starts`)."""
    window = inputs.shape.scaled(retention_s(budgets, inputs.contract))
    answered = np.asarray(inputs.history["done"], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.asarray(np.isfinite(began) & ~(answered - began >= window))


def dropped_poll_delivered(inputs: CheckInputs, budgets: Budgets, among: np.ndarray) -> Allowance:
    """Rows of ``among`` whose abandoned poll was dropped at or after the router completed the request (or just
    before: ``drop_notice_slack_s``), answered 404 the retention window or more after that poll began."""
    began = dropped_poll_starts(inputs, budgets.drop_notice_slack_s)
    out = among & np.isfinite(began) & ~_within_retention(inputs, budgets, began)
    note = (
        (
            f"{int(out.sum())} 404 after a poll dropped when the result was there (or came as it was dropped), "
            f"{retention_s(budgets, inputs.contract):g} SDK s or more before (delivered as far as the server can "
            "tell; retained by design)"
        )
        if out.any()
        else ""
    )
    return Allowance(DROPPED_POLL, out, note)


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


def overlap_s(spans: list[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of [start, end] inside ``spans``."""
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)


def stall_not_scaled(inputs: CheckInputs, budgets: Budgets, among: np.ndarray) -> Allowance:
    """404s of ``among`` explained by a server stall that the time scale did not shrink.

    At time scale s a result completed by the router at c and answered 404
    at d lived L = d - c trial seconds, S of them inside a stall; at full
    time it would have lived (L - S) / s + S SDK seconds. When that is within
    ``retention_window_s`` and L is not, the scale made the loss. c is the
    router's completion time; a request the router never completed takes the
    start of the first fault window it overlapped (so L is never shorter than
    it was). At s >= 1 nothing is allowed.
    """
    out = np.zeros(len(inputs.history), dtype=bool)
    scale = inputs.shape.time_scale
    spans = stall_spans(inputs.monitor, budgets.healthz_p99_s) if scale < 1.0 and among.any() else []
    if not spans:
        return Allowance(STALL_NOT_SCALED, out)
    history = inputs.history
    completed_s = inputs.router_completed_s or {}
    failed_at = _first_fault_overlapped(history, fault_windows(inputs.faults))
    window = retention_s(budgets, inputs.contract)
    worst_stall = 0.0
    for i in np.flatnonzero(among).tolist():
        done_at = completed_s.get(int(history["nonce"][i]), failed_at[i] if math.isfinite(failed_at[i]) else None)
        answered = float(history["done"][i])
        if done_at is None or not math.isfinite(answered) or answered <= done_at:
            continue
        lived = answered - done_at
        stalled = overlap_s(spans, done_at, answered)
        if lived > window * scale and (lived - stalled) / scale + stalled <= window:
            out[i] = True
            worst_stall = max(worst_stall, stalled)
    note = (
        (
            f"{int(out.sum())} 404 after a server stall of up to {worst_stall:.1f} real s, which the time "
            f"scale does not shrink (each result at most {window:g} SDK s old at full time; "
            "the stall is judged by healthz_latency/no_collapse)"
        )
        if out.any()
        else ""
    )
    return Allowance(STALL_NOT_SCALED, out, note)


def expired_by_design(inputs: CheckInputs, budgets: Budgets, among: np.ndarray) -> Allowance:
    """404s of ``among`` for results older than ``expiry_window_s`` when answered.

    The age is a lower bound: from the latest the server can have stored the
    result — the router's completion, or the end of a backend/router fault
    in force then (a held response arrives when the fault ends) — to the
    404. A failed forward is a result too (SkyRL 0.4.0 stores the failure with
    the same completed TTL): its age runs from the server's last error line
    naming its request id, plus ``LOGGED_STORE_SLACK_S``. A result with
    neither has no known age and is not allowed.
    """
    out = np.zeros(len(inputs.history), dtype=bool)
    window = inputs.shape.scaled(expiry_s(budgets, inputs.contract))
    completed_s = inputs.router_completed_s or {}
    failed_s = _logged_failures_s(inputs) if among.any() else {}  # it reads every error line
    history = inputs.history
    held = fault_windows(inputs.faults, lambda f: f.link in ("backend", "router"))
    youngest = math.inf
    # believed delivered: its retrieved TTL runs instead
    among = among & ~_within_retention(inputs, budgets, dropped_poll_starts(inputs, budgets.drop_notice_slack_s))
    for i in np.flatnonzero(among).tolist() if (completed_s or failed_s) else ():
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
    note = (
        (
            f"{int(out.sum())} 404 for results older than the server's expiry when polled (the youngest "
            f"{youngest / inputs.shape.time_scale:.0f} SDK s > expiry {expiry_s(budgets, inputs.contract):g} SDK s; "
            "expired by design, not lost)"
        )
        if out.any()
        else ""
    )
    return Allowance(EXPIRED_BY_DESIGN, out, note)


def forgotten_after_creation(inputs: CheckInputs, budgets: Budgets, among: np.ndarray) -> Allowance:
    """404s of ``among`` answered more than the contract's ``created_ttl_s`` after their submit was answered."""
    ttl = inputs.contract.created_ttl_s
    out = np.zeros(len(inputs.history), dtype=bool)
    if ttl is not None and among.any():
        history = inputs.history
        with np.errstate(invalid="ignore"):
            out = among & (history["done"] - history["submit_end"] > inputs.shape.scaled(ttl))
    note = (
        f"{int(out.sum())} 404 asked for more than the created TTL ({ttl:g} SDK s) after the server accepted it "
        "(forgotten by design, not lost)"
        if out.any()
        else ""
    )
    return Allowance(FORGOTTEN_AFTER_CREATION, out, note)


def forgotten_past_cap(inputs: CheckInputs, budgets: Budgets, among: np.ndarray) -> Allowance:
    """404s of ``among`` with the contract's ``max_futures`` or more submits begun after their acceptance."""
    cap = inputs.contract.max_futures
    out = np.zeros(len(inputs.history), dtype=bool)
    if cap is not None and among.any():
        history = inputs.history
        began = np.sort(np.asarray(history["submit_start"], dtype=np.float64))
        accepted = np.asarray(history["submit_end"], dtype=np.float64)
        after = len(began) - np.searchsorted(began, accepted, side="right")
        out = among & np.isfinite(accepted) & (after >= cap)
    note = (
        f"{int(out.sum())} 404 with {cap:,} or more futures submitted after it (past the server's cap; "
        "forgotten by design, not lost)"
        if out.any()
        else ""
    )
    return Allowance(FORGOTTEN_PAST_CAP, out, note)


def restart_forgets(inputs: CheckInputs, among: np.ndarray) -> tuple[Allowance, list[str]]:
    """Requests of ``among`` held by the server (accepted, not yet done) when a fatal restart began,
    and the labels of the restarts that hit one."""
    history = inputs.history
    restarts = fault_windows(inputs.faults, lambda f: is_fatal(f, inputs.fatal_fault_kinds) and is_restart(f))
    start, _ = request_spans(history)
    accepted = np.where(np.isfinite(history["submit_end"]), history["submit_end"], start)
    end = np.where(np.isfinite(history["done"]), history["done"], np.inf)
    forgotten, labels = overlaps(history, restarts, among=among, spans=(accepted, end))
    return Allowance(RESTART_FORGETS, forgotten), labels


def model_forgotten(inputs: CheckInputs, among: np.ndarray) -> Allowance:
    """RESTART_FORGETS for training: calls of ``among`` made after a fatal ``server:restart`` that came after
    their trainer's create_model reached the server.

    The new process never loaded that model: 0.4.0 answers each later call ``400 Model ... not loaded
    (likely stale request from previous server)``. What counts is when the server accepted the create_model,
    not when the client read its result: the old process creates the model and stores the result, and a
    client cut off from the server (an edge fault) reads it from the database after the restart.
    """
    log = inputs.training
    assert log is not None
    lost = np.zeros(len(log), dtype=bool)
    restarts = np.array(
        [
            start
            for start, _, fault in fault_windows(inputs.faults)
            if is_restart(fault) and is_fatal(fault, inputs.fatal_fault_kinds)
        ]
    )
    if restarts.size:
        created = log.of(TrainingOp.CREATE_MODEL) & (log["outcome"] == Outcome.OK)
        for trainer, reached in zip(log["trainer"][created].tolist(), log["accepted"][created].tolist()):
            later = restarts[restarts >= reached]
            if later.size:
                lost |= among & (log["trainer"] == trainer) & (log["start"] >= later.min())
    return Allowance(RESTART_FORGETS, lost)


def is_restart(fault: Fault) -> bool:
    return fault.link == "server" and fault.kind == "restart"


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
    return np.asarray(np.maximum(first, start))


def answered_by(completed_s: Mapping[int, float] | None, history: History) -> np.ndarray:
    """Per request, trial seconds the router completed it (NaN: unknown or never)."""
    if not completed_s:
        return np.full(len(history), np.nan)
    return np.array([completed_s.get(int(n), np.nan) for n in history["nonce"].tolist()], dtype=np.float64)
