"""Load through the real tinker SDK: ServiceClient -> sampling client -> sample_async.

Used to check that what the raw client shows also holds for the SDK users
run. The SDK hides its HTTP attempts, so only submit/done times and outcomes
are recorded (attempts stay 0), and it cannot bind a source address, so its
traffic comes from 127.0.0.1 whatever the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any, Callable

from faultload import tokens
from faultload.client import decode
from faultload.client.job import WorkerJob
from faultload.client.raw import COMPLETED, FAILED, IN_FLIGHT, SUBMITTED, ACCEPTED, _Counters
from faultload.history import ErrorClass, History, Outcome

_STOP_CHECK_S = 0.2


class SdkClient:
    def __init__(self, job: WorkerJob, counters: _Counters) -> None:
        self.job = job
        self.counters = counters
        self.history = History.empty(job.count)
        self.history["worker"][:] = job.worker
        self.examples: dict[str, str] = {}

    def now(self) -> float:
        return time.monotonic() - self.job.t0

    async def run(self, stop: Callable[[], bool]) -> None:
        import tinker
        from tinker import types

        os.environ.setdefault("TINKER_API_KEY", "tml-faultload")
        service = tinker.ServiceClient(base_url=self.job.base_url)
        sampling = await service.create_sampling_client_async(base_model=self.job.base_model)
        shape = self.job.shape
        cap = max(1, shape.max_outstanding // shape.workers) if shape.max_outstanding else self.job.count
        gate = asyncio.Semaphore(cap)
        params = types.SamplingParams(max_tokens=shape.result_tokens, temperature=1.0)

        async def one(row: int) -> None:
            nonce = self.job.nonce(self.job.first + row)
            h = self.history
            h["nonce"][row] = nonce
            async with gate:
                self.counters.add(IN_FLIGHT)
                self.counters.add(SUBMITTED)
                h["submit_start"][row] = self.now()
                try:
                    prompt = types.ModelInput.from_ints(tokens.prompt_tokens(nonce, shape.prompt_extra_tokens))
                    response = await sampling.sample_async(prompt=prompt, num_samples=shape.num_samples, sampling_params=params)
                    h["done"][row] = self.now()
                    self.counters.add(ACCEPTED)
                    sequences = [
                        decode.Sequence(seq.tokens_np.astype("int32"), seq.logprobs_np.astype("float32"))
                        for seq in response.sequences
                    ]
                    problem = decode.check(sequences, nonce, shape.num_samples, shape.result_tokens)
                    if problem is None:
                        h["outcome"][row] = Outcome.OK
                        self.counters.add(COMPLETED)
                    else:
                        h["outcome"][row] = Outcome.CORRUPT
                        h["error"][row] = ErrorClass.INTEGRITY
                        self.examples.setdefault("integrity", problem)
                        self.counters.add(FAILED)
                except Exception as exc:  # the SDK raises many types; classify by name
                    h["outcome"][row] = Outcome.FAILED
                    h["error"][row] = ErrorClass.OTHER
                    self.examples.setdefault("other", f"sdk: {type(exc).__name__}: {exc}"[:300])
                    self.counters.add(FAILED)
                finally:
                    self.counters.add(IN_FLIGHT, -1)

        tasks = [asyncio.ensure_future(one(row)) for row in range(self.job.count)]
        pending = set(tasks)
        while pending and not stop() and self.now() < self.job.deadline_s:
            _, pending = await asyncio.wait(pending, timeout=_STOP_CHECK_S)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        with contextlib.suppress(Exception):
            service.holder.close()


async def run_sdk(job: WorkerJob, counter_array: Any, slots: int, stop: Callable[[], bool]) -> SdkClient:
    client = SdkClient(job, _Counters(counter_array, job.worker, slots))
    await client.run(stop)
    return client
