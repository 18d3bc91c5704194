"""Was it right: the trial's invariants as pure functions of what was recorded.

Each checker is ``check_x(inputs: CheckInputs, budgets: Budgets) -> Verdict``;
it reads only its arguments (no clock, no network, no globals), so a stored
history can be re-checked later. A verdict is ``ok=True`` (holds), ``False``
(violated) or ``None`` (unknown: not enough data, or the checker crashed —
:func:`check_all` turns an exception into ``None``, never into ``True``).

``detail`` is one line that names the requests (nonce, server id) and times
(seconds since the trial's start) a reader needs to go and look.

Checkers, in :data:`CHECKERS` order:

* ``no_lost_results`` — every request the server accepted ends OK;
* ``accepted_requests`` — every asample is accepted unless a fatal fault was in force;
* ``result_integrity`` — no result belonged to another request or was damaged;
* ``bounded_fds`` / ``bounded_rss`` — peak within a budget of the in-flight
  count, and back near the baseline after drain;
* ``healthz_latency`` — ``/healthz`` p99 and failures during load;
* ``bounded_cpu`` — server CPU per HTTP request;
* ``retry_amplification`` — HTTP attempts per request;
* ``unprovoked_resets`` — no attempt reset or refused on a healthy network;
* ``clean_server_log`` — no error lines unless a fault was active.

Each verdict's ``figure`` is the invariant's one steering figure (the suite's
Hypothesis ``target()`` reads only these), always the same quantity whatever
the branch: a count of bad requests, fds per request in flight, RSS growth in
MiB, the /healthz p99, CPU ms per request, mean attempts per request. When a
second condition of the same invariant fails (fds not back after the drain,
too many failed probes, one request over the attempt max), ``ok`` is False and
the detail names it; the figure stays what it always means.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from faultload.budgets import Budgets
from faultload.history import AttemptKind, ErrorClass, History, Outcome
from faultload.serverlog import ServerLogSummary
from faultload.shape import LoadShape

if TYPE_CHECKING:  # type-only: keeps this module cheap to import (no toxiproxy client, no psutil)
    from faultload.faults.schedule import FaultLog
    from faultload.faults.spec import Fault
    from faultload.monitor import MonitorSamples

# Bytes a server holds per result token: a 4-byte token id and a 4-byte float32
# logprob (the proto's packed fields; JSON is larger — see bounded_rss).
RESULT_BYTES_PER_TOKEN = 8
# How many requests/classes/times a detail line names before "...".
DETAIL_ITEMS = 5
MIB = 1024 * 1024


@dataclass(frozen=True)
class Verdict:
    """One invariant's answer. ``ok=None`` means unknown (crashed, or not enough data)."""

    name: str
    ok: bool | None
    figure: float | int | None  # the measured number compared to the budget
    budget: float | int | None
    detail: str  # one line: requests (nonce, server id), times

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "figure": _json_number(self.figure),
                "budget": _json_number(self.budget), "detail": self.detail}


@dataclass(frozen=True)
class CheckInputs:
    """Everything the checkers may read about one trial.

    ``faults`` None means no faults were scheduled. ``fatal_fault_kinds`` holds
    the fault kinds the shape declares fatal to the requests they hit (a
    request that gives up while one was in force is not a loss); an entry may be
    a bare kind (``"crash"``) or ``"link:kind"`` (``"router:crash"``).
    ``interrupted``: the trial was stopped early, so requests still pending
    are unfinished, not lost. ``load_stopped_s``: trial seconds when the harness
    stopped the load (what the client met after it is the harness's doing, not
    the server's). ``trial_start_epoch`` maps the server log's
    wall-clock times to trial seconds (falls back to ``faults.trial_start_epoch``).
    """

    history: History
    monitor: MonitorSamples | None
    faults: FaultLog | None
    shape: LoadShape
    server_log: ServerLogSummary | None = None
    fatal_fault_kinds: frozenset[str] = frozenset()
    interrupted: bool = False
    load_stopped_s: float | None = None
    trial_start_epoch: float | None = None
    router_peak_in_flight: int | None = None  # the router's exact peak (its /stats), when known
    # nonce -> trial seconds the router completed it (its completion log), when known
    router_completed_s: Mapping[int, float] | None = None
    # error class key (ErrorClass.key) -> the client's first message of that class, when kept
    error_examples: Mapping[str, str] | None = None


Checker = Callable[[CheckInputs, Budgets], Verdict]


# -- small helpers -------------------------------------------------------------------

def _json_number(value: Any) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    number = float(value)
    return number if math.isfinite(number) else None


def _s(t: float | None) -> str:
    """Trial seconds for a detail line."""
    if t is None or not math.isfinite(t):
        return "?"
    return f"{t:.1f}s"


def _mib(n: float) -> str:
    """A byte count for a detail line: MiB, or smaller/larger units when that reads better."""
    if abs(n) < 1024:
        return f"{n:.0f} B"
    if abs(n) < MIB:
        return f"{n / 1024:.1f} KiB"
    if abs(n) < 10 * 1024 * MIB:
        return f"{n / MIB:.0f} MiB"
    return f"{n / (1024 * MIB):.1f} GiB"


def _few(items: Sequence[str], total: int | None = None) -> str:
    total = len(items) if total is None else total
    shown = ", ".join(items[:DETAIL_ITEMS])
    return shown + (", ..." if total > DETAIL_ITEMS else "")


