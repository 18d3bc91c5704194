"""The training path's invariants, judged only for a trial that ran a training mix (``CheckInputs.training``).

* ``training_futures`` — every training call (create_model, forward_backward,
  optim_step) accepted by the server ends with its own result: none lost (404),
  failed, corrupted (the null backend's logprobs are a function of the request)
  or left unfinished, unless it ended in a definite error while a fatal fault
  was in force (never answering is no such end: ``checker/contract/faults.py``)
  or the trial was stopped first (then unfinished, named, not lost). A call
  never accepted while no fault was in force counts too: a trainer that cannot
  submit is a trainer that cannot train.
* ``heartbeats_answered`` — no session goes longer than ``heartbeat_gap_s``
  (real seconds) between answered heartbeats (the SDK warns after 120 s;
  SkyRL expires a session after 300 s), and no heartbeat fails but one that
  timed out (the SDK's 10 s, real) within such a short gap, or one a fault in
  force explains (``checker/contract/heartbeats.py``). The detail names
  the server log's pool-exhaustion and database-lock lines when there are any,
  which is what starves a heartbeat on a server with a small DB pool.

A trial without a training mix gets neither verdict (``checkers_for``): they
are not reported as ok for something never judged.
"""

from __future__ import annotations

import math

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.common import overlaps
from faultload.checker.contract.faults import fatal_windows, in_force_windows
from faultload.checker.contract.heartbeats import tolerated_timeouts
from faultload.checker.contract.retention import model_forgotten
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.record.history import ErrorClass, Outcome
from faultload.record.training import TrainingLog, TrainingOp

# The server-log classes that explain a starved heartbeat or a failed training call.
# pool_exhausted is faultload's own record of checkouts that waited (targets/skyrl_dbpool.py): below
# SQLAlchemy's 30 s pool timeout the server writes nothing, and 0.3.0 swallows even that timeout.
STARVATION_CLASSES = ("pool_exhausted", "pool_timeout", "db_locked")


def _spans(log: TrainingLog) -> tuple[np.ndarray, np.ndarray]:
    end = np.where(np.isnan(log["done"]), np.inf, log["done"])
    return log["start"], end


def _starvation_note(inputs: CheckInputs) -> str:
    summary = inputs.server_log
    if summary is None:
        return ""
    found = {**summary.notes, **summary.classes}  # pool_exhausted is a note: faultload's observer wrote it
    parts = [
        f"{found[name].count} {name} lines (first: {found[name].example[:200]})"
        for name in STARVATION_CLASSES
        if name in found
    ]
    return ("; server log: " + ", ".join(parts)) if parts else ""


def _first_examples(log: TrainingLog, ops: tuple[TrainingOp, ...]) -> str:
    keys = [k for k in log.examples if k.split(":")[0] in {op.key for op in ops}]
    return ("; first: " + log.examples[keys[0]]) if keys else ""


