"""Result bodies as the SkyRL server sends them, for tests of the client's decoding.

Built from faultload.client.decode.expected (the router's choices as a server converts them, with the prompt
logprobs and top-k the request asked for), so each belongs to its nonce exactly as a real forwarded result
does; ``cut`` drops each sequence's last token, as a server that truncates would.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from faultload.client import decode
from faultload.model import tokens


def _expected(nonce: int, samples: int, length: int, prompt_extra: int, cut: bool) -> decode.Result:
    result = decode.expected(nonce, samples, length, prompt_extra)
    if not cut:
        return result
    return replace(
        result, sequences=[replace(s, tokens=s.tokens[:-1], logprobs=s.logprobs[:-1]) for s in result.sequences]
    )


def encode_proto(result: decode.Result) -> bytes:
    """A SkyRL 0.4.0 retrieve_future body (its serialize_sample_output): SampleResponse proto, tokens int32,
    logprobs float32, prompt logprobs float32 with NaN, top-k as dense masked matrices."""
    message = decode.pb.SampleResponse()
    stop_reasons = {decode.STOP: decode.pb.STOP_REASON_STOP, decode.LENGTH: decode.pb.STOP_REASON_LENGTH}
    for seq in result.sequences:
        message.sequences.add(
            stop_reason=stop_reasons[seq.stop_reason],
            tokens=seq.tokens.astype("<i4").tobytes(),
            logprobs=seq.logprobs.astype("<f4").tobytes(),
        )
    if result.prompt_logprobs is not None:
        message.prompt_logprobs = result.prompt_logprobs.astype("<f4").tobytes()
    if result.topk is not None:
        ids, lps = result.topk
        message.topk_prompt_logprobs.CopyFrom(
            decode.pb.TopkPromptLogprobs(
                prompt_length=ids.shape[0],
                k=ids.shape[1],
                token_ids=ids.astype("<i4").tobytes(),
                logprobs=lps.astype("<f4").tobytes(),
            )
        )
    return message.SerializeToString()


def encode_json(result: decode.Result) -> bytes:
    """A SampleOutput JSON body (logprobs printed as Python floats, as pydantic does; prompt logprobs with null
    at undefined positions, top-k rows of [token id, logprob] pairs or null)."""

    def floats(values: np.ndarray) -> list[float | None]:
        return [None if np.isnan(x) else float(x) for x in values.astype(np.float64)]

    doc: dict = {
        "sequences": [
            {"tokens": s.tokens.tolist(), "logprobs": floats(s.logprobs), "stop_reason": s.stop_reason}
            for s in result.sequences
        ],
        "type": "sample",
        "prompt_logprobs": None if result.prompt_logprobs is None else floats(result.prompt_logprobs),
    }
    if result.topk is not None:
        ids, lps = result.topk
        rows = [
            [
                [int(t), float(lp)]
                for t, lp in zip(ids[i], lps[i].astype(np.float64))
                if (t, lp) != (tokens.TOPK_MASK_TOKEN, tokens.TOPK_MASK_LOGPROB)
            ]
            for i in range(ids.shape[0])
        ]
        doc["topk_prompt_logprobs"] = [row or None for row in rows]
    return json.dumps(doc).encode()


def proto_result(nonce: int, samples: int, length: int, prompt_extra: int = 0, cut: bool = False) -> bytes:
    """What SkyRL 0.4.0 answers request ``nonce`` with (proto)."""
    return encode_proto(_expected(nonce, samples, length, prompt_extra, cut))


def json_result(nonce: int, samples: int, length: int, prompt_extra: int = 0, cut: bool = False) -> bytes:
    """What a JSON-answering server answers request ``nonce`` with (SampleOutput JSON)."""
    return encode_json(_expected(nonce, samples, length, prompt_extra, cut))
