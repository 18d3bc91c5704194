"""The futures contract (``faultload.checker.contract``): for every rule, a history that breaks it and one
that keeps it, judged through the verdicts that are its views.

Histories are built by hand (``tests/invariant_doubles.py`` helpers); nothing runs. ``CASES`` maps each rule of
``RULES`` to a pair of functions returning the verdict's ok for (a history the rule does not allow, one it
allows); the last test holds ``CASES`` to exactly ``RULES``, so a new rule cannot land without its pair.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import pytest

from faultload.checker.accepted import check_accepted_requests
from faultload.checker.budgets import MIB, Budgets
from faultload.checker.contract import RULES
from faultload.checker.forwards import check_forwarded_once, check_forwards_concurrent
from faultload.checker.futures import check_futures_resolve, check_polls_held
from faultload.checker.releases import check_releases_results
from faultload.checker.resources import check_bounded_cpu, check_bounded_fds, check_bounded_rss
from faultload.checker.results import check_no_lost_results
from faultload.checker.retries import check_retry_amplification, check_unprovoked_resets
from faultload.model.family import HATCHERY_CONTRACT, SKYRL_CONTRACT, TUFT_CONTRACT, TWINKLE_CONTRACT, ServerContract
from faultload.model.faults import Fault
from faultload.record.history import TRY_AGAIN, AttemptKind, ErrorClass, Outcome
from faultload.record.samples import ProcessSnapshot
from tests.invariant_doubles import (
    BUDGETS,
    CRASH,
    RESET,
    SHAPE,
    N,
    _stalled_monitor,
    applied,
    fault_log,
    make_history,
    make_inputs,
    make_monitor,
    rejected,
    set_row,
    submit_log,
    with_abandoned_polls,
    with_attempts,
)

SCALED = dataclasses.replace(SHAPE, time_scale=0.05)  # poll timeout 2.25 s, backoff cap 1.5 s, hold 15 s
DOWN = Fault("backend", "down", start_s=5.0, duration_s=3.0)
RESTART = Fault("server", "restart", start_s=5.0, duration_s=None)


def _lost(**changes) -> bool | None:
    return check_no_lost_results(make_inputs(**changes), BUDGETS).ok


def _resolve(**changes) -> bool | None:
    return check_futures_resolve(make_inputs(**changes), BUDGETS).ok


# -- retention


def _dropped(completed_at: float, answered_at: float = 20.4) -> bool | None:
    """A poll dropped at 1.2 s (begun 0.95 s), then a 404 at ``answered_at``; retrieved TTL 15 s at 0.05."""
    h = set_row(make_history(), 30, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=answered_at)
    with_abandoned_polls(h, {30: 1.2})
    return _lost(history=h, shape=SCALED, router_completed_s={int(h["nonce"][30]): completed_at})


def test_a_dropped_poll_allows_a_404_only_once_its_retention_window_has_passed() -> None:
    """dropped_poll_delivered's edge: the retrieved TTL (300 SDK s, 15 s at 0.05) runs from the dropped poll's
    start (0.95 s) at the earliest; a 404 at 14.95 s (280 SDK s on) is early, one at 15.95 s is not."""
    assert _dropped(completed_at=1.0, answered_at=14.95) is False
    assert _dropped(completed_at=1.0, answered_at=15.95) is True


def test_a_result_completed_as_its_poll_was_dropped_may_have_gone_out_on_it() -> None:
    """The server sees a drop only once the close has crossed the proxy and reached its loop: a result the router
    completed 0.42 ms after the client dropped its poll (1.2 s) may have been written on the dead connection and
    counted delivered, so its 404 past the retention window is allowed; one completed twice the notice slack
    after the drop was not delivered by that poll, and its 404 is a loss."""
    assert _dropped(completed_at=1.2 + 0.00042) is True
    assert _dropped(completed_at=1.2 + 2 * BUDGETS.drop_notice_slack_s) is False
    exact = dataclasses.replace(BUDGETS, drop_notice_slack_s=0.0)
    h = set_row(make_history(), 30, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=20.4)
    with_abandoned_polls(h, {30: 1.2})
    inputs = make_inputs(history=h, shape=SCALED, router_completed_s={int(h["nonce"][30]): 1.2 + 0.00042})
    assert check_no_lost_results(inputs, exact).ok is False  # the rule as it was: exact order, a false alarm


def _stall(stall: tuple[float, float]) -> bool | None:
    h = set_row(make_history(), 40, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=38.0)
    return _lost(
        history=h, shape=SCALED, monitor=_stalled_monitor(stall), router_completed_s={int(h["nonce"][40]): 9.0}
    )


def _expired(answered_at: float, contract: ServerContract = SKYRL_CONTRACT) -> bool | None:
    h = set_row(make_history(), 40, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=answered_at)
    return _lost(history=h, shape=SCALED, router_completed_s={int(h["nonce"][40]): 0.5}, contract=contract)


def _forgotten(answered_at: float) -> bool | None:
    """Row 40 (accepted at 0.405 s) answered 404 at ``answered_at``; hatchery's created TTL 3600 s is 180 s at 0.05,
    its result written at 0.5 s (no completed or retrieved TTL: only the creation clock can allow the 404)."""
    h = set_row(make_history(), 40, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=answered_at)
    return _lost(history=h, shape=SCALED, router_completed_s={int(h["nonce"][40]): 0.5}, contract=HATCHERY_CONTRACT)


def _past_cap(cap: int) -> bool | None:
    """Row 40 of the history's rows answered 404 with ``N - 41`` submits begun after it was accepted."""
    h = set_row(make_history(), 40, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=5.0)
    return _lost(history=h, contract=dataclasses.replace(HATCHERY_CONTRACT, max_futures=cap))