def _request(history: History, i: int) -> str:
    return f"nonce {int(history['nonce'][i])} (id {int(history['server_id'][i])})"


def _fault_label(fault: Fault) -> str:
    return f"{fault.link}:{fault.kind}"


def _is_fatal(fault: Fault, kinds: Iterable[str]) -> bool:
    kinds = set(kinds)
    return fault.kind in kinds or _fault_label(fault) in kinds or fault.to_spec() in kinds


def _windows(faults: FaultLog | None, keep: Callable[[Fault], bool] = lambda f: True,
             grace_s: float = 0.0) -> list[tuple[float, float, Fault]]:
    """(start, end, fault) in trial seconds for each fault that took effect."""
    if faults is None:
        return []
    out = []
    for record in faults.records:
        if not record.applied or not keep(record.fault):
            continue
        end = math.inf if record.removed_at_s is None else record.removed_at_s + grace_s
        out.append((float(record.applied_at_s), end, record.fault))  # type: ignore[arg-type]
    return out


def _request_spans(history: History, until: str = "done") -> tuple[np.ndarray, np.ndarray]:
    """[submit start, ``until`` (done, or submit_end)] per request; unknown start -> 0, not reached -> +inf."""
    start = np.where(np.isfinite(history["submit_start"]), history["submit_start"], 0.0)
    end = np.where(np.isfinite(history[until]), history[until], np.inf)
    return start, end


def _overlaps(history: History, windows: list[tuple[float, float, Fault]],
              among: np.ndarray | None = None,
              spans: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, list[str]]:
    """Which requests (of ``among``) overlap any window, and the labels of the windows that hit one.

    A request's span is [submit start, done] unless ``spans`` gives others.
    """
    start, end = _request_spans(history) if spans is None else spans
    hit = np.zeros(len(history), dtype=bool)
    labels: list[str] = []
    for w_start, w_end, fault in windows:
        mask = (start <= w_end) & (end >= w_start)
        if among is not None:
            mask &= among
        if mask.any():
            hit |= mask
            label = _fault_label(fault)
            if label not in labels:
                labels.append(label)
    return hit, labels


def _event_times(history: History) -> np.ndarray:
    """When each request's fate was seen: done, else submit end, else submit start (NaN: never)."""
    t = history["done"]
    t = np.where(np.isfinite(t), t, history["submit_end"])
    return np.where(np.isfinite(t), t, history["submit_start"])


def _event_time(history: History, i: int) -> float:
    return _first_finite(history["done"][i], history["submit_end"][i], history["submit_start"][i])


def _first_finite(*values: float) -> float:
    for value in values:
        if math.isfinite(float(value)):
            return float(value)
    return math.nan


def _ordered(history: History, mask: np.ndarray) -> np.ndarray:
    """Indices where ``mask`` holds, earliest event first (unknown times last)."""
    idx = np.flatnonzero(mask)
    times = _event_times(history)[idx]
    order = np.argsort(np.where(np.isfinite(times), times, np.inf), kind="stable")
    return idx[order]


_OUTCOME_WORDS = {
    Outcome.LOST: "404", Outcome.GAVE_UP: "gave up", Outcome.FAILED: "failed",
    Outcome.PENDING: "never finished", Outcome.REJECTED: "rejected after acceptance",
    Outcome.CORRUPT: "corrupt",
}


def _what(history: History, i: int) -> str:
    outcome = Outcome(int(history["outcome"][i]))
    word = _OUTCOME_WORDS.get(outcome, outcome.name.lower())
    error = int(history["error"][i])
    if outcome != Outcome.LOST and error != ErrorClass.NONE and error in ErrorClass._value2member_map_:
        word += f" ({ErrorClass(error).key})"
    return f"{_request(history, i)} {word} at {_s(_event_time(history, i))}"


def _peak_in_flight(
    monitor: MonitorSamples | None, shape: LoadShape, router_peak: int | None = None
) -> tuple[float, str]:
    """Peak requests in flight at the server, and where the number came from.

    The larger of the sampled client and router peaks and the router's own exact
    peak: samples every 0.5 s miss short peaks (a barrier wave), and the client
    does not count a resubmitted asample whose first copy the server still holds,
    while the router sees every forward.
    """
    best, note = -1.0, ""
    if monitor is not None:
        t = monitor.samples.get("t")
        for key, label in (("client_in_flight", "client in-flight"), ("router_in_flight", "router in-flight")):
            values = monitor.samples.get(key)
            if values is None or values.size == 0:
                continue
            valid = np.isfinite(values) & (values >= 0)
            if valid.any():
                i = int(np.flatnonzero(valid)[np.argmax(values[valid])])
                if values[i] > best:
                    when = f" at {_s(float(t[i]))}" if t is not None and t.size > i else ""
                    best, note = float(values[i]), f"peak {label} {int(values[i])}{when}"
    if router_peak is not None and router_peak > best:
        best, note = float(router_peak), f"router's exact peak in-flight {router_peak}"
    if best >= 0:
        return best, note
    cap = shape.max_outstanding or shape.requests
    cap = min(cap, shape.requests)
    return float(cap), f"shape cap {cap} (no in-flight samples)"


def _series(monitor: MonitorSamples, key: str) -> tuple[np.ndarray, np.ndarray]:
    values = monitor.samples.get(key)
    t = monitor.samples.get("t")
    if values is None or values.size == 0:
        return np.empty(0), np.empty(0)
    valid = np.isfinite(values) & (values >= 0)
    t = t[valid] if t is not None and t.size == values.size else np.full(int(valid.sum()), np.nan)
    return values[valid], t


