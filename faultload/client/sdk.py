"""Load through the real tinker SDK: ServiceClient -> sampling client -> sample_async (or sample, where deprecated).

Used to check that what the raw client shows also holds for the SDK users
run. Per request it records what the raw client records: the SDK's HTTP
attempts (submits and polls, each with its status or transport error), its
retries and re-polls, the server's request id — all seen on the wire by
:mod:`faultload.client.sdk_wire` — and the outcome and error class of its
final answer or exception.

What it cannot do: bind a source address (its traffic comes from 127.0.0.1
whatever the worker), delay or abandon polls, ask for JSON results, follow a
policy other than its own (a retry storm), or spread arrivals; its backoff
sleeps (1-30 s) are not scaled by the time scale (its HTTP timeouts are).
``LoadShape.validate`` refuses such shapes.

The SDK's session and sampling client are opened in :func:`prepare_sdk`,
before the trial's clock starts, so the trial times (and faults) the load only.
What the SDK raises is a request's outcome, never the worker's crash: an
exception from ``sample_async`` ends that request; one from the set-up
(``ServiceClient``, ``create_sampling_client``: where a user's program would
have stopped before sending anything) ends every request of the worker as
rejected, with that error class.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from typing import Any, Callable

import tinker
from tinker import types

from faultload.client import decode
from faultload.client.counters import COMPLETED, CONNECTIONS_PEAK, FAILED, IN_FLIGHT, SUBMITTED, LiveCounters
from faultload.client.job import WorkerJob
from faultload.client.sdk_wire import SdkWire, classify_exception, installed
from faultload.model import tokens
from faultload.model.sdk import sdk_version
from faultload.record.history import ErrorClass, History, Outcome

# The SDK insists on a key ("tml-" prefix). The job's (faultload's own, or a url= target's --api-key /
# TINKER_API_KEY) is given to ServiceClient as a value (it hands it to every holder and pool), never written
# to os.environ, so a TINKER_API_KEY in the environment reaches only the server it was given for.
_STOP_CHECK_S = 0.2
_GAVE_UP = (ErrorClass.CONNECT, ErrorClass.RESET, ErrorClass.TIMEOUT)


def final_outcome(error: ErrorClass, accepted: bool) -> Outcome:
    """How a request the SDK gave up on ended, as the raw client would call it.

    Never accepted: rejected. Accepted: a 404 is a lost result, transport
    errors are giving up, an undecodable result is corrupt, the rest (the
    server's failure report, other HTTP errors) failed.
    """
    if not accepted:
        return Outcome.REJECTED
    if error == ErrorClass.HTTP_404:
        return Outcome.LOST
    if error in _GAVE_UP:
        return Outcome.GAVE_UP
    if error in (ErrorClass.DECODE, ErrorClass.INTEGRITY):
        return Outcome.CORRUPT
    return Outcome.FAILED


def socket_count() -> int:
    """Sockets this process holds (-1 where /proc is not readable)."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return -1
    count = 0
    for fd in fds:
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


class SdkClient:
    def __init__(self, job: WorkerJob, counters: LiveCounters) -> None:
        self.job = job
        self.counters = counters
        self.history = History.empty(job.count)
        self.history["worker"][:] = job.worker
        self.examples: dict[str, str] = {}
        self.wire = SdkWire(job, self.history, self.examples, counters.add, self.now)
        self._installed = installed(self.wire, job.shape.time_scale)
        self.service: Any = None
        self.sampling: Any = None
        self._sample: Callable[..., Any] | None = None  # how this release samples (sample_call), set by run
        self.setup_error: Exception | None = None  # what the SDK raised while setting up

    def now(self) -> float:
        return time.monotonic() - self.job.t0

    def prepare(self) -> None:
        """Open the SDK's session and sampling client (blocking; call outside an event loop).

        What the SDK raises here is kept as :attr:`setup_error` for :meth:`run` to record.
        """
        self._installed.__enter__()
        try:
            access = self.job.access  # an https target's CA: SSL_CERT_FILE, set by the worker process's entry
            self.service = tinker.ServiceClient(
                base_url=self.job.base_url, api_key=access.api_key, default_headers=dict(access.headers)
            )
            sampling = self.service.create_sampling_client(base_model=self.job.base_model)
            # tinker >= 0.38 answers a future of the client (its session opens in the background): waited for
            # here, so what opening it raised is the set-up's error, as on 0.25
            self.sampling = sampling.result() if callable(getattr(sampling, "result", None)) else sampling
        except Exception as exc:  # the SDK gave up setting up: every request's outcome (see run)
            self.setup_error = exc

    def _set_up_failed(self, exc: Exception) -> None:
        """Every request ends rejected with the set-up's error: none could be sent."""
        h = self.history
        error = classify_exception(exc)
        h["nonce"][:] = [self.job.nonce(self.job.first + row) for row in range(self.job.count)]
        h["submit_start"][:] = 0.0
        h["submit_end"][:] = 0.0
        h["outcome"][:] = Outcome.REJECTED
        h["error"][:] = error
        self.examples.setdefault(error.key, f"sdk set-up: {type(exc).__name__}: {exc}"[:300])
        self.counters.add(SUBMITTED, self.job.count)
        self.counters.add(FAILED, self.job.count)

    async def run(self, stop: Callable[[], bool]) -> None:
        """Run every request until done, the deadline, or ``stop()``; keep partial history."""
        if self.setup_error is not None:
            self._set_up_failed(self.setup_error)
            self.close()
            return
        shape = self.job.shape
        self._sample = sample_call(self.sampling)
        cap = max(1, shape.max_outstanding // shape.workers) if shape.max_outstanding else self.job.count
        gate = asyncio.Semaphore(cap)
        params = types.SamplingParams(max_tokens=shape.result_tokens, temperature=1.0)
        tasks: set[asyncio.Task] = set()
        harness_errors: list[BaseException] = []  # raised while recording or judging: ours, not the server's
        settled = asyncio.Event()  # every request fed and finished
        fed = False
        sockets0 = socket_count()
        peak = 0

        def finished(task: asyncio.Task) -> None:
            tasks.discard(task)
            gate.release()
            if not task.cancelled() and task.exception() is not None:  # the harness's own bug: end the run
                harness_errors.append(task.exception())
                settled.set()
            if fed and not tasks:
                settled.set()

        async def feed() -> None:
            nonlocal fed
            try:
                for row in range(self.job.count):
                    await gate.acquire()
                    task = asyncio.ensure_future(self._one(row, params))
                    tasks.add(task)
                    task.add_done_callback(finished)
            finally:
                fed = True
                if not tasks:
                    settled.set()

        feeder = asyncio.ensure_future(feed())
        try:
            while not settled.is_set() and not stop() and self.now() < self.job.deadline_s:
                slice_s = min(_STOP_CHECK_S, max(0.0, self.job.deadline_s - self.now()))
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(settled.wait(), slice_s)
                if sockets0 >= 0:
                    peak = max(peak, socket_count() - sockets0)
                    self.counters.set(CONNECTIONS_PEAK, peak)
        finally:
            leftovers = [feeder, *tasks]
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)
            self.close()
        if harness_errors:  # surfaces as the trial's harness error, as the raw client's would
            raise harness_errors[0]

    async def _one(self, row: int, params: Any) -> None:
        h = self.history
        shape = self.job.shape
        nonce = self.job.nonce(self.job.first + row)
        h["nonce"][row] = nonce
        self.counters.add(IN_FLIGHT)
        self.counters.add(SUBMITTED)
        h["submit_start"][row] = self.now()
        try:
            prompt = types.ModelInput.from_ints(tokens.prompt_tokens(nonce, shape.prompt_extra_tokens))
            asks = tokens.asks(nonce)
            response = await self._sample(
                prompt=prompt,
                num_samples=shape.num_samples,
                sampling_params=params,
                include_prompt_logprobs=asks.prompt_logprobs,
                topk_prompt_logprobs=asks.topk,
            )
            h["done"][row] = self.now()
        except Exception as exc:  # what the SDK gave up with
            self._gave_up(row, exc)
        else:
            self._judge(row, nonce, response)
        finally:
            self.counters.add(IN_FLIGHT, -1)

    def _judge(self, row: int, nonce: int, response: Any) -> None:
        """The result against its nonce. What the server sent may not read as arrays (no logprobs, say): that
        is the server's DECODE; anything raised past that point is the harness's own, and ends the run."""
        h = self.history
        shape = self.job.shape
        try:
            result = decode.from_sdk(response)
        except (AttributeError, TypeError, ValueError) as exc:
            h["outcome"][row] = Outcome.CORRUPT
            h["error"][row] = ErrorClass.DECODE
            self.examples.setdefault(
                ErrorClass.DECODE.key, f"sdk result of nonce {nonce}: {type(exc).__name__}: {exc}"[:300]
            )
            self.counters.add(FAILED)
            return
        problem = decode.check(result, nonce, shape.num_samples, shape.result_tokens, shape.prompt_extra_tokens)
        if problem is None:
            h["outcome"][row] = Outcome.OK
            self.counters.add(COMPLETED)
            return
        h["outcome"][row] = Outcome.CORRUPT
        h["error"][row] = ErrorClass.INTEGRITY
        self.examples.setdefault("integrity", f"result of nonce {nonce}: {problem}")
        self.counters.add(FAILED)

    def _gave_up(self, row: int, exc: Exception) -> None:
        h = self.history
        error = classify_exception(exc)
        if error == ErrorClass.OTHER and self.wire.last_poll_status.get(row) == 200:
            error = ErrorClass.DECODE  # a result arrived and the SDK could not read it
        accepted = bool(h["server_id"][row])
        if accepted:
            h["done"][row] = self.now()
        h["outcome"][row] = final_outcome(error, accepted)
        h["error"][row] = error
        self.examples.setdefault(error.key, f"sdk: {type(exc).__name__}: {exc}"[:300])
        self.counters.add(FAILED)

    async def start(self, t0: float, stop: Callable[[], bool]) -> "SdkClient":
        """Run the load on the trial's clock ``t0`` (set once the workers are told to go)."""
        self.job = dataclasses.replace(self.job, t0=t0)
        await self.run(stop)
        return self

    def close(self) -> None:
        """Freeze the attempt rows and close the SDK (idempotent)."""
        self.history.attempts = self.wire.close()
        if self.wire.unmapped:  # never expected: say so rather than drop them silently
            self.examples.setdefault("other", f"{self.wire.unmapped} SDK sample/poll attempts matched no request")
        if self.service is not None:
            close_service(self.service)
            self.service = None
        self._installed.__exit__(None, None, None)


def close_service(service: Any) -> None:
    """Stop a ``tinker.ServiceClient``'s session heartbeat and telemetry: left open, its heartbeat thread keeps
    calling a server long gone (and logging so) for as long as the process lives.

    The holder as built, if it was: ``ServiceClient.holder`` builds it lazily, so asking for it after a
    failed set-up would run the whole set-up (and its 300 s retries) again.
    """
    holder = getattr(service, "_session_holder", None)
    with contextlib.suppress(Exception):
        if holder is not None:
            holder.close()


def sample_call(sampling: Any) -> Callable[..., Any]:
    """How a user of this SDK release samples asynchronously: ``sample_async`` (0.25), or ``await sample(...)``
    where ``sample_async`` is marked deprecated (0.38: it warns on every call, and points there)."""
    if getattr(type(sampling).sample_async, "__deprecated__", None):
        return sampling.sample
    return sampling.sample_async


def check_sdk_release(job: WorkerJob) -> None:
    """RuntimeError (the harness's error, never the server's) when this process did not import the SDK release
    the job names: its folder was not first on the worker's ``sys.path``."""
    if job.shape.sdk and tinker.__version__ != sdk_version(job.shape.sdk):
        raise RuntimeError(
            f"the sdk client imported tinker {tinker.__version__} from "
            f"{os.path.dirname(tinker.__file__)}, not {job.shape.sdk}"
        )


def prepare_sdk(job: WorkerJob, counter_array: Any, slots: int) -> SdkClient:
    """An SDK client with its session open (or what the SDK raised), ready for ``start`` (blocking)."""
    check_sdk_release(job)
    client = SdkClient(job, LiveCounters(counter_array, job.worker, slots))
    try:
        client.prepare()
    except BaseException:
        client.close()
        raise
    return client
