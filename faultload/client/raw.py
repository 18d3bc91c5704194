"""The SDK-shaped raw client: the Tinker SDK's sampling retry policy over a lean HTTP pool.

Why not the SDK itself for load: one SDK client holds a thread, an httpx/pyqwest
pool and telemetry per process, and cannot bind a source address; the load
needs thousands of requests per second from a few processes on distinct
127.x.y.z addresses. This client reproduces what matters for the server:

- asample POSTs: at most ``submit_concurrency`` in flight, retried as the
  SDK's ``execute_with_retries`` does (for 300 s, scaled), a 429 paused and
  retried afresh;
- an outstanding cap like ``sample_max_concurrent_requests``;
- retrieve_future polls with a 45 s (scaled) client timeout, re-polled as
  the SDK's ``_result_async`` does, with no count limit;
- ``Accept: application/x-protobuf`` as the SDK sends for sample results.

The rules, as read from the SDK, are in :mod:`faultload.client.sdk_rules`.
Every loop ends by the job's deadline (the trial's wall bound) or its stop: a
request still retrying then stays ``PENDING`` (unfinished, not given up), as a
real client would still be waiting there.

HTTP goes through :class:`faultload.client.http.HttpPool` (one per worker,
keep-alive, bound to the worker's source address), which costs about a quarter
of aiohttp's client CPU per request (``bench/client_cpu.py``). It is built with
``retry_stale=False``: like aiohttp for a POST, a reused connection that fails
before any response byte is an error the policy here sees and counts, never a
silent retry, so an injected drop is never hidden.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import Any, Callable

import numpy as np
import simdjson

from faultload.client import decode
from faultload.client.arrivals import arrival_offsets
from faultload.client.counters import (
    ACCEPTED,
    ATTEMPTS,
    COMPLETED,
    CONNECTIONS_PEAK,
    FAILED,
    IN_FLIGHT,
    POLL_TIMEOUTS,
    SUBMITTED,
    LiveCounters,
)
from faultload.client.endpoint import classify_error, json_headers, make_session, split_base_url
from faultload.client.http import HttpPool
from faultload.client.job import WorkerJob
from faultload.client.poll_plan import first_poll_plan
from faultload.client.sample_bodies import asample_body, poll_body, request_id_of
from faultload.client.sdk_rules import (
    BAD_REQUEST_RETRIES,
    RATE_LIMITED,
    RETRYABLE_SUBMIT_STATUSES,
    SDK_SAMPLING_RULES,
    backoff_s,
    failure_reported,
    is_try_again,
    rate_limit_pause_s,
)
from faultload.model.sdk import SDK_REQUEST_TIMEOUT_S
from faultload.record.history import (
    TRY_AGAIN,
    AttemptKind,
    AttemptRecorder,
    ErrorClass,
    History,
    Outcome,
    bump_count,
    server_id_key,
)

RULES = SDK_SAMPLING_RULES  # which answers are retried, and how
# How long an abandoned poll stays open at the server before the client drops it.
ABANDON_AFTER_S = 0.25
# How often a running worker checks for a stop request.
STOP_CHECK_S = 0.2
_UINT32_MAX = int(np.iinfo(np.uint32).max)  # result_bytes saturates here


class RawClient:
    """Runs one worker's share of a trial against ``job.base_url``."""

    def __init__(self, job: WorkerJob, session: HttpPool, counters: LiveCounters) -> None:
        self.job = job
        self.shape = job.shape
        self.policy = job.shape.policy
        self.session = session
        self.counters = counters
        self.history = History.empty(job.count)
        self._h = self.history.columns  # the hot paths index the columns' dict directly, not History.__getitem__
        self._t0 = job.t0
        self._attempts = AttemptRecorder()
        self.history["worker"][:] = job.worker
        self.examples: dict[str, str] = {}
        self._parser = simdjson.Parser()
        self._rng = random.Random((job.shape.seed << 16) ^ job.worker)
        prefix = split_base_url(job.base_url)[2]
        self._url_sample = f"{prefix}/api/v1/asample"
        self._url_poll = f"{prefix}/api/v1/retrieve_future"
        accept = decode.PROTO_CONTENT_TYPE if self.shape.accept == "proto" else "application/json"
        self._json_headers = json_headers(job)
        self._poll_headers = f"Accept: {accept}\r\n".encode() + self._json_headers
        cap = self.shape.max_outstanding
        per_worker = max(1, cap // self.shape.workers) if cap else 0
        self._outstanding = asyncio.Semaphore(per_worker) if per_worker else None
        self._submit = asyncio.Semaphore(max(1, self.policy.submit_concurrency // self.shape.workers))
        self._rate_limit_pause_s = self.shape.scaled(rate_limit_pause_s(self.shape.prompt_extra_tokens))

    def now(self) -> float:
        return time.monotonic() - self._t0

    def _record(self, row: int, kind: AttemptKind, started: float, status: int) -> None:
        self._attempts.add(row, kind, started, self.now(), status)

    def _note(self, row: int, error: ErrorClass, message: str) -> None:
        self.history["error"][row] = error
        self.examples.setdefault(error.key, message[:300])

    async def _backoff(self, attempt: int) -> None:
        await asyncio.sleep(self.shape.scaled(backoff_s(attempt, self.policy.backoff_cap_s)))

    async def run(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Run every request until done, the deadline, or ``stop()``; keep partial history.

        A feeder starts a request only when an outstanding slot is free, so
        at most ``max_outstanding`` request tasks exist at once.
        """
        self._tasks: set[asyncio.Task] = set()
        self._settled = asyncio.Event()  # all requests finished, or one raised
        self._error: BaseException | None = None
        self._fed = False
        feeder = asyncio.ensure_future(self._feed())
        while not stop() and not self._settled.is_set() and self.now() < self.job.deadline_s:
            slice_s = min(STOP_CHECK_S, max(0.0, self.job.deadline_s - self.now()))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._settled.wait(), slice_s)
            self.counters.set(CONNECTIONS_PEAK, self.session.peak_live)
        self.counters.set(CONNECTIONS_PEAK, self.session.peak_live)
        leftovers = [feeder, *self._tasks]
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)
        self.close()
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Freeze the attempt rows into the history (idempotent; a crashed worker calls it too)."""
        self.history.attempts = self._attempts.columns()

    async def _feed(self) -> None:
        offsets = arrival_offsets(self.shape, self.job.first, self.job.count)  # None: a burst
        try:
            for row in range(self.job.count):
                if offsets is not None and offsets[row] > self.now():
                    await asyncio.sleep(offsets[row] - self.now())
                if self._outstanding is not None:
                    await self._outstanding.acquire()
                task = asyncio.ensure_future(self._one(row))
                self._tasks.add(task)
                task.add_done_callback(self._finished)
                if row % 256 == 255:
                    await asyncio.sleep(0)  # let started requests run while we feed
        finally:
            self._fed = True
            if not self._tasks:
                self._settled.set()

    def _finished(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if self._outstanding is not None:
            self._outstanding.release()
        if not task.cancelled() and task.exception() is not None and self._error is None:
            self._error = task.exception()
            self._settled.set()
        if self._fed and not self._tasks:
            self._settled.set()

    async def _one(self, row: int) -> None:
        h = self._h
        nonce = self.job.nonce(self.job.first + row)
        h["nonce"][row] = nonce
        self.counters.add(IN_FLIGHT)
        try:
            h["submit_start"][row] = self.now()
            self.counters.add(SUBMITTED)
            async with self._submit:
                request_id = await self._asample(row, nonce)
            if isinstance(request_id, Outcome):
                if request_id == Outcome.REJECTED:
                    h["submit_end"][row] = self.now()
                    h["outcome"][row] = Outcome.REJECTED
                    self.counters.add(FAILED)
                return  # PENDING: still retrying when the load stopped
            h["submit_end"][row] = self.now()
            h["server_id"][row] = server_id_key(request_id)
            self.counters.add(ACCEPTED)
            outcome = await self._retrieve(row, nonce, request_id)
            if outcome == Outcome.PENDING:
                return  # still polling when the load stopped
            h["outcome"][row] = outcome
            h["done"][row] = self.now()
            self.counters.add(COMPLETED if outcome == Outcome.OK else FAILED)
        finally:
            self.counters.add(IN_FLIGHT, -1)

    async def _asample(self, row: int, nonce: int) -> str | Outcome:
        """The server's request id (its text), or REJECTED (the SDK raised), or PENDING (the deadline came first)."""
        h = self._h
        body = asample_body(self.job, row, nonce)
        timeout_s = self.shape.scaled(SDK_REQUEST_TIMEOUT_S)  # connects are bounded by the pool's connect_timeout_s
        window_s = self.shape.scaled(self.policy.submit_retry_window_s)
        window_start, failures = self.now(), 0
        while self.now() < self.job.deadline_s:
            bump_count(h["attempts"], row)
            self.counters.add(ATTEMPTS)
            started = self.now()
            try:
                status, _, payload = await self.session.post(self._url_sample, body, self._json_headers, timeout_s)
            except OSError as exc:  # every HttpError, and TimeoutError
                bump_count(h["transport_errors"], row)
                self._note(row, classify_error(exc), f"asample: {type(exc).__name__}: {exc}")
                self._record(row, AttemptKind.SUBMIT, started, -classify_error(exc))
            else:
                self._record(row, AttemptKind.SUBMIT, started, status)
                if 200 <= status < 300:  # as the SDK: any 2xx (SkyRL answers 200, TuFT 202)
                    return self._request_id(row, payload)
                error = ErrorClass.HTTP_5XX if status >= 500 else ErrorClass.HTTP_4XX
                self._note(row, error, f"asample: HTTP {status}: {payload[:200]!r}")
                if status not in RETRYABLE_SUBMIT_STATUSES and not (status >= 500 and RULES.retry_server_errors):
                    return Outcome.REJECTED
                if status == RATE_LIMITED:
                    bump_count(h["submit_retries"], row)
                    await asyncio.sleep(self._rate_limit_pause_s)
                    window_start, failures = self.now(), 0
                    continue
            # As execute_with_retries: retry while inside the window, never sleeping past its end.
            left_s = window_start + window_s - self.now()
            if left_s <= 0:
                return Outcome.REJECTED  # the SDK raises what it last met
            bump_count(h["submit_retries"], row)
            await asyncio.sleep(min(self.shape.scaled(backoff_s(failures, self.policy.backoff_cap_s)), left_s))
            failures += 1
        return Outcome.PENDING

    def _request_id(self, row: int, payload: bytes) -> str | Outcome:
        try:
            return request_id_of(self._parser, payload)
        except (ValueError, KeyError, TypeError, RuntimeError) as exc:  # RuntimeError: simdjson's bigint or depth
            self._note(row, ErrorClass.DECODE, f"asample: bad body: {exc}")
            return Outcome.REJECTED

    def _first_poll_plan(self, nonce: int) -> tuple[float, bool]:
        return first_poll_plan(self.shape, nonce)

    async def _retrieve(self, row: int, nonce: int, request_id: str) -> Outcome:
        h = self._h
        delay, abandon = self._first_poll_plan(nonce)
        if delay:
            await asyncio.sleep(delay)
        body = poll_body(request_id)
        poll_timeout = self.shape.scaled(self.policy.poll_timeout_s)
        transport_failures = 0
        bad_requests = 0
        poll = 0
        while self.now() < self.job.deadline_s:  # as the SDK: no count limit; the trial's wall bound ends it
            poll += 1
            if poll > 1:
                bump_count(h["repolls"], row)
            bump_count(h["attempts"], row)
            self.counters.add(ATTEMPTS)
            started = self.now()
            try:
                answer = await self._send_poll(row, body, poll_timeout, abandon and poll == 1, started)
            except OSError as exc:  # every HttpError, and TimeoutError
                bump_count(h["transport_errors"], row)
                if classify_error(exc) == ErrorClass.TIMEOUT:
                    self.counters.add(POLL_TIMEOUTS)
                self._note(row, classify_error(exc), f"retrieve_future: {type(exc).__name__}: {exc}")
                self._record(row, AttemptKind.POLL, started, -classify_error(exc))
                await self._backoff(transport_failures)
                transport_failures += 1
                continue
            if answer is None:  # abandoned client-side: poll again
                continue
            status, ctype, payload = answer
            try_again = status == 200 and is_try_again(ctype, payload)
            self._record(row, AttemptKind.POLL, started, TRY_AGAIN if try_again else status)
            if status in RULES.poll_backoff_statuses:
                # As the SDK: rate limited -> re-poll after the connection-error backoff,
                # whose exponent a 429 does not reset.
                self._note(row, ErrorClass.HTTP_4XX, f"retrieve_future: HTTP {status}: {payload[:200]!r}")
                await self._backoff(transport_failures)
                transport_failures += 1
                continue
            transport_failures = 0
            if try_again:
                continue  # as the SDK: the server's "not yet", polled again at once
            failure = failure_reported(ctype, payload) if status == 200 else None
            if failure is not None:  # as the SDK: a 200 that reports the request failed raises, definite
                self._note(row, ErrorClass.SERVER_FAILED, f"retrieve_future: 200 request failed: {failure[:300]}")
                return Outcome.FAILED
            if status == 200:
                return self._judge(row, nonce, ctype, payload)
            outcome, bad_requests = self._settle(row, request_id, status, payload, bad_requests)
            if outcome is not None:
                return outcome
        return Outcome.PENDING

    async def _send_poll(
        self, row: int, body: bytes, timeout_s: float, abandon: bool, started: float
    ) -> tuple[int, str, bytes] | None:
        """One poll's answer; None when it was abandoned client-side (recorded, and waited out)."""
        request = self._post_poll(body, timeout_s)
        if not abandon:
            return await request
        result = await self._abandon(request)
        if result is None:
            self._record(row, AttemptKind.ABANDONED, started, 0)
            await asyncio.sleep(self.shape.scaled(self.shape.abandon_polls.after_s))
        return result

    def _settle(
        self, row: int, request_id: str, status: int, payload: bytes, bad_requests: int
    ) -> tuple[Outcome | None, int]:
        """What a poll answered with neither 200 nor 429 ends as: (outcome, or None to poll again; bare 400s so far)."""
        if status in RULES.lost_statuses:
            self._note(row, ErrorClass.HTTP_404, f"retrieve_future {request_id}: HTTP {status}: {payload[:200]!r}")
            return Outcome.LOST, bad_requests
        if status in RULES.poll_at_once_statuses or (status >= 500 and RULES.retry_server_errors):
            if status >= 500:
                self._note(row, ErrorClass.HTTP_5XX, f"retrieve_future: HTTP {status}: {payload[:200]!r}")
            # as the SDK: a 408 is a round trip, re-opening the bare-400 budget
            return None, 0 if status in RULES.bad_request_reset_by else bad_requests
        if status == RULES.bad_request:
            self._note(row, ErrorClass.SERVER_FAILED, f"retrieve_future: HTTP {status}: {payload[:300]!r}")
            if bad_requests < BAD_REQUEST_RETRIES:
                return None, bad_requests + 1
            return Outcome.FAILED, bad_requests
        self._note(row, ErrorClass.HTTP_4XX, f"retrieve_future: HTTP {status}: {payload[:200]!r}")
        return Outcome.FAILED, bad_requests

    def _post_poll(self, body: bytes, timeout_s: float):
        """The poll request (a coroutine: awaited, or wrapped in a task to abandon)."""
        return self.session.post(self._url_poll, body, self._poll_headers, timeout_s)

    async def _abandon(self, request) -> tuple[int, str, bytes] | None:
        """Start a poll and drop it client-side unless it answers within ABANDON_AFTER_S."""
        task = asyncio.ensure_future(request)
        done, _ = await asyncio.wait([task], timeout=ABANDON_AFTER_S)
        if done:
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None

    def _judge(self, row: int, nonce: int, ctype: str, payload: bytes) -> Outcome:
        self.history["result_bytes"][row] = min(len(payload), _UINT32_MAX)
        try:
            result = decode.decode(payload, ctype, self._parser)
        except decode.DecodeError as exc:
            self._note(row, ErrorClass.DECODE, f"result of nonce {nonce}: {exc}")
            return Outcome.CORRUPT
        problem = decode.check(
            result, nonce, self.shape.num_samples, self.shape.result_tokens, self.shape.prompt_extra_tokens
        )
        if problem is not None:
            self._note(row, ErrorClass.INTEGRITY, f"result of nonce {nonce}: {problem}")
            return Outcome.CORRUPT
        return Outcome.OK


async def run_raw(
    job: WorkerJob,
    counter_array: Any,
    slots: int,
    stop: Callable[[], bool],
    built: Callable[[RawClient], None] = lambda client: None,
) -> RawClient:
    """Run one worker's raw client; ``built`` gets it before it runs (its history outlives a crash)."""
    async with make_session(job) as session:
        client = RawClient(job, session, LiveCounters(counter_array, job.worker, slots))
        built(client)
        await client.run(stop)
    return client
