"""Did each accepted sample reach the router once: ``forwarded_once``.

A view of the futures contract's forwarding rules (``checker/contract/forwards.py``).
"""

from __future__ import annotations

from faultload.checker.budgets import Budgets
from faultload.checker.common import DETAIL_ITEMS, few, ordered, request_label
from faultload.checker.contract.forwards import repeated_forwards
from faultload.checker.inputs import CheckInputs, Verdict


def check_forwarded_once(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """No prompt completed by the router more than once unless its first answer could have been lost.

    Figure: requests whose prompt the router completed again with no fault
    on the forward's path and no resubmission; budget 0. Unknown when the
    router's completions were not counted (a server someone else started)
    or there were no requests.
    """
    name = "forwarded_once"
    history = inputs.history
    if len(history) == 0:
        return Verdict(name, None, None, 0, "no requests in the history")
    if inputs.router_repeats is None:
        return Verdict(name, None, None, 0, "the router's completions were not counted (not our router)")
    broken, allowed, completions = repeated_forwards(inputs, budgets.log_fault_grace_s)
    tail = f"; {allowed.note} ({allowed.rule.name})" if allowed.note else ""
    if broken.count:
        items = [f"{request_label(history, i)} completed {completions[i]}x"
                 for i in ordered(history, broken.rows)[:DETAIL_ITEMS].tolist()]
        return Verdict(name, False, broken.count, 0,
                       f"{broken.count} of {len(history)} prompts completed by the router more than once with no "
                       f"fault that could lose an answer and no resubmission: {few(items, broken.count)}{tail}")
    return Verdict(name, True, 0, 0, f"{len(history)} prompts, none completed twice for nothing{tail}")
