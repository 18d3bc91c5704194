"""Invariants on hand-made histories, monitor samples, fault logs and server logs.

Each invariant has cases that must hold and cases that must be violated, plus
the edge cases: empty trial, all failed, a retried asample, give-ups explained
(or not) by a fatal fault, a crashing checker (unknown, never ok).
"""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faultload.checker.budgets import MIB, Budgets
from faultload.checker.common import DETAIL_ITEMS
from faultload.checker.compose import CHECKERS, check_all, overall, to_report
from faultload.checker.health import check_healthz_latency
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.checker.resources import (
    RESULT_BYTES_PER_TOKEN,
    check_bounded_cpu,
    check_bounded_fds,
    check_bounded_rss,
    server_http_requests,
)
from faultload.checker.accepted import check_accepted_requests
from faultload.checker.contract.retention import stall_spans
from faultload.checker.results import check_no_lost_results, check_result_integrity
from faultload.checker.retries import check_retry_amplification, check_unprovoked_resets
from faultload.checker.serverlog import check_clean_server_log
from faultload.record.faults import AppliedFault, FaultLog
from faultload.model.faults import Fault
from faultload.model.family import SKYRL_CONTRACT, TUFT_CONTRACT
from faultload.record.history import AttemptKind, ErrorClass, History, Outcome
from faultload.record.samples import SAMPLE_FIELDS, MonitorSamples, ProcessSnapshot
from faultload.record.serverlog import ServerLogSummary, classify_log, classify_log_file, normalize_message
from faultload.model.shape import LoadShape, PollBehaviour
from faultload.model.training import TrainingMix
from faultload.record.training import TrainingLog

BUDGETS = Budgets()
SHAPE = LoadShape(requests=100, result_tokens=64, num_samples=1, max_outstanding=50)
N = 100
TRIAL_START_EPOCH = datetime(2026, 11, 30, 7, 50, 0).timestamp()  # local time, as logging prints it


# --------------------------------------------------------------------------- builders

def make_history(n: int = N, **columns: Any) -> History:
    """``n`` requests that all went well: submitted every 10 ms, done 100 ms later, 2 attempts."""
    h = History.empty(n)
    h["nonce"][:] = np.arange(n) + 1000
    h["server_id"][:] = -(np.arange(n) + 1) * 7
    h["submit_start"][:] = np.arange(n) * 0.01
    h["submit_end"][:] = h["submit_start"] + 0.005
    h["done"][:] = h["submit_start"] + 0.1
    h["result_bytes"][:] = 600
    h["attempts"][:] = 2
    h["outcome"][:] = Outcome.OK
    for name, values in columns.items():
        h[name][:] = values
    return h


def set_row(h: History, i: int, **values: Any) -> History:
    for name, value in values.items():
        h[name][i] = value
    return h


def make_monitor(
    seconds: float = 10.0,
    fds: np.ndarray | None = None,
    rss: np.ndarray | None = None,
    client_in_flight: np.ndarray | None = None,
    router_in_flight: np.ndarray | None = None,
    baseline: ProcessSnapshot | None = ProcessSnapshot(200 * MIB, 40, 1.0),
    drained: ProcessSnapshot | None = ProcessSnapshot(230 * MIB, 42, 5.0),
    healthz_latency: np.ndarray | None = None,
    healthz_ok: np.ndarray | None = None,
    healthz_t: np.ndarray | None = None,
) -> MonitorSamples:
    t = np.arange(0.0, seconds, 0.5)
    n = t.size
    ramp = np.minimum(np.arange(n), 10) / 10.0  # in flight ramps to 50, fds/rss follow
    in_flight = np.round(50 * ramp)
    samples = {name: np.full(n, -1.0) for name in SAMPLE_FIELDS}
    samples["t"] = t
    samples["fds"] = 40 + 2 * in_flight if fds is None else fds
    samples["rss"] = 200 * MIB + in_flight * MIB if rss is None else rss
    samples["cpu_s"] = np.linspace(1.0, 5.0, n)
    samples["client_in_flight"] = in_flight if client_in_flight is None else client_in_flight
    if router_in_flight is not None:
        samples["router_in_flight"] = router_in_flight
    ht = np.arange(0.0, 1.2, 0.01) if healthz_t is None else healthz_t
    lat = np.full(ht.size, 0.01) if healthz_latency is None else healthz_latency
    hok = np.ones(ht.size, dtype=bool) if healthz_ok is None else healthz_ok
    return MonitorSamples(samples, ht, lat, hok, baseline=baseline, drained=drained)


def applied(fault: Fault, at: float, until: float | None, index: int = 0, error: str | None = None) -> AppliedFault:
    return AppliedFault(index, fault, applied_at_s=at, removed_at_s=until,
                        applied_at_epoch=TRIAL_START_EPOCH + at,
                        removed_at_epoch=None if until is None else TRIAL_START_EPOCH + until, error=error)


CRASH = Fault("router", "crash", start_s=0.2, duration_s=0.3)
RESET = Fault("edge", "reset_peer", start_s=0.2, duration_s=0.3)


def fault_log(*records: AppliedFault, epoch: float | None = TRIAL_START_EPOCH) -> FaultLog:
    return FaultLog(tuple(records), epoch)


def make_inputs(**changes: Any) -> CheckInputs:
    base = CheckInputs(history=make_history(), monitor=make_monitor(), faults=None, shape=SHAPE, contract=SKYRL_CONTRACT,
                       server_log=classify_log(CLEAN_LOG), trial_start_epoch=TRIAL_START_EPOCH,
                       router_completed_s={}, router_repeats={})  # our router's log, with no completion in it
    return dataclasses.replace(base, **changes)