# -- no lost results -----------------------------------------------------------------

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
    ``no_collapse``. Gave up / failed / never finished
    (pending, unless the trial was interrupted) is a loss unless the request was
    in flight ([submit start, done]) while a fault of a fatal kind was in force.
    A corrupt result arrived, so it is left to ``result_integrity``; a request
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
    unfinished = 0
    if inputs.interrupted:
        pending = open_ & (outcome == Outcome.PENDING)
        unfinished = int(pending.sum())
        open_ &= ~pending
    fatal = _windows(inputs.faults, lambda f: _is_fatal(f, inputs.fatal_fault_kinds))
    explained, fatal_labels = _overlaps(history, fatal, among=open_)
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
    if unfinished:
        notes.append(f"{unfinished} unfinished (trial interrupted)")
    if int(corrupt.sum()):
        notes.append(f"{int(corrupt.sum())} corrupt (see result_integrity)")
    if rejected:
        notes.append(f"{rejected} never accepted (see accepted_requests)")
    tail = ("; " + "; ".join(notes)) if notes else ""
    if n_lost:
        idx = _ordered(history, lost)
        items = [_what(history, int(i)) for i in idx[:DETAIL_ITEMS]]
        return Verdict(name, False, n_lost, 0, f"{n_lost} lost of {n_accepted} accepted: {_few(items, n_lost)}{tail}")
    return Verdict(name, True, 0, 0, f"{int((accepted & is_ok).sum())} of {n_accepted} accepted requests OK{tail}")


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
    failed_at = _first_fault_overlapped(history, _windows(inputs.faults))
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


def _first_fault_overlapped(history: History, windows: list[tuple[float, float, Fault]]) -> np.ndarray:
    """Per request, the start of the earliest fault window its [submit, done] span overlapped (inf: none)."""
    start, end = _request_spans(history)
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
    the asample or a poll failed. Nothing accepted is no excuse: a trial whose
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
                         f"{_s(inputs.load_stopped_s)} (not judged)")
            rejected &= ~cut
    fatal = _windows(inputs.faults, lambda f: _is_fatal(f, inputs.fatal_fault_kinds))
    explained, fatal_labels = _overlaps(history, fatal, among=rejected, spans=_request_spans(history, "submit_end"))
    if explained.any():
        notes.append(f"{int(explained.sum())} rejected while fatal {'/'.join(fatal_labels)} was in force "
                     f"(explained: {_rejection_classes(inputs, explained)})")
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
        idx = _ordered(history, unexplained)
        first = [f"nonce {int(history['nonce'][i])} at {_s(_event_time(history, int(i)))}" for i in idx[:DETAIL_ITEMS]]
        return Verdict(name, False, n_bad, 0,
                       f"{n_bad} of {judged} submitted requests rejected with no fatal fault in force "
                       f"({n_accepted} accepted): {_rejection_classes(inputs, unexplained)}; first "
                       f"{_few(first, n_bad)}{tail}")
    return Verdict(name, True, 0, 0, f"{n_accepted} of {judged} submitted requests accepted{tail}")


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
            item += f" (e.g. {_one_line(example, 160)})"
        items.append(item)
    return _few(items)


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
        idx = _ordered(history, corrupt)
        items = [_what(history, int(i)) for i in idx[:DETAIL_ITEMS]]
        return Verdict(name, False, n_corrupt, 0, f"{n_corrupt} of {arrived} results corrupt: {_few(items, n_corrupt)}")
    return Verdict(name, True, 0, 0, f"{arrived} results all matched their requests")


# -- resources -----------------------------------------------------------------------

