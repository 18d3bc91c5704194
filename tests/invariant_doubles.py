"""Test doubles for the invariant tests: hand-made histories, monitor samples, fault logs and server logs
(as SkyRL 0.4.0 writes them). Imported by the test_invariants_* files and the checkers' other tests."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import numpy as np

from faultload.checker.budgets import MIB, Budgets
from faultload.checker.inputs import CheckInputs
from faultload.model.family import SKYRL_CONTRACT
from faultload.model.faults import Fault
from faultload.model.shape import LoadShape
from faultload.record.faults import AppliedFault, FaultLog
from faultload.record.history import AttemptKind, ErrorClass, History, Outcome
from faultload.record.samples import SAMPLE_FIELDS, MonitorSamples, ProcessSnapshot
from faultload.record.serverlog import classify_log

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
    return AppliedFault(
        index,
        fault,
        applied_at_s=at,
        removed_at_s=until,
        applied_at_epoch=TRIAL_START_EPOCH + at,
        removed_at_epoch=None if until is None else TRIAL_START_EPOCH + until,
        error=error,
    )


CRASH = Fault("router", "crash", start_s=0.2, duration_s=0.3)
RESET = Fault("edge", "reset_peer", start_s=0.2, duration_s=0.3)


def fault_log(*records: AppliedFault, epoch: float | None = TRIAL_START_EPOCH) -> FaultLog:
    return FaultLog(tuple(records), epoch)


def make_inputs(**changes: Any) -> CheckInputs:
    base = CheckInputs(
        history=make_history(),
        monitor=make_monitor(),
        faults=None,
        shape=SHAPE,
        contract=SKYRL_CONTRACT,
        server_log=classify_log(CLEAN_LOG),
        trial_start_epoch=TRIAL_START_EPOCH,
        router_completed_s={},
        router_repeats={},
    )  # our router's log, with no completion in it
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
{log_time(-6.0)} - INFO - uvicorn.error: Started server process [6256]{" " * 180}
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
        [
            "TimeoutError: QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00 "
            "(Background on this error at: https://sqlalche.me/e/20/3o7r)"
        ],
    )


def forwarding_timeout_log(t: float) -> str:
    first = rich_traceback(
        f"{log_time(t)} - ERROR - skyrl: Backend-forwarded sample failed (request_id=17)",
        ["/opt/skyrl/tinker/extra/skyrl_train_inference_forwarding.py:140 in _forward_with_retry"],
        [
            "SocketTimeoutError: Timeout on reading data from socket",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
        ],
    )
    # Rich wraps the long exception line at 250 columns
    second = (
        "\n".join(
            [
                BOX_TOP,
                "│ /opt/skyrl/tinker/extra/skyrl_train_inference_forwarding.py:146 in _forward_with_retry │",
                BOX_BOTTOM,
                "RuntimeError: Inference request to http://127.0.0.1:40123 timed out after 30s waiting for a "
                "response (read timeout). The request was not retried because vLLM may still be executing it. "
                "If requests are expected to take this long (long prompts, large",
                "max_tokens, or queueing behind other requests), increase the deadline with "
                "`--forwarding-inference-timeout-sec`.",
            ]
        )
        + "\n"
    )
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


NO_RETENTION = dataclasses.replace(BUDGETS, retention_window_s=0.0, in_flight_request_overhead_bytes=0)


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
    rows = [
        (row, AttemptKind.SUBMIT, float(h["submit_end"][row]), status)
        for row, codes in statuses.items()
        for status in codes
    ]
    return with_attempts(h, *rows)


NOT_LOADED = 'asample: HTTP 400: b\'{"detail":"base model not loaded"}\''


def with_abandoned_polls(h: History, drops: dict[int, float]) -> History:
    """Record one abandoned first poll (dropped at the given trial second) per row."""
    rows = np.array(sorted(drops), dtype=np.int32)
    h.attempts = {
        "row": rows,
        "kind": np.full(rows.size, AttemptKind.ABANDONED, dtype=np.uint8),
        "start": np.array([drops[r] - 0.25 for r in rows], dtype=np.float32),
        "end": np.array([drops[r] for r in rows], dtype=np.float32),
        "status": np.zeros(rows.size, dtype=np.int16),
    }
    return h


def _stalled_monitor(stall: tuple[float, float]) -> MonitorSamples:
    """Probes every 0.5 s over 60 s; those starting in ``stall`` time out after 10 s."""
    ht = np.arange(0.0, 60.0, 0.5)
    inside = (ht >= stall[0]) & (ht < stall[1])
    return make_monitor(seconds=60.0, healthz_t=ht, healthz_latency=np.where(inside, 10.0, 0.01), healthz_ok=~inside)