def log_time(seconds: float) -> str:
    """Trial seconds -> the timestamp Python logging would print (local time)."""
    dt = datetime.fromtimestamp(TRIAL_START_EPOCH + seconds)
    return dt.strftime("%Y-%m-%d %H:%M:%S") + f",{dt.microsecond // 1000:03d}"


# --------------------------------------------------------------------------- server log samples
# As SkyRL 0.4.0 writes them under COLUMNS=250 (Rich handler, rich_tracebacks;
# boxes shortened here, one line kept with Rich's trailing padding).

CLEAN_LOG = f"""\
faultload-launch: patches {{"router_url": "seeded", "engine": "sleeper", "time_scale": 1.0}}
faultload-launch: version 0.4.0
{log_time(-6.0)} - INFO - uvicorn.error: Started server process [6256]{' ' * 180}
{log_time(-6.0)} - INFO - uvicorn.error: Waiting for application startup.
{log_time(-5.9)} - INFO - skyrl: Using external inference forwarding to http://127.0.0.1:40123 (request timeout 30s)
{log_time(-5.8)} - INFO - uvicorn.error: Application startup complete.
{log_time(-5.8)} - INFO - uvicorn.error: Uvicorn running on http://127.0.0.1:41234 (Press CTRL+C to quit)
{log_time(0.1)} - INFO - uvicorn.access: 127.0.0.2:50312 - "POST /api/v1/asample HTTP/1.1" 200
{log_time(0.2)} - INFO - uvicorn.access: 127.0.0.2:50312 - "POST /api/v1/retrieve_future HTTP/1.1" 200
{log_time(0.3)} - INFO - uvicorn.access: 127.0.0.1:50400 - "GET /api/v1/healthz HTTP/1.1" 200
{log_time(9.0)} - INFO - uvicorn.error: Shutting down
{log_time(9.1)} - INFO - uvicorn.error: Finished server process [6256]
"""

BOX_TOP = "╭" + "─" * 40 + " Traceback (most recent call last) " + "─" * 40 + "╮"
BOX_BOTTOM = "╰" + "─" * 115 + "╯"


def rich_traceback(header: str, frames: list[str], exception: list[str]) -> str:
    body = [BOX_TOP] + [f"│ {line:<113}│" for line in frames] + [BOX_BOTTOM] + exception
    return "\n".join([header] + body) + "\n"


def emfile_log(t: float) -> str:
    return rich_traceback(
        f"{log_time(t)} - ERROR - skyrl: Backend-forwarded sample failed (request_id=4242)",
        [
            "/opt/skyrl/tinker/extra/skyrl_train_inference_forwarding.py:118 in call_and_store_result",
            "",
            "  117 │   │   try:",
            "❱ 118 │   │   │   result = await self._forward_with_retry(sample_req, model_id, base_model=base_model)",
            "  119 │   │   │   status = RequestStatus.COMPLETED",
            "",
            "/venv/lib/python3.11/site-packages/aiohttp/connector.py:1268 in _create_direct_connection",
            "  1267 │   │   except (asyncio.TimeoutError, OSError) as exc:  # source text: must not be classified",
        ],
        ["OSError: [Errno 24] Too many open files"],
    )


def pool_log(t: float) -> str:
    return rich_traceback(
        f"{log_time(t)} - ERROR - uvicorn.error: Exception in ASGI application",
        [
            "/venv/lib/python3.11/site-packages/sqlalchemy/pool/impl.py:168 in _do_get",
            "",
            "  165 │   │   │   │   raise exc.TimeoutError(",
            '❱ 168 │   │   │   │   │   "QueuePool limit of size %d overflow %d reached, "',
        ],
        ["TimeoutError: QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00 "
         "(Background on this error at: https://sqlalche.me/e/20/3o7r)"],
    )


def forwarding_timeout_log(t: float) -> str:
    first = rich_traceback(
        f"{log_time(t)} - ERROR - skyrl: Backend-forwarded sample failed (request_id=17)",
        ["/opt/skyrl/tinker/extra/skyrl_train_inference_forwarding.py:140 in _forward_with_retry"],
        ["SocketTimeoutError: Timeout on reading data from socket", "",
         "The above exception was the direct cause of the following exception:", ""],
    )
    # Rich wraps the long exception line at 250 columns
    second = "\n".join([BOX_TOP, "│ /opt/skyrl/tinker/extra/skyrl_train_inference_forwarding.py:146 in _forward_with_retry │",
                        BOX_BOTTOM,
                        "RuntimeError: Inference request to http://127.0.0.1:40123 timed out after 30s waiting for a "
                        "response (read timeout). The request was not retried because vLLM may still be executing it. "
                        "If requests are expected to take this long (long prompts, large",
                        "max_tokens, or queueing behind other requests), increase the deadline with "
                        "`--forwarding-inference-timeout-sec`."]) + "\n"
    return first + second


