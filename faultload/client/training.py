"""The training clients: T trainers, each a session with a LoRA model, looping forward_backward and optim_step.

Each trainer does what a tinker SDK training client does, over the worker's
lean HTTP pool (its own source address): create_session, then a heartbeat
every ``SDK_HEARTBEAT_PERIOD_S`` (scaled; a sleep, then one POST with a 10 s
timeout, never scaled, since how long the server takes to answer is real
time, and no retry, as ``internal_client_holder._session_heartbeat``), create_model
(LoRA rank 8) and its future, then ``steps`` times a forward_backward and an
optim_step, each submitted (60 s timeout, never scaled; retried on transport
errors, 408, 429 and 5xx with the SDK's backoff, under the same ``seq_id``,
which SkyRL 0.4.0 deduplicates) and its
future awaited by retrieve_future polls (45 s client timeout, re-polled on 408
and transport errors, as the SDK does). Every call's result is checked against
the request (:mod:`faultload.client.training_bodies`). Every other timer is
scaled by the shape's time scale; every loop ends at the job's deadline or its stop.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Callable

from faultload.client.endpoint import classify_error, json_headers, make_session, split_base_url
from faultload.client.http import HttpPool
from faultload.client.job import WorkerJob
from faultload.client.sdk_rules import backoff_s
from faultload.client.training_bodies import TrainingCodec
from faultload.model.sdk import SDK_HEARTBEAT_PERIOD_S, SDK_HEARTBEAT_TIMEOUT_S, SDK_REQUEST_TIMEOUT_S
from faultload.record.history import ErrorClass, History, Outcome
from faultload.record.training import TrainingOp, TrainingRecorder
from faultload.version import CLIENT_VERSION

_STOP_CHECK_S = 0.2
LORA_RANK = 8


class _Call:
    """One training call's bookkeeping while it runs."""

    def __init__(self, op: TrainingOp, trainer: int, step: int, start: float) -> None:
        self.op, self.trainer, self.step = op, trainer, step
        self.start, self.accepted, self.attempts = start, float("nan"), 0
        self.error, self.status, self.message = ErrorClass.NONE, 0, ""

    def note(self, error: ErrorClass, message: str, status: int = 0) -> None:
        self.error, self.message = error, message
        if status:
            self.status = status


