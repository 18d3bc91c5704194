"""Did each accepted sample reach the router once, and all at once: ``forwarded_once``, ``forwards_concurrent``.

Both are views of the futures contract's forwarding rules (``checker/contract/forwards.py``).
"""

from __future__ import annotations

from faultload.checker.budgets import Budgets
from faultload.checker.common import ordered
from faultload.checker.contract.forwards import (
    FORWARD_PATH_FAULT,
    FORWARDS_AT_ONCE,
    FORWARDS_BY_DESIGN,
    ROUTER_HOLDS_BRIEFLY,
    forward_path_faults,
    owed_forwards_peak,
    repeated_forwards,
)
from faultload.checker.contract.rules import cases_of
from faultload.checker.inputs import CheckInputs, RuleCase, Verdict
from faultload.checker.wording import DETAIL_ITEMS, few, request_label


def check_forwarded_once(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """No prompt completed by the router more than once unless its first answer could have been lost.

    Figure: requests whose prompt the router completed again with no fault
    on the forward's path and no resubmission; budget 0. Unknown when the
    router's completions were not counted (a server someone else started)
    or there were no requests.
    """
    history = inputs.history
    if len(history) == 0:
        return Verdict(ok=None, figure=None, budget=0, head="no requests in the history")
    if inputs.router_repeats is None:
        return Verdict(
            ok=None, figure=None, budget=0, head="the router's completions were not counted (not our router)"
        )
    broken, allowed, completions = repeated_forwards(inputs, budgets.log_fault_grace_s)
    notes_said, cases = (f"{allowed.note} ({allowed.rule.name})",) if allowed.note else (), cases_of(allowed)
    if broken.count:
        items = [
            f"{request_label(history, i)} completed {completions[i]}x"
            for i in ordered(history, broken.rows)[:DETAIL_ITEMS].tolist()
        ]
        return Verdict(
            ok=False,
            figure=broken.count,
            budget=0,
            head=f"{broken.count} of {len(history)} prompts completed by the router more than once with no "
            f"fault that could lose an answer and no resubmission: {few(items, broken.count)}",
            notes=notes_said,
            cases=cases,
        )
    return Verdict(
        ok=True,
        figure=0,
        budget=0,
        head=f"{len(history)} prompts, none completed twice for nothing",
        notes=notes_said,
        cases=cases,
    )


def check_forwards_concurrent(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """The server forwards what it owes at once, up to its configured forwarding connections.

    A server that accepted N samples and has not had their results owes the
    router N forwards; its configuration says how many it may hold open at
    once (SkyRL's ``forwarding_inference_max_connections``: none by default).
    A lower ceiling of its own (a connector's default pool, a semaphore)
    queues the rest inside the server, where no timer of the contract sees
    them. Figure: the router's exact peak in flight over ``min(peak owed,
    configured cap)``; budget ``forwarding_concurrency_share``. Unknown when
    the router is not ours, fewer than ``forwarding_min_owed`` were owed at
    once (a small trial cannot tell a ceiling from its own size), the router
    held each forward less than ``forwarding_min_hold_s`` (the server's own
    sending queue is then all it owes), or a fault on the forward's path
    (backend, router, server) was drawn. A family whose contract forwards
    fewer at a time by design (``forwards_at_once``) is owed that many.
    """
    budget = budgets.forwarding_concurrency_share
    if inputs.router_completed_s is None or inputs.router_peak_in_flight is None:
        return Verdict(
            ok=None, figure=None, budget=budget, head="the router's peak and completions were not seen (not our router)"
        )
    hold = inputs.router_least_hold_s
    if hold is not None and hold < budgets.forwarding_min_hold_s:
        return Verdict(
            ok=None,
            figure=None,
            budget=budget,
            head=f"not judged: the router holds each forward {hold:g} s "
            f"(< forwarding_min_hold_s {budgets.forwarding_min_hold_s:g}; "
            f"{ROUTER_HOLDS_BRIEFLY.name})",
        )
    on_path = forward_path_faults(inputs)
    if on_path:
        return Verdict(
            ok=None,
            figure=None,
            budget=budget,
            head=f"not judged: {', '.join(on_path)} on the forward's path ({FORWARD_PATH_FAULT.name})",
        )
    owed, cap = owed_forwards_peak(inputs), inputs.forwarding_cap
    expected = min(owed, cap) if cap else owed
    if expected < budgets.forwarding_min_owed:
        return Verdict(
            ok=None,
            figure=None,
            budget=budget,
            head=f"{owed} forwards owed at once at most (< forwarding_min_owed "
            f"{budgets.forwarding_min_owed}): too few to see a ceiling",
        )
    design = inputs.contract.forwards_at_once
    by_design = design is not None and design < expected
    if design is not None and by_design:
        expected = design
    share = inputs.router_peak_in_flight / expected
    detail = (
        f"{FORWARDS_AT_ONCE.name}: router peak in flight {inputs.router_peak_in_flight} of {expected} (peak owed {owed}, forwarding "
        f"cap {cap or 'none'}{f', {design} at a time by design' if by_design else ''}) = {share:.2f} (budget >= {budget:g})"
    )
    cases = (RuleCase(FORWARDS_BY_DESIGN.name, owed - expected),) if by_design else ()
    return Verdict(ok=share >= budget, figure=round(share, 3), budget=budget, head=detail, cases=cases)