def _swept(contract: ServerContract) -> bool | None:
    """A server that kept 70 MiB of the 64 MiB it delivered past its release (SkyRL's timer sweep, or a family
    whose sweep waits for registrations)."""
    from tests.unit.test_releases import inputs, monitor

    return check_releases_results(inputs(m=monitor(70 * MIB), contract=contract), Budgets()).ok


def _restart(accepted_at: float) -> bool | None:
    h = set_row(
        make_history(),
        40,
        outcome=Outcome.LOST,
        error=ErrorClass.HTTP_404,
        submit_start=accepted_at - 0.1,
        submit_end=accepted_at,
        done=12.0,
    )
    return _lost(history=h, faults=fault_log(applied(RESTART, 5.0, 7.0)), fatal_fault_kinds=frozenset({"restart"}))


# -- faults


def _fatal(outcome: Outcome) -> bool | None:
    """An accepted request in flight during a fatal backend outage ends as ``outcome``."""
    h = set_row(
        make_history(),
        40,
        outcome=outcome,
        submit_start=4.0,
        submit_end=4.1,
        done=np.nan if outcome == Outcome.PENDING else 8.5,
        error=ErrorClass.SERVER_FAILED,
    )
    inputs = make_inputs(
        history=h,
        faults=fault_log(applied(DOWN, 5.0, 8.0)),
        fatal_fault_kinds=frozenset({"down"}),
        load_stopped_s=120.0,
    )
    return check_no_lost_results(inputs, BUDGETS).ok and check_futures_resolve(inputs, BUDGETS).ok


# -- liveness


def _ended_at(done: float, **changes) -> bool | None:
    """Row 40 accepted at 1.0 s, answered by the router at 1.5 s, ends at ``done`` (NaN: never) at scale 0.05."""
    h = set_row(
        make_history(),
        40,
        submit_start=0.9,
        submit_end=1.0,
        done=done,
        outcome=Outcome.PENDING if np.isnan(done) else Outcome.OK,
    )
    base = dict(history=h, shape=SCALED, router_completed_s={int(h["nonce"][40]): 1.5}, load_stopped_s=120.0)
    return _resolve(**{**base, **changes})


# -- polls


