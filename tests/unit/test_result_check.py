"""The client's result check (faultload.client.decode): every field a result carries, decoded and compared.

Results here are built by tests/results.py (TEST DOUBLES of a server's answer: decode.expected encoded as
SkyRL 0.4.0's proto or as SampleOutput JSON) and by ``_as_skyrl`` below (a TEST DOUBLE of SkyRL's forwarding
conversion, applied to the real router's bodies). Each corruption changes one field and must be named.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import simdjson
from tinker.proto.response_conv import deserialize_sample_response

from faultload.client import decode
from faultload.model import tokens
from faultload.router.bodies import completion_body
from tests.results import encode_json, encode_proto, json_result, proto_result

LENGTH = 12


def _nonce(*, stopped: bool = False, bare: bool = False, topk: bool = False, samples: int = 1) -> int:
    """The first nonce whose sample 0 stops early / has no logprobs / whose request asks for top-k."""
    for nonce in range(1 << 24, (1 << 24) + 100_000):
        c, a = tokens.choice(nonce, 0, LENGTH), tokens.asks(nonce)
        if c.stopped == stopped and c.has_logprobs != bare and (a.topk > 0) == topk:
            return nonce
    raise AssertionError("no such nonce")


def _roundtrip(kind: str, result: decode.Result) -> decode.Result:
    if kind == "proto":
        return decode.decode(encode_proto(result), decode.PROTO_CONTENT_TYPE)
    return decode.decode(encode_json(result), "application/json", simdjson.Parser())


@pytest.mark.parametrize("kind", ["proto", "json"])
@pytest.mark.parametrize("nonce", [_nonce(), _nonce(stopped=True), _nonce(bare=True), _nonce(topk=True)])
def test_the_expected_result_decodes_and_passes(kind: str, nonce: int) -> None:
    result = _roundtrip(kind, decode.expected(nonce, 3, LENGTH, prompt_extra=2))
    assert result.sequences[0].tokens.dtype == np.int32 and result.sequences[0].logprobs.dtype == np.float32
    assert decode.check(result, nonce, 3, LENGTH, prompt_extra=2) is None


def test_a_choice_without_logprobs_is_expected_zero_filled() -> None:
    nonce = _nonce(bare=True)
    seq = decode.expected(nonce, 1, LENGTH).sequences[0]
    assert (seq.logprobs == decode.MISSING_LOGPROB).all() and seq.logprobs.size == seq.tokens.size


def _one_field_wrong(field: str, nonce: int) -> decode.Result:
    """The expected result with exactly ``field`` wrong."""
    good = decode.expected(nonce, 2, LENGTH)
    s0 = good.sequences[0]
    if field == "count":
        return replace(good, sequences=good.sequences[:1])
    if field == "tokens":
        return replace(good, sequences=[replace(s0, tokens=s0.tokens + 1), good.sequences[1]])
    if field == "length":
        return replace(
            good, sequences=[replace(s0, tokens=s0.tokens[:-1], logprobs=s0.logprobs[:-1]), good.sequences[1]]
        )
    if field == "logprobs":
        return replace(good, sequences=[replace(s0, logprobs=s0.logprobs - np.float32(0.5)), good.sequences[1]])
    if field == "missing logprobs":  # a server that passes the router's null on as no logprobs, not zero-filled
        return replace(good, sequences=[replace(s0, logprobs=np.zeros(0, dtype=np.float32)), good.sequences[1]])
    if field == "stop reason":
        flipped = decode.LENGTH if s0.stop_reason == decode.STOP else decode.STOP
        return replace(good, sequences=[replace(s0, stop_reason=flipped), good.sequences[1]])
    if field == "prompt logprobs":
        plp = good.prompt_logprobs.copy()
        plp[-1] -= np.float32(0.25)
        return replace(good, prompt_logprobs=plp)
    if field == "top-k":
        ids, lps = good.topk
        return replace(good, topk=(ids[:, ::-1].copy(), lps))
    raise AssertionError(field)


FIELDS = {  # field -> (the nonce it needs, what the check must name)
    "count": (_nonce(), "1 sequences, expected 2"),
    "tokens": (_nonce(), "sample 0: tokens do not match"),
    "length": (_nonce(), f"sample 0: {LENGTH - 1} tokens, expected {LENGTH}"),
    "logprobs": (_nonce(), "sample 0: logprobs do not match"),
    "missing logprobs": (_nonce(bare=True), "sample 0: logprobs do not match"),
    "stop reason": (_nonce(stopped=True), "sample 0: stop reason 'length', expected 'stop'"),
    "prompt logprobs": (_nonce(topk=True), "prompt logprobs do not match"),
    "top-k": (_nonce(topk=True), "top-k prompt logprobs do not match"),
}


@pytest.mark.parametrize("kind", ["proto", "json"])
@pytest.mark.parametrize("field", list(FIELDS))
def test_one_wrong_field_is_judged_corrupt_and_named(kind: str, field: str) -> None:
    nonce, named = FIELDS[field]
    if field == "length":
        named = named.replace(str(LENGTH), str(tokens.choice(nonce, 0, LENGTH).length))
    problem = decode.check(_roundtrip(kind, _one_field_wrong(field, nonce)), nonce, 2, LENGTH)
    assert problem is not None and named in problem, problem


@pytest.mark.parametrize("kind", ["proto", "json"])
def test_prompt_logprobs_present_exactly_where_asked(kind: str) -> None:
    asked, plain = _nonce(topk=True), _nonce()
    unasked = replace(decode.expected(plain, 1, LENGTH), prompt_logprobs=np.zeros(3, dtype=np.float32))
    assert "prompt logprobs not asked for" in decode.check(_roundtrip(kind, unasked), plain, 1, LENGTH)
    dropped = replace(decode.expected(asked, 1, LENGTH), prompt_logprobs=None, topk=None)
    assert "prompt logprobs missing (asked for" in decode.check(_roundtrip(kind, dropped), asked, 1, LENGTH)
    no_topk = replace(decode.expected(asked, 1, LENGTH), topk=None)
    assert "top-k prompt logprobs missing" in decode.check(_roundtrip(kind, no_topk), asked, 1, LENGTH)


@pytest.mark.parametrize("kind", ["proto", "json"])
def test_check_rejects_wrong_nonce_truncation_and_swapped_samples(kind: str) -> None:
    nonce = _nonce()
    assert "do not match" in decode.check(_roundtrip(kind, decode.expected(nonce + 1, 1, LENGTH)), nonce, 1, LENGTH)
    body = (proto_result if kind == "proto" else json_result)(nonce, 1, LENGTH, cut=True)
    ctype = decode.PROTO_CONTENT_TYPE if kind == "proto" else "application/json"
    assert f"{LENGTH - 1} tokens, expected {LENGTH}" in decode.check(decode.decode(body, ctype), nonce, 1, LENGTH)
    good = decode.expected(nonce, 2, LENGTH)
    swapped = replace(good, sequences=good.sequences[::-1])
    assert "sample 0" in decode.check(_roundtrip(kind, swapped), nonce, 2, LENGTH)


def _as_skyrl(body: bytes, prompt: list[int], asks: tokens.Asks) -> decode.Result:
    """TEST DOUBLE of SkyRL 0.4.0's forwarding conversion (skyrl_train_inference_forwarding._forward,
    convert_vllm_prompt_logprobs, serialize_sample_output), written from its source: zero-filled missing
    logprobs, "stop" for stop/stop_token, prompt logprobs from the first choice, top-k sorted and cut to k."""
    doc = json.loads(body)
    sequences = []
    for choice in doc["choices"]:
        toks = choice.get("token_ids", [])
        lps = (choice.get("logprobs") or {}).get("token_logprobs") or [0.0] * len(toks)
        stop = "stop" if choice.get("finish_reason") in ("stop", "stop_token") else "length"
        sequences.append(decode.Sequence(np.asarray(toks, np.int32), np.asarray(lps, np.float32), stop))
    if not asks.prompt_logprobs:
        return decode.Result(sequences)
    raw = doc["choices"][0]["prompt_logprobs"]
    own = [(d.get(str(t)) or {}).get("logprob") if d is not None else None for t, d in zip(prompt, raw)]
    plp = np.array([np.nan if x is None else x for x in own], dtype=np.float32)
    if not asks.topk:
        return decode.Result(sequences, plp)
    rows = [
        sorted(((int(t), e["logprob"]) for t, e in d.items()), key=lambda x: x[1], reverse=True)[: asks.topk]
        if d is not None
        else None
        for d in raw
    ]
    return decode.Result(sequences, plp, decode.topk_matrices(rows))


@pytest.mark.parametrize("prompt_extra", [0, 5])
def test_router_bodies_as_skyrl_converts_them_pass_the_check(prompt_extra: int) -> None:
    """Every kind of request and choice: the router's body, converted as SkyRL does, is exactly expected()."""
    for nonce in range(3 << 24, (3 << 24) + 64):
        asks, prompt = tokens.asks(nonce), tokens.prompt_tokens(nonce, prompt_extra)
        k = asks.topk if asks.prompt_logprobs else None
        result = _as_skyrl(completion_body(nonce, 4, LENGTH, "m", prompt, k), prompt, asks)
        for kind in ("proto", "json"):
            assert decode.check(_roundtrip(kind, result), nonce, 4, LENGTH, prompt_extra) is None, nonce