def check_bounded_fds(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Peak fds ≤ baseline + fds_slack + fds_per_in_flight × peak in-flight + idle connections; drained ≤ baseline + ε.

    Figure: fds per request in flight, (peak − baseline − idle) / peak in
    flight (at least 1); budget: ``fds_per_in_flight`` + ``fds_slack`` / peak
    in flight, so figure > budget is the peak rule exactly. Idle connections:
    the client's peak of open connections beyond the peak in flight, one fd
    each at the server (the client keeps finished connections for reuse until
    its 5 s idle expiry, as the SDK does).
    Reaching the server's own soft RLIMIT_NOFILE (``monitor.fd_limit``, when
    known) is a violation whatever the budget: from there on every accept and
    every forward fails with "Too many open files". Fds not back near the
    baseline after the drain is a violation too; both are named in the detail.
    """
    name = "bounded_fds"
    monitor = inputs.monitor
    if monitor is None:
        return Verdict(name, None, None, None, "no monitor samples")
    fds, t = _series(monitor, "fds")
    if fds.size == 0:
        return Verdict(name, None, None, None, "no process metrics (server fds not readable)")
    if monitor.baseline is not None and monitor.baseline.fds >= 0:
        baseline, base_note = int(monitor.baseline.fds), "baseline"
    else:
        baseline, base_note = int(fds[0]), "baseline (first sample)"
    in_flight, in_flight_note = _peak_in_flight(monitor, inputs.shape, inputs.router_peak_in_flight)
    in_flight = max(1.0, in_flight)
    connections, _ = _series(monitor, "client_connections_peak")
    idle = max(0, int(connections.max()) - int(in_flight)) if connections.size else 0
    i = int(np.argmax(fds))
    peak, peak_t = int(fds[i]), float(t[i])
    per_in_flight = (peak - baseline - idle) / in_flight
    per_budget = budgets.fds_per_in_flight + budgets.fds_slack / in_flight
    peak_budget = baseline + budgets.fds_slack + budgets.fds_per_in_flight * in_flight + idle
    idle_text = f" + {idle} idle client connections" if idle else ""
    head = (f"{per_in_flight:.2f} fds per request in flight (budget {per_budget:.2f}): peak {peak} fds at "
            f"{_s(peak_t)} vs {base_note} {baseline} + {budgets.fds_slack} + {budgets.fds_per_in_flight:g}×"
            f"{int(in_flight)} in flight ({in_flight_note}){idle_text} = {peak_budget:g}")
    drained = monitor.drained.fds if monitor.drained is not None and monitor.drained.fds >= 0 else None
    drain_budget = baseline + budgets.drain_fds_epsilon
    limit = getattr(monitor, "fd_limit", None)
    soft = int(limit[0]) if limit and limit[0] and limit[0] > 0 else None
    if soft is not None:
        head += f"; fd limit {soft}"
        if peak >= soft:  # the server could not open another socket: a collapse, not a slow leak
            return Verdict(name, False, per_in_flight, per_budget, f"reached the server's fd limit ({soft}): {head}")
    if peak > peak_budget:
        return Verdict(name, False, per_in_flight, per_budget, f"over budget: {head}")
    if drained is None:
        return Verdict(name, None, per_in_flight, per_budget, f"{head}; drained fds not measured")
    drain_text = f"drained {drained} fds vs {baseline} + {budgets.drain_fds_epsilon} = {drain_budget}"
    if drained > drain_budget:
        return Verdict(name, False, per_in_flight, per_budget, f"not back to baseline: {drain_text}; {head}")
    return Verdict(name, True, per_in_flight, per_budget, f"{head}; {drain_text}")


def _result_bytes_per_request(inputs: CheckInputs) -> tuple[float, str]:
    shape = inputs.shape
    formula = float(shape.result_tokens * shape.num_samples * RESULT_BYTES_PER_TOKEN)
    history = inputs.history
    ok = history["outcome"] == Outcome.OK
    observed = float(history["result_bytes"][ok].mean()) if ok.any() else 0.0
    if observed > formula:
        return observed, f"{observed:.0f} B/result observed"
    return formula, f"{shape.result_tokens}×{shape.num_samples}×{RESULT_BYTES_PER_TOKEN} B/result"


def check_bounded_rss(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Peak RSS within a budget of the result bytes in flight; no growth left after drain.

    In-flight result bytes = peak in-flight × result_tokens × num_samples ×
    RESULT_BYTES_PER_TOKEN, or × the mean observed size of a result body when
    that is larger (JSON bodies: the server holds the body it sends).
    At every sample: RSS ≤ baseline + rss_slack_bytes + rss_bytes_per_in_flight_result_byte
    × that + retained × (retained_result_overhead_bytes + the same multiple of a
    result), where retained = results completed within ``retention_window_s``
    (× time scale) before the sample: the server keeps delivered results that
    long by design (SkyRL 0.4.0's retrieved TTL), so they are not a leak.
    Drained ≤ baseline + drain_rss_epsilon_bytes + drain_rss_growth_fraction ×
    (peak − baseline): a Python process keeps much of its freed memory, so by
    default (fraction 1.0) this asks only that RSS stopped growing after load.

    Figure: RSS growth over the baseline in MiB at the sample judged (the
    one furthest over its budget, else the peak); budget: that sample's
    allowed growth in MiB. A drained RSS over its budget is named in the detail.
    """
    name = "bounded_rss"
    monitor = inputs.monitor
    if monitor is None:
        return Verdict(name, None, None, None, "no monitor samples")
    rss, t = _series(monitor, "rss")
    if rss.size == 0:
        return Verdict(name, None, None, None, "no process metrics (server RSS not readable)")
    if monitor.baseline is not None and monitor.baseline.rss >= 0:
        baseline, base_note = int(monitor.baseline.rss), "baseline"
    else:
        baseline, base_note = int(rss[0]), "baseline (first sample)"
    in_flight, in_flight_note = _peak_in_flight(monitor, inputs.shape, inputs.router_peak_in_flight)
    per_request, per_note = _result_bytes_per_request(inputs)
    in_flight_bytes = in_flight * per_request
    mult = budgets.rss_bytes_per_in_flight_result_byte
    # Results the server keeps by design after delivery (its retrieved TTL): at
    # each sample, those completed within the retention window before it.
    done = np.sort(inputs.history["done"][np.isfinite(inputs.history["done"])])
    window = budgets.retention_window_s * inputs.shape.time_scale
    retained = np.searchsorted(done, t, side="right") - np.searchsorted(done, t - window, side="left")
    per_retained = budgets.retained_result_overhead_bytes + mult * per_request
    in_flight_budget = mult * in_flight_bytes + in_flight * budgets.in_flight_request_overhead_bytes
    budget_at = baseline + budgets.rss_slack_bytes + in_flight_budget + retained * per_retained
    over = rss - budget_at
    i = int(np.argmax(over)) if (over > 0).any() else int(np.argmax(rss))
    peak, peak_t, peak_budget = int(rss[i]), float(t[i]), float(budget_at[i])
    head = (f"{'peak' if over[i] <= 0 else 'RSS'} {_mib(peak)} at {_s(peak_t)} vs {base_note} {_mib(baseline)} + "
            f"{_mib(budgets.rss_slack_bytes)} + {_mib(in_flight_budget)} for {int(in_flight)} in flight ({in_flight_note}, {per_note})"
            f" + {int(retained[i])} retained × {_mib(per_retained)} = {_mib(peak_budget)}")
    growth_mib, allowed_mib = (peak - baseline) / MIB, (peak_budget - baseline) / MIB
    if over[i] > 0:
        return Verdict(name, False, growth_mib, allowed_mib, f"over budget: {head}")
    drained = monitor.drained.rss if monitor.drained is not None and monitor.drained.rss >= 0 else None
    if drained is None:
        return Verdict(name, None, growth_mib, allowed_mib, f"{head}; drained RSS not measured")
    growth = max(0, peak - baseline)
    drain_budget = baseline + budgets.drain_rss_epsilon_bytes + budgets.drain_rss_growth_fraction * growth
    drain_text = (f"drained {_mib(drained)} vs {_mib(baseline)} + {_mib(budgets.drain_rss_epsilon_bytes)} + "
                  f"{budgets.drain_rss_growth_fraction:g}×{_mib(growth)} growth = {_mib(drain_budget)}")
    if drained > drain_budget:
        return Verdict(name, False, growth_mib, allowed_mib, f"not back to baseline: {drain_text}; {head}")
    return Verdict(name, True, growth_mib, allowed_mib, f"{head}; {drain_text}")