def _polls(
    status: int, held_s: float, completed_at: float = 50.0, contract: ServerContract = SKYRL_CONTRACT
) -> tuple[bool | None, float]:
    """Row 40 polled once and was answered ``status`` after ``held_s``, then got its result: (polls_held, mean)."""
    h = make_history()
    with_attempts(h, (40, AttemptKind.POLL, 2.0 + held_s, status))
    h.attempts["start"][0] = 2.0
    set_row(h, 40, attempts=3)
    inputs = make_inputs(
        history=h, shape=SCALED, router_completed_s={int(h["nonce"][40]): completed_at}, contract=contract
    )
    return check_polls_held(inputs, BUDGETS).ok, check_retry_amplification(inputs, BUDGETS).figure


# -- submits and faults in force


def _rejected(
    fatal: bool,
    submit_end: float = 0.45,
    error: ErrorClass = ErrorClass.HTTP_5XX,
    statuses: list[int] | None = None,
    faults=None,
    **changes,
) -> bool | None:
    """Row 6 rejected (its submit ended at ``submit_end``) during a router crash 0.2-0.5 s."""
    h = rejected(make_history(), [6], error, submit_end=submit_end)
    h = submit_log(h, {6: statuses or [503]})
    kinds = frozenset({"crash"}) if fatal else frozenset()
    faults = faults or fault_log(applied(CRASH, 0.2, 0.5))
    return check_accepted_requests(
        make_inputs(history=h, faults=faults, fatal_fault_kinds=kinds, **changes), BUDGETS
    ).ok


def _unreachable(last_attempt_at: float) -> bool | None:
    """Row 6 gave up on its asample with a connect error; an edge outage lasted 0-24 s."""
    refused = -int(ErrorClass.CONNECT)
    down = Fault("edge", "down", start_s=0.0, duration_s=24.0)
    return _rejected(
        False,
        submit_end=last_attempt_at,
        error=ErrorClass.CONNECT,
        statuses=[refused],
        faults=fault_log(applied(down, 0.0, 24.0)),
    )


def _reset(fault: bool) -> bool | None:
    h = with_attempts(
        make_history(), (3, AttemptKind.POLL, 0.5, -int(ErrorClass.RESET)), (3, AttemptKind.POLL, 0.6, 200)
    )
    faults = fault_log(applied(RESET, 0.2, 0.3)) if fault else None
    return check_unprovoked_resets(make_inputs(history=h, faults=faults), BUDGETS).ok


def _cpu(fault: bool) -> bool | None:
    tight = Budgets(server_cpu_ms_per_request=1.0, server_cpu_ms_per_result_kib=0.0)
    faults = fault_log(applied(RESET, 0.2, 0.3)) if fault else None
    return check_bounded_cpu(make_inputs(history=make_history(1000), monitor=make_monitor(), faults=faults), tight).ok


# -- forwards


def _forwarded(completions: int, faults=None, **row) -> bool | None:
    """Row 30 (submitted at 0.3 s, done at 0.4 s) whose prompt the router completed ``completions`` times."""
    h = set_row(make_history(), 30, **row)
    repeats = {int(h["nonce"][30]): completions} if completions > 1 else {}
    return check_forwarded_once(make_inputs(history=h, faults=faults, router_repeats=repeats), BUDGETS).ok


def _at_once(
    router_peak: int, fault: Fault | None = None, hold_s: float | None = 10.0, contract: ServerContract = SKYRL_CONTRACT
) -> bool | None:
    """2,048 accepted within 0.5 s, all answered by the router at 10 s: all owed at once; the router's peak and
    the least it holds a forward given."""
    from tests.unit.test_forwards_concurrent import _inputs

    faults = fault_log(applied(fault, 1.0, 3.0)) if fault is not None else None
    inputs = _inputs(2048, router_peak, faults=faults, router_least_hold_s=hold_s)
    return check_forwards_concurrent(dataclasses.replace(inputs, contract=contract), BUDGETS).ok


# -- heartbeats


