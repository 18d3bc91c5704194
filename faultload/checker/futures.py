"""Did every accepted future resolve in time, and was every poll held: ``futures_resolve``, ``polls_held``.

Views of the futures contract (``checker/contract/``): the rules say what a
correct server may do; these verdicts count where the trial broke them.
"""

from __future__ import annotations

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.common import ordered
from faultload.checker.contract.liveness import resolution, resolve_bound_s
from faultload.checker.contract.polls import early_not_yets, hold_s, not_yet, poll_attempts, unwoken_polls
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.checker.wording import DETAIL_ITEMS, few, fmt_s, request_label
from faultload.record.history import TRY_AGAIN


def check_futures_resolve(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Every accepted request ended within the resolve bound of its release (``contract/liveness.py``).

    Figure: requests that ended late or never; budget 0. Requests the
    harness cut off (an interrupt, a collapse stop) and, without the router's
    completion log, requests still open, are indeterminate: counted in the
    detail, not judged. Unknown when nothing was accepted or nothing could be
    judged.
    """
    history = inputs.history
    if len(history) == 0:
        return Verdict(ok=None, figure=None, budget=0, head="no requests in the history")
    res = resolution(inputs, budgets)
    n_accepted = int(res.accepted.sum())
    if n_accepted == 0:
        return Verdict(ok=None, figure=None, budget=0, head=f"0 of {len(history)} accepted (see accepted_requests)")
    skipped = [
        f"{a.count} indeterminate ({a.rule.name}: {a.rule.says.split(':')[0]})" for a in res.indeterminate if a.count
    ]
    judged = n_accepted - sum(a.count for a in res.indeterminate)
    notes_said = tuple(skipped)
    bound = resolve_bound_s(inputs, budgets)
    if judged <= 0:
        return Verdict(ok=None, figure=None, budget=0, head="no accepted request could be judged", notes=notes_said)
    late = res.late.rows
    n_late = int(late.sum())
    if n_late:
        items = []
        for i in ordered(history, late)[:DETAIL_ITEMS].tolist():
            ended = res.ended[i]
            how = f"ended at {fmt_s(ended)}" if np.isfinite(ended) else "never ended"
            items.append(
                f"{request_label(history, i)} {how}, released at {fmt_s(res.release[i])}, bound {res.allowed_s[i]:.1f}s"
            )
        never = int((late & ~np.isfinite(res.ended)).sum())
        return Verdict(
            ok=False,
            figure=n_late,
            budget=0,
            head=f"{n_late} of {judged} accepted requests did not end within the resolve bound "
            f"({never} never ended): {few(items, n_late)}",
            notes=notes_said,
        )
    return Verdict(
        ok=True,
        figure=0,
        budget=0,
        head=f"{judged} accepted requests ended within {bound:.1f}s of their release (plus stalls)",
        notes=notes_said,
    )


def check_polls_held(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Every poll was held until its result or the server's hold time (``contract/polls.py``).

    Figure: polls answered "not yet" (a 408, a try-again) before the hold, plus polls held past their
    result and never answered with it (a lost wake-up); budget 0. Unknown
    without a poll in the attempt log.
    """
    rows, start, end, status = poll_attempts(inputs.history)
    if rows.size == 0:
        return Verdict(ok=None, figure=None, budget=0, head="no poll in the attempt log")
    early = early_not_yets(inputs)
    unwoken = unwoken_polls(inputs, budgets.poll_wake_slack_s, budgets.log_fault_grace_s)
    bad = early.rows | unwoken.rows
    n_bad = int(bad.sum())
    n_not_yet = int(not_yet(status).sum())
    if n_bad:
        idx = np.flatnonzero(bad)
        idx = idx[np.argsort(end[idx], kind="stable")][:DETAIL_ITEMS]
        items = [
            f"{request_label(inputs.history, int(rows[i]))} held {end[i] - start[i]:.2f}s to {fmt_s(end[i])}"
            + {408: " (408)", TRY_AGAIN: " (try-again)"}.get(int(status[i]), "")
            for i in idx.tolist()
        ]
        notes = "; ".join(note for note in (early.note, unwoken.note) if note)
        return Verdict(
            ok=False,
            figure=n_bad,
            budget=0,
            head=f"{notes} (hold {hold_s(inputs):.2f} trial s), of {rows.size} polls: {few(items, n_bad)}",
        )
    return Verdict(
        ok=True,
        figure=0,
        budget=0,
        head=f"{rows.size} polls, {n_not_yet} answered 'not yet', none before the hold "
        f"({hold_s(inputs):.2f} trial s), none held past its result",
    )