def plain_reset_log(t: float) -> str:
    return (
        f"{log_time(t)} - ERROR - uvicorn.error: Exception in ASGI application\n"
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/uvicorn/protocols/http/h11_impl.py", line 408, in run_asgi\n'
        "    result = await app(  # type: ignore[func-returns-value]\n"
        '  File "/usr/lib/python3.11/asyncio/selector_events.py", line 970, in _read_ready__get_buffer\n'
        "    nbytes = self._sock.recv_into(buf)\n"
        "ConnectionResetError: [Errno 104] Connection reset by peer\n"
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


def with_abandoned_polls(h: History, drops: dict[int, float]) -> History:
    """Record one abandoned first poll (dropped at the given trial second) per row."""
    rows = np.array(sorted(drops), dtype=np.int32)
    h.attempts = {
        "row": rows, "kind": np.full(rows.size, AttemptKind.ABANDONED, dtype=np.uint8),
        "start": np.array([drops[r] - 0.25 for r in rows], dtype=np.float32),
        "end": np.array([drops[r] for r in rows], dtype=np.float32),
        "status": np.zeros(rows.size, dtype=np.int16),
    }
    return h


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
    assert "1 404 after a poll dropped when the result was already there" in v.detail
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
    v = check_no_lost_results(make_inputs(history=h, shape=scaled, router_completed_s=completed,
                                          contract=TUFT_CONTRACT), BUDGETS)
    assert v.figure == 2


def _stalled_monitor(stall: tuple[float, float]) -> MonitorSamples:
    """Probes every 0.5 s over 60 s; those starting in ``stall`` time out after 10 s."""
    ht = np.arange(0.0, 60.0, 0.5)
    inside = (ht >= stall[0]) & (ht < stall[1])
    return make_monitor(seconds=60.0, healthz_t=ht, healthz_latency=np.where(inside, 10.0, 0.01),
                        healthz_ok=~inside)


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
    inputs = make_inputs(history=h, shape=shape, monitor=_stalled_monitor((10.0, 30.0)),
                         router_completed_s=completed)
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
    inputs = make_inputs(history=h, shape=shape, monitor=_stalled_monitor((10.0, 30.0)),
                         faults=fault_log(applied(down, 9.0, 9.5)))
    v = check_no_lost_results(inputs, BUDGETS)
    assert v.ok is True and "1 404 after a server stall" in v.detail
    assert check_no_lost_results(dataclasses.replace(inputs, faults=None), BUDGETS).figure == 1


def test_a_404_inside_the_scaled_window_is_a_loss_whatever_the_stall() -> None:
    # 10 s old at scale 0.05 is under the 15 s a correct server keeps a result.
    shape = dataclasses.replace(SHAPE, time_scale=0.05)
    h = set_row(make_history(), 40, outcome=Outcome.LOST, error=ErrorClass.HTTP_404, done=19.0)
    inputs = make_inputs(history=h, shape=shape, monitor=_stalled_monitor((10.0, 30.0)),
                         router_completed_s={int(h["nonce"][40]): 9.0})
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
        for row, t in ((50, 3.3), (51, 20.0)))
    partition = Fault("edge", "timeout", {"timeout": 0}, start_s=0.35, duration_s=36.0)
    inputs = make_inputs(history=h, shape=shape, faults=fault_log(applied(partition, 0.35, 36.35)),
                         server_log=classify_log(CLEAN_LOG + failed), router_completed_s={})
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

NOT_LOADED = "asample: HTTP 400: b'{\"detail\":\"base model not loaded\"}'"


def rejected(h: History, rows: Any, error: ErrorClass = ErrorClass.HTTP_4XX, submit_end: Any = None) -> History:
    """Mark ``rows`` rejected as the raw client records it: no server id, no poll, submit ended."""
    h["server_id"][rows] = 0
    h["outcome"][rows] = Outcome.REJECTED
    h["error"][rows] = error
    h["done"][rows] = np.nan
    h["attempts"][rows] = 1
    h["result_bytes"][rows] = 0
    if submit_end is not None:
        h["submit_end"][rows] = submit_end
    return h


def submit_log(h: History, statuses: dict[int, list[int]]) -> History:
    """An attempt log holding only the submits of ``statuses`` (row -> each attempt's status)."""
    rows = [(row, AttemptKind.SUBMIT, float(h["submit_end"][row]), status)
            for row, codes in statuses.items() for status in codes]
    return with_attempts(h, *rows)


def test_nothing_accepted_and_no_fault_is_violated_naming_the_class_and_the_first_requests() -> None:
    h = submit_log(rejected(make_history(16), slice(None)), {i: [400] for i in range(16)})
    v = check_accepted_requests(make_inputs(history=h, error_examples={"http_4xx": NOT_LOADED}), BUDGETS)
    assert v.ok is False and v.figure == 16 and v.budget == 0
    assert v.detail.startswith(
        "16 of 16 submitted requests rejected with no fatal fault in force (0 accepted): 400 ×16 (e.g. asample: "
        "HTTP 400: b'{\"detail\":\"base model not loaded\"}'); first nonce 1000 at 0.0s, nonce 1001 at 0.0s")
    assert v.detail.count("nonce") == DETAIL_ITEMS and "..." in v.detail


def test_rejections_during_a_fatal_fault_are_explained() -> None:
    h = rejected(make_history(), slice(20, 40))  # submitted 0.2..0.4 s, while the router was down
    faults = fault_log(applied(CRASH, 0.2, 0.5))
    v = check_accepted_requests(make_inputs(history=h, faults=faults, fatal_fault_kinds=frozenset({"crash"})), BUDGETS)
    assert v.ok is True and v.figure == 0
    assert v.detail == ("80 of 100 submitted requests accepted; 20 rejected while fatal router:crash was in force "
                        "(explained: http_4xx ×20)")
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
    inputs = make_inputs(history=h, faults=faults, fatal_fault_kinds=frozenset({"router:crash"}), error_examples=examples)
    v = check_accepted_requests(inputs, BUDGETS)
    assert v.ok is False and v.figure == 6
    # classes by the last submit attempt's status; an example only when it is an asample's
    assert "(94 accepted): 400 ×3, 503 ×2 (e.g. asample: HTTP 503: b'busy'), reset ×1; first nonce 1001 at 0.0s" \
        in v.detail


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
    assert "3 gave up unable to reach the server: their last asample attempt failed in transport while " \
           "edge:down cut the link" in v.detail
    # a degradation does not cut a link off; without the attempt log, the last backoff_cap_s stands for it
    slow = Fault("edge", "latency", {"latency": 100}, start_s=0.0, duration_s=24.0)
    assert check_accepted_requests(dataclasses.replace(inputs, faults=fault_log(applied(slow, 0.0, 24.0))),
                                   BUDGETS).figure == 5
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
    assert v.detail == ("50 of 50 submitted requests accepted; "
                        "50 unfinished (not submitted or still submitting when the load ended)")
    nothing_ended = make_history(server_id=0, outcome=Outcome.PENDING, done=np.nan, submit_end=np.nan)
    v = check_accepted_requests(make_inputs(history=nothing_ended, interrupted=True), BUDGETS)
    assert v.ok is None and "100 unfinished" in v.detail


