"""Invariants on hand-made histories (tests/invariant_doubles.py): no_lost_results, accepted_requests and result_integrity. Each has cases that must hold
and cases that must be violated, and the edge cases."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faultload.checker.accepted import check_accepted_requests
from faultload.checker.contract.retention import stall_spans
from faultload.checker.results import check_no_lost_results, check_result_integrity
from faultload.checker.wording import DETAIL_ITEMS
from faultload.model.family import TUFT_CONTRACT
from faultload.model.faults import Fault
from faultload.record.history import ErrorClass, History, Outcome
from faultload.record.serverlog import classify_log
from tests.invariant_doubles import (
    BUDGETS,
    CLEAN_LOG,
    CRASH,
    NOT_LOADED,
    SHAPE,
    N,
    _stalled_monitor,
    applied,
    fault_log,
    log_time,
    make_history,
    make_inputs,
    make_monitor,
    rejected,
    set_row,
    submit_log,
    with_abandoned_polls,
)

# --------------------------------------------------------------------------- no_lost_results


def test_no_lost_results_holds_when_all_ok() -> None:
    v = check_no_lost_results(make_inputs(), BUDGETS)
    assert v.ok is True and v.figure == 0 and v.budget == 0
    assert "100 of 100" in v.detail


def test_a_404_is_always_a_loss_even_during_a_fatal_fault() -> None:
    h = set_row(make_history(), 30, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=12.3)
    faults = fault_log(applied(CRASH, 0.0, None))
    v = check_no_lost_results(make_inputs(history=h, faults=faults, fatal_fault_kinds=frozenset({"crash"})), BUDGETS)
    assert v.ok is False and v.figure == 1
    assert "nonce 1030 (id -217) 404 at 12.3s" in v.detail


def test_a_404_after_a_poll_dropped_when_the_result_was_there_is_retained_by_design() -> None:
    # Rows 30 and 31 re-polled after the retrieved TTL and got 404. Row 30's
    # result was complete at the router (1.0 s) before its poll was dropped
    # (1.2 s): the server may have answered it. Row 31's result came after
    # the drop: the server kept the clock of a poll nobody was waiting on.
    h = make_history()
    set_row(h, 30, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=20.4)
    set_row(h, 31, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=20.4)
    # (At time scale 0.05 the retrieved TTL is 15 s: both 404s came over 19 s after the dropped poll began.)
    with_abandoned_polls(h, {30: 1.2, 31: 1.2})
    completed = {int(h["nonce"][30]): 1.0, int(h["nonce"][31]): 1.5}
    scaled = dataclasses.replace(SHAPE, time_scale=0.05)
    v = check_no_lost_results(make_inputs(history=h, shape=scaled, router_completed_s=completed), BUDGETS)
    assert v.ok is False and v.figure == 1 and "nonce 1031" in v.detail and "nonce 1030" not in v.detail
    assert "1 404 after a poll dropped when the result was there (or came as it was dropped)" in v.detail
    # without the router's completion times nothing is excused
    assert check_no_lost_results(make_inputs(history=h, shape=scaled), BUDGETS).figure == 2


def test_a_404_sooner_than_the_retention_window_after_a_dropped_poll_is_a_loss() -> None:
    # The retrieved TTL runs from the delivery, which came no earlier than the dropped poll that carried it
    # (began 24.75 s): at time scale 0.05 a correct server keeps the result until 39.75 s at least. Row 30 got
    # its 404 at 37 s, 12.25 s (245 SDK s) later: a TTL shorter than promised, or one measured from the
    # completion (1.0 s). It is past the completed TTL's 30 s, but a result believed delivered is kept its
    # retrieved TTL from that delivery, so the expiry does not excuse it either. Row 31's 404 at 40 s is in time.
    h = make_history()
    set_row(h, 30, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=37.0)
    set_row(h, 31, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=40.0)
    with_abandoned_polls(h, {30: 25.0, 31: 25.0})
    completed = {int(h["nonce"][30]): 1.0, int(h["nonce"][31]): 1.0}
    scaled = dataclasses.replace(SHAPE, time_scale=0.05)
    v = check_no_lost_results(make_inputs(history=h, shape=scaled, router_completed_s=completed), BUDGETS)
    assert v.ok is False and v.figure == 1 and "nonce 1030" in v.detail and "nonce 1031" not in v.detail
    # a family that keeps results until it stops (TuFT) never answers 404 after a dropped poll by design
    v = check_no_lost_results(
        make_inputs(history=h, shape=scaled, router_completed_s=completed, contract=TUFT_CONTRACT), BUDGETS
    )
    assert v.figure == 2


def test_stall_spans_merge_failed_and_slow_probes() -> None:
    spans = stall_spans(_stalled_monitor((10.0, 30.0)), BUDGETS.healthz_p99_s)
    assert spans == [(10.0, 39.5)]
    assert stall_spans(make_monitor(), BUDGETS.healthz_p99_s) == []


def test_a_404_made_by_an_unscaled_server_stall_is_not_a_loss() -> None:
    # At time scale 0.05 a correct server keeps a result 300 SDK s = 15 real s.
    # Row 40's result completed at 9 s and was answered 404 at 38 s: 29 s old,
    # but 28 s of that the loop was stalled, which at full time is still
    # 28 s, so the result would have been 1 / 0.05 + 28 = 48 SDK s
    # old. Row 41 completed at 30 s and was answered 404 at 58 s with the same
    # stall: 18.5 s outside it is 370 SDK s, beyond the window, so a loss.
    # (Both are under the 600 SDK s = 30 real s expiry window.)
    shape = dataclasses.replace(SHAPE, time_scale=0.05)
    h = make_history()
    set_row(h, 40, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=38.0)
    set_row(h, 41, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=58.0)
    completed = {int(h["nonce"][40]): 9.0, int(h["nonce"][41]): 30.0}
    inputs = make_inputs(history=h, shape=shape, monitor=_stalled_monitor((10.0, 30.0)), router_completed_s=completed)
    v = check_no_lost_results(inputs, BUDGETS)
    assert v.ok is False and v.figure == 1 and "nonce 1041" in v.detail and "nonce 1040" not in v.detail
    assert "1 404 after a server stall of up to 28.0 real s" in v.detail
    # no stall, or full time scale: both are losses
    assert check_no_lost_results(dataclasses.replace(inputs, monitor=make_monitor(seconds=60.0)), BUDGETS).figure == 2
    assert check_no_lost_results(dataclasses.replace(inputs, shape=SHAPE), BUDGETS).figure == 2


def test_a_failure_stored_under_a_fault_and_expired_in_the_stall_after_it_is_not_a_loss() -> None:
    # Row 40's forward failed under a backend outage at 9 s (the router never
    # completed it); the server stalled 10-39.5 s writing tracebacks and the
    # stored failure expired: 404 at 40 s. Without a fault it would be a loss.
    shape = dataclasses.replace(SHAPE, time_scale=0.05)
    h = set_row(make_history(), 40, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, submit_start=8.0, done=40.0)
    down = Fault("backend", "down", start_s=9.0, duration_s=0.5)
    inputs = make_inputs(
        history=h, shape=shape, monitor=_stalled_monitor((10.0, 30.0)), faults=fault_log(applied(down, 9.0, 9.5))
    )
    v = check_no_lost_results(inputs, BUDGETS)
    assert v.ok is True and "1 404 after a server stall" in v.detail
    assert check_no_lost_results(dataclasses.replace(inputs, faults=None), BUDGETS).figure == 1


def test_a_404_inside_the_scaled_window_is_a_loss_whatever_the_stall() -> None:
    # 10 s old at scale 0.05 is under the 15 s a correct server keeps a result.
    shape = dataclasses.replace(SHAPE, time_scale=0.05)
    h = set_row(make_history(), 40, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=19.0)
    inputs = make_inputs(
        history=h, shape=shape, monitor=_stalled_monitor((10.0, 30.0)), router_completed_s={int(h["nonce"][40]): 9.0}
    )
    assert check_no_lost_results(inputs, BUDGETS).figure == 1


def test_a_404_for_a_result_older_than_the_expiry_window_is_expired_by_design() -> None:
    # At scale 0.05 the server's completed TTL (600 SDK s) is 30 real s. An
    # edge partition kept rows 40-42 away: row 40's result completed at 0.5 s and
    # was answered 404 at 34 s (33.5 s = 670 SDK s old: expired); row 41's at
    # 20 s, 404 at 34 s (14 s: lost); row 42 completed at 2 s at the router,
    # but a backend fault held its response until 10 s (24 s old: lost).
    shape = dataclasses.replace(SHAPE, time_scale=0.05)
    h = make_history()
    for row in (40, 41, 42):
        set_row(h, row, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=34.0)
    completed = {int(h["nonce"][40]): 0.5, int(h["nonce"][41]): 20.0, int(h["nonce"][42]): 2.0}
    slow = Fault("backend", "latency", {"latency": 9000}, start_s=1.0, duration_s=9.0)
    held = Fault("edge", "down", start_s=1.0, duration_s=32.0)
    faults = fault_log(applied(held, 1.0, 33.0), applied(slow, 1.0, 10.0))
    inputs = make_inputs(history=h, shape=shape, faults=faults, router_completed_s=completed)
    v = check_no_lost_results(inputs, BUDGETS)
    assert v.ok is False and v.figure == 2, v.detail
    assert "nonce 1041" in v.detail and "nonce 1042" in v.detail and "nonce 1040" not in v.detail
    assert "1 404 for results older than the server's expiry when polled (the youngest 670 SDK s" in v.detail
    # a server documented to keep results forever: all three are losses; no completion times: no age, losses
    forever = dataclasses.replace(BUDGETS, expiry_window_s=1e9)
    assert check_no_lost_results(inputs, forever).figure == 3
    assert check_no_lost_results(dataclasses.replace(inputs, router_completed_s=None), BUDGETS).figure == 3


def test_a_404_for_a_failed_forward_older_than_the_expiry_window_is_expired_by_design() -> None:
    """Nightly fixed row 2026-12-01 (shrunk to 1 request): edge:timeout@0.35+36 kept the client away 720 SDK s;
    backend:timeout@2.25+1 failed the forward at 3.3 s (the router never completed it); the failure was stored
    with the completed TTL (600 SDK s = 30 real s at scale 0.05) and the poll at 37.9 s got 404."""
    shape = dataclasses.replace(SHAPE, time_scale=0.05)
    h = make_history()
    for row in (50, 51):
        set_row(h, row, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=37.9)
    failed = "".join(
        f"{log_time(t)} - ERROR - skyrl: Backend-forwarded sample failed (request_id={int(h['server_id'][row])})\n"
        "aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected\n"
        for row, t in ((50, 3.3), (51, 20.0))
    )
    partition = Fault("edge", "timeout", {"timeout": 0}, start_s=0.35, duration_s=36.0)
    inputs = make_inputs(
        history=h,
        shape=shape,
        faults=fault_log(applied(partition, 0.35, 36.35)),
        server_log=classify_log(CLEAN_LOG + failed),
        router_completed_s={},
    )
    v = check_no_lost_results(inputs, BUDGETS)
    assert v.ok is False and v.figure == 1, v.detail  # row 51's failure was 17.9 s (358 SDK s) old: lost
    assert "nonce 1051" in v.detail and "nonce 1050" not in v.detail
    assert "1 404 for results older than the server's expiry when polled (the youngest 672 SDK s" in v.detail
    # without the log line naming it, a failed forward has no known age: both are losses
    assert check_no_lost_results(dataclasses.replace(inputs, server_log=classify_log(CLEAN_LOG)), BUDGETS).figure == 2


def test_the_expiry_window_is_no_shorter_than_the_retention_window() -> None:
    with pytest.raises(ValueError, match="expiry_window_s"):
        dataclasses.replace(BUDGETS, retention_window_s=300.0, expiry_window_s=100.0)


def test_give_up_without_fault_is_a_loss() -> None:
    h = set_row(make_history(), 5, outcome=Outcome.GAVE_UP, error=ErrorClass.RESET, done=0.4)
    v = check_no_lost_results(make_inputs(history=h), BUDGETS)
    assert v.ok is False and v.figure == 1
    assert "nonce 1005 (id -42) gave up (reset) at 0.4s" in v.detail


@pytest.mark.parametrize("kinds", [{"crash"}, {"router:crash"}])
def test_give_up_explained_by_a_fatal_fault(kinds: set[str]) -> None:
    # request 25 runs 0.25..0.35 s; the crash was in force 0.2..0.5 s
    h = set_row(make_history(), 25, outcome=Outcome.GAVE_UP, error=ErrorClass.CONNECT, done=0.35)
    faults = fault_log(applied(CRASH, 0.2, 0.5))
    v = check_no_lost_results(make_inputs(history=h, faults=faults, fatal_fault_kinds=frozenset(kinds)), BUDGETS)
    assert v.ok is True and v.figure == 0
    assert "1 ended during fatal router:crash (explained)" in v.detail


def test_give_up_not_explained_when_the_fault_is_not_fatal_or_elsewhere() -> None:
    h = set_row(make_history(), 25, outcome=Outcome.GAVE_UP, done=0.35)
    crash = fault_log(applied(CRASH, 0.2, 0.5))
    # the shape does not declare the crash fatal
    assert check_no_lost_results(make_inputs(history=h, faults=crash), BUDGETS).ok is False
    # a fatal fault, but not while the request was in flight
    later = fault_log(applied(CRASH, 5.0, 6.0))
    v = check_no_lost_results(make_inputs(history=h, faults=later, fatal_fault_kinds=frozenset({"crash"})), BUDGETS)
    assert v.ok is False
    # a fatal fault whose apply call failed never took effect
    failed = fault_log(applied(CRASH, 0.2, 0.5, error="FaultControlError: router down"))
    v = check_no_lost_results(make_inputs(history=h, faults=failed, fatal_fault_kinds=frozenset({"crash"})), BUDGETS)
    assert v.ok is False


def test_a_fault_lasting_to_the_end_explains_requests_never_done() -> None:
    h = set_row(make_history(), 99, outcome=Outcome.PENDING, done=np.nan)
    faults = fault_log(applied(CRASH, 5.0, None))
    v = check_no_lost_results(make_inputs(history=h, faults=faults, fatal_fault_kinds=frozenset({"crash"})), BUDGETS)
    assert v.ok is True


def test_pending_is_a_loss_unless_the_trial_was_interrupted() -> None:
    h = make_history()
    for i in (97, 98, 99):
        set_row(h, i, outcome=Outcome.PENDING, done=np.nan)
    v = check_no_lost_results(make_inputs(history=h), BUDGETS)
    assert v.ok is False and v.figure == 3 and "never finished" in v.detail
    v = check_no_lost_results(make_inputs(history=h, interrupted=True), BUDGETS)
    assert v.ok is True and "3 unfinished (trial interrupted)" in v.detail


def test_nothing_ended_is_unknown_not_kept() -> None:
    # every accepted request cut off by the trial's wall: no loss seen, but nothing seen kept either
    h = make_history(outcome=Outcome.PENDING, done=np.nan)
    v = check_no_lost_results(make_inputs(history=h, interrupted=True), BUDGETS)
    assert v.ok is None and v.figure is None
    assert v.detail.startswith("none of 100 accepted requests ended within the trial")
    assert "100 unfinished (trial interrupted)" in v.detail
    # one that ended OK is enough to judge the rest as not lost
    set_row(h, 0, outcome=Outcome.OK, done=0.5)
    assert check_no_lost_results(make_inputs(history=h, interrupted=True), BUDGETS).ok is True


def test_retried_asample_is_judged_on_its_final_outcome() -> None:
    # one row: asample accepted after 3 retries (10 attempts in all), then the result arrived
    h = set_row(make_history(), 10, submit_retries=3, attempts=10, transport_errors=3)
    assert check_no_lost_results(make_inputs(history=h), BUDGETS).ok is True
    # the same request finally gave up: one loss, not four
    set_row(h, 10, outcome=Outcome.GAVE_UP, error=ErrorClass.TIMEOUT)
    v = check_no_lost_results(make_inputs(history=h), BUDGETS)
    assert v.ok is False and v.figure == 1 and "nonce 1010" in v.detail


def test_rejected_requests_are_not_losses_and_corrupt_is_left_to_integrity() -> None:
    h = make_history()
    set_row(h, 0, server_id=0, outcome=Outcome.REJECTED, error=ErrorClass.HTTP_5XX)
    set_row(h, 1, outcome=Outcome.CORRUPT, error=ErrorClass.INTEGRITY)
    v = check_no_lost_results(make_inputs(history=h), BUDGETS)
    assert v.ok is True
    assert "1 never accepted (see accepted_requests)" in v.detail and "1 corrupt" in v.detail
    assert check_accepted_requests(make_inputs(history=h), BUDGETS).ok is False


def test_empty_trial_and_nothing_accepted_are_unknown_here_and_violate_accepted_requests() -> None:
    v = check_no_lost_results(make_inputs(history=History.empty(0)), BUDGETS)
    assert v.ok is None
    h = make_history(server_id=0, outcome=Outcome.REJECTED)
    v = check_no_lost_results(make_inputs(history=h), BUDGETS)  # no loss of nothing to judge ...
    assert v.ok is None and v.detail.startswith("0 accepted (see accepted_requests): 100 of 100 never got a server id")
    v = check_accepted_requests(make_inputs(history=h), BUDGETS)  # ... the verdict is accepted_requests'
    assert v.ok is False and v.figure == 100


def test_all_failed() -> None:
    h = make_history(outcome=Outcome.FAILED, error=ErrorClass.SERVER_FAILED)
    v = check_no_lost_results(make_inputs(history=h), BUDGETS)
    assert v.ok is False and v.figure == N
    assert v.detail.startswith("100 lost of 100 accepted: nonce 1000 (id -7) failed (server_failed) at 0.1s")
    assert v.detail.count("nonce") == 5 and v.detail.endswith("...") and "\n" not in v.detail


def test_lost_requests_are_named_in_time_order() -> None:
    h = make_history()
    set_row(h, 80, outcome=Outcome.LOST, done=2.0)
    set_row(h, 20, outcome=Outcome.LOST, done=9.0)
    v = check_no_lost_results(make_inputs(history=h), BUDGETS)
    assert v.detail.index("nonce 1080") < v.detail.index("nonce 1020")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(Outcome)), st.booleans()), min_size=1, max_size=40))
def test_no_lost_results_counts_exactly_the_unexplained(rows: list[tuple[Outcome, bool]]) -> None:
    h = make_history(len(rows))
    for i, (outcome, accepted) in enumerate(rows):
        set_row(h, i, outcome=outcome, server_id=-(i + 1) if accepted else 0)
    v = check_no_lost_results(make_inputs(history=h), BUDGETS)
    expected = sum(1 for o, a in rows if a and o not in (Outcome.OK, Outcome.CORRUPT))
    if not any(a for _, a in rows):
        assert v.ok is None
    else:
        assert v.figure == expected and v.ok is (expected == 0)


# --------------------------------------------------------------------------- accepted_requests


def test_nothing_accepted_and_no_fault_is_violated_naming_the_class_and_the_first_requests() -> None:
    h = submit_log(rejected(make_history(16), slice(None)), {i: [400] for i in range(16)})
    v = check_accepted_requests(make_inputs(history=h, error_examples={"http_4xx": NOT_LOADED}), BUDGETS)
    assert v.ok is False and v.figure == 16 and v.budget == 0
    assert v.detail.startswith(
        "16 of 16 submitted requests rejected with no fatal fault in force (0 accepted): 400 ×16 (e.g. asample: "
        'HTTP 400: b\'{"detail":"base model not loaded"}\'); first nonce 1000 at 0.0s, nonce 1001 at 0.0s'
    )
    assert v.detail.count("nonce") == DETAIL_ITEMS and "..." in v.detail


def test_rejections_during_a_fatal_fault_are_explained() -> None:
    h = rejected(make_history(), slice(20, 40))  # submitted 0.2..0.4 s, while the router was down
    faults = fault_log(applied(CRASH, 0.2, 0.5))
    v = check_accepted_requests(make_inputs(history=h, faults=faults, fatal_fault_kinds=frozenset({"crash"})), BUDGETS)
    assert v.ok is True and v.figure == 0
    assert v.detail == (
        "80 of 100 submitted requests accepted; 20 rejected while fatal router:crash was in force "
        "(explained: http_4xx ×20)"
    )
    # the same fault not declared fatal explains nothing
    v = check_accepted_requests(make_inputs(history=h, faults=faults), BUDGETS)
    assert v.ok is False and v.figure == 20


def test_a_fatal_fault_explains_only_rejections_whose_submit_it_overlapped() -> None:
    # Rejected at 0.1 s; the crash came at 0.2 s. A rejected request never has a done time,
    # so its span ends at its submit, not at the end of the trial.
    h = rejected(make_history(), [10])
    faults = fault_log(applied(CRASH, 0.2, None))
    v = check_accepted_requests(make_inputs(history=h, faults=faults, fatal_fault_kinds=frozenset({"crash"})), BUDGETS)
    assert v.ok is False and v.figure == 1 and "first nonce 1010 at 0.1s" in v.detail


def test_rejections_outside_fatal_faults_are_named_by_class_commonest_first() -> None:
    h = rejected(make_history(), [1, 2, 3], ErrorClass.HTTP_4XX)
    rejected(h, [5, 6], ErrorClass.HTTP_5XX)
    rejected(h, [8], ErrorClass.RESET)
    h = submit_log(h, {1: [400], 2: [400], 3: [400], 5: [503, 503], 6: [500, 503], 8: [-int(ErrorClass.RESET)]})
    faults = fault_log(applied(CRASH, 0.5, 0.9))  # fatal, but after these submits
    examples = {"http_4xx": "retrieve_future: HTTP 429: b''", "http_5xx": "asample: HTTP 503: b'busy'"}
    inputs = make_inputs(
        history=h, faults=faults, fatal_fault_kinds=frozenset({"router:crash"}), error_examples=examples
    )
    v = check_accepted_requests(inputs, BUDGETS)
    assert v.ok is False and v.figure == 6
    # classes by the last submit attempt's status; an example only when it is an asample's
    assert (
        "(94 accepted): 400 ×3, 503 ×2 (e.g. asample: HTTP 503: b'busy'), reset ×1; first nonce 1001 at 0.0s"
        in v.detail
    )


def test_a_client_cut_off_by_an_edge_outage_past_its_retry_window_was_never_refused() -> None:
    # An edge outage from 0 to 24 s (480 SDK s at scale 0.05) outlasts the client's 300 SDK s (15 s)
    # asample retry window: rows 1-3 gave up at 15 s with a connect error, their last attempt inside the
    # outage. Row 5 gave up at 30 s, its last attempt after the link healed; row 6 got a 503 from the
    # server at 15 s. Both of those are the server's.
    shape = dataclasses.replace(SHAPE, time_scale=0.05)
    h = rejected(make_history(), [1, 2, 3], ErrorClass.CONNECT, submit_end=15.0)
    rejected(h, [5], ErrorClass.CONNECT, submit_end=30.0)
    rejected(h, [6], ErrorClass.HTTP_5XX, submit_end=15.0)
    refused = -int(ErrorClass.CONNECT)
    h = submit_log(h, {1: [refused], 2: [refused], 3: [refused], 5: [refused], 6: [503]})
    down = Fault("edge", "down", start_s=0.0, duration_s=24.0)
    inputs = make_inputs(history=h, shape=shape, faults=fault_log(applied(down, 0.0, 24.0)))
    v = check_accepted_requests(inputs, BUDGETS)
    assert v.ok is False and v.figure == 2 and "nonce 1005" in v.detail and "nonce 1006" in v.detail, v.detail
    assert (
        "3 gave up unable to reach the server: their last asample attempt failed in transport while "
        "edge:down cut the link" in v.detail
    )
    # a degradation does not cut a link off; without the attempt log, the last backoff_cap_s stands for it
    slow = Fault("edge", "latency", {"latency": 100}, start_s=0.0, duration_s=24.0)
    assert (
        check_accepted_requests(dataclasses.replace(inputs, faults=fault_log(applied(slow, 0.0, 24.0))), BUDGETS).figure
        == 5
    )
    h.attempts = History.empty(0).attempts
    assert check_accepted_requests(dataclasses.replace(inputs, history=h), BUDGETS).figure == 2


def test_without_an_attempt_log_the_class_is_the_last_error() -> None:
    h = rejected(make_history(), [4, 7], ErrorClass.CONNECT)
    v = check_accepted_requests(make_inputs(history=h), BUDGETS)
    assert v.ok is False and "connect ×2" in v.detail


def test_submits_the_load_ended_are_unfinished_not_rejected() -> None:
    # The wall bound (or Ctrl-C) ended the load: 30 submits were still retrying, 20 never started.
    h = make_history()
    h["server_id"][50:] = 0
    h["outcome"][50:] = Outcome.PENDING
    h["done"][50:] = np.nan
    h["submit_end"][50:] = np.nan
    h["submit_start"][80:] = np.nan
    v = check_accepted_requests(make_inputs(history=h, interrupted=True), BUDGETS)
    assert v.ok is True and v.figure == 0
    assert v.detail == (
        "50 of 50 submitted requests accepted; 50 unfinished (not submitted or still submitting when the load ended)"
    )
    nothing_ended = make_history(server_id=0, outcome=Outcome.PENDING, done=np.nan, submit_end=np.nan)
    v = check_accepted_requests(make_inputs(history=nothing_ended, interrupted=True), BUDGETS)
    assert v.ok is None and "100 unfinished" in v.detail


def test_a_rejection_after_the_harness_stopped_the_load_is_not_judged() -> None:
    h = rejected(make_history(), [90], submit_end=0.95)
    rejected(h, [10])  # at 0.105 s, before the stop: judged
    v = check_accepted_requests(make_inputs(history=h, load_stopped_s=0.9), BUDGETS)
    assert (
        v.ok is False
        and v.figure == 1
        and "1 rejected after the harness stopped the load at 0.9s (not judged)" in v.detail
    )


def test_a_client_that_hides_server_ids_is_judged_by_its_results() -> None:
    # As the SDK client records today: results but no ids; a failure does not say which call failed.
    h = make_history(server_id=0)
    h["outcome"][:10] = Outcome.FAILED
    v = check_accepted_requests(make_inputs(history=h), BUDGETS)
    assert v.ok is True and v.detail.startswith("90 of 90 submitted requests accepted; 10 failed with no server id")
    all_failed = make_history(server_id=0, outcome=Outcome.FAILED)
    v = check_accepted_requests(make_inputs(history=all_failed), BUDGETS)
    assert v.ok is None and v.figure is None
    assert check_accepted_requests(make_inputs(history=History.empty(0)), BUDGETS).ok is None


def test_accepted_requests_on_a_mix() -> None:
    h = make_history()
    rejected(h, slice(20, 30))  # during the fatal crash: explained
    rejected(h, [60, 61, 62])  # after it: not
    h["server_id"][90:] = 0  # cut off by an interrupt
    h["outcome"][90:] = Outcome.PENDING
    h["submit_end"][90:] = np.nan
    set_row(h, 70, outcome=Outcome.LOST)  # accepted, then lost: no_lost_results' business
    faults = fault_log(applied(CRASH, 0.2, 0.3))
    inputs = make_inputs(history=h, faults=faults, fatal_fault_kinds=frozenset({"crash"}), interrupted=True)
    v = check_accepted_requests(inputs, BUDGETS)
    assert v.ok is False and v.figure == 3
    assert v.detail.startswith("3 of 90 submitted requests rejected with no fatal fault in force (77 accepted)")
    assert "10 rejected while fatal router:crash was in force" in v.detail and "10 unfinished" in v.detail
    assert check_no_lost_results(inputs, BUDGETS).figure == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(Outcome)), st.booleans()), min_size=1, max_size=40))
def test_accepted_requests_counts_exactly_the_rejections(rows: list[tuple[Outcome, bool]]) -> None:
    h = make_history(len(rows))
    for i, (outcome, has_id) in enumerate(rows):
        set_row(h, i, outcome=outcome, server_id=-(i + 1) if has_id else 0)
    v = check_accepted_requests(make_inputs(history=h), BUDGETS)
    expected = sum(1 for o, a in rows if not a and o == Outcome.REJECTED)
    judged = sum(1 for o, a in rows if a or o in (Outcome.OK, Outcome.CORRUPT, Outcome.REJECTED))
    if judged == 0:
        assert v.ok is None
    else:
        assert v.figure == expected and v.ok is (expected == 0)


# --------------------------------------------------------------------------- result_integrity


def test_integrity_holds_and_fails() -> None:
    assert check_result_integrity(make_inputs(), BUDGETS).ok is True
    h = make_history()
    set_row(h, 3, outcome=Outcome.CORRUPT, error=ErrorClass.INTEGRITY, done=1.5)
    set_row(h, 4, outcome=Outcome.CORRUPT, error=ErrorClass.DECODE, done=1.6)
    v = check_result_integrity(make_inputs(history=h), BUDGETS)
    assert v.ok is False and v.figure == 2 and v.budget == 0
    assert "nonce 1003 (id -28) corrupt (integrity) at 1.5s" in v.detail and "(decode)" in v.detail


def test_integrity_unknown_without_results() -> None:
    assert check_result_integrity(make_inputs(history=History.empty(0)), BUDGETS).ok is None
    h = make_history(outcome=Outcome.FAILED)
    assert check_result_integrity(make_inputs(history=h), BUDGETS).ok is None