def _beats(last: tuple) -> bool | None:
    """Trainer 0 heartbeats every 10 s from 10 s to 30 s, answered; then ``last`` (start, end, error)."""
    from faultload.checker.training import check_heartbeats_answered
    from faultload.record.training import TrainingOp, TrainingRecorder

    recorder = TrainingRecorder()
    for i in range(1, 4):
        recorder.add(TrainingOp.HEARTBEAT, 0, i, 10.0 * i, 10.0 * i + 0.1, 10.0 * i + 0.1, 1, Outcome.OK)
    start, end, error = last
    ok = error == ErrorClass.NONE
    recorder.add(
        TrainingOp.HEARTBEAT,
        0,
        4,
        start,
        end,
        end if ok else np.nan,
        1,
        Outcome.OK if ok else Outcome.FAILED,
        error,
        200 if ok else (500 if error == ErrorClass.HTTP_5XX else 0),
    )
    return check_heartbeats_answered(make_inputs(training=recorder.log()), BUDGETS).ok


def _pool_drained(contract: ServerContract) -> bool | None:
    """fds and RSS left 50 and 500 MiB over the baseline after the load, every peak within its budget."""
    monitor = make_monitor(drained=ProcessSnapshot(700 * MIB, 90, 5.0))
    inputs = make_inputs(monitor=monitor, contract=contract)
    fds, rss = check_bounded_fds(inputs, BUDGETS), check_bounded_rss(inputs, BUDGETS)
    assert fds.figure <= fds.budget and rss.figure <= rss.budget  # only the drain tells them apart
    return fds.ok if fds.ok == rss.ok else None


CASES: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
    # rule: (a history it does not allow -> violated, one it allows -> held)
    "dropped_poll_delivered": (lambda: _dropped(completed_at=1.5), lambda: _dropped(completed_at=1.0)),
    "stall_not_scaled": (lambda: _stall((40.0, 50.0)), lambda: _stall((10.0, 30.0))),
    "expired_by_design": (lambda: _expired(20.0), lambda: _expired(40.0)),
    "forgotten_after_creation": (lambda: _forgotten(170.0), lambda: _forgotten(181.0)),
    "forgotten_past_cap": (lambda: _past_cap(N - 40), lambda: _past_cap(N - 41)),
    "sweep_on_registration": (
        lambda: _swept(SKYRL_CONTRACT),
        lambda: _swept(dataclasses.replace(SKYRL_CONTRACT, sweep_registrations=1000)),
    ),
    # twinkle-kit on Ray; its worker pool, not the requests, sets what is left
    "worker_pool_drain": (lambda: _pool_drained(SKYRL_CONTRACT), lambda: _pool_drained(TWINKLE_CONTRACT)),
    "restart_forgets": (lambda: _restart(accepted_at=8.0), lambda: _restart(accepted_at=4.5)),
    "fatal_definite_error": (lambda: _fatal(Outcome.PENDING), lambda: _fatal(Outcome.FAILED)),
    "forwards_at_once": (lambda: _at_once(100), lambda: _at_once(2048)),
    "forward_path_fault": (lambda: _at_once(100), lambda: _at_once(100, DOWN)),
    # one forward at a time is a ceiling on SkyRL, hatchery-core's design
    "forwards_by_design": (lambda: _at_once(1), lambda: _at_once(1, contract=HATCHERY_CONTRACT)),
    "router_holds_briefly": (lambda: _at_once(100), lambda: _at_once(100, hold_s=0.0)),
    "futures_resolve": (lambda: _ended_at(np.nan), lambda: _ended_at(4.0)),
    "harness_stopped": (
        lambda: _ended_at(np.nan, interrupted=False),
        lambda: _ended_at(np.nan, interrupted=True, load_stopped_s=10.0),
    ),
    "router_unknown": (lambda: _ended_at(np.nan), lambda: _ended_at(np.nan, router_completed_s=None)),
    # a timed-out poll is discounted (the mean stays the baseline 2) only while the engine had no result
    "long_poll_cycle": (
        lambda: _polls(-int(ErrorClass.TIMEOUT), 2.25, completed_at=1.0)[1] == 2.0,
        lambda: _polls(-int(ErrorClass.TIMEOUT), 2.25)[1] == 2.0,
    ),
    "polls_held": (lambda: _polls(408, 0.05)[0], lambda: _polls(408, 15.0)[0]),
    # a poll that timed out 2.05 s after its result existed was not woken; one that ended 0.75 s after may be
    "polls_woken": (
        lambda: _polls(-int(ErrorClass.TIMEOUT), 2.25, completed_at=2.2)[0],
        lambda: _polls(-int(ErrorClass.TIMEOUT), 2.25, completed_at=3.5)[0],
    ),
    "fatal_rejection": (lambda: _rejected(fatal=False), lambda: _rejected(fatal=True)),
    "edge_unreachable": (lambda: _unreachable(30.0), lambda: _unreachable(15.0)),
    "harness_cut": (
        lambda: _rejected(False, submit_end=0.45, faults=fault_log(), load_stopped_s=1.0),
        lambda: _rejected(False, submit_end=0.45, faults=fault_log(), load_stopped_s=0.4),
    ),
    "fault_in_force": (lambda: _reset(fault=False), lambda: _reset(fault=True)),
    # a request never answered after an edge fault healed at 3 s is late; one whose removal failed still holds it
    "fault_not_healed": (
        lambda: _ended_at(np.nan, faults=fault_log(applied(RESET, 2.0, 3.0))),
        lambda: _ended_at(
            np.nan,
            faults=fault_log(dataclasses.replace(applied(RESET, 2.0, 3.0), remove_error="did not finish within 5.0 s")),
        ),
    ),
    "no_fault_cost": (lambda: _cpu(fault=False), lambda: _cpu(fault=True)),
    "forwarded_once": (lambda: _forwarded(2), lambda: _forwarded(1)),
    # a router crash can lose the first answer; an edge reset (client to server) cannot
    "retried_forward": (
        lambda: _forwarded(2, fault_log(applied(RESET, 0.2, 0.3))),
        lambda: _forwarded(2, fault_log(applied(CRASH, 0.2, 0.5))),
    ),
    "heartbeats_answered": (
        lambda: _beats((40.0, 40.1, ErrorClass.HTTP_5XX)),
        lambda: _beats((40.0, 40.1, ErrorClass.NONE)),
    ),
    # a timeout that ends 20 s after the last answered beat is invisible; one that leaves 160 s is not
    "heartbeat_timeout_tolerated": (
        lambda: _beats((180.0, 190.0, ErrorClass.TIMEOUT)),
        lambda: _beats((40.0, 50.0, ErrorClass.TIMEOUT)),
    ),
}