def test_the_sdk_decoding_of_the_proto_passes_the_check() -> None:
    """The tinker SDK's own proto decoding (the SDK client's path), through decode.from_sdk."""
    for nonce in (_nonce(), _nonce(stopped=True), _nonce(bare=True), _nonce(topk=True)):
        response = deserialize_sample_response(proto_result(nonce, 2, LENGTH))
        assert decode.check(decode.from_sdk(response), nonce, 2, LENGTH) is None
        wrong = deserialize_sample_response(encode_proto(_one_field_wrong("stop reason", _nonce(stopped=True))))
        assert "stop reason" in decode.check(decode.from_sdk(wrong), _nonce(stopped=True), 2, LENGTH)


@pytest.mark.parametrize(
    "body, ctype",
    [
        (b"\xff\xff\xff", "application/x-protobuf"),
        (b"not json", "application/json"),
        (b'{"error": "boom"}', "application/json"),
        (b'{"sequences": [{"tokens": [1, 2], "logprobs": [null, -0.5]}]}', "application/json"),
        # a scalar where the prompt-level lists go, and packed fields of part of a value: the server's answer is
        # corrupt, not a crash of the worker judging it
        (b'{"sequences": [], "prompt_logprobs": 5}', "application/json"),
        (b'{"sequences": [], "topk_prompt_logprobs": 5}', "application/json"),
        (b"\n\x07\x12\x05\x01\x02\x03\x04\x05", "application/x-protobuf"),  # tokens of 5 bytes
        # simdjson's own errors (RuntimeError) and numpy's OverflowError: once a crash of the worker
        (
            b'{"sequences": [{"tokens": [99999999999999999999999], "logprobs": [], "stop_reason": "stop"}]}',
            "application/json",
        ),
        (b"[" * 2000 + b"]" * 2000, "application/json"),  # deeper than simdjson's depth limit
        (b'{"sequences": [], "topk_prompt_logprobs": [[[99999999999, -0.1]]]}', "application/json"),  # id past int32
    ],
)
def test_undecodable_bodies_raise_decode_error(body: bytes, ctype: str) -> None:
    with pytest.raises(decode.DecodeError):
        decode.decode(body, ctype)


def test_parser_reusable_after_decode_error() -> None:
    """The raw client shares one simdjson parser per worker: a bad body must not poison it."""
    parser = simdjson.Parser()
    with pytest.raises(decode.DecodeError):
        decode.decode_json(b'{"sequences": [{"tokens": [1], "logprobs": ["x"]}]}', parser)
    nonce = _nonce(topk=True)
    assert decode.check(decode.decode_json(json_result(nonce, 1, LENGTH), parser), nonce, 1, LENGTH) is None


def test_asks_json_is_what_the_sdk_sends() -> None:
    """The raw client's extra sample fields are the SDK's SampleRequest fields, present only where asked."""
    assert decode.asks_json(_nonce()) == ""
    nonce = _nonce(topk=True)
    fields = json.loads("{" + decode.asks_json(nonce)[1:] + "}")
    assert fields == {"prompt_logprobs": True, "topk_prompt_logprobs": tokens.asks(nonce).topk}
