"""Training request bodies and the check of their results, derived from (trainer, step) alone.

Each forward_backward's target tokens are a function of the trainer, the step
and the position, so a result returned to the wrong call (or damaged) does not
match what the null backend (``targets/skyrl_engine.py``) derives from the
request: ``logprobs[i] = -((t_i * 7 + i * 13) % 10000) / 10000``.

Two encodings, as the server takes them: ``proto`` (SkyRL 0.4.0: the tinker
SDK's own encoder, ``tinker.proto.request_conv``, zstd-compressed as SDK ≥ 0.25
sends a body when the server asks for it; results read with the SDK's
``deserialize_forward_backward_output``) and ``json`` (SkyRL 0.3.0, which takes
JSON bodies only: the form SDKs before 0.25 sent). tinker and zstandard are
imported by the training worker only, never by a sampling worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

ENCODINGS = ("proto", "json")
LOGPROB_SCALE = 10_000
TOKEN_SPACE = 50_000
LEARNING_RATE = 3e-4
_PROTO = "application/x-protobuf"


def target_tokens(trainer: int, step: int, datum: int, n: int) -> np.ndarray:
    """The target tokens of one datum (int64), unique per (trainer, step, datum) in practice."""
    base = (trainer * 7919 + step * 104_729 + datum * 6151) % TOKEN_SPACE
    return (base + np.arange(n, dtype=np.int64) * 31) % TOKEN_SPACE


def expected_logprobs(targets: np.ndarray) -> np.ndarray:
    """What the null backend answers for ``targets`` (float32 on the proto wire, float in JSON)."""
    return -((targets * 7 + np.arange(targets.size, dtype=np.int64) * 13) % LOGPROB_SCALE) / LOGPROB_SCALE


def encoding_for(version: str | None) -> str:
    """The body encoding a server takes: JSON for SkyRL 0.3.x (no proto forward_backward), else proto."""
    return "json" if (version or "").startswith("0.3.") else "proto"


@dataclass(frozen=True)
class Encoded:
    body: bytes
    headers: bytes  # extra header lines, each ending in CRLF


class TrainingCodec:
    """Builds the bodies and judges the results of one encoding."""

    def __init__(self, encoding: str) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"training encoding must be one of {', '.join(ENCODINGS)}, got {encoding!r}")
        self.encoding = encoding
        if encoding == "proto":
            from faultload.client import training_proto  # local import: tinker, in a proto training worker only

            self._proto = training_proto
            self._zstd = training_proto.compressor()
        self.poll_headers = (
            f"Content-Type: application/json\r\nAccept: {_PROTO}\r\n".encode()
            if encoding == "proto"
            else b"Content-Type: application/json\r\n"
        )

    def forward_backward(
        self, model_id: str, seq_id: int, trainer: int, step: int, datums: int, tokens: int
    ) -> Encoded:
        targets = [target_tokens(trainer, step, d, tokens) for d in range(datums)]
        prompt = [int(x) for x in (np.arange(tokens) % 1000 + 1)]
        if self.encoding == "json":
            data = [
                {
                    "model_input": {"chunks": [{"type": "encoded_text", "tokens": prompt}]},
                    "loss_fn_inputs": {"target_tokens": {"data": t.tolist(), "dtype": "int64"}},
                }
                for t in targets
            ]
            body = {
                "model_id": model_id,
                "seq_id": seq_id,
                "type": "forward_backward",
                "forward_backward_input": {"data": data, "loss_fn": "cross_entropy"},
            }
            return Encoded(json.dumps(body).encode(), b"Content-Type: application/json\r\n")
        types = self._proto.types
        data = [
            types.Datum(model_input=types.ModelInput.from_ints(prompt), loss_fn_inputs={"target_tokens": t.tolist()})
            for t in targets
        ]
        request = types.ForwardBackwardRequest(
            forward_backward_input=types.ForwardBackwardInput(data=data, loss_fn="cross_entropy"),
            model_id=model_id,
            seq_id=seq_id,
        )
        raw = self._proto.forward_backward_request_to_proto(request).SerializeToString()
        return Encoded(self._zstd.compress(raw), f"Content-Type: {_PROTO}\r\nContent-Encoding: zstd\r\n".encode())

    @staticmethod
    def optim_step(model_id: str, seq_id: int) -> bytes:
        return json.dumps(
            {
                "model_id": model_id,
                "seq_id": seq_id,
                "type": "optim_step",
                "adam_params": {"learning_rate": LEARNING_RATE, "beta1": 0.9, "beta2": 0.95, "eps": 1e-12},
            }
        ).encode()

    def check_forward_backward(
        self, ctype: str, payload: bytes, trainer: int, step: int, datums: int, tokens: int
    ) -> str | None:
        """None if the result is this call's; else one line saying what is wrong."""
        try:
            if "protobuf" in ctype:
                got = [
                    np.asarray(o["logprobs"].tolist(), dtype=np.float64)
                    for o in self._proto.deserialize_forward_backward_output(payload).loss_fn_outputs
                ]
            else:
                got = [
                    np.asarray(o["logprobs"]["data"], dtype=np.float64) for o in json.loads(payload)["loss_fn_outputs"]
                ]
        except Exception as exc:  # any undecodable result is corrupt, whatever raised
            return f"undecodable forward_backward result ({ctype}): {type(exc).__name__}: {exc}"
        if len(got) != datums:
            return f"{len(got)} outputs for {datums} data"
        for d, values in enumerate(got):
            want = expected_logprobs(target_tokens(trainer, step, d, tokens))
            if values.shape != want.shape or not np.allclose(values, want, atol=1e-4):
                return f"datum {d}: logprobs are not trainer {trainer} step {step}'s"
        return None

    @staticmethod
    def check_optim_step(payload: bytes) -> str | None:
        try:
            metrics = json.loads(payload).get("metrics") or {}
        except (ValueError, AttributeError) as exc:
            return f"undecodable optim_step result: {exc}"
        rate = metrics.get("skyrl.ai/learning_rate")
        if rate is not None and abs(float(rate) - LEARNING_RATE) > 1e-9:
            return f"optim_step answered learning rate {rate}, not {LEARNING_RATE}"
        return None
