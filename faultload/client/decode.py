"""Decode a retrieve_future body into arrays and check it belongs to its request.

Proto bodies (``application/x-protobuf``, SkyRL >= 0.4.0 with tinker >= 0.25)
are parsed with the SDK's own generated message; JSON bodies (0.3.0) with
pysimdjson straight into numpy buffers, never into Python lists.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

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


STOP, LENGTH = "stop", "length"  # the Tinker API's stop reasons
_PROTO_STOP_REASONS = {pb.STOP_REASON_STOP: STOP, pb.STOP_REASON_LENGTH: LENGTH}
# What a server puts in place of the logprobs vLLM did not return for a choice: SkyRL (0.3.0 and 0.4.0)
# zero-fills them ("so RL advantage computation doesn't see a ragged shape"), and so does the TuFT backend
# that forwards to faultload's router (targets/tuft_forwarding.py).
MISSING_LOGPROB = 0.0


@dataclass(frozen=True)
class Sequence:
    """One sampled sequence as the server sent it."""

    tokens: np.ndarray  # int32
    logprobs: np.ndarray  # float32
    stop_reason: str  # STOP or LENGTH; anything else as the server named it


@dataclass(frozen=True)
class Result:
    """A sample's result: its sequences and, where the request asked, its prompt logprobs and top-k."""

    sequences: list[Sequence]
    prompt_logprobs: np.ndarray | None = None  # float32, NaN where undefined (position 0); None: absent
    topk: tuple[np.ndarray, np.ndarray] | None = None  # (positions, k) int32 ids and float32 logprobs, masked
    # cells as the proto fills them (tokens.TOPK_MASK_*); None: absent


class DecodeError(ValueError):
    pass


def _proto_topk(message: Any) -> tuple[np.ndarray, np.ndarray] | None:
    if not message.HasField("topk_prompt_logprobs"):
        return None
    top = message.topk_prompt_logprobs
    shape = (top.prompt_length, top.k)
    ids, lps = _packed(top.token_ids, np.int32, "top-k token ids"), _packed(top.logprobs, np.float32, "top-k logprobs")
    if ids.size != shape[0] * shape[1] or lps.size != ids.size:
        raise DecodeError(f"top-k prompt logprobs of {ids.size} ids and {lps.size} logprobs, not {shape[0]}x{shape[1]}")
    return ids.reshape(shape), lps.reshape(shape)


def _packed(data: bytes, dtype: type, field: str) -> np.ndarray:
    """A packed bytes field as an array; DecodeError when its length is not whole elements (numpy's ValueError
    would end the worker, where the server's answer is at fault)."""
    if len(data) % np.dtype(dtype).itemsize:
        raise DecodeError(f"{field} of {len(data)} bytes, not whole {np.dtype(dtype).name} values")
    return np.frombuffer(data, dtype=dtype)


def decode_proto(body: bytes) -> Result:
    message = pb.SampleResponse()
    try:
        message.ParseFromString(body)
    except Exception as exc:  # protobuf raises its own DecodeError subclasses
        raise DecodeError(f"not a SampleResponse proto: {exc}") from None
    sequences = [
        Sequence(
            _packed(seq.tokens, np.int32, "tokens"),
            _packed(seq.logprobs, np.float32, "logprobs"),
            _PROTO_STOP_REASONS.get(seq.stop_reason, f"stop reason {seq.stop_reason}"),
        )
        for seq in message.sequences
    ]
    has_plp = message.HasField("prompt_logprobs")
    plp = _packed(message.prompt_logprobs, np.float32, "prompt_logprobs") if has_plp else None
    return Result(sequences, plp, _proto_topk(message))


def topk_matrices(rows: list) -> tuple[np.ndarray, np.ndarray]:
    """Top-k rows as the Tinker API's lists give them (``[(token id, logprob), ...]`` or None per position) in
    the proto's dense form: k the widest row, the rest masked (SkyRL's serialize_sample_output)."""
    k = max((len(row) for row in rows if row), default=1)
    ids = np.full((len(rows), k), tokens.TOPK_MASK_TOKEN, dtype=np.int32)
    lps = np.full((len(rows), k), tokens.TOPK_MASK_LOGPROB, dtype=np.float32)
    for i, row in enumerate(rows):
        for m, (tid, lp) in enumerate(row or ()):
            ids[i, m], lps[i, m] = tid, lp
    return ids, lps


def _json_prompt_level(doc: Any) -> tuple[np.ndarray | None, tuple[np.ndarray, np.ndarray] | None]:
    plp, top = doc.get("prompt_logprobs"), doc.get("topk_prompt_logprobs")
    if plp is not None:
        plp = np.array([np.nan if x is None else x for x in plp.as_list()], dtype=np.float32)
    if top is not None:
        top = topk_matrices(top.as_list())
    return plp, top


def decode_json(body: bytes, parser: simdjson.Parser | None = None) -> Result:
    parser = parser or simdjson.Parser()
    doc = None
    try:
        doc = parser.parse(body)
        out = []
        for seq in doc["sequences"]:
            toks = np.frombuffer(seq["tokens"].as_buffer(of_type="i"), dtype=np.int64).astype(np.int32)
            lps = np.frombuffer(seq["logprobs"].as_buffer(of_type="d"), dtype=np.float64).astype(np.float32)
            out.append(Sequence(toks, lps, str(seq.get("stop_reason"))))
        return Result(out, *_json_prompt_level(doc))
    # AttributeError: a scalar where a list is; RuntimeError: simdjson's own (an integer past 64 bits, nesting past
    # its depth); OverflowError: a top-k id past int32
    except (ValueError, KeyError, TypeError, AttributeError, RuntimeError, OverflowError) as exc:
        raise DecodeError(f"not a SampleOutput JSON: {exc}") from None
    finally:
        doc = None  # simdjson proxies must not outlive the next parse