def test_a_rejection_after_the_harness_stopped_the_load_is_not_judged() -> None:
    h = rejected(make_history(), [90], submit_end=0.95)
    rejected(h, [10])  # at 0.105 s, before the stop: judged
    v = check_accepted_requests(make_inputs(history=h, load_stopped_s=0.9), BUDGETS)
    assert v.ok is False and v.figure == 1 and "1 rejected after the harness stopped the load at 0.9s (not judged)" \
        in v.detail


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


# --------------------------------------------------------------------------- bounded_fds

def test_fds_within_budget() -> None:
    v = check_bounded_fds(make_inputs(), BUDGETS)
    assert v.ok is True
    # the figure is fds per request in flight over the baseline, (140 - 40) / 50; the budget 3 + 64 / 50
    assert v.figure == pytest.approx(2.0) and v.budget == pytest.approx(3.0 + 64 / 50)
    assert "peak 140 fds" in v.detail and f"= {40 + 64 + 3 * 50}" in v.detail
    assert "peak client in-flight 50" in v.detail and "drained 42" in v.detail


def test_fd_leak_over_peak_budget() -> None:
    leak = 40 + np.arange(20) * 30.0  # grows with requests served, not with in-flight
    v = check_bounded_fds(make_inputs(monitor=make_monitor(fds=leak)), BUDGETS)
    assert v.ok is False and v.figure == pytest.approx((610 - 40) / 50) and v.figure > v.budget
    assert v.detail.startswith("over budget: 11.40 fds per request in flight (budget 4.28): peak 610 fds at 9.5s")


def test_fds_reaching_the_servers_limit_is_a_collapse() -> None:
    m = make_monitor()
    if not hasattr(m, "fd_limit"):
        pytest.skip("MonitorSamples has no fd_limit")
    big = dataclasses.replace(make_monitor(fds=np.full(20, 1024.0), client_in_flight=np.full(20, 8192.0)),
                              fd_limit=(1024, 1024))
    v = check_bounded_fds(make_inputs(monitor=big), BUDGETS)  # within 3 fds per in-flight, but at the limit
    assert v.ok is False and v.figure == pytest.approx((1024 - 40) / 8192) and v.figure <= v.budget
    assert v.detail.startswith("reached the server's fd limit (1024)")
    fine = dataclasses.replace(make_monitor(), fd_limit=(20000, 20000))
    v = check_bounded_fds(make_inputs(monitor=fine), BUDGETS)
    assert v.ok is True and "fd limit 20000" in v.detail


def test_fds_not_back_after_drain() -> None:
    m = make_monitor(drained=ProcessSnapshot(230 * MIB, 90, 5.0))
    v = check_bounded_fds(make_inputs(monitor=m), BUDGETS)
    # the figure stays fds per request in flight (within budget); the drain is named in the detail
    assert v.ok is False and v.figure == pytest.approx(2.0) and v.figure <= v.budget
    assert v.detail.startswith("not back to baseline: drained 90 fds vs 40 + 8 = 48")


def test_fds_unknown_without_process_metrics() -> None:
    m = make_monitor(fds=np.full(20, -1.0), baseline=None, drained=None)
    assert check_bounded_fds(make_inputs(monitor=m), BUDGETS).ok is None
    assert check_bounded_fds(make_inputs(monitor=None), BUDGETS).ok is None
    # peak fine but the drain was never measured: not "ok"
    v = check_bounded_fds(make_inputs(monitor=make_monitor(drained=None)), BUDGETS)
    assert v.ok is None and "not measured" in v.detail


def test_fds_in_flight_falls_back_to_router_then_shape_cap() -> None:
    router = np.full(20, 30.0)
    m = make_monitor(client_in_flight=np.full(20, -1.0), router_in_flight=router)
    v = check_bounded_fds(make_inputs(monitor=m), BUDGETS)
    assert v.figure == pytest.approx(100 / 30) and v.budget == pytest.approx(3 + 64 / 30)
    assert "= 194" in v.detail and "router in-flight 30" in v.detail
    m = make_monitor(client_in_flight=np.full(20, -1.0))
    v = check_bounded_fds(make_inputs(monitor=m), BUDGETS)
    assert v.figure == pytest.approx(100 / 50) and "= 254" in v.detail and "shape cap 50" in v.detail


def test_fds_baseline_from_first_sample_when_missing() -> None:
    v = check_bounded_fds(make_inputs(monitor=make_monitor(baseline=None)), BUDGETS)
    assert v.ok is True and "baseline (first sample) 40" in v.detail


# --------------------------------------------------------------------------- bounded_rss

NO_RETENTION = dataclasses.replace(BUDGETS, retention_window_s=0.0, in_flight_request_overhead_bytes=0)