class TrainingClient:
    """A training worker's trainers; ``history`` stays empty (its samples are none), ``training`` is its log."""

    def __init__(self, job: WorkerJob, session: HttpPool) -> None:
        self.job, self.mix, self.session = job, job.shape.training, session
        self.codec = TrainingCodec(job.training_encoding)
        self.recorder = TrainingRecorder()
        self.history = History.empty(0)
        self.examples: dict[str, str] = {}
        _, _, prefix = split_base_url(job.base_url)
        self._api = f"{prefix}/api/v1/"
        self._headers = json_headers(job)
        self._stop: Callable[[], bool] = lambda: False
        self._open: dict[int, _Call] = {}  # calls begun and not ended: unfinished if the trial stops them

    @property
    def training(self):
        return self.recorder.log()

    def now(self) -> float:
        return time.monotonic() - self.job.t0

    def _over(self) -> bool:
        return self._stop() or self.now() >= self.job.deadline_s

    def close(self) -> None:
        """Nothing to freeze: rows are written as each call ends."""

    async def run(self, stop: Callable[[], bool]) -> "TrainingClient":
        self._stop = stop
        trainers = [asyncio.ensure_future(self._trainer(t)) for t in range(self.mix.trainers)]
        try:
            while not all(t.done() for t in trainers) and not self._over():
                await asyncio.sleep(_STOP_CHECK_S)
        finally:
            for task in trainers:
                task.cancel()
            await asyncio.gather(*trainers, return_exceptions=True)
            for call in list(self._open.values()):  # stopped by the trial, not ended by the server
                self._end(call, Outcome.PENDING)
        return self

    async def _trainer(self, trainer: int) -> None:
        spread = self.job.shape.scaled(self.mix.spread_s)
        if spread and self.mix.trainers > 1:
            await asyncio.sleep(spread * trainer / (self.mix.trainers - 1))
        session_id = await self._create_session(trainer)
        if session_id is None:
            return
        beat = asyncio.ensure_future(self._heartbeats(trainer, session_id))
        try:
            model_id = await self._create_model(trainer, session_id)
            seq = 0
            for step in range(self.mix.steps):
                if model_id is None or self._over():
                    break
                seq += 1
                await self._forward_backward(trainer, step, model_id, seq)
                seq += 1
                await self._optim_step(trainer, step, model_id, seq)
        finally:  # a trainer done with its steps stops heartbeating: its session is left to expire
            beat.cancel()

    async def _create_session(self, trainer: int) -> str | None:
        body = json.dumps(
            {
                "tags": ["faultload-trainer"],
                "user_metadata": {},
                "type": "create_session",
                "sdk_version": CLIENT_VERSION,
            }
        ).encode()
        call = self._begin(TrainingOp.CREATE_MODEL, trainer, 0)  # a trainer's set-up, as its first call
        answer = await self._submit(call, "create_session", body, self._headers)
        session_id = self._field(call, answer, "session_id")
        if session_id is None:
            self._end(call, self._unanswered(answer))
        else:
            self._open.pop(id(call), None)  # set up: its row is create_model's
        return session_id

    async def _create_model(self, trainer: int, session_id: str) -> str | None:
        body = json.dumps(
            {
                "session_id": session_id,
                "model_seq_id": 0,
                "base_model": self.job.base_model,
                "lora_config": {"rank": LORA_RANK},
                "type": "create_model",
            }
        ).encode()
        call = self._begin(TrainingOp.CREATE_MODEL, trainer, 0)
        answer = await self._submit(call, "create_model", body, self._headers)
        request_id, model_id = self._field(call, answer, "request_id"), self._field(call, answer, "model_id")
        if request_id is None or model_id is None:
            self._end(call, self._unanswered(answer))
            return None
        outcome, _, _ = await self._await(call, request_id, self._headers)
        self._end(call, outcome)
        return model_id if outcome == Outcome.OK else None

    async def _forward_backward(self, trainer: int, step: int, model_id: str, seq: int) -> bool:
        mix = self.mix
        encoded = self.codec.forward_backward(model_id, seq, trainer, step, mix.datums, mix.datum_tokens)
        call = self._begin(TrainingOp.FORWARD_BACKWARD, trainer, step)
        answer = await self._submit(call, "forward_backward", encoded.body, encoded.headers)
        request_id = self._field(call, answer, "request_id")
        if request_id is None:
            return self._end(call, self._unanswered(answer))
        outcome, ctype, payload = await self._await(call, request_id, self.codec.poll_headers)
        if outcome == Outcome.OK:
            problem = self.codec.check_forward_backward(ctype, payload, trainer, step, mix.datums, mix.datum_tokens)
            if problem is not None:
                call.note(ErrorClass.INTEGRITY, f"forward_backward trainer {trainer} step {step}: {problem}")
                outcome = Outcome.CORRUPT
        return self._end(call, outcome)

    async def _optim_step(self, trainer: int, step: int, model_id: str, seq: int) -> bool:
        call = self._begin(TrainingOp.OPTIM_STEP, trainer, step)
        answer = await self._submit(call, "optim_step", self.codec.optim_step(model_id, seq), self._headers)
        request_id = self._field(call, answer, "request_id")
        if request_id is None:
            return self._end(call, self._unanswered(answer))
        outcome, _, payload = await self._await(call, request_id, self._headers)
        if outcome == Outcome.OK:
            problem = self.codec.check_optim_step(payload)
            if problem is not None:
                call.note(ErrorClass.INTEGRITY, f"optim_step trainer {trainer} step {step}: {problem}")
                outcome = Outcome.CORRUPT
        return self._end(call, outcome)

    def _begin(self, op: TrainingOp, trainer: int, step: int) -> _Call:
        call = _Call(op, trainer, step, self.now())
        self._open[id(call)] = call
        return call

    def _end(self, call: _Call, outcome: Outcome) -> bool:
        self._open.pop(id(call), None)
        done = self.now() if outcome == Outcome.OK else float("nan")
        self.recorder.add(
            call.op,
            call.trainer,
            call.step,
            call.start,
            call.accepted,
            done,
            call.attempts,
            outcome,
            call.error,
            call.status,
            call.message,
        )
        return outcome == Outcome.OK

    def _unanswered(self, answer: bytes | None) -> Outcome:
        """A submit that got no future: stopped by the trial (unfinished), refused, or answered without one."""
        if answer is not None:
            return Outcome.FAILED
        return Outcome.PENDING if self._over() else Outcome.REJECTED

    @staticmethod
    def _field(call: _Call, answer: bytes | None, key: str) -> str | None:
        """``answer``'s JSON field ``key`` as a string; None (noted as a decode error) when it has none."""
        if answer is None:
            return None
        try:
            return str(json.loads(answer)[key])
        except (ValueError, KeyError, TypeError) as exc:
            call.note(ErrorClass.DECODE, f"answer without {key}: {type(exc).__name__}: {answer[:200]!r}")
            return None

    async def _submit(self, call: _Call, path: str, body: bytes, headers: bytes) -> bytes | None:
        """POST until a 200 (its body) or a refusal (None), as the SDK retries: transport errors, 408, 429, 5xx."""
        failures = 0
        while not self._over():
            call.attempts += 1
            try:
                # Unscaled, as the heartbeat's: a submit timed out by the scale would be sent twice
                # (0.3.0 does not deduplicate a seq_id), and the server's answer time is real.
                status, _, payload = await self.session.post(self._api + path, body, headers, SDK_REQUEST_TIMEOUT_S)
            except OSError as exc:
                call.note(classify_error(exc), f"{path}: {type(exc).__name__}: {exc}")
            else:
                call.status = status
                if status == 200:
                    call.accepted = self.now()
                    return payload
                error = ErrorClass.HTTP_5XX if status >= 500 else ErrorClass.HTTP_4XX
                call.note(error, f"{path}: HTTP {status}: {payload[:300]!r}", status)
                if status < 500 and status not in (408, 429):
                    return None
            await asyncio.sleep(self.job.shape.scaled(backoff_s(failures, self.job.shape.policy.backoff_cap_s)))
            failures += 1
        return None

    async def _await(self, call: _Call, request_id: str, headers: bytes) -> tuple[Outcome, str, bytes]:
        """Poll the future until its result: (outcome, content type, body); PENDING when the trial ends first."""
        body = json.dumps({"request_id": request_id}).encode()
        timeout = self.job.shape.scaled(self.job.shape.policy.poll_timeout_s)
        failures = 0
        while not self._over():
            call.attempts += 1
            try:
                status, ctype, payload = await self.session.post(self._api + "retrieve_future", body, headers, timeout)
            except OSError as exc:
                call.note(classify_error(exc), f"retrieve_future {request_id}: {type(exc).__name__}: {exc}")
                await asyncio.sleep(self.job.shape.scaled(backoff_s(failures, self.job.shape.policy.backoff_cap_s)))
                failures += 1
                continue
            call.status, failures = status, 0
            if status == 200:
                return Outcome.OK, ctype, payload
            if status == 408:
                continue
            message = f"retrieve_future {request_id}: HTTP {status}: {payload[:300]!r}"
            if status == 404:
                call.note(ErrorClass.HTTP_404, message, status)
                return Outcome.LOST, ctype, payload
            call.note(ErrorClass.SERVER_FAILED if status in (400, 500) else ErrorClass.HTTP_4XX, message, status)
            return Outcome.FAILED, ctype, payload
        return Outcome.PENDING, "", b""

    async def _heartbeats(self, trainer: int, session_id: str) -> None:
        """The SDK's heartbeat loop: sleep the period, one POST with a timeout and no retry; each recorded."""
        body = json.dumps({"session_id": session_id, "type": "session_heartbeat"}).encode()
        period = self.job.shape.scaled(SDK_HEARTBEAT_PERIOD_S)
        timeout = SDK_HEARTBEAT_TIMEOUT_S  # the server's answer time is real seconds: never scaled
        beat = 0
        while not self._over():
            await asyncio.sleep(period)
            if self._over():
                return
            call = _Call(TrainingOp.HEARTBEAT, trainer, beat, self.now())
            call.attempts = 1
            try:
                status, _, payload = await self.session.post(
                    self._api + "session_heartbeat", body, self._headers, timeout
                )
            except OSError as exc:
                call.note(classify_error(exc), f"session_heartbeat: {type(exc).__name__}: {exc}")
                outcome = Outcome.FAILED
            else:
                call.status = status
                outcome = Outcome.OK if status == 200 else Outcome.FAILED
                if status != 200:
                    call.note(
                        ErrorClass.HTTP_5XX if status >= 500 else ErrorClass.HTTP_4XX,
                        f"session_heartbeat: HTTP {status}: {payload[:300]!r}",
                        status,
                    )
            call.accepted = self.now()
            self._end(call, outcome)
            beat += 1


async def run_training(
    job: WorkerJob, stop: Callable[[], bool], built: Callable[[TrainingClient], None] = lambda client: None
) -> TrainingClient:
    """Run the training worker's trainers; ``built`` gets the client before it runs (its log outlives a crash).

    It counts nothing in the live sampling counters: the watchdog and the progress line judge samples.
    """
    async with make_session(job) as session:
        client = TrainingClient(job, session)
        built(client)
        await client.run(stop)
    return client