def check_training_futures(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Every training call (create_model, forward_backward, optim_step) ends with its own result, or as a fault allows.

    A call lost (404), failed, corrupt or never answered counts, unless the
    load was stopped first, it ended in a definite error while a fault declared
    fatal was in force (never answering is no such end), or a fatal
    ``server:restart`` took its model; a call refused while a fault was in force
    is the fault's. Figure: training calls without their own result; budget 0.
    Unknown without a training call.
    """
    log = inputs.training
    if log is None:
        return Verdict(ok=None, figure=None, budget=0, head="no training log")
    calls = np.isin(log["op"], (TrainingOp.CREATE_MODEL, TrainingOp.FORWARD_BACKWARD, TrainingOp.OPTIM_STEP))
    if not calls.any():
        return Verdict(ok=None, figure=None, budget=0, head="no training call was made")
    outcome = log["outcome"]
    bad = calls & (outcome != Outcome.OK)
    pending = bad & (outcome == Outcome.PENDING)
    unfinished = int(pending.sum()) if inputs.interrupted else 0
    if inputs.interrupted:
        bad &= ~pending
    # a damaged result is never a fault's excuse, nor silence (a call never answered: contract/faults.py)
    definite = bad & (outcome != Outcome.CORRUPT) & (outcome != Outcome.PENDING)
    excused, _ = overlaps(log, fatal_windows(inputs), among=definite, spans=_spans(log))
    excused |= model_forgotten(inputs, definite).rows
    rejected = bad & (outcome == Outcome.REJECTED)
    during_fault, _ = overlaps(log, in_force_windows(inputs), among=rejected, spans=_spans(log))
    bad &= ~excused & ~during_fault
    counts = {o.name.lower(): int((bad & (outcome == o)).sum()) for o in Outcome if (bad & (outcome == o)).any()}
    figure = int(bad.sum())
    ops = (TrainingOp.CREATE_MODEL, TrainingOp.FORWARD_BACKWARD, TrainingOp.OPTIM_STEP)
    detail = (
        f"{figure} of {int(calls.sum())} training calls did not end with their own result"
        + (f" ({', '.join(f'{n} {k}' for k, n in counts.items())})" if counts else "")
        + (f"; {int(excused.sum())} excused by a fatal fault" if excused.any() else "")
        + (f"; {unfinished} unfinished when the load stopped" if unfinished else "")
    )
    if figure:
        detail += _starvation_note(inputs) + _first_examples(log, ops)
    return Verdict(ok=figure == 0, figure=figure, budget=0, head=detail)


def check_heartbeats_answered(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """The contract's heartbeat rules (``contract/heartbeats.py``): no heartbeat failed but a timeout within a
    short gap or what a fault in force did, and no session's gap over ``heartbeat_gap_s``.

    Figure: heartbeats failed outside faults and not tolerated (a gap over the budget is named in the detail);
    budget 0.
    """
    log = inputs.training
    if log is None:
        return Verdict(ok=None, figure=None, budget=0, head="no training log")
    beats = log.of(TrainingOp.HEARTBEAT)
    if not beats.any():
        return Verdict(ok=None, figure=None, budget=0, head="no heartbeat was due while the sessions were open")
    failed = beats & (log["outcome"] != Outcome.OK)
    spans = (log["start"], log["accepted"])
    during_fault, _ = overlaps(log, in_force_windows(inputs), among=failed, spans=spans)
    gap_budget = budgets.heartbeat_gap_s  # real seconds, like the heartbeat's own timeout
    gaps = _gaps(log, beats)
    tolerated = tolerated_timeouts(log, failed & ~during_fault, gaps, gap_budget)
    counted = failed & ~during_fault & ~tolerated.rows
    gap = max(gaps.values(), default=0.0)
    latency = (log["accepted"] - log["start"])[beats]
    timeouts = int((counted & (log["error"] == ErrorClass.TIMEOUT)).sum())
    ok = not counted.any() and gap <= gap_budget
    detail = (
        f"{int(counted.sum())} of {int(beats.sum())} heartbeats failed ({timeouts} timed out)"
        + (f", {int(during_fault.sum())} more while a fault was in force" if during_fault.any() else "")
        + (f", {tolerated.note}" if tolerated.note else "")
        + f"; answer p99 {np.nanpercentile(latency, 99):.2f}s max {np.nanmax(latency):.2f}s; longest gap between "
        f"answered heartbeats {gap:.1f}s (budget {gap_budget:.0f}s)"
    )
    if not ok:
        detail += _starvation_note(inputs) + _first_examples(log, (TrainingOp.HEARTBEAT,))
    return Verdict(ok=ok, figure=int(counted.sum()), budget=0, head=detail)


def _gaps(log: TrainingLog, beats: np.ndarray) -> dict[int, float]:
    """Trainer -> the longest it went without an answered heartbeat, from its first beat's start on."""
    gaps: dict[int, float] = {}
    for trainer in np.unique(log["trainer"][beats]).tolist():
        mine = beats & (log["trainer"] == trainer)
        answered = np.sort(log["accepted"][mine & (log["outcome"] == Outcome.OK)])
        last = float(np.nanmax(log["accepted"][mine])) if np.isfinite(log["accepted"][mine]).any() else math.nan
        marks = np.concatenate([[float(np.nanmin(log["start"][mine]))], answered, [last]])
        marks = marks[np.isfinite(marks)]
        gaps[int(trainer)] = float(np.max(np.diff(marks))) if marks.size > 1 else 0.0
    return gaps


TRAINING_CHECKERS = (
    ("training_futures", check_training_futures),
    ("heartbeats_answered", check_heartbeats_answered),
)