def test_rss_within_budget() -> None:
    v = check_bounded_rss(make_inputs(), NO_RETENTION)
    # figure and budget: growth over the baseline in MiB (the peak's, and what that sample allows)
    assert v.ok is True and v.figure == 50.0
    # results of 600 B observed beat the proto formula (64 tokens × 8 B = 512 B)
    assert v.budget == pytest.approx((256 * MIB + 4.0 * 50 * 600) / MIB)
    assert "600 B/result observed" in v.detail
    with_overhead = check_bounded_rss(make_inputs(), dataclasses.replace(NO_RETENTION, in_flight_request_overhead_bytes=1000))
    assert with_overhead.budget == pytest.approx(v.budget + 50 * 1000 / MIB)
    proto_sized = make_history(result_bytes=500)
    v = check_bounded_rss(make_inputs(history=proto_sized), NO_RETENTION)
    assert v.budget == pytest.approx((256 * MIB + 4.0 * 50 * 64 * 1 * RESULT_BYTES_PER_TOKEN) / MIB)


def test_rss_growth_over_budget() -> None:
    rss = 200 * MIB + np.arange(20) * 40.0 * MIB  # retains results: 760 MiB of growth
    v = check_bounded_rss(make_inputs(monitor=make_monitor(rss=rss)), BUDGETS)
    assert v.ok is False and v.figure > v.budget > 256
    assert v.detail.startswith("over budget: RSS")


def test_rss_of_results_retained_by_design_is_budgeted_by_the_retention_window() -> None:
    """Delivered results the server keeps for its retrieved TTL are not a leak; past the window they are."""
    n = 20_000
    h = make_history(n, result_bytes=60_000)  # one done every 10 ms from 0.1 s to 200 s
    samples = np.arange(0.0, 200.0, 0.5)
    per_result = BUDGETS.retained_result_overhead_bytes + 4.0 * 60_000
    growth = np.searchsorted(np.sort(h["done"]), samples, side="right") * per_result * 0.9  # 90% of budget
    rss = 200 * MIB + growth
    mon = make_monitor(seconds=200.0, rss=rss)
    assert check_bounded_rss(make_inputs(history=h, monitor=mon), BUDGETS).ok is True
    short = dataclasses.replace(BUDGETS, retention_window_s=30.0)  # a server that should have freed them
    v = check_bounded_rss(make_inputs(history=h, monitor=mon), short)
    assert v.ok is False and "retained" in v.detail


def test_rss_budget_follows_big_results() -> None:
    rss = np.full(20, 200.0 * MIB)
    rss[10] = 700 * MIB  # 500 MiB over baseline: over the slack unless results are big
    big = dataclasses.replace(SHAPE, result_tokens=400_000)  # 3.2 MB per result, 50 in flight
    assert check_bounded_rss(make_inputs(monitor=make_monitor(rss=rss)), BUDGETS).ok is False
    assert check_bounded_rss(make_inputs(monitor=make_monitor(rss=rss), shape=big), BUDGETS).ok is True
    # JSON bodies larger than the proto formula raise the budget too
    h = make_history(result_bytes=4_000_000)
    assert check_bounded_rss(make_inputs(monitor=make_monitor(rss=rss), history=h), BUDGETS).ok is True


def test_rss_drain() -> None:
    # peak 250 MiB (growth 50), drained 240 MiB: fine by default (fraction 1.0) ...
    m = make_monitor(drained=ProcessSnapshot(240 * MIB, 42, 5.0))
    assert check_bounded_rss(make_inputs(monitor=m), BUDGETS).ok is True
    # ... and too much with no retained fraction and a small epsilon
    strict = Budgets(drain_rss_growth_fraction=0.0, drain_rss_epsilon_bytes=16 * MIB)
    v = check_bounded_rss(make_inputs(monitor=m), strict)
    assert v.ok is False and v.figure == 50.0 and v.figure <= v.budget  # the peak was within its budget
    assert v.detail.startswith("not back to baseline: drained 240 MiB vs 200 MiB + 16 MiB + 0×50 MiB growth = 216 MiB")
    # still growing after the load: over even the default
    m = make_monitor(drained=ProcessSnapshot(400 * MIB, 42, 5.0))
    assert check_bounded_rss(make_inputs(monitor=m), BUDGETS).ok is False


def test_rss_unknown_without_metrics() -> None:
    m = make_monitor(rss=np.full(20, -1.0), baseline=None, drained=None)
    assert check_bounded_rss(make_inputs(monitor=m), BUDGETS).ok is None
    assert check_bounded_rss(make_inputs(monitor=make_monitor(drained=None)), BUDGETS).ok is None


# --------------------------------------------------------------------------- healthz_latency

def with_attempts(h: History, *rows: tuple[int, AttemptKind, float, int]) -> History:
    """Attach attempt-log rows (row, kind, end time, status or -ErrorClass)."""
    h.attempts = {
        "row": np.array([r[0] for r in rows], dtype=np.int32),
        "kind": np.array([r[1] for r in rows], dtype=np.uint8),
        "start": np.array([r[2] - 0.01 for r in rows], dtype=np.float32),
        "end": np.array([r[2] for r in rows], dtype=np.float32),
        "status": np.array([r[3] for r in rows], dtype=np.int16),
    }
    return h


