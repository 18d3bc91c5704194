"""The training client's bookkeeping against a scripted HTTP pool (a test double of ``HttpPool``, not a server).

What a real SkyRL does with these calls is tested in ``tests/integration/test_training_integration.py``;
here each answer is chosen to reach one branch: a good result, a lost future, a
result of another call, an answer without a future, and a trial that stops first.
"""

from __future__ import annotations

import asyncio
import json
import time

from faultload.client.job import WorkerJob
from faultload.client.training import TrainingClient
from faultload.client.training_bodies import expected_logprobs, target_tokens
from faultload.model.shape import LoadShape
from faultload.model.training import TrainingMix
from faultload.record.history import ErrorClass, Outcome
from faultload.record.training import TrainingOp

MIX = TrainingMix(trainers=1, steps=1, datums=2, datum_tokens=5)


def _job(mix: TrainingMix = MIX, deadline_s: float = 30.0) -> WorkerJob:
    return WorkerJob(
        worker=0,
        base_url="http://127.0.0.1:9",
        source_ip=None,
        sampling_session_id="s",
        base_model="m",
        first=0,
        count=0,
        nonce_salt=1,
        shape=LoadShape(training=mix),
        t0=time.monotonic(),
        deadline_s=deadline_s,
        role="train",
        training_encoding="json",
    )


def _good_forward_backward(trainer: int, step: int) -> bytes:
    outputs = [
        {"logprobs": {"data": expected_logprobs(target_tokens(trainer, step, d, MIX.datum_tokens)).tolist()}}
        for d in range(MIX.datums)
    ]
    return json.dumps({"loss_fn_outputs": outputs}).encode()


class ScriptedPool:
    """Answers each path from a script: a list of (status, body) per path, the last one repeated."""

    def __init__(self, script: dict[str, list[tuple[int, bytes]]], results: dict[str, list[tuple[int, bytes]]]):
        self.script, self.results, self.calls = script, results, []

    async def post(self, path: str, body: bytes, headers: bytes, timeout_s: float):
        name = path.rsplit("/", 1)[-1]
        self.calls.append(name)
        if name == "retrieve_future":
            queue = self.results[json.loads(body)["request_id"]]
        else:
            queue = self.script[name]
        status, payload = queue.pop(0) if len(queue) > 1 else queue[0]
        if status == -1:  # hang: the trial stops first
            await asyncio.sleep(3600)
        return status, "application/json", payload


def _script(fb_result: list[tuple[int, bytes]]) -> ScriptedPool:
    return ScriptedPool(
        {
            "create_session": [(200, b'{"session_id": "s1"}')],
            "create_model": [(200, b'{"request_id": "1", "model_id": "m1"}')],
            "forward_backward": [(200, b'{"request_id": "2"}')],
            "optim_step": [(200, b'{"request_id": "3"}')],
            "session_heartbeat": [(200, b"{}")],
        },
        {"1": [(200, b"{}")], "2": fb_result, "3": [(200, b'{"metrics": {"skyrl.ai/learning_rate": 0.0003}}')]},
    )


def _run(pool: ScriptedPool, job: WorkerJob | None = None, stop_after_s: float | None = None):
    client = TrainingClient(job or _job(), pool)
    started = time.monotonic()
    stop = (lambda: time.monotonic() - started > stop_after_s) if stop_after_s else (lambda: False)
    asyncio.run(client.run(stop))
    log = client.training
    return {
        TrainingOp(int(op)): (Outcome(int(o)), ErrorClass(int(e)))
        for op, o, e in zip(log["op"], log["outcome"], log["error"])
    }, log


def test_a_good_step_records_each_call_ok():
    rows, log = _run(_script([(408, b"{}"), (200, _good_forward_backward(0, 0))]))
    assert rows == {
        TrainingOp.CREATE_MODEL: (Outcome.OK, ErrorClass.NONE),
        TrainingOp.FORWARD_BACKWARD: (Outcome.OK, ErrorClass.NONE),
        TrainingOp.OPTIM_STEP: (Outcome.OK, ErrorClass.NONE),
    }
    assert int(log["attempts"][log.of(TrainingOp.FORWARD_BACKWARD)][0]) == 3  # the submit, a 408 re-poll, the result


def test_a_lost_future_and_another_calls_result_are_recorded_as_such():
    rows, _ = _run(_script([(404, b'{"detail": "Future not found"}')]))
    assert rows[TrainingOp.FORWARD_BACKWARD] == (Outcome.LOST, ErrorClass.HTTP_404)
    rows, log = _run(_script([(200, _good_forward_backward(0, 1))]))  # step 1's logprobs for step 0
    assert rows[TrainingOp.FORWARD_BACKWARD] == (Outcome.CORRUPT, ErrorClass.INTEGRITY)
    assert "not trainer 0 step 0" in log.examples["forward_backward:integrity"]


def test_an_answer_without_a_future_is_a_failure_not_a_crash():
    pool = _script([(200, b"{}")])
    pool.script["forward_backward"] = [(200, b'{"no": "id"}')]
    rows, log = _run(pool)
    assert rows[TrainingOp.FORWARD_BACKWARD] == (Outcome.FAILED, ErrorClass.DECODE)
    assert rows[TrainingOp.OPTIM_STEP][0] == Outcome.OK  # the trainer goes on


def test_a_call_the_trial_stops_is_unfinished_not_missing():
    rows, _ = _run(_script([(-1, b"")]), stop_after_s=0.5)
    assert rows[TrainingOp.FORWARD_BACKWARD] == (Outcome.PENDING, ErrorClass.NONE)
    assert TrainingOp.OPTIM_STEP not in rows  # never begun


def test_heartbeats_run_on_the_scaled_period_while_the_trainer_works():
    job = _job(TrainingMix(trainers=1, steps=1, datums=2, datum_tokens=5))
    job = WorkerJob(**{**job.__dict__, "shape": LoadShape(training=job.shape.training, time_scale=0.02)})  # 0.2 s
    pool = _script([(-1, b"")])
    _, log = _run(pool, job, stop_after_s=1.0)
    beats = log.of(TrainingOp.HEARTBEAT)
    assert 3 <= int(beats.sum()) <= 6 and (log["outcome"][beats] == Outcome.OK).all()
