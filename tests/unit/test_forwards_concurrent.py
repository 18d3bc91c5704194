"""``forwards_concurrent``: the router's peak against what the server owed it at once, on hand-built histories.

Nothing runs: a history of ``n`` requests all accepted at 0-0.5 s and completed by the router at 10 s (so all
``n`` are owed at once), judged with a router peak the test chooses.
"""

from __future__ import annotations

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.contract.forwards import owed_forwards_peak
from faultload.checker.forwards import check_forwards_concurrent
from faultload.model.faults import Fault
from tests.invariant_doubles import applied, fault_log, make_history, make_inputs

BUDGETS = Budgets()


def _inputs(n: int, router_peak: int | None, **changes):
    h = make_history(n)
    h["submit_end"][:] = np.linspace(0.0, 0.5, n)
    completed = {int(nonce): 10.0 for nonce in h["nonce"]}
    return make_inputs(history=h, router_completed_s=completed, router_peak_in_flight=router_peak, **changes)


def test_the_peak_owed_counts_accepted_requests_the_router_had_not_completed() -> None:
    inputs = _inputs(300, 300)
    assert owed_forwards_peak(inputs) == 300
    h = inputs.history
    h["submit_end"][:] = np.arange(300) * 1.0  # one a second, each completed 10 s after t=0: at most 10 owed at once
    completed = {int(nonce): float(i) + 10.0 for i, nonce in enumerate(h["nonce"])}
    assert owed_forwards_peak(make_inputs(history=h, router_completed_s=completed)) == 10


def test_a_router_that_saw_what_was_owed_holds_and_a_ceiling_is_violated() -> None:
    assert check_forwards_concurrent(_inputs(2048, 2048), BUDGETS).ok is True
    v = check_forwards_concurrent(_inputs(2048, 100), BUDGETS)
    assert v.ok is False and v.figure < 0.05 and "router peak in flight 100 of 2048" in v.detail


def test_the_configured_cap_is_what_the_server_owes_at_most() -> None:
    v = check_forwards_concurrent(_inputs(2048, 400, forwarding_cap=400), BUDGETS)
    assert v.ok is True and "forwarding cap 400" in v.detail


def test_unknown_when_the_router_answers_before_the_servers_own_queue_to_send_is_behind_it() -> None:
    """An immediate router (as size_flood's): what is owed is the server's sending queue, no ceiling."""
    v = check_forwards_concurrent(_inputs(2048, 3, router_least_hold_s=0.0), BUDGETS)
    assert v.ok is None and "router_holds_briefly" in v.detail
    assert check_forwards_concurrent(_inputs(2048, 3, router_least_hold_s=10.0), BUDGETS).ok is False
    assert check_forwards_concurrent(_inputs(2048, 3, router_least_hold_s=1.0), BUDGETS).ok is False  # the default
    assert check_forwards_concurrent(_inputs(2048, 3, router_least_hold_s=None), BUDGETS).ok is False  # a barrier


def test_unknown_when_small_not_our_router_or_a_fault_on_the_forwards_path() -> None:
    assert check_forwards_concurrent(_inputs(100, 10), BUDGETS).ok is None  # under forwarding_min_owed
    assert check_forwards_concurrent(_inputs(2048, None), BUDGETS).ok is None
    down = fault_log(applied(Fault("backend", "down", start_s=1.0, duration_s=2.0), 1.0, 3.0))
    v = check_forwards_concurrent(_inputs(2048, 100, faults=down), BUDGETS)
    assert v.ok is None and "backend:down" in v.detail
    edge = fault_log(applied(Fault("edge", "latency", {"latency": 100}, start_s=1.0, duration_s=2.0), 1.0, 3.0))
    assert check_forwards_concurrent(_inputs(2048, 100, faults=edge), BUDGETS).ok is False