def test_resets_with_no_fault_in_force_violate_unprovoked_resets() -> None:
    reset, refused = -int(ErrorClass.RESET), -int(ErrorClass.CONNECT)
    h = with_attempts(make_history(), (3, AttemptKind.POLL, 0.5, reset), (3, AttemptKind.POLL, 0.6, 200),
                      (7, AttemptKind.SUBMIT, 0.9, refused), (8, AttemptKind.POLL, 0.9, -int(ErrorClass.TIMEOUT)))
    v = check_unprovoked_resets(make_inputs(history=h), BUDGETS)
    assert v.ok is False and v.figure == 2 and v.budget == 0
    assert v.detail.startswith("2 attempts reset or refused with no fault in force (budget 0): 1 resets, "
                               "1 connect errors; first at 0.5s (poll of nonce 1003")
    # attempts per request are another invariant: the same history is not amplified
    amplification = check_retry_amplification(make_inputs(history=h), BUDGETS)
    assert amplification.ok is True and "reset" not in amplification.detail
    # the same attempts while a fault was in force (or within the grace after it) are the fault's
    faults = fault_log(applied(RESET, 0.2, 0.3))
    v = check_unprovoked_resets(make_inputs(history=h, faults=faults), BUDGETS)
    assert v.ok is True and v.figure == 0 and "those during edge:reset_peer or 5s after not counted" in v.detail
    # a budget allows some
    v = check_unprovoked_resets(make_inputs(history=h), Budgets(unprovoked_resets_max=2))
    assert v.ok is True and v.figure == 2 and "2 unprovoked resets ≤ 2" in v.detail


def test_unprovoked_resets_unknown_without_an_attempt_log() -> None:
    v = check_unprovoked_resets(make_inputs(), BUDGETS)  # attempt counts, but no per-attempt log
    assert v.ok is None and v.figure is None and "no attempt log" in v.detail
    sdk = dataclasses.replace(SHAPE, client="sdk")
    v = check_unprovoked_resets(make_inputs(history=make_history(attempts=0), shape=sdk), BUDGETS)
    assert v.ok is None and v.detail.startswith("no attempt log")  # unknown for either client, never ok
    assert check_unprovoked_resets(make_inputs(history=History.empty(0)), BUDGETS).ok is None


def test_resets_after_the_harness_stopped_the_load_are_not_the_servers() -> None:
    # A collapse was called at 0.7 s and the harness killed the server: the connect error at
    # 0.9 s is its doing; the reset at 0.5 s, before the stop, still counts.
    reset, refused = -int(ErrorClass.RESET), -int(ErrorClass.CONNECT)
    h = with_attempts(make_history(), (3, AttemptKind.POLL, 0.5, reset), (7, AttemptKind.SUBMIT, 0.9, refused))
    v = check_unprovoked_resets(make_inputs(history=h, interrupted=True, load_stopped_s=0.7), BUDGETS)
    assert v.ok is False and v.figure == 1 and "1 resets, 0 connect errors" in v.detail
    v = check_unprovoked_resets(make_inputs(history=h, interrupted=True, load_stopped_s=0.4), BUDGETS)
    assert v.ok is True and v.figure == 0


def test_idle_client_connections_get_one_fd_each() -> None:
    # 50 in flight at most, but the client held 120 connections open (70 idle, kept for reuse).
    monitor = make_monitor(fds=np.full(20, 40 + 64 + 3 * 50 + 60.0))
    assert check_bounded_fds(make_inputs(monitor=monitor), BUDGETS).ok is False
    monitor.samples["client_connections_peak"] = np.full(20, 120.0)
    v = check_bounded_fds(make_inputs(monitor=monitor), BUDGETS)
    assert v.ok is True and "+ 70 idle client connections" in v.detail


def test_bounded_cpu() -> None:
    # 1,000 requests × 2 attempts + 120 probes; results of 600 B; CPU 1 s -> 4 s over the trial.
    h = make_history(1000)
    monitor = make_monitor()
    v = check_bounded_cpu(make_inputs(history=h, monitor=monitor), BUDGETS)
    http = 2000 + monitor.healthz_t.size
    assert server_http_requests(h, monitor) == http
    per_request = 4000.0 / http
    assert v.figure == pytest.approx(per_request)
    kib = 1000 * 600 / 1024 / http
    assert v.budget == pytest.approx(SKYRL_CONTRACT.cpu_ms_per_request + BUDGETS.server_cpu_ms_per_result_kib * kib)
    assert v.ok is (per_request <= v.budget)
    tight = Budgets(server_cpu_ms_per_request=1.0, server_cpu_ms_per_result_kib=0.0)
    v = check_bounded_cpu(make_inputs(history=h, monitor=monitor), tight)
    assert v.ok is False and v.detail.startswith("over budget: 1.887 ms of server CPU per HTTP request")
    assert v.detail.endswith("vs 1 + 0×0.3 = 1.000 ms")  # a budget given wins over the family's figure
    # too few requests, or a fault in force: unknown, never ok
    assert check_bounded_cpu(make_inputs(monitor=monitor), BUDGETS).ok is None
    faulted = make_inputs(history=h, monitor=monitor, faults=fault_log(applied(RESET, 0.2, 0.3)))
    assert check_bounded_cpu(faulted, tight).ok is None
    assert check_bounded_cpu(make_inputs(history=h, monitor=None), tight).ok is None


def test_healthz_within_budget() -> None:
    v = check_healthz_latency(make_inputs(), BUDGETS)
    assert v.ok is True and v.figure == pytest.approx(0.01) and v.budget == BUDGETS.healthz_p99_s
    assert "during load" in v.detail


def test_healthz_slow_p99() -> None:
    lat = np.full(120, 0.01)
    lat[::20] = 2 * BUDGETS.healthz_p99_s  # 5% of probes take twice the budget
    v = check_healthz_latency(make_inputs(monitor=make_monitor(healthz_latency=lat)), BUDGETS)
    assert v.ok is False and v.figure > BUDGETS.healthz_p99_s and v.detail.startswith("slow: p99")