def decode(body: bytes, content_type: str, parser: simdjson.Parser | None = None) -> Result:
    if PROTO_CONTENT_TYPE in content_type:
        return decode_proto(body)
    return decode_json(body, parser)


def from_sdk(response: Any) -> Result:
    """The tinker SDK's SampleResponse as a Result (the SDK client's path; the SDK decoded the wire)."""
    sequences = [
        Sequence(
            np.asarray(seq.tokens_np, dtype="int32"),
            np.zeros(0, dtype="float32") if seq.logprobs_np is None else np.asarray(seq.logprobs_np, dtype="float32"),
            str(seq.stop_reason),
        )
        for seq in response.sequences
    ]
    plp, top = response.prompt_logprobs_np, response.topk_prompt_logprobs_np
    return Result(
        sequences,
        None if plp is None else np.asarray(plp, dtype="float32"),
        None if top is None else (np.asarray(top.token_ids, dtype="int32"), np.asarray(top.logprobs, dtype="float32")),
    )


def _expected_sample(nonce: int, j: int, max_tokens: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Sample ``j``'s tokens, logprobs and stop reason: the router's choice (tokens.choice) as a server converts
    it, the logprobs the router left out filled with MISSING_LOGPROB."""
    shape = tokens.choice(nonce, j, max_tokens)
    lps = (
        tokens.output_logprobs(nonce, j, max_tokens)[: shape.length]
        if shape.has_logprobs
        else np.full(shape.length, MISSING_LOGPROB, dtype=np.float32)
    )
    return tokens.output_tokens(nonce, j, max_tokens)[: shape.length], lps, STOP if shape.stopped else LENGTH


def _expected_prompt(nonce: int, prompt_extra: int) -> tuple[np.ndarray | None, tuple[np.ndarray, np.ndarray] | None]:
    """The prompt logprobs and top-k the request asked for (tokens.asks), None where it did not ask."""
    asks = tokens.asks(nonce)
    if not asks.prompt_logprobs:
        return None, None
    prompt = tokens.prompt_tokens(nonce, prompt_extra)
    topk = tokens.topk_prompt_logprobs(nonce, prompt, asks.topk) if asks.topk else None
    return tokens.prompt_logprobs(nonce, prompt, asks.topk), topk


def expected(nonce: int, num_samples: int, max_tokens: int, prompt_extra: int = 0) -> Result:
    """The result request ``nonce`` should get, every field :func:`check` compares (tests and benchmarks build
    their stand-in servers' answers from it)."""
    sequences = [Sequence(*_expected_sample(nonce, j, max_tokens)) for j in range(num_samples)]
    return Result(sequences, *_expected_prompt(nonce, prompt_extra))


def _same(got: np.ndarray, want: np.ndarray, equal_nan: bool = False) -> bool:
    # Elementwise ==, then all(): np.array_equal's own checks (asarray, shapes) cost more than the compare.
    if got.shape != want.shape:
        return False
    same = got == want
    if equal_nan:  # NaN where the position has none (position 0); np.array_equal(equal_nan=True) costs twice this
        same |= np.isnan(got) & np.isnan(want)
    return bool(same.all())


def _presence(missing: bool) -> str:
    return "missing (asked for," if missing else "not asked for ("


def _prompt_level(
    result: Result, plp: np.ndarray | None, topk: tuple[np.ndarray, np.ndarray] | None, nonce: int
) -> str | None:
    """The prompt logprobs and top-k: present exactly where asked, and then the nonce's."""
    got_plp, got_top = result.prompt_logprobs, result.topk
    if got_plp is None and plp is None and got_top is None and topk is None:
        return None  # the common case: neither asked nor sent
    if (got_plp is None) != (plp is None):
        return f"prompt logprobs {_presence(got_plp is None)} nonce {nonce})"
    if got_plp is not None and not _same(got_plp, plp, equal_nan=True):
        return f"prompt logprobs do not match nonce {nonce}"
    if (got_top is None) != (topk is None):
        return f"top-k prompt logprobs {_presence(got_top is None)} nonce {nonce})"
    if got_top is not None and not (_same(got_top[0], topk[0]) and _same(got_top[1], topk[1])):
        return f"top-k prompt logprobs do not match nonce {nonce}"
    return None


def check(result: Result, nonce: int, num_samples: int, max_tokens: int, prompt_extra: int = 0) -> str | None:
    """None when the result is exactly the request's (every field of :func:`expected`); otherwise the first
    field that is wrong, by name."""
    if len(result.sequences) != num_samples:
        return f"{len(result.sequences)} sequences, expected {num_samples}"
    for j, seq in enumerate(result.sequences):
        toks, lps, stop_reason = _expected_sample(nonce, j, max_tokens)
        if seq.tokens.size != toks.size:
            return f"sample {j}: {seq.tokens.size} tokens, expected {toks.size}"
        if not (seq.tokens == toks).all():
            return f"sample {j}: tokens do not match nonce {nonce}"
        if seq.logprobs.size != lps.size or not (seq.logprobs == lps).all():
            return f"sample {j}: logprobs do not match nonce {nonce}"
        if seq.stop_reason != stop_reason:
            return f"sample {j}: stop reason {seq.stop_reason!r}, expected {stop_reason!r}"
    return _prompt_level(result, *_expected_prompt(nonce, prompt_extra), nonce)


def asks_json(nonce: int) -> str:
    """What request ``nonce`` asks beside its samples (tokens.asks), as the sample body's trailing fields."""
    asks = tokens.asks(nonce)
    if not asks.prompt_logprobs:
        return ""
    return f',"prompt_logprobs":true,"topk_prompt_logprobs":{asks.topk}'