def test_each_family_is_held_to_its_own_hold_and_its_own_ttls() -> None:
    """At scale 0.05 SkyRL holds a poll 15 s and answers 408, TuFT holds 6 s and answers a try-again: either
    "not yet" before the family's hold is early, after it the long-poll cycle. TuFT keeps results until it
    stops, so a 404 that SkyRL's completed TTL (30 s here) would excuse is a loss there."""
    assert _polls(TRY_AGAIN, 3.0, contract=TUFT_CONTRACT)[0] is False
    assert _polls(TRY_AGAIN, 6.5, contract=TUFT_CONTRACT)[0] is True
    assert _polls(TRY_AGAIN, 6.5, contract=TUFT_CONTRACT)[1] == 2.0  # a full hold is not counted as a retry
    assert _polls(408, 6.5)[0] is False  # SkyRL's hold is 300 SDK s
    assert _polls(TRY_AGAIN, 3.0)[0] is False  # whichever "not yet" a server answers early
    assert _expired(40.0) is True and _expired(40.0, contract=TUFT_CONTRACT) is False


def test_each_family_is_held_to_its_own_cpu_cost_per_request() -> None:
    """4 ms of server CPU per HTTP request is twice what clean SkyRL spends at most, and within what clean TuFT
    (2.4x SkyRL's cost on one machine) spends on a slow one; a budget given applies to either family."""
    h = make_history(1000)  # 2,000 attempts
    monitor = make_monitor()
    cpu = monitor.samples["cpu_s"]
    monitor.samples["cpu_s"] = np.linspace(1.0, 1.0 + 4.0 * (2000 + monitor.healthz_t.size) / 1000, cpu.size)
    skyrl = check_bounded_cpu(make_inputs(history=h, monitor=monitor), BUDGETS)
    tuft = check_bounded_cpu(make_inputs(history=h, monitor=monitor, contract=TUFT_CONTRACT), BUDGETS)
    assert skyrl.figure == pytest.approx(4.0) and tuft.figure == pytest.approx(4.0)
    assert skyrl.ok is False and tuft.ok is True
    given = Budgets(server_cpu_ms_per_request=3.5)
    assert check_bounded_cpu(make_inputs(history=h, monitor=monitor, contract=TUFT_CONTRACT), given).ok is False