def test_healthz_failures() -> None:
    hok = np.ones(120, dtype=bool)
    hok[50] = False
    v = check_healthz_latency(make_inputs(monitor=make_monitor(healthz_ok=hok)), BUDGETS)
    # the figure stays the p99 (fine); the failures are named in the detail
    assert v.ok is False and v.figure == pytest.approx(0.01) and v.budget == BUDGETS.healthz_p99_s
    assert v.detail.startswith("failing: 1 failed (allowed 0) at 0.5s")
    lenient = Budgets(healthz_failure_fraction=0.05)
    assert check_healthz_latency(make_inputs(monitor=make_monitor(healthz_ok=hok)), lenient).ok is True
    assert check_healthz_latency(make_inputs(monitor=make_monitor(healthz_ok=hok)),
                                 Budgets(healthz_max_failures=1)).ok is True


def test_healthz_only_during_load() -> None:
    # load runs 0..1.09 s; a slow probe at 5 s (after the load) does not count
    ht = np.concatenate([np.arange(0.0, 1.0, 0.1), [5.0]])
    lat = np.concatenate([np.full(10, 0.01), [3.0]])
    v = check_healthz_latency(make_inputs(monitor=make_monitor(healthz_t=ht, healthz_latency=lat)), BUDGETS)
    assert v.ok is True and "10 probes" in v.detail


def test_healthz_probes_during_a_fault_and_its_recovery_are_not_judged() -> None:
    t = np.arange(0.0, 60.0, 0.5)
    lat = np.full(t.size, 0.01)
    lat[(t >= 2.0) & (t < 12.0)] = 8.0  # a 10 s stall starting with a fault at 2-3 s
    ok = np.ones(t.size, dtype=bool)
    ok[t == 2.0] = False
    h = make_history(8)
    h["submit_start"][:] = 0.0
    h["done"][:] = 55.0
    monitor = make_monitor(healthz_t=t, healthz_latency=lat, healthz_ok=ok)
    faults = fault_log(applied(CRASH, 2.0, 3.0))
    v = check_healthz_latency(make_inputs(history=h, monitor=monitor, faults=faults), BUDGETS)
    assert v.ok is True and "63 probes during faults or 30s after not judged (max 8.000s, 1 failed)" in v.detail
    # without the fault the same stall is judged
    assert check_healthz_latency(make_inputs(history=h, monitor=monitor), BUDGETS).ok is False
    # a stall that outlasts the recovery allowance is judged as usual
    short = Budgets(healthz_fault_recovery_s=5.0)
    v = check_healthz_latency(make_inputs(history=h, monitor=monitor, faults=faults), short)
    assert v.ok is False and v.detail.startswith("slow: p99")
    # every probe inside the allowance: unknown, never ok
    inside = make_monitor(healthz_t=np.arange(2.0, 20.0, 0.5), healthz_latency=np.full(36, 8.0),
                          healthz_ok=np.ones(36, dtype=bool))
    v = check_healthz_latency(make_inputs(history=h, monitor=inside, faults=faults), BUDGETS)
    assert v.ok is None and "fell during a fault or its recovery allowance" in v.detail


def test_a_probe_in_flight_when_a_fault_began_is_not_judged() -> None:
    # Probes every 0.5 s; the one sent at 5.5 s took 0.1 s and failed: the server was restarted at 5.55 s
    # (nightly fixed row, trial 54). One that failed at 2.0 s, with no fault near, still counts.
    t = np.arange(0.0, 10.0, 0.5)
    lat = np.full(t.size, 0.01)
    ok = np.ones(t.size, dtype=bool)
    lat[t == 5.5], ok[t == 5.5] = 0.1, False
    h = make_history(8)
    h["submit_start"][:] = 0.0
    h["done"][:] = 9.0
    monitor = make_monitor(healthz_t=t, healthz_latency=lat, healthz_ok=ok)
    restart = fault_log(applied(Fault("server", "restart", start_s=5.55), 5.55, 5.9))
    v = check_healthz_latency(make_inputs(history=h, monitor=monitor, faults=restart), BUDGETS)
    assert v.ok is True and "(max 0.100s, 1 failed)" in v.detail, v.detail
    ok[t == 2.0] = False
    monitor = make_monitor(healthz_t=t, healthz_latency=lat, healthz_ok=ok)
    assert check_healthz_latency(make_inputs(history=h, monitor=monitor, faults=restart), BUDGETS).ok is False


def test_healthz_unknown_without_probes() -> None:
    empty = np.empty(0)
    m = make_monitor(healthz_t=empty, healthz_latency=empty, healthz_ok=np.empty(0, dtype=bool))
    assert check_healthz_latency(make_inputs(monitor=m), BUDGETS).ok is None
    assert check_healthz_latency(make_inputs(monitor=None), BUDGETS).ok is None


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


_OBSERVED = ("2026-12-02 23:10:01,412 - WARNING - faultload.dbpool: DB pool exhausted: 3 checkouts waited >= 1 s "
             "for a connection in the last 1 s (longest 2.10 s, 0 timed out); QueuePool size 5, overflow 10\n")


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
    text = (f"{log_time(1.0)} - ERROR - skyrl: Forwarding task failed: ClientOSError(104, 'Connection\n"
            "reset by peer')\n")
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