# -- CPU ------------------------------------------------------------------------------

def server_http_requests(history: History, monitor: MonitorSamples | None) -> int:
    """HTTP requests the server answered in a trial: the client's attempts plus the /healthz probes."""
    attempts = int(history["attempts"].astype(np.int64).sum()) if len(history) else 0
    probes = int(np.asarray(monitor.healthz_t).size) if monitor is not None else 0
    return attempts + probes


def check_bounded_cpu(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Server CPU per HTTP request ≤ server_cpu_ms_per_request + server_cpu_ms_per_result_kib × result KiB.

    The server's CPU (its own /proc counters, first to last monitor sample)
    over the HTTP requests it answered (client attempts + /healthz probes).
    Result KiB is the mean result body per request, spread over its attempts
    (decoding the router's answer and encoding the client's cost in
    proportion). Unknown below ``cpu_min_requests`` requests (the fixed cost
    of an idle loop and the drain dominates) and when a fault took effect (a
    failed forward costs the server a traceback, by design of its logging).
    """
    name = "bounded_cpu"
    monitor = inputs.monitor
    if monitor is None:
        return Verdict(name, None, None, None, "no monitor samples")
    cpu, _ = _series(monitor, "cpu_s")
    if cpu.size < 2:
        return Verdict(name, None, None, None, "no server CPU samples")
    http = server_http_requests(inputs.history, monitor)
    if http < budgets.cpu_min_requests:
        return Verdict(name, None, None, None, f"{http} HTTP requests < cpu_min_requests {budgets.cpu_min_requests}")
    if _windows(inputs.faults):
        return Verdict(name, None, None, None, "faults took effect: CPU per request not judged")
    history = inputs.history
    ok = history["outcome"] == Outcome.OK
    result_kib = float(history["result_bytes"][ok].astype(np.float64).sum()) / 1024.0 / http
    server_ms = 1000.0 * float(cpu[-1] - cpu[0])
    per_request = server_ms / http
    budget = budgets.server_cpu_ms_per_request + budgets.server_cpu_ms_per_result_kib * result_kib
    head = (f"{per_request:.3f} ms of server CPU per HTTP request ({server_ms / 1000:.1f} s over {http} requests, "
            f"{result_kib:.1f} KiB of results each) vs {budgets.server_cpu_ms_per_request:g} + "
            f"{budgets.server_cpu_ms_per_result_kib:g}×{result_kib:.1f} = {budget:.3f} ms")
    if per_request > budget:
        return Verdict(name, False, per_request, budget, f"over budget: {head}")
    return Verdict(name, True, per_request, budget, head)


# -- health --------------------------------------------------------------------------

def _load_window(history: History) -> tuple[float, float] | None:
    starts = history["submit_start"]
    ends = np.concatenate([history["done"], history["submit_end"], starts])
    if len(history) == 0 or not np.isfinite(starts).any():
        return None
    return float(np.nanmin(starts)), float(np.nanmax(ends))


def check_healthz_latency(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """``/healthz`` p99 latency ≤ healthz_p99_s and failures within budget, during load.

    "During load" is [first submit, last request event]; if no probe fell in it
    (a very short trial), all probes are judged. Failed probes count with the
    time they took (up to the prober's timeout). Failures allowed: the larger
    of healthz_max_failures and healthz_failure_fraction × probes. Probes
    from a fault's start to healthz_fault_recovery_s after its end are counted
    in the detail but not judged (see the budget); if every probe fell there
    the verdict is unknown, never ok. Figure: the p99 of the judged probes
    (too many failures is named in the detail).
    """
    name = "healthz_latency"
    monitor = inputs.monitor
    if monitor is None:
        return Verdict(name, None, None, budgets.healthz_p99_s, "no monitor samples")
    t = np.asarray(monitor.healthz_t, dtype=np.float64)
    latency = np.asarray(monitor.healthz_latency_s, dtype=np.float64)
    ok = np.asarray(monitor.healthz_ok, dtype=bool)
    if latency.size == 0:
        return Verdict(name, None, None, budgets.healthz_p99_s, "no /healthz probes")
    window = _load_window(inputs.history)
    where = "over the trial"
    select = np.ones(latency.size, dtype=bool)
    if window is not None:
        during = (t >= window[0]) & (t <= window[1])
        if during.any():
            select, where = during, f"during load {_s(window[0])}-{_s(window[1])}"
        else:
            where = f"over the trial (none during load {_s(window[0])}-{_s(window[1])})"
    recovering = np.zeros(t.size, dtype=bool)
    for w_start, w_end, _ in _windows(inputs.faults, grace_s=budgets.healthz_fault_recovery_s):
        recovering |= (t >= w_start) & (t <= w_end)
    excused = select & recovering
    fault_text = ""
    if excused.any():
        finite_excused = latency[excused][np.isfinite(latency[excused])]
        worst_excused = float(finite_excused.max()) if finite_excused.size else math.inf
        fault_text = (f"; {int(excused.sum())} probes during faults or {budgets.healthz_fault_recovery_s:g}s "
                      f"after not judged (max {worst_excused:.3f}s, {int((~ok[excused]).sum())} failed)")
    select = select & ~recovering
    if not select.any():
        return Verdict(name, None, None, budgets.healthz_p99_s,
                       f"every probe {where} fell during a fault or its recovery allowance{fault_text}")
    t, latency, ok = t[select], latency[select], ok[select]
    n = int(latency.size)
    finite = np.isfinite(latency)
    p99 = float(np.percentile(latency[finite], 99)) if finite.any() else math.inf
    worst = int(np.argmax(np.where(finite, latency, -1.0)))
    failures = int(np.count_nonzero(~ok))
    allowed = max(budgets.healthz_max_failures, math.floor(budgets.healthz_failure_fraction * n))
    head = f"p99 {p99:.3f}s over {n} probes {where} (max {latency[worst]:.3f}s at {_s(float(t[worst]))})"
    fail_times = [_s(float(x)) for x in t[~ok][:DETAIL_ITEMS]]
    fail_text = f"{failures} failed (allowed {allowed})" + (f" at {_few(fail_times, failures)}" if failures else "")
    if p99 > budgets.healthz_p99_s:
        return Verdict(name, False, p99, budgets.healthz_p99_s,
                       f"slow: {head} > {budgets.healthz_p99_s:g}s; {fail_text}{fault_text}")
    if failures > allowed:
        return Verdict(name, False, p99, budgets.healthz_p99_s, f"failing: {fail_text}; {head}{fault_text}")
    return Verdict(name, True, p99, budgets.healthz_p99_s, f"{head}; {fail_text}{fault_text}")


# -- retries -------------------------------------------------------------------------

def check_retry_amplification(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """HTTP attempts per request: mean ≤ attempts_per_request (+ abandoned-poll fraction), max ≤ the max.

    A request costs 2 attempts when nothing goes wrong: one ``asample`` POST and
    one ``retrieve_future`` poll. The shape's abandoned first polls each cost
    one more, so the mean budget is attempts_per_request + abandon fraction.
    Requests whose [submit, done] overlapped any applied fault are expected to
    retry: they are judged against attempts_per_request_max only, and the mean
    is taken over the others. Requests with 0 attempts recorded (never
    submitted) are left out; if none has a count: unknown. Both clients count
    attempts (the SDK client on its own wire, ``faultload.client.sdk_wire``).
    Figure: that mean (attempts per request over the requests that overlapped
    no fault; None when every request overlapped one, and only the max is
    judged); a request over the max is named in the detail. Resets on a
    healthy network are ``unprovoked_resets``.
    """
    name = "retry_amplification"
    history = inputs.history
    shape = inputs.shape
    mean_budget = budgets.attempts_per_request + shape.abandon_polls.fraction
    if len(history) == 0:
        return Verdict(name, None, None, mean_budget, "no requests in the history")
    attempts = history["attempts"].astype(np.int64)
    started = np.isfinite(history["submit_start"]) | (attempts > 0)
    recorded = started & (attempts > 0)
    unrecorded = int(np.count_nonzero(started & (attempts == 0)))
    if not recorded.any():
        return Verdict(name, None, None, mean_budget, f"no attempt counts recorded ({int(started.sum())} requests started)")
    overlapped, labels = _overlaps(history, _windows(inputs.faults), among=recorded)
    calm = recorded & ~overlapped
    idx_max = int(np.flatnonzero(recorded)[np.argmax(attempts[recorded])])
    worst = int(attempts[idx_max])
    max_text = f"max {worst} by {_request(history, idx_max)} at {_s(_event_time(history, idx_max))}"
    notes = []
    n_faulted = int((recorded & overlapped).sum())
    if n_faulted:
        notes.append(f"{n_faulted} overlapping {'/'.join(labels)} judged on max only")
    if unrecorded:
        notes.append(f"{unrecorded} without attempt counts left out")
    tail = ("; " + "; ".join(notes)) if notes else ""
    mean = float(attempts[calm].mean()) if calm.any() else None
    if mean is None:
        head = f"all {int(recorded.sum())} requests overlapped faults (no mean judged); {max_text}"
    else:
        head = (f"mean {mean:.2f} attempts over {int(calm.sum())} requests (baseline 2, budget {mean_budget:g}); "
                f"{max_text}")
    if worst > budgets.attempts_per_request_max:
        over = recorded & (attempts > budgets.attempts_per_request_max)
        items = [f"{_request(history, int(i))} {int(attempts[i])}" for i in _ordered(history, over)[:DETAIL_ITEMS]]
        return Verdict(name, False, mean, mean_budget,
                       f"{int(over.sum())} requests over {budgets.attempts_per_request_max} attempts: "
                       f"{_few(items, int(over.sum()))}; {head}{tail}")
    head += f" ≤ {budgets.attempts_per_request_max}"
    if mean is not None and mean > mean_budget:
        return Verdict(name, False, mean, mean_budget, f"amplified: {head}{tail}")
    return Verdict(name, True, mean, mean_budget, f"{head}{tail}")


def check_unprovoked_resets(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """HTTP attempts reset or refused on a healthy network ≤ ``unprovoked_resets_max``.

    Counts attempts that ended in a connection reset or a failed connect
    while no fault was in force (nor ``log_fault_grace_s`` after one). Such a
    reset is the server closing a connection the client was entitled to reuse
    (a keep-alive shorter than the client's idle expiry) or refusing connects
    (an accept backlog overflowing). Attempts that ended after the harness
    stopped the load (``load_stopped_s``: a collapse called, Ctrl-C) are not
    counted: the harness cut them off. Unknown without an attempt log (both
    clients keep one). Figure: that count.
    """
    name = "unprovoked_resets"
    history = inputs.history
    budget = budgets.unprovoked_resets_max
    n_attempts = int(history.attempts["row"].size) if len(history) else 0
    if n_attempts == 0:
        return Verdict(name, None, None, budget, f"no attempt log ({len(history)} requests)")
    windows = _windows(inputs.faults, grace_s=budgets.log_fault_grace_s)
    count, text = _unprovoked_resets(history, windows, inputs.load_stopped_s)
    labels = "/".join(dict.fromkeys(_fault_label(f) for _, _, f in windows))
    scope = f"over {n_attempts} attempts" + (
        f", those during {labels} or {budgets.log_fault_grace_s:g}s after not counted" if windows else "")
    if count > budget:
        return Verdict(name, False, count, budget,
                       f"{count} attempts reset or refused with no fault in force (budget {budget}): {text}; {scope}")
    if count:
        return Verdict(name, True, count, budget, f"{count} unprovoked resets ≤ {budget}: {text}; {scope}")
    return Verdict(name, True, 0, budget, f"no attempt reset or refused with no fault in force, {scope}")


def _unprovoked_resets(history: History, windows: list[tuple[float, float, Fault]],
                       load_stopped_s: float | None = None) -> tuple[int, str]:
    """Attempts that ended in a reset or connect error outside every fault window, before the
    harness stopped the load; (count, detail)."""
    attempts = history.attempts
    if attempts["row"].size == 0:
        return 0, ""
    status = attempts["status"].astype(np.int64)
    failed = (status == -int(ErrorClass.RESET)) | (status == -int(ErrorClass.CONNECT))
    start = attempts["start"].astype(np.float64)
    end = attempts["end"].astype(np.float64)
    inside = np.zeros(status.size, dtype=bool)
    for w_start, w_end, _ in windows:
        inside |= (start <= w_end) & (end >= w_start)
    out = failed & ~inside
    if load_stopped_s is not None:
        out &= end < load_stopped_s
    n = int(out.sum())
    if not n:
        return 0, ""
    resets = int((out & (status == -int(ErrorClass.RESET))).sum())
    first = int(np.flatnonzero(out)[np.argmin(end[out])])
    row = int(attempts["row"][first])
    text = (f"{resets} resets, {n - resets} connect errors; first at {_s(float(end[first]))} "
            f"({AttemptKind(int(attempts['kind'][first])).name.lower()} of {_request(history, row)})")
    return n, text


# -- server log ----------------------------------------------------------------------

def check_clean_server_log(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """No error lines in the server log, unless every one was written while a fault was active.

    An error counts as during a fault when its log time, mapped to trial
    seconds with ``trial_start_epoch``, falls in [applied, removed +
    log_fault_grace_s] of a fault that took effect, or when it names
    (``request_id=N``) a request that was in flight while a fault was in
    force. The second rule is needed because the server writes each failure
    when its handler gets the event loop back: after a router crash SkyRL
    0.4.0 prints one Rich traceback per failed forward (0.1-0.3 s each), so
    the last of 50 failures is written ~8 s after the crash although every
    one was caused by it. With faults injected but no way to map the log's
    times (no start epoch, or lines without timestamps) the verdict is
    unknown; so it is for a log of no lines (nothing was read, as for a
    ``url=`` target: an empty log is not a clean one). Classes matching
    ``clean_log_allow`` are ignored.
    """
    name = "clean_server_log"
    log = inputs.server_log
    if log is None:
        return Verdict(name, None, None, 0, "no server log")
    if log.lines == 0:  # nothing was read (a url= target's log is not faultload's): not "clean"
        return Verdict(name, None, None, 0, "no server log lines to read (a url= target's log is not followed)")
    patterns = [re.compile(p) for p in budgets.clean_log_allow]
    classes = [c for c in log.classes.values() if not any(p.search(c.name) or p.search(c.example) for p in patterns)]
    allowed = sum(c.count for c in log.classes.values()) - sum(c.count for c in classes)
    allowed_note = f"; {allowed} allowed by clean_log_allow" if allowed else ""
    total = sum(c.count for c in classes)
    if total == 0:
        return Verdict(name, True, 0, 0, f"no error lines in {log.lines} log lines{allowed_note}")

    def summary(counts: dict[str, int]) -> str:
        items = []
        for c in classes:
            if counts.get(c.name):
                items.append(f"{c.name} ×{counts[c.name]}: {c.example[:160]}")
        return _few(items, len(items))

    all_counts = {c.name: c.count for c in classes}
    windows = _windows(inputs.faults, grace_s=budgets.log_fault_grace_s)
    if not windows:
        return Verdict(name, False, total, 0, f"{total} error lines with no fault injected: {summary(all_counts)}")
    start_epoch = inputs.trial_start_epoch
    if start_epoch is None and inputs.faults is not None:
        start_epoch = inputs.faults.trial_start_epoch
    if start_epoch is None:
        return Verdict(name, None, total, 0,
                       f"faults were active; log not attributable (no trial start time): {summary(all_counts)}")
    outside: dict[str, int] = {}
    first_outside: list[float] = []
    untimed = 0
    faulted_ids = _faulted_server_ids(inputs.history, _windows(inputs.faults))
    by_request = 0
    for c in classes:
        trial_t = np.asarray(c.times, dtype=np.float64) - start_epoch
        inside = np.zeros(trial_t.size, dtype=bool)
        for w_start, w_end, _ in windows:
            inside |= (trial_t >= w_start) & (trial_t <= w_end)
        if faulted_ids.size and c.request_ids.size == trial_t.size:
            named = ~inside & np.isin(c.request_ids, faulted_ids)
            by_request += int(np.count_nonzero(named))
            inside |= named
        n_out = int(np.count_nonzero(~inside))
        if n_out:
            outside[c.name] = n_out
            first_outside.append(float(trial_t[~inside][0]))
        untimed += c.untimed
    labels = "/".join(dict.fromkeys(_fault_label(f) for _, _, f in windows))
    if outside:
        n_out = sum(outside.values())
        return Verdict(name, False, n_out, 0,
                       f"{n_out} of {total} error lines outside fault windows ({labels}), first at "
                       f"{_s(min(first_outside))}: {summary(outside)}{allowed_note}")
    if untimed:
        return Verdict(name, None, untimed, 0,
                       f"faults were active; log not attributable: {untimed} error lines without timestamps: "
                       f"{summary(all_counts)}")
    by_request_note = f" ({by_request} by the request they name)" if by_request else ""
    return Verdict(name, True, 0, 0,
                   f"{total} error lines, all while faults were active{by_request_note} ({labels}): "
                   f"{summary(all_counts)}{allowed_note}")


def _faulted_server_ids(history: History, windows: list[tuple[float, float, Fault]]) -> np.ndarray:
    """Server ids of the requests in flight while a fault was in force (sorted, unique, known ids only)."""
    if not windows or len(history) == 0:
        return np.empty(0, dtype=np.int64)
    hit, _ = _overlaps(history, windows)
    ids = history["server_id"][hit]
    return np.unique(ids[ids != 0])


# -- composition ---------------------------------------------------------------------

CHECKERS: tuple[tuple[str, Checker], ...] = (
    ("no_lost_results", check_no_lost_results),
    ("accepted_requests", check_accepted_requests),
    ("result_integrity", check_result_integrity),
    ("bounded_fds", check_bounded_fds),
    ("bounded_rss", check_bounded_rss),
    ("healthz_latency", check_healthz_latency),
    ("bounded_cpu", check_bounded_cpu),
    ("retry_amplification", check_retry_amplification),
    ("unprovoked_resets", check_unprovoked_resets),
    ("clean_server_log", check_clean_server_log),
)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_all(
    inputs: CheckInputs,
    budgets: Budgets,
    checkers: Sequence[tuple[str, Checker]] = CHECKERS,
) -> list[Verdict]:
    """Run every checker; one that raises (or returns something else than a Verdict) gives ok=None."""
    verdicts = []
    for name, checker in checkers:
        try:
            verdict = checker(inputs, budgets)
            if not isinstance(verdict, Verdict) or verdict.ok not in (True, False, None):
                raise TypeError(f"returned {verdict!r} instead of a Verdict")
            verdict = Verdict(name, verdict.ok, verdict.figure, verdict.budget, _one_line(verdict.detail, 1000))
        except Exception as exc:  # a crashing checker is "unknown", never "ok"
            verdict = Verdict(name, None, None, None, _one_line(f"checker crashed: {type(exc).__name__}: {exc}"))
        verdicts.append(verdict)
    return verdicts


def overall(verdicts: Iterable[Verdict]) -> bool | None:
    """False if any verdict is violated, else None if any is unknown, else True (Jepsen's merge)."""
    result: bool | None = True
    for verdict in verdicts:
        if verdict.ok is False:
            return False
        if verdict.ok is None:
            result = None
    return result


def to_report(verdicts: Iterable[Verdict]) -> list[dict[str, Any]]:
    """``[{name, ok, figure, budget, detail}]``, JSON-ready (NaN/inf figures become null)."""
    return [v.to_dict() for v in verdicts]