@pytest.mark.parametrize("rule", [rule.name for rule in RULES])
def test_each_rule_tells_a_history_it_breaks_from_one_it_keeps(rule: str) -> None:
    breaks, keeps = CASES[rule]
    assert breaks() is False
    assert keeps() is True or (rule in INDETERMINATE and keeps() is None)


# The rules that make a request indeterminate: what they allow is "not judged" (unknown), never "ok".
INDETERMINATE = (
    "sweep_on_registration",
    "harness_stopped",
    "router_unknown",
    "no_fault_cost",
    "forward_path_fault",
    "router_holds_briefly",
)


def test_every_rule_has_a_case_and_every_case_a_rule() -> None:
    assert set(CASES) == {rule.name for rule in RULES}
    assert all(rule.says and rule.why for rule in RULES)


def test_a_hang_under_a_fatal_fault_is_named_never_ended_with_its_release() -> None:
    h = set_row(make_history(), 40, outcome=Outcome.PENDING, submit_start=4.0, submit_end=4.1, done=np.nan)
    inputs = make_inputs(
        history=h,
        shape=SCALED,
        faults=fault_log(applied(DOWN, 5.0, 8.0)),
        fatal_fault_kinds=frozenset({"down"}),
        load_stopped_s=120.0,
    )
    verdict = check_futures_resolve(inputs, BUDGETS)
    assert verdict.ok is False and verdict.figure == 1
    assert (
        "(1 never ended)" in verdict.detail and "nonce 1040" in verdict.detail and "released at 8.0s" in verdict.detail
    )
    lost = check_no_lost_results(inputs, BUDGETS)
    assert lost.ok is False and "never finished" in lost.detail


def test_a_fault_still_in_force_when_the_load_ended_leaves_the_request_unjudged_not_late() -> None:
    h = set_row(make_history(), 99, outcome=Outcome.PENDING, done=np.nan)
    inputs = make_inputs(history=h, faults=fault_log(applied(CRASH, 5.0, None)), load_stopped_s=60.0)
    assert check_futures_resolve(inputs, BUDGETS).ok is True


def test_the_clients_own_late_poll_moves_the_release() -> None:
    """A request whose client re-polls on purpose 400 SDK s after dropping its poll is not late for it."""
    shape = dataclasses.replace(
        SCALED, abandon_polls=dataclasses.replace(SCALED.abandon_polls, fraction=0.5, after_s=400.0)
    )
    h = set_row(make_history(), 40, submit_start=0.9, submit_end=1.0, done=22.0)
    with_abandoned_polls(h, {40: 1.25})
    base = dict(history=h, shape=shape, router_completed_s={int(h["nonce"][40]): 1.5}, load_stopped_s=120.0)
    assert _resolve(**base) is True  # nothing recorded after the drop: the plan's 20 s stands for the re-poll
    assert _resolve(**{**base, "shape": SCALED}) is False  # the same history without the plan is late


def test_a_poll_past_its_result_is_not_judged_while_a_fault_was_in_force_or_the_loop_was_slow() -> None:
    h = make_history()
    with_attempts(h, (40, AttemptKind.POLL, 4.25, -int(ErrorClass.TIMEOUT)))
    h.attempts["start"][0] = 2.0
    base = make_inputs(history=h, shape=SCALED, router_completed_s={int(h["nonce"][40]): 2.2})
    assert check_polls_held(base, BUDGETS).ok is False
    faulted = dataclasses.replace(base, faults=fault_log(applied(RESET, 0.2, 0.3)))  # within the 5 s grace
    assert check_polls_held(faulted, BUDGETS).ok is True
    slow = dataclasses.replace(
        base,
        monitor=make_monitor(healthz_t=np.array([3.0]), healthz_latency=np.array([1.5]), healthz_ok=np.array([True])),
    )
    assert check_polls_held(slow, BUDGETS).ok is True