def test_classify_warnings_levels_and_generic_errors() -> None:
    text = "".join([
        f"{log_time(1.0)} - WARNING - skyrl: Transient error talking to http://127.0.0.1:40123 "
        "(ClientConnectorError: Cannot connect to host 127.0.0.1:40123 ssl:default [Connection refused]) "
        "— refreshing proxy URL and retrying once\n",
        f"{log_time(1.1)} - WARNING - skyrl: Requested prompt logprobs but vLLM /v1/completions returned none\n",
        f"{log_time(1.2)} - WARNING - skyrl: External future 77 was evicted before its result arrived — dropping\n",
        f"{log_time(1.3)} - INFO - uvicorn.access: 127.0.0.2:50312 - \"POST /api/v1/retrieve_future HTTP/1.1\" 500\n",
        f"{log_time(1.4)} - ERROR - skyrl: Background engine crashed with exit code 137, exiting API server\n",
        f"{log_time(1.5)} - ERROR - skyrl: Background engine crashed with exit code 1, exiting API server\n",
        rich_traceback(f"{log_time(1.6)} - ERROR - skyrl: Future poller iteration failed",
                       ["/opt/skyrl/tinker/api.py:205 in _poll"], ["KeyError: 123456"]),
        "ERROR:    Exception in ASGI application\n",
        "Traceback (most recent call last):\n",
        '  File "x.py", line 1, in f\n',
        "ValueError: bad request 0x7f3a\n",
    ])
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
    assert v.detail.startswith(f"2 error lines with no fault injected: too_many_open_files ×1: {log_time(3.0)} ERROR skyrl")
    assert "pool_timeout ×1" in v.detail


def test_errors_inside_fault_windows_are_attributed() -> None:
    log = classify_log(CLEAN_LOG + plain_reset_log(2.5) + plain_reset_log(7.0))
    faults = fault_log(applied(RESET, 2.0, 3.0, 0), applied(Fault("backend", "down", start_s=6.5, duration_s=1.0),
                                                            6.5, 7.5, 1))
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
    return (f"{log_time(t)} - ERROR - skyrl: Backend-forwarded sample failed (request_id={request_id}) | "
            "ServerDisconnectedError: Server disconnected\n")


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
    v = check_clean_server_log(make_inputs(history=h, server_log=classify_log(plain_reset_log(11.0)),
                                           faults=faults), BUDGETS)
    assert v.ok is False


def test_log_not_attributable_with_faults_is_unknown() -> None:
    log = classify_log(plain_reset_log(2.5))
    faults = fault_log(applied(RESET, 2.0, 3.0), epoch=None)
    v = check_clean_server_log(make_inputs(server_log=log, faults=faults, trial_start_epoch=None), BUDGETS)
    assert v.ok is None and v.detail.startswith("faults were active; log not attributable")
    untimed = classify_log("Traceback (most recent call last):\n  File \"x\", line 1\nConnectionResetError: reset\n")
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
@given(peak=st.integers(40, 2000), in_flight=st.integers(0, 400), idle=st.integers(0, 100),
       rss_growth_mib=st.floats(0, 2000))
def test_resource_figures_cross_their_budgets_exactly_when_the_peak_rule_fails(
        peak: int, in_flight: int, idle: int, rss_growth_mib: float) -> None:
    """One definition: the steering figure is the judged one, so figure > budget iff "over budget"."""
    fds = np.full(20, 40.0)
    fds[7] = peak
    monitor = make_monitor(fds=fds, rss=np.full(20, 200 * MIB + rss_growth_mib * MIB),
                           client_in_flight=np.full(20, float(in_flight)))
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
    for name in ("no_lost_results", "accepted_requests", "result_integrity", "bounded_fds", "bounded_rss",
                 "healthz_latency", "bounded_cpu", "retry_amplification", "unprovoked_resets", "clean_server_log"):
        assert verdicts[name].ok is None, verdicts[name]
    assert overall(verdicts.values()) is None


def test_a_crashing_checker_is_unknown_never_ok() -> None:
    def crashes(inputs: CheckInputs, budgets: Budgets) -> Verdict:
        raise ZeroDivisionError("division by zero")

    def returns_junk(inputs: CheckInputs, budgets: Budgets) -> Verdict:
        return True  # type: ignore[return-value]

    verdicts = check_all(make_inputs(), BUDGETS, [("crashes", crashes), ("junk", returns_junk),
                                                 ("no_lost_results", check_no_lost_results)])
    assert verdicts[0] == Verdict("crashes", None, None, None, "checker crashed: ZeroDivisionError: division by zero")
    assert verdicts[1].ok is None and verdicts[1].detail.startswith("checker crashed: TypeError")
    assert verdicts[2].ok is True
    assert overall(verdicts) is None


def test_real_checkers_crash_to_unknown_on_broken_inputs() -> None:
    broken = History({"nonce": np.zeros(3, dtype=np.int64)})  # columns missing
    verdicts = check_all(make_inputs(history=broken), BUDGETS)
    by_name = {v.name: v for v in verdicts}
    assert by_name["no_lost_results"].ok is None
    assert by_name["no_lost_results"].detail.startswith("checker crashed: KeyError")
    assert not any(v.ok is True and v.name in ("no_lost_results", "accepted_requests", "result_integrity",
                                                "retry_amplification", "unprovoked_resets")
                   for v in verdicts)


def test_overall_merges_like_jepsen() -> None:
    t, f, u = (Verdict("a", ok, None, None, "") for ok in (True, False, None))
    assert overall([t, t]) is True
    assert overall([t, u]) is None
    assert overall([u, f, t]) is False
    assert overall([]) is True


def test_to_report_is_json_ready() -> None:
    verdicts = check_all(make_inputs(), BUDGETS) + [Verdict("x", None, math.nan, np.float64(math.inf), "d"),
                                                    Verdict("y", False, np.int64(3), np.float32(2.5), "d")]
    report = to_report(verdicts)
    assert all(set(r) == {"name", "ok", "figure", "budget", "detail"} for r in report)
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
    v = check_no_lost_results(make_inputs(history=h, faults=faults, fatal_fault_kinds=frozenset({"server:restart"})), BUDGETS)
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
