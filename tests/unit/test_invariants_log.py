"""Invariants on hand-made histories (tests/invariant_doubles.py): retry_amplification, the server log classifier, clean_server_log and the composition of all checkers. Each has cases that must hold
and cases that must be violated, and the edge cases."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faultload.checker.budgets import MIB, Budgets
from faultload.checker.compose import CHECKERS, check_all, overall, to_report
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.checker.resources import (
    check_bounded_fds,
    check_bounded_rss,
)
from faultload.checker.results import check_no_lost_results
from faultload.checker.retries import check_retry_amplification
from faultload.checker.serverlog import check_clean_server_log
from faultload.model.faults import Fault
from faultload.model.shape import PollBehaviour
from faultload.model.training import TrainingMix
from faultload.record.history import AttemptKind, ErrorClass, History, Outcome
from faultload.record.samples import ProcessSnapshot
from faultload.record.serverlog import ServerLogSummary, classify_log, classify_log_file, normalize_message
from faultload.record.training import TrainingLog
from tests.invariant_doubles import (
    BUDGETS,
    CLEAN_LOG,
    CRASH,
    NO_RETENTION,
    RESET,
    SHAPE,
    TRIAL_START_EPOCH,
    applied,
    emfile_log,
    fault_log,
    forwarding_timeout_log,
    log_time,
    make_history,
    make_inputs,
    make_monitor,
    plain_reset_log,
    pool_log,
    rich_traceback,
    set_row,
    with_attempts,
)

# --------------------------------------------------------------------------- retry_amplification


def test_retries_at_baseline() -> None:
    v = check_retry_amplification(make_inputs(), BUDGETS)
    assert v.ok is True and v.figure == 2.0 and v.budget == 3.0


def test_retry_mean_amplified() -> None:
    v = check_retry_amplification(make_inputs(history=make_history(attempts=4)), BUDGETS)
    assert v.ok is False and v.figure == 4.0 and v.detail.startswith("amplified: mean 4.00")


def test_one_request_in_a_retry_storm() -> None:
    h = set_row(make_history(), 42, attempts=60, submit_retries=20)
    v = check_retry_amplification(make_inputs(history=h), BUDGETS)
    # the figure stays the mean attempts per request; the request over the max is named
    assert v.ok is False and v.figure == pytest.approx((99 * 2 + 60) / 100) and v.budget == 3.0
    assert v.detail.startswith("1 requests over 50 attempts: nonce 1042 (id -301) 60")


def test_retries_during_faults_count_only_against_the_max() -> None:
    h = make_history()
    h["attempts"][20:50] = 12  # requests 20..49 (0.2..0.59 s) overlap the reset fault at 0.2..0.5 s
    faults = fault_log(applied(RESET, 0.2, 0.5))
    v = check_retry_amplification(make_inputs(history=h, faults=faults), BUDGETS)
    assert v.ok is True and v.figure == 2.0 and "overlapping edge:reset_peer judged on max only" in v.detail
    # without the fault the same history is amplified
    assert check_retry_amplification(make_inputs(history=h), BUDGETS).ok is False


def test_abandoned_polls_raise_the_mean_budget() -> None:
    h = make_history(attempts=2)
    h["attempts"][:70] = 4  # mean 3.4
    abandon = dataclasses.replace(SHAPE, abandon_polls=PollBehaviour(fraction=0.5, after_s=1.0))
    assert check_retry_amplification(make_inputs(history=h), BUDGETS).ok is False
    v = check_retry_amplification(make_inputs(history=h, shape=abandon), BUDGETS)
    assert v.ok is True and v.budget == 3.5


def test_retry_figure_is_the_mean_only_where_the_mean_is_judged() -> None:
    h = make_history(attempts=6)
    faults = fault_log(applied(Fault("edge", "reset_peer", start_s=0.0, duration_s=5.0), 0.0, 5.0))
    v = check_retry_amplification(make_inputs(history=h, faults=faults), BUDGETS)  # every request overlapped it
    assert v.ok is True and v.figure is None and v.budget == 3.0
    assert v.detail.startswith("all 100 requests overlapped faults (no mean judged); max 6")
    h["attempts"][0] = 60
    v = check_retry_amplification(make_inputs(history=h, faults=faults), BUDGETS)
    assert v.ok is False and v.figure is None and v.detail.startswith("1 requests over 50 attempts")


def test_polls_that_timed_out_waiting_on_the_engine_are_not_amplification() -> None:
    # Every request: a submit, 4 polls that hit the client's poll timeout, then the poll that got the result
    # (6 attempts). The router completed rows 0-89 at 1.0 s, after their timeouts (ending 0.2-0.8 s): the
    # client was waiting on the engine. Rows 90-99 were complete at 0.0 s: their timeouts waited on the server.
    h = make_history(attempts=6)
    timeout = -int(ErrorClass.TIMEOUT)
    rows = [(r, AttemptKind.POLL, 0.2 * k, timeout) for r in range(100) for k in range(1, 5)]
    h = with_attempts(h, *rows)
    completed = {int(h["nonce"][r]): (1.0 if r < 90 else 0.0) for r in range(100)}
    v = check_retry_amplification(make_inputs(history=h, router_completed_s=completed), BUDGETS)
    assert v.ok is True and v.figure == pytest.approx((90 * 2 + 10 * 6) / 100), v.detail
    assert "360 polls that timed out before the engine had the result not counted" in v.detail
    # without the router's completion times: every timeout counts, amplified
    assert check_retry_amplification(make_inputs(history=h), BUDGETS).figure == 6.0


def test_retries_unknown_without_attempt_counts() -> None:
    sdk = dataclasses.replace(SHAPE, client="sdk")
    v = check_retry_amplification(make_inputs(history=make_history(attempts=0), shape=sdk), BUDGETS)
    assert v.ok is None and v.detail.startswith("no attempt counts recorded")
    assert check_retry_amplification(make_inputs(history=History.empty(0)), BUDGETS).ok is None


# --------------------------------------------------------------------------- server log classifier


def test_classify_clean_log() -> None:
    summary = classify_log(CLEAN_LOG)
    assert summary.clean and summary.errors == 0
    assert summary.records == 10 and summary.lines == CLEAN_LOG.count("\n")
    assert summary.first_ts == pytest.approx(TRIAL_START_EPOCH - 6.0)
    json.dumps(summary.to_dict())


def test_classify_too_many_open_files_traceback() -> None:
    summary = classify_log(CLEAN_LOG + emfile_log(3.25) + emfile_log(4.5))
    assert list(summary.classes) == ["too_many_open_files"]
    cls = summary.classes["too_many_open_files"]
    assert cls.count == 2 and cls.untimed == 0
    assert cls.first_time == log_time(3.25) and cls.last_time == log_time(4.5)
    assert cls.first_ts == pytest.approx(TRIAL_START_EPOCH + 3.25)
    assert "Backend-forwarded sample failed" in cls.example and "OSError: [Errno 24] Too many open files" in cls.example
    assert "\n" not in cls.example
    d = summary.to_dict()
    assert d["errors"] == 2 and d["classes"][0]["name"] == "too_many_open_files"


def test_classify_queuepool_timeout() -> None:
    summary = classify_log(pool_log(2.0))
    assert list(summary.classes) == ["pool_timeout"]
    assert "QueuePool limit of size 5 overflow 10 reached" in summary.classes["pool_timeout"].example


_OBSERVED = (
    "2026-12-02 23:10:01,412 - WARNING - faultload.dbpool: DB pool exhausted: 3 checkouts waited >= 1 s "
    "for a connection in the last 1 s (longest 2.10 s, 0 timed out); QueuePool size 5, overflow 10\n"
)


def test_the_observed_pool_exhaustion_is_a_note_apart_from_the_pool_timeout_error() -> None:
    summary = classify_log(_OBSERVED + pool_log(2.0))
    assert list(summary.classes) == ["pool_timeout"] and summary.errors == 1
    assert list(summary.notes) == ["pool_exhausted"] and summary.notes["pool_exhausted"].count == 1
    assert classify_log(_OBSERVED).clean  # the wait alone: 0.4.0 waits so too under a dense mix


def test_only_faultloads_observer_writes_notes() -> None:
    """The same words from the server's own logger (or at ERROR) are the server's: an error."""
    as_server = _OBSERVED.replace("WARNING - faultload.dbpool", "WARNING - skyrl")
    assert list(classify_log(as_server).classes) == ["pool_timeout"] and not classify_log(as_server).notes
    as_error = _OBSERVED.replace("WARNING", "ERROR")
    assert classify_log(as_error).errors == 1 and not classify_log(as_error).notes


def test_a_bundle_from_when_pool_exhausted_was_an_error_reads_it_as_a_note() -> None:
    stored = classify_log(_OBSERVED + pool_log(2.0)).to_dict(exact=True)
    stored["classes"] = stored["notes"] + stored["classes"]
    del stored["notes"]
    summary = ServerLogSummary.from_dict(stored)
    assert list(summary.classes) == ["pool_timeout"] and list(summary.notes) == ["pool_exhausted"]
    assert ServerLogSummary.from_dict(summary.to_dict(exact=True)).notes["pool_exhausted"].count == 1


def test_classify_forwarding_timeout_chain_and_wrapped_lines() -> None:
    summary = classify_log(forwarding_timeout_log(1.0))
    assert list(summary.classes) == ["forwarding_timeout"] and summary.errors == 1


def test_classify_plain_python_traceback() -> None:
    summary = classify_log(plain_reset_log(1.0))
    assert list(summary.classes) == ["connection_reset"]
    assert "ConnectionResetError: [Errno 104]" in summary.classes["connection_reset"].example


def test_classify_message_wrapped_by_rich() -> None:
    text = f"{log_time(1.0)} - ERROR - skyrl: Forwarding task failed: ClientOSError(104, 'Connection\nreset by peer')\n"
    assert list(classify_log(text).classes) == ["connection_reset"]


def test_classify_untimed_last_resort_output() -> None:
    # asyncio's logger has no handler under SkyRL: Python's last-resort handler prints bare lines
    text = CLEAN_LOG + (
        "socket.accept() out of system resource\n"
        "socket: <asyncio.TransportSocket fd=12, family=2, type=1, proto=6, laddr=('127.0.0.1', 41234)>\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/asyncio/selector_events.py", line 165, in _accept_connection\n'
        "OSError: [Errno 24] Too many open files\n"
    )
    summary = classify_log(text)
    assert summary.classes["too_many_open_files"].count == 1


def test_asyncios_bare_error_lines_are_errors_at_the_time_of_the_line_before() -> None:
    """aiohttp's "Unclosed client session" (a session dropped unclosed, once per forward with
    ``--regress session-per-request``) reaches SkyRL's log through the last-resort handler: no time, no level,
    after an access line. Each is an error of its own, timed as the line before it; the lines it carries
    (``client_session: <...>``) stay in it, and a wrapped message that only mentions one is not one."""
    access = f'{log_time(2.0)} - INFO - uvicorn.access: 127.0.1.1:56148 - "POST /api/v1/retrieve_future HTTP/1.1" 200\n'
    unclosed = (
        "Unclosed client session\n"
        "client_session: <aiohttp.client.ClientSession object at 0x7f1ade6e4c90>\n"
        "Unclosed connector\n"
        "connections: ['deque([(<aiohttp.client_proto.ResponseHandler object at 0x7f1a>, 3772.03)])']\n"
        "connector: <aiohttp.connector.TCPConnector object at 0x7f1ade6e5a90>\n"
    )
    summary = classify_log(CLEAN_LOG + access + unclosed + unclosed)
    session = summary.classes["error: asyncio: Unclosed client session"]
    assert session.count == 2 and summary.classes["error: asyncio: Unclosed connector"].count == 2
    assert session.untimed == 0 and list(session.times) == [session.times[0]] * 2
    assert session.times[0] == classify_log(access).last_ts  # the access line's time
    wrapped = f"{log_time(1.0)} - INFO - skyrl: a message Rich wrapped at the console's width, so that its\nUnclosed-looking tail\n"
    assert classify_log(wrapped).errors == 0
    assert classify_log("Unclosed client session\n").classes["error: asyncio: Unclosed client session"].untimed == 1


def test_classify_warnings_levels_and_generic_errors() -> None:
    text = "".join(
        [
            f"{log_time(1.0)} - WARNING - skyrl: Transient error talking to http://127.0.0.1:40123 "
            "(ClientConnectorError: Cannot connect to host 127.0.0.1:40123 ssl:default [Connection refused]) "
            "— refreshing proxy URL and retrying once\n",
            f"{log_time(1.1)} - WARNING - skyrl: Requested prompt logprobs but vLLM /v1/completions returned none\n",
            f"{log_time(1.2)} - WARNING - skyrl: External future 77 was evicted before its result arrived — dropping\n",
            f'{log_time(1.3)} - INFO - uvicorn.access: 127.0.0.2:50312 - "POST /api/v1/retrieve_future HTTP/1.1" 500\n',
            f"{log_time(1.4)} - ERROR - skyrl: Background engine crashed with exit code 137, exiting API server\n",
            f"{log_time(1.5)} - ERROR - skyrl: Background engine crashed with exit code 1, exiting API server\n",
            rich_traceback(
                f"{log_time(1.6)} - ERROR - skyrl: Future poller iteration failed",
                ["/opt/skyrl/tinker/api.py:205 in _poll"],
                ["KeyError: 123456"],
            ),
            "ERROR:    Exception in ASGI application\n",
            "Traceback (most recent call last):\n",
            '  File "x.py", line 1, in f\n',
            "ValueError: bad request 0x7f3a\n",
        ]
    )
    summary = classify_log(text)
    assert summary.warnings == 1  # the logprobs warning is not an error
    names = list(summary.classes)
    assert names[:3] == ["connect_error", "future_evicted", "http_5xx"]
    assert summary.classes["error: skyrl: Background engine crashed with exit code N, exiting API server"].count == 2
    assert "KeyError: N" in names and "ValueError: bad request <hex>" in names
    assert summary.classes["ValueError: bad request <hex>"].untimed == 1


def test_classify_log_file(tmp_path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes((CLEAN_LOG + pool_log(2.0)).encode() + b"\xff\xfe garbage\n")
    summary = classify_log_file(path)
    assert list(summary.classes) == ["pool_timeout"]


def test_normalize_message() -> None:
    assert normalize_message("request 123 at 0xdeadbeef  took   5s") == "request N at <hex> took Ns"


# --------------------------------------------------------------------------- clean_server_log


def test_clean_log_holds() -> None:
    v = check_clean_server_log(make_inputs(), BUDGETS)
    assert v.ok is True and v.figure == 0


def test_errors_without_faults_violate() -> None:
    log = classify_log(CLEAN_LOG + emfile_log(3.0) + pool_log(4.0))
    v = check_clean_server_log(make_inputs(server_log=log), BUDGETS)
    assert v.ok is False and v.figure == 2
    assert v.detail.startswith(
        f"2 error lines with no fault injected: too_many_open_files ×1: {log_time(3.0)} ERROR skyrl"
    )
    assert "pool_timeout ×1" in v.detail


def test_errors_inside_fault_windows_are_attributed() -> None:
    log = classify_log(CLEAN_LOG + plain_reset_log(2.5) + plain_reset_log(7.0))
    faults = fault_log(
        applied(RESET, 2.0, 3.0, 0), applied(Fault("backend", "down", start_s=6.5, duration_s=1.0), 6.5, 7.5, 1)
    )
    v = check_clean_server_log(make_inputs(server_log=log, faults=faults), BUDGETS)
    assert v.ok is True and "2 error lines, all while faults were active" in v.detail
    # the start epoch may come from the fault log alone
    v = check_clean_server_log(make_inputs(server_log=log, faults=faults, trial_start_epoch=None), BUDGETS)
    assert v.ok is True


def test_errors_outside_fault_windows_violate() -> None:
    log = classify_log(CLEAN_LOG + plain_reset_log(2.5) + emfile_log(30.0))
    faults = fault_log(applied(RESET, 2.0, 3.0))
    v = check_clean_server_log(make_inputs(server_log=log, faults=faults), BUDGETS)
    assert v.ok is False and v.figure == 1
    assert "1 of 2 error lines outside fault windows (edge:reset_peer), first at 30.0s" in v.detail
    assert "too_many_open_files" in v.detail


def test_grace_after_fault_removal() -> None:
    log = classify_log(plain_reset_log(6.0))  # 3 s after the fault was removed
    faults = fault_log(applied(RESET, 2.0, 3.0))
    assert check_clean_server_log(make_inputs(server_log=log, faults=faults), BUDGETS).ok is True
    no_grace = Budgets(log_fault_grace_s=0.0)
    assert check_clean_server_log(make_inputs(server_log=log, faults=faults), no_grace).ok is False


def forward_failed_log(t: float, request_id: int) -> str:
    return (
        f"{log_time(t)} - ERROR - skyrl: Backend-forwarded sample failed (request_id={request_id}) | "
        "ServerDisconnectedError: Server disconnected\n"
    )


def test_errors_naming_a_request_in_flight_during_a_fault_are_attributed() -> None:
    # A router crash at 2-3 s; the server writes the failures up to 8 s later
    # (one slow traceback after another). Request 0 was in flight during the
    # crash, request 1 was submitted after it.
    h = make_history(4)
    set_row(h, 0, submit_start=1.5, done=12.0, server_id=-18832780833000)
    set_row(h, 1, submit_start=9.0, done=9.5, server_id=-18832780833001)
    faults = fault_log(applied(CRASH, 2.0, 3.0))
    log = classify_log(CLEAN_LOG + forward_failed_log(11.0, -18832780833000))
    assert log.classes["connection_reset"].request_ids.tolist() == [-18832780833000]
    v = check_clean_server_log(make_inputs(history=h, server_log=log, faults=faults), BUDGETS)
    assert v.ok is True and "(1 by the request they name)" in v.detail
    # the same line naming a request that was not in flight during the crash is not excused
    log = classify_log(CLEAN_LOG + forward_failed_log(11.0, -18832780833001))
    v = check_clean_server_log(make_inputs(history=h, server_log=log, faults=faults), BUDGETS)
    assert v.ok is False and "1 of 1 error lines outside fault windows (router:crash), first at 11.0s" in v.detail
    # nor one that names no request
    v = check_clean_server_log(
        make_inputs(history=h, server_log=classify_log(plain_reset_log(11.0)), faults=faults), BUDGETS
    )
    assert v.ok is False


def test_log_not_attributable_with_faults_is_unknown() -> None:
    log = classify_log(plain_reset_log(2.5))
    faults = fault_log(applied(RESET, 2.0, 3.0), epoch=None)
    v = check_clean_server_log(make_inputs(server_log=log, faults=faults, trial_start_epoch=None), BUDGETS)
    assert v.ok is None and v.detail.startswith("faults were active; log not attributable")
    untimed = classify_log('Traceback (most recent call last):\n  File "x", line 1\nConnectionResetError: reset\n')
    v = check_clean_server_log(make_inputs(server_log=untimed, faults=fault_log(applied(RESET, 2.0, 3.0))), BUDGETS)
    assert v.ok is None and "without timestamps" in v.detail
    # without faults, the same untimed error is a violation
    assert check_clean_server_log(make_inputs(server_log=untimed), BUDGETS).ok is False


def test_a_fault_that_never_applied_does_not_excuse_errors() -> None:
    log = classify_log(plain_reset_log(2.5))
    faults = fault_log(applied(RESET, 2.0, 3.0, error="FaultControlError: toxiproxy down"))
    assert check_clean_server_log(make_inputs(server_log=log, faults=faults), BUDGETS).ok is False


def test_allowed_patterns_and_missing_log() -> None:
    log = classify_log(CLEAN_LOG + plain_reset_log(2.5))
    allow = Budgets(clean_log_allow=("connection_reset",))
    v = check_clean_server_log(make_inputs(server_log=log), allow)
    assert v.ok is True and "1 allowed by clean_log_allow" in v.detail
    assert check_clean_server_log(make_inputs(server_log=None), BUDGETS).ok is None
    # a log of no lines was not read (a url= target's): unknown, not clean
    v = check_clean_server_log(make_inputs(server_log=classify_log("")), BUDGETS)
    assert v.ok is None and "no server log lines" in v.detail


@settings(max_examples=80, deadline=None)
@given(
    peak=st.integers(40, 2000),
    in_flight=st.integers(0, 400),
    idle=st.integers(0, 100),
    rss_growth_mib=st.floats(0, 2000),
)
def test_resource_figures_cross_their_budgets_exactly_when_the_peak_rule_fails(
    peak: int, in_flight: int, idle: int, rss_growth_mib: float
) -> None:
    """One definition: the steering figure is the judged one, so figure > budget iff "over budget"."""
    fds = np.full(20, 40.0)
    fds[7] = peak
    monitor = make_monitor(
        fds=fds, rss=np.full(20, 200 * MIB + rss_growth_mib * MIB), client_in_flight=np.full(20, float(in_flight))
    )
    monitor.samples["client_connections_peak"] = np.full(20, float(in_flight + idle))
    for check in (check_bounded_fds, check_bounded_rss):
        v = check(make_inputs(monitor=monitor), NO_RETENTION)
        assert (v.figure > v.budget) == v.detail.startswith("over budget"), v


# --------------------------------------------------------------------------- composition


def clean_attempt_log(h: History) -> History:
    """Attach the attempt log of a trial where every request took one asample and one poll, both 200."""
    n = len(h)
    rows = np.repeat(np.arange(n), 2)
    kinds = np.tile([AttemptKind.SUBMIT, AttemptKind.POLL], n)
    ends = np.where(kinds == AttemptKind.SUBMIT, h["submit_end"][rows], h["done"][rows])
    return with_attempts(h, *[(int(r), AttemptKind(int(k)), float(e), 200) for r, k, e in zip(rows, kinds, ends)])


def test_check_all_on_a_healthy_trial() -> None:
    verdicts = check_all(make_inputs(history=clean_attempt_log(make_history(2000))), BUDGETS)
    assert [v.name for v in verdicts] == [name for name, _ in CHECKERS]
    # releases_results judges a trial that delivered tens of MiB and held past the TTLs only (release_hold);
    # forwards_concurrent one whose router's peak was seen (this trial's was not): both not judged, never ok
    held = [v for v in verdicts if v.name == "releases_results"]
    assert held[0].ok is None and "would not be measurable" in held[0].detail
    assert [v.ok for v in verdicts if v.name == "forwards_concurrent"] == [None]
    assert overall(verdicts) is None
    verdicts = [v for v in verdicts if v.name not in ("releases_results", "forwards_concurrent")]
    assert all(v.ok is True for v in verdicts), [v for v in verdicts if v.ok is not True]
    assert overall(verdicts) is True
    for v in verdicts:
        assert "\n" not in v.detail


def test_check_all_on_an_empty_trial_is_never_ok_about_requests() -> None:
    inputs = make_inputs(history=History.empty(0), monitor=None, server_log=None)
    verdicts = {v.name: v for v in check_all(inputs, BUDGETS)}
    for name in (
        "no_lost_results",
        "accepted_requests",
        "result_integrity",
        "bounded_fds",
        "bounded_rss",
        "healthz_latency",
        "bounded_cpu",
        "retry_amplification",
        "unprovoked_resets",
        "clean_server_log",
    ):
        assert verdicts[name].ok is None, verdicts[name]
    assert overall(verdicts.values()) is None


def test_a_crashing_checker_is_unknown_never_ok() -> None:
    def crashes(inputs: CheckInputs, budgets: Budgets) -> Verdict:
        raise ZeroDivisionError("division by zero")

    def returns_junk(inputs: CheckInputs, budgets: Budgets) -> Verdict:
        return True  # type: ignore[return-value]

    verdicts = check_all(
        make_inputs(),
        BUDGETS,
        [("crashes", crashes), ("junk", returns_junk), ("no_lost_results", check_no_lost_results)],
    )
    assert verdicts[0] == Verdict(
        name="crashes", ok=None, figure=None, budget=None, head="checker crashed: ZeroDivisionError: division by zero"
    )
    assert verdicts[1].ok is None and verdicts[1].detail.startswith("checker crashed: TypeError")
    assert verdicts[2].ok is True
    assert overall(verdicts) is None


def test_real_checkers_crash_to_unknown_on_broken_inputs() -> None:
    broken = History({"nonce": np.zeros(3, dtype=np.int64)})  # columns missing
    verdicts = check_all(make_inputs(history=broken), BUDGETS)
    by_name = {v.name: v for v in verdicts}
    assert by_name["no_lost_results"].ok is None
    assert by_name["no_lost_results"].detail.startswith("checker crashed: KeyError")
    assert not any(
        v.ok is True
        and v.name
        in ("no_lost_results", "accepted_requests", "result_integrity", "retry_amplification", "unprovoked_resets")
        for v in verdicts
    )


def test_overall_merges_like_jepsen() -> None:
    t, f, u = (Verdict(name="a", ok=ok, figure=None, budget=None, head="") for ok in (True, False, None))
    assert overall([t, t]) is True
    assert overall([t, u]) is None
    assert overall([u, f, t]) is False
    assert overall([]) is True


def test_to_report_is_json_ready() -> None:
    verdicts = check_all(make_inputs(), BUDGETS) + [
        Verdict(name="x", ok=None, figure=math.nan, budget=np.float64(math.inf), head="d"),
        Verdict(name="y", ok=False, figure=np.int64(3), budget=np.float32(2.5), head="d"),
    ]
    report = to_report(verdicts)
    assert all(set(r) == {"name", "ok", "figure", "budget", "detail", "head", "notes", "cases"} for r in report)
    assert report[-2]["figure"] is None and report[-2]["budget"] is None
    assert report[-1]["figure"] == 3 and isinstance(report[-1]["figure"], int) and report[-1]["budget"] == 2.5
    json.dumps(report, allow_nan=False)


def test_server_log_summary_defaults() -> None:
    empty = ServerLogSummary(lines=0, records=0, warnings=0)
    assert empty.clean and empty.to_dict()["classes"] == []


def test_fd_budget_uses_the_routers_exact_peak_when_sampling_missed_it() -> None:
    """A barrier wave of 500 between two 0.5 s samples: the samples say 50 in flight, the router saw 500."""
    fds = np.full(20, 40.0)
    fds[10] = 40 + 2 * 500
    inputs = make_inputs(monitor=make_monitor(fds=fds))
    assert check_bounded_fds(inputs, BUDGETS).ok is False
    with_router = dataclasses.replace(inputs, router_peak_in_flight=500)
    v = check_bounded_fds(with_router, BUDGETS)
    assert v.ok is True and "router's exact peak in-flight 500" in v.detail


def test_a_restart_excuses_what_the_old_process_held_but_not_what_was_accepted_after_it() -> None:
    restart = Fault("server", "restart", start_s=0.3)
    h = make_history()
    # accepted at 0.205 and polled across the restart [0.3, 0.6]: forgotten with the old process
    set_row(h, 20, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=2.0)
    set_row(h, 21, outcome=Outcome.GAVE_UP, done=2.0)
    # submitted during the restart, accepted by the new process at 0.7: judged as ever
    set_row(h, 50, submit_start=0.5, submit_end=0.7, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=2.0)
    set_row(h, 60, submit_start=0.5, submit_end=0.7, outcome=Outcome.GAVE_UP, done=2.0)
    faults = fault_log(applied(restart, 0.3, 0.6))
    v = check_no_lost_results(
        make_inputs(history=h, faults=faults, fatal_fault_kinds=frozenset({"server:restart"})), BUDGETS
    )
    assert v.ok is False and v.figure == 2, v.detail
    assert "nonce 1050" in v.detail and "nonce 1060" in v.detail and "nonce 1020" not in v.detail
    assert "2 ended during fatal server:restart (explained)" in v.detail
    # not declared fatal: all four are losses
    v = check_no_lost_results(make_inputs(history=h, faults=faults), BUDGETS)
    assert v.figure == 4


def test_a_trial_that_trained_gets_the_trainers_connections_and_the_db_pool_in_its_fd_budgets() -> None:
    trained = dataclasses.replace(SHAPE, training=TrainingMix(trainers=32))
    # 32 trainers' connections (2 each) on top of 50 in flight: over the samples-only budget, within the trained one
    fds = 40 + 2 * np.minimum(np.arange(20), 10) * 5 + np.where(np.arange(20) > 2, 150, 0)
    drained = ProcessSnapshot(230 * MIB, 40 + 20, 5.0)  # the DB pool's kept connections
    monitor = make_monitor(fds=fds, drained=drained)
    assert check_bounded_fds(make_inputs(monitor=monitor, shape=trained), BUDGETS).ok is False
    verdict = check_bounded_fds(make_inputs(monitor=monitor, shape=trained, training=TrainingLog.empty()), BUDGETS)
    assert verdict.ok is True, verdict.detail
    assert "2×32 the trainers'" in verdict.detail and "+ 16 (the DB pool, training)" in verdict.detail


def test_an_error_written_to_the_second_is_placed_anywhere_in_that_second() -> None:
    """twinkle-kit writes whole seconds: an error it printed "at second 2" was written between 2.0 and 3.0, so a
    fault applied at 2.85 may have caused it; the same time written to the millisecond is before the fault."""
    second = log_time(2.0)[:19]  # "YYYY-MM-DD HH:MM:SS", the second the trial's 2.0 s falls in
    starts = 2.0 - (TRIAL_START_EPOCH + 2.0) % 1  # the trial time that second starts at
    lines = f"[{second}][ERROR:twinkle] Traceback (most recent call last):\nValueError: boom\n"
    faults = fault_log(applied(RESET, starts + 0.85, 4.0))
    coarse = classify_log(lines)
    assert coarse.classes["ValueError: boom"].resolution_s == 1.0
    assert check_clean_server_log(make_inputs(server_log=coarse, faults=faults), BUDGETS).ok is True
    fine = classify_log(f"{second},000 - ERROR - twinkle: boom\nValueError: boom\n")
    assert check_clean_server_log(make_inputs(server_log=fine, faults=faults), BUDGETS).ok is False