def test_no_checker_decides_outside_the_contract_which_fault_allows_what() -> None:
    """Only ``checker/contract/`` picks fault windows (``fault_windows``) or reads the fatal kinds (``is_fatal``);
    the checkers take the windows and allowances it gives them."""
    from pathlib import Path

    import faultload.checker as checker_pkg

    root = Path(checker_pkg.__file__).parent
    offenders = [
        f"{path.relative_to(root)}:{n}"
        for path in sorted(root.glob("*.py"))
        if path.name != "common.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "fault_windows(" in line or "is_fatal(" in line or "inputs.fatal_fault_kinds" in line
    ]
    assert offenders == []


def test_the_reference_states_every_rule_as_the_code_does() -> None:
    """docs/reference/invariants.md (written by scripts/reference.py) has a `| name | says | why |` row per rule."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "invariants.md").read_text(encoding="utf-8")
    for rule in RULES:
        says, why = (text.replace("|", r"\|") for text in (rule.says, rule.why))
        assert f"| `{rule.name}` | {says} | {why} |" in page, f"{rule.name}: run python scripts/reference.py"


def test_a_request_already_past_its_bound_when_the_harness_stopped_the_load_is_late_not_indeterminate() -> None:
    """Router answered at 1.5 s; bound 3.75 + 10 s at scale 0.05: overdue from 15.25 s on."""
    assert _ended_at(np.nan, interrupted=True, load_stopped_s=60.0) is False
    h = set_row(make_history(), 40, submit_start=0.9, submit_end=1.0, done=np.nan, outcome=Outcome.PENDING)
    inputs = make_inputs(
        history=h, shape=SCALED, router_completed_s={int(h["nonce"][40]): 1.5}, load_stopped_s=10.0, interrupted=True
    )
    verdict = check_futures_resolve(inputs, BUDGETS)
    assert verdict.ok is True and "1 indeterminate (harness_stopped" in verdict.detail


def test_a_resubmitted_asample_may_reach_the_router_twice_and_uncounted_completions_are_unknown() -> None:
    assert _forwarded(2, submit_retries=1) is True
    h = make_history()
    verdict = check_forwarded_once(make_inputs(history=h, router_repeats={int(h["nonce"][7]): 3}), BUDGETS)
    assert verdict.ok is False and verdict.figure == 1 and "nonce 1007 (id -56) completed 3x" in verdict.detail
    assert check_forwarded_once(make_inputs(router_repeats=None), BUDGETS).ok is None


def test_a_fault_the_injector_could_not_heal_stays_in_force_and_ends_the_load_as_a_harness_error() -> None:
    """fault_not_healed, end to end of the record: the window never closes (the watchdog and the checkers see
    it in force), the load's wait ends at once, and the trial's error names the fault and why."""
    import math

    from faultload.run.gather import unhealed_error
    from faultload.run.watching import wait_load

    stuck = dataclasses.replace(
        applied(RESET, 2.0, 3.0), remove_error="toxiproxy remove_toxic did not finish within 5.0 s"
    )
    log = fault_log(applied(CRASH, 0.2, 0.5, index=1), stuck)
    assert log.unhealed() == (stuck,) and fault_log(applied(RESET, 2.0, 3.0)).unhealed() == ()
    assert [w.end_s for w in log.windows()] == [0.5, math.inf]
    assert not stuck.active_at(1.0) and stuck.active_at(60.0)
    message = unhealed_error(log.unhealed())
    assert "could not heal edge:reset_peer" in message and "did not finish within 5.0 s" in message
    assert "Shopify/toxiproxy#558" in message

    class NeverDone:  # test double: a pool whose load never ends
        def finished(self) -> bool:
            return False

    # the wait checks the injector before anything else: no watchdog, monitor or log is touched
    assert (
        wait_load(NeverDone(), float("inf"), None, None, 1.0, None, None, None, True, harness_failed=lambda: True)
        is False
    )
