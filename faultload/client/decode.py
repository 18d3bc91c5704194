"""Decode a retrieve_future body into arrays and check it belongs to its request.

Proto bodies (``application/x-protobuf``, SkyRL >= 0.4.0 with tinker >= 0.25)
are parsed with the SDK's own generated message; JSON bodies (0.3.0) with
pysimdjson straight into numpy buffers, never into Python lists.
"""

from __future__ import annotations

from dataclasses import dataclass

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import simdjson

from faultload.model import tokens

PROTO_CONTENT_TYPE = "application/x-protobuf"


def _sdk_proto_module() -> ModuleType:
    """The installed tinker SDK's generated ``tinker_public_pb2``, loaded on its own.

    Importing it as ``tinker.proto...`` runs the SDK's package init (pydantic,
    httpx, ...: ~0.5 s of CPU in every load worker); the generated module itself
    needs only protobuf. If the SDK is already imported, reuse its module.
    """
    loaded = sys.modules.get("tinker.proto.tinker_public_pb2")
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("tinker")
    if spec is None or spec.origin is None:
        raise ImportError("the tinker SDK is not installed (pip install 'tinker>=0.25,<0.26')")
    path = Path(spec.origin).parent / "proto" / "tinker_public_pb2.py"
    file_spec = importlib.util.spec_from_file_location("tinker.proto.tinker_public_pb2", path)
    module = importlib.util.module_from_spec(file_spec)
    file_spec.loader.exec_module(module)
    sys.modules["tinker.proto.tinker_public_pb2"] = module
    return module


pb = _sdk_proto_module()


@dataclass(frozen=True)
class Sequence:
    tokens: np.ndarray  # int32
    logprobs: np.ndarray  # float32


class DecodeError(ValueError):
    pass


def decode_proto(body: bytes) -> list[Sequence]:
    message = pb.SampleResponse()
    try:
        message.ParseFromString(body)
    except Exception as exc:  # protobuf raises its own DecodeError subclasses
        raise DecodeError(f"not a SampleResponse proto: {exc}") from None
    return [
        Sequence(np.frombuffer(seq.tokens, dtype=np.int32), np.frombuffer(seq.logprobs, dtype=np.float32))
        for seq in message.sequences
    ]


def decode_json(body: bytes, parser: simdjson.Parser | None = None) -> list[Sequence]:
    parser = parser or simdjson.Parser()
    doc = None
    try:
        doc = parser.parse(body)
        out = []
        for seq in doc["sequences"]:
            toks = np.frombuffer(seq["tokens"].as_buffer(of_type="i"), dtype=np.int64).astype(np.int32)
            lps = np.frombuffer(seq["logprobs"].as_buffer(of_type="d"), dtype=np.float64).astype(np.float32)
            out.append(Sequence(toks, lps))
        return out
    except (ValueError, KeyError, TypeError) as exc:
        raise DecodeError(f"not a SampleOutput JSON: {exc}") from None
    finally:
        doc = None  # simdjson proxies must not outlive the next parse


def decode(body: bytes, content_type: str, parser: simdjson.Parser | None = None) -> list[Sequence]:
    if PROTO_CONTENT_TYPE in content_type:
        return decode_proto(body)
    return decode_json(body, parser)


def check(sequences: list[Sequence], nonce: int, num_samples: int, length: int) -> str | None:
    """None when the result is exactly the request's; otherwise what is wrong."""
    if len(sequences) != num_samples:
        return f"{len(sequences)} sequences, expected {num_samples}"
    for j, seq in enumerate(sequences):
        if seq.tokens.size != length:
            return f"sample {j}: {seq.tokens.size} tokens, expected {length}"
        # Elementwise ==, then all(): np.array_equal's own checks (asarray, shapes) cost more than the compare.
        if not (seq.tokens == tokens.output_tokens(nonce, j, length)).all():
            return f"sample {j}: tokens do not match nonce {nonce}"
        if seq.logprobs.size != length or not (seq.logprobs == tokens.output_logprobs(nonce, j, length)).all():
            return f"sample {j}: logprobs do not match nonce {nonce}"
    return None
