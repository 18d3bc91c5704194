"""Result bodies as the SkyRL server sends them, for tests of the client's decoding.

Built from faultload.model.tokens, so each belongs to its nonce exactly as a real
forwarded result does.
"""

from __future__ import annotations

import json

from faultload.model import tokens
from faultload.client import decode


def proto_result(nonce: int, samples: int, length: int) -> bytes:
    """A SkyRL 0.4.0 retrieve_future body: SampleResponse proto, tokens int32, logprobs float32."""
    message = decode.pb.SampleResponse()
    for j in range(samples):
        seq = message.sequences.add()
        seq.tokens = tokens.output_tokens(nonce, j, length).astype("<i4").tobytes()
        seq.logprobs = tokens.output_logprobs(nonce, j, length).astype("<f4").tobytes()
    return message.SerializeToString()


def json_result(nonce: int, samples: int, length: int) -> bytes:
    """A SkyRL 0.3.0-style JSON SampleOutput (logprobs printed as Python floats, as pydantic does)."""
    sequences = [
        {
            "tokens": tokens.output_tokens(nonce, j, length).tolist(),
            "logprobs": [float(x) for x in -(tokens.logprob_digits(nonce, j, length) / tokens.LOGPROB_SCALE)],
            "stop_reason": "length",
        }
        for j in range(samples)
    ]
    return json.dumps({"sequences": sequences, "type": "sample", "prompt_logprobs": None}).encode()
