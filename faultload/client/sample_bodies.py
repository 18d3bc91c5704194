"""The sampling requests' bodies as the raw client sends them, and the request id it reads from asample's answer.

Formatted directly rather than through ``json.dumps`` of a dict: at thousands of requests per second the dict and
its encoding are a measurable share of a worker's CPU. The prompt and what a request asks beside its samples
(prompt logprobs and their top-k) derive from its nonce (:mod:`faultload.model.tokens`), so the result's check
(:func:`faultload.client.decode.check`) can tell whose result came back.
"""

from __future__ import annotations

import json

import simdjson

from faultload.client import decode
from faultload.client.job import WorkerJob
from faultload.model import tokens


def asample_body(job: WorkerJob, row: int, nonce: int) -> bytes:
    """The asample JSON body of the job's request ``row``, whose nonce is ``nonce``."""
    shape = job.shape
    prompt = ",".join(map(str, tokens.prompt_tokens(nonce, shape.prompt_extra_tokens)))
    return (
        f'{{"sampling_session_id":"{job.sampling_session_id}","seq_id":{job.first + row},'
        f'"num_samples":{shape.num_samples},"type":"sample",'
        f'"prompt":{{"chunks":[{{"type":"encoded_text","tokens":[{prompt}]}}]}},'
        f'"sampling_params":{{"max_tokens":{shape.result_tokens},"temperature":1.0,"seed":{nonce % (1 << 31)}}}'
        f"{decode.asks_json(nonce)}}}"
    ).encode()


def poll_body(request_id: str) -> bytes:
    """The retrieve_future JSON body for the server's ``request_id``."""
    return json.dumps({"request_id": request_id}).encode()


def request_id_of(parser: simdjson.Parser, payload: bytes) -> str:
    """The request id of asample's 2xx answer, as text (SkyRL's is an integer, TuFT's a uuid); ValueError,
    KeyError or TypeError when the body holds none."""
    request_id = parser.parse(payload)["request_id"]
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool) or request_id == "":
        raise ValueError(f"request_id {request_id!r} is not an id")
    return str(request_id)
