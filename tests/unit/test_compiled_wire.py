"""The compiled client's wire package (faultload/client/go/wire) against the Python functions it ports.

Each test sends its cases through one ``<client> vectors`` run (wire.RunVectors) and compares every answer with
the Python function's for the same input: asample and poll bodies, request ids, server id keys, first-poll plans,
try-again and failure answers, and the verdict on results (tests/results.py's exact bodies in both encodings,
then bodies wrong in each way check() names, undecodable ones, and JSON shapes only pysimdjson and numpy define).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import re
import subprocess
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import simdjson

from faultload.client import decode
from faultload.client.poll_plan import first_poll_plan
from faultload.client.sample_bodies import asample_body, poll_body, request_id_of
from faultload.client.sdk_rules import failure_reported, is_try_again
from faultload.model import tokens
from faultload.model.shape import LoadShape, PollBehaviour
from faultload.record.history import ErrorClass, server_id_key
from tests.results import encode_json, encode_proto

SALTS = (0, 1, 0x2A5, 0xFFFF)  # a trial's salt sits above its 24 index bits
SHAPES = ((1, 16, 0), (4, 64, 3), (8, 1, 0), (2, 300, 17))  # (num_samples, result_tokens, prompt_extra)
JUDGED = ((1, 16, 0), (4, 24, 3), (8, 1, 0), (2, 20, 17))  # shorter: the Python side builds and judges each
JSON, PROTO = "application/json", decode.PROTO_CONTENT_TYPE


def _nonces(count: int = 10_000) -> list[int]:
    """``count`` nonces over the salts: the first indices of each trial and random ones up to 2**24."""
    rng, per = random.Random(7), count // len(SALTS)
    indices = [*range(per // 2), *rng.sample(range(1 << 24), per - per // 2)]
    return [(salt << tokens.NONCE_INDEX_BITS) | i for salt in SALTS for i in indices]


def _run(binary: Path, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Go answers, one per case, from a single run."""
    stdin = "".join(json.dumps(case) + "\n" for case in cases).encode()
    proc = subprocess.run([str(binary), "vectors"], input=stdin, capture_output=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(answers) == len(cases)
    return answers


def _payload(payload: bytes) -> dict[str, str]:
    try:
        return {"payload": payload.decode()}
    except UnicodeDecodeError:
        return {"payload_b64": base64.b64encode(payload).decode()}


def _differences(cases: list[dict[str, Any]], got: list[dict[str, Any]], want: list[dict[str, Any]]) -> list[str]:
    return [f"{case} -> go {g}, python {w}" for case, g, w in zip(cases, got, want) if g != w]


def test_asample_bodies_match(client_binary: Path) -> None:
    """The sample body is formatted by hand in both: every byte, for every shape and what a nonce asks."""
    cases, want = [], []
    for n, nonce in enumerate(_nonces()):
        samples, length, extra = SHAPES[n % len(SHAPES)]
        shape = dataclasses.replace(LoadShape(), num_samples=samples, result_tokens=length, prompt_extra_tokens=extra)
        job = SimpleNamespace(shape=shape, first=n * 3, sampling_session_id=f"sess-{n % 7}")
        cases.append({"kind": "asample", "session_id": job.sampling_session_id, "seq_id": n * 3 + n % 5,
                      "num_samples": samples, "result_tokens": length, "prompt_extra": extra, "nonce": nonce})  # fmt: skip
        want.append({"body": asample_body(job, n % 5, nonce).decode()})
    assert _differences(cases, _run(client_binary, cases), want) == []


def test_plans_match(client_binary: Path) -> None:
    """The first poll's delay and abandon draw the same for each (seed, request), seeds past 2**63 masked."""
    seeds = (0, 1, 2**63 - 1, 2**63, 2**64 - 1, 12_345_678_901_234_567_890, -1, 2**70 + 3)
    fractions = ((0.0, 0.0), (0.5, 0.5), (1.0, 1.0), (0.1, 0.9), (0.999, 0.001), (0.25, 0.0))
    cases, want = [], []
    for n, nonce in enumerate(_nonces()):
        seed, (delay, abandon) = seeds[n % len(seeds)], fractions[n % len(fractions)]
        shape = dataclasses.replace(
            LoadShape(), seed=seed, time_scale=0.5, delay_polls=PollBehaviour(delay, 3.0),
            abandon_polls=PollBehaviour(abandon, 1.0),
        )  # fmt: skip
        cases.append({"kind": "plan", "seed": seed & (2**64 - 1), "nonce": nonce, "delay_fraction": delay,
                      "delay_s": shape.scaled(3.0), "abandon_fraction": abandon})  # fmt: skip
        got_delay, got_abandon = first_poll_plan(shape, nonce)
        want.append({"delay": got_delay, "abandon": got_abandon})
    assert _differences(cases, _run(client_binary, cases), want) == []


_PARSER = simdjson.Parser()


def _python_judge(ctype: str, body: bytes, nonce: int, shape: tuple[int, int, int]) -> dict[str, Any]:
    """The raw client's verdict. Where the Python raises past its DecodeError catch (simdjson's BIGINT_ERROR and
    DEPTH_ERROR are RuntimeErrors, numpy's OverflowError on a top-k id past int32: the worker would end), Go
    says DECODE."""
    try:
        result = decode.decode(body, ctype, _PARSER)
    except decode.DecodeError as exc:
        return {"class": int(ErrorClass.DECODE), "message": str(exc)}
    except (RuntimeError, OverflowError):
        return {"class": int(ErrorClass.DECODE), "message": "not a SampleOutput JSON: (Python raised)"}
    problem = decode.check(result, nonce, *shape)
    return {"class": int(ErrorClass.INTEGRITY if problem else ErrorClass.NONE), "message": problem or ""}


def _same_verdict(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """Equal, but a DecodeError raised with a parser's own text needs only its prefix to match, and a pysimdjson
    proxy's repr (a stop reason that is a list or an object) its address."""
    want = {**want, "message": re.sub(r" at 0x[0-9a-f]+>", " at 0x0>", want["message"])}
    for prefix in ("not a SampleOutput JSON:", "not a SampleResponse proto:"):
        if want["class"] == ErrorClass.DECODE and want["message"].startswith(prefix):
            return got["class"] == want["class"] and got["message"].startswith(prefix)
    return got == want


def _judge(binary: Path, bodies: list[tuple[str, bytes, int, tuple[int, int, int]]]) -> list[int]:
    """Go's verdicts held against Python's; the Python classes, for the caller to check what was met."""
    cases = [
        {"kind": "judge", "content_type": ct, "body_b64": base64.b64encode(body).decode(), "nonce": nonce,
         "num_samples": s[0], "max_tokens": s[1], "prompt_extra": s[2]}
        for ct, body, nonce, s in bodies
    ]  # fmt: skip
    want = [_python_judge(ct, body, nonce, s) for ct, body, nonce, s in bodies]
    wrong = [
        f"{c} -> go {g}, python {w}" for c, g, w in zip(cases, _run(binary, cases), want) if not _same_verdict(g, w)
    ]
    assert wrong == [], f"{len(wrong)} of {len(cases)} differ: {wrong[:5]}"
    return [w["class"] for w in want]


def test_exact_results_pass_in_both_encodings(client_binary: Path) -> None:
    """Every nonce's own result is OK, proto and JSON (and judged against the next nonce, INTEGRITY)."""
    bodies = []
    for n, nonce in enumerate(_nonces()):
        shape = JUDGED[n % len(JUDGED)]
        result = decode.expected(nonce, *shape)
        bodies += [(PROTO, encode_proto(result), nonce, shape), (JSON, encode_json(result), nonce, shape)]
        if n % 50 == 0:
            bodies.append((PROTO, bodies[-2][1], nonce + 1, shape))  # the wrong nonce's result
    classes = _judge(client_binary, bodies)
    assert classes.count(ErrorClass.NONE) == 20_000 and set(classes) == {ErrorClass.NONE, ErrorClass.INTEGRITY}


def _mutants(result: decode.Result) -> list[decode.Result]:
    """One field wrong each: a token, a logprob, the stop reason, a sample gone, a token cut, the prompt level."""
    seq = result.sequences[0]
    toks, lps = seq.tokens.copy(), seq.logprobs.copy()
    toks[-1] ^= 1
    lps[0] = -0.5 if lps[0] != -0.5 else -0.25
    other = decode.STOP if seq.stop_reason == decode.LENGTH else decode.LENGTH
    swap = [dataclasses.replace(seq, tokens=toks), dataclasses.replace(seq, logprobs=lps),
            dataclasses.replace(seq, stop_reason=other), dataclasses.replace(seq, tokens=seq.tokens[:-1])]  # fmt: skip
    out = [dataclasses.replace(result, sequences=[s, *result.sequences[1:]]) for s in swap]
    out.append(dataclasses.replace(result, sequences=result.sequences[:-1]))
    plp = tokens.prompt_logprobs(0, [1, 2, 3], 0) if result.prompt_logprobs is None else None
    out.append(dataclasses.replace(result, prompt_logprobs=plp))
    if result.topk is not None:
        ids = result.topk[0].copy()
        ids[1, 0] += 1
        out += [dataclasses.replace(result, topk=(ids, result.topk[1])), dataclasses.replace(result, topk=None)]
    return out


def _proto_edits(body: bytes) -> list[bytes]:
    """Proto bodies upb reads in its own ways: a field twice, packed bytes not whole values, unknown fields."""
    message = decode.pb.SampleResponse.FromString(body)
    odd, seven = decode.pb.SampleResponse(), decode.pb.SampleResponse()
    odd.CopyFrom(message)
    odd.sequences[0].tokens += b"\x00"
    seven.CopyFrom(message)
    seven.sequences[0].stop_reason = 7
    return [body[: len(body) // 2], odd.SerializeToString(), seven.SerializeToString(), body + b"\x28\x05",
            body + b"\x0a\x00", body + b"\x12\x03abc", body + b"\x2b\x30\x01\x2c", body + b"\x2b", b"\x08" * 3,
            body + b"\x1a\x02\x18\x09", b"\x0a\x02\x10\x05" + body, body + b"\x12\x04" + b"\x00\x00\xc0\x7f"]  # fmt: skip


def _json_edits(doc: dict[str, Any]) -> list[Any]:
    """JSON documents pysimdjson and numpy read in their own ways (nested, wrapped, typed otherwise)."""
    seq = doc["sequences"][0]
    out: list[Any] = [[doc], 5, "x", None, {}, {"sequences": {}}, {"sequences": ""}, {"sequences": "ab"},
                      {"sequences": 5}, {"sequences": [5]}, {"sequences": [[seq]]}]  # fmt: skip
    for key, values in {
        "tokens": [[[t] for t in seq["tokens"]], [float(t) for t in seq["tokens"]], [True], [2**63], [2**64 - 1],
                   [t + 2**32 for t in seq["tokens"]], 5, "abc", {}, [None], [[]]],
        "logprobs": [[[x] for x in seq["logprobs"]], [int(x) for x in seq["logprobs"]], ["-0.5"], [None], 0, [2**64]],
        "stop_reason": [None, 1, 1.5, True, "STOP", "st'op", "ça\n", [1], {"a": 1}, 1e16],
    }.items():  # fmt: skip
        out += [{**doc, "sequences": [{**seq, key: v}, *doc["sequences"][1:]]} for v in values]
    out.append({**doc, "sequences": [{k: v for k, v in seq.items() if k != "stop_reason"}, *doc["sequences"][1:]]})
    plp, top = doc.get("prompt_logprobs"), doc.get("topk_prompt_logprobs")
    if plp is not None:
        out += [{**doc, "prompt_logprobs": v} for v in ([str(x) for x in plp], [[x] for x in plp], [*plp, None],
                                                        5, "abc", {}, [], [plp, plp], [None, *plp[1:]])]  # fmt: skip
    if top is not None:
        rows = top[1:]
        variants = [[0, *rows], [[], *rows], ["ab", *rows], [{"12": 1}, *rows], [5, *rows], [None, [[2**31, 0.0]]],
                    [None, [[1.5, "-0.5"]]], [None, [{"5": 0, "-1": 0}]], [None, [[1, 2, 3]]], [None, [["1", None]]],
                    [None, ["12", "34"]], [None, [[float("nan"), 0]]], [None, *rows, None], {}]  # fmt: skip
        out += [{**doc, "topk_prompt_logprobs": v} for v in variants]
    return out


def test_wrong_and_odd_results_get_the_same_verdict(client_binary: Path) -> None:
    """Each mutation, proto oddity and JSON shape is judged alike: same class, check()'s exact message."""
    bodies: list[tuple[str, bytes, int, tuple[int, int, int]]] = []
    picks = [n for n in _nonces(4_000) if tokens.asks(n).prompt_logprobs][:60] + _nonces(200)[::5]
    for n, nonce in enumerate(picks):
        shape = (1 + n % 3, 1 + n % 12, n % 4)
        result = decode.expected(nonce, *shape)
        for mutant in _mutants(result):
            bodies += [(PROTO, encode_proto(mutant), nonce, shape), (JSON, encode_json(mutant), nonce, shape)]
        bodies += [(PROTO, b, nonce, shape) for b in _proto_edits(encode_proto(result))]
        raw = encode_json(result)
        bodies += [(JSON, json.dumps(d).encode(), nonce, shape) for d in _json_edits(json.loads(raw))]
        bodies += [(JSON, b, nonce, shape) for b in (raw[:-1], b"\xef\xbb\xbf" + raw, raw + b" \n", b" ", b"",
                   b"\xff" + raw, raw.replace(b"[", b"[" * 1025, 1), b'{"sequences": [], ' + raw[1:],
                   raw[:-1] + b', "sequences": 1}', raw.replace(b"sequences", b"sequ\\u0065nces"))]  # fmt: skip
        bodies += [(ct, b, nonce, shape) for ct in (JSON, PROTO) for b in (b"garbage", random.Random(n).randbytes(40))]
    assert set(_judge(client_binary, bodies)) == {ErrorClass.NONE, ErrorClass.INTEGRITY, ErrorClass.DECODE}


def test_ids_and_keys_match(client_binary: Path) -> None:
    """request_id_of, server_id_key and poll_body on the ids servers give and on odd ones."""
    ids = ["123", "-5", "+5", " 7 ", "1_000", "0", "-0", "007", str(2**63 - 1), str(2**63), str(-(2**63)),
           str(-(2**63) - 1), "1__0", "_1", "1_", "", " ", "abc", "1e3", "0x10", "+-1", "\u0663\u0664", "\uff15",
           "\u00a05\u3000", "\x1c5", "5\x00", "\t9\n", "\u00e9", "\u65e5\u672c", "\U0001f600", "a\"b\\c",
           "\x01\x1f\x7f\u2028", *(str(uuid.UUID(int=random.Random(i).getrandbits(128))) for i in range(20))]  # fmt: skip
    payloads = [json.dumps({"request_id": v}).encode() for v in [*ids, 42, -7, 2**63, 2**64, True, 1.5, None, [1], {}]]
    payloads += [b'{"request_id": "a", "request_id": "b"}', b"[1]", b'"x"', b"{}", b'{"x": {"request_id": 1}}',
                 b"\xef\xbb\xbf{\"request_id\": 3}", b'{"request_id": "\xff"}', b"", b"{", b'{"request_id": 1e400}',
                 b'{"request_id": 123456789012345678901234567890}', b'{"request_id": "\\u0041"}']  # fmt: skip
    cases: list[dict[str, Any]] = []
    want: list[dict[str, Any]] = []
    for i in ids:
        cases += [{"kind": "server_id", "request_id": i}, {"kind": "poll", "request_id": i}]
        want += [{"key": server_id_key(i)}, {"body": poll_body(i).decode()}]
    for payload in payloads:
        cases.append({"kind": "request_id", **_payload(payload)})
        try:
            want.append({"id": request_id_of(simdjson.Parser(), payload), "error": False})
        except Exception:  # RuntimeError too (BIGINT_ERROR): the raw client would end; Go calls it an error
            want.append({"id": "", "error": True})
    assert _differences(cases, _run(client_binary, cases), want) == []


def test_try_again_and_failure_answers_match(client_binary: Path) -> None:
    """is_try_again and failure_reported: json.loads's reading (last key wins, NaN, big ints) and str() of it."""
    payloads = [b'{"type": "try_again"}', b'{"type": "try_again", "type": "x"}', b'{"type": "x", "type": "try_again"}',
                b'["try_again"]', b'"try_again"', b'{"type": "try_again"' + b" " * 4100 + b"}", b"try_again",
                b'\xef\xbb\xbf{"type": "try_again"}', b'{"type": "try\\u005fagain"}', b'{"type": "try_again", "n": NaN}',
                b'{"error": "boom"}', b'{"error": 1}', b'{"error": 1.5e300}', b'{"error": null}', b'{"error": true}',
                b'{"error": [1, "a\'b", {"k": null, "j": -0.0}]}', b'{"error": {"a": 1, "b": [], "a": 2}}',
                b'{"error": "x", "type": "try_again"}', b'{"error": "\\ud800"}', b'{"error": "\\u00e9\\u0007"}',
                b'{"error": 12345678901234567890123}', b'{"error": -0}', b'{"error": NaN}', b'{"error": -Infinity}',
                b'{"error": 1e16}', b'{"error": 1e-05}', b'{"error": 0.0001}', b'{"error": ["\\"", "\'\\""]}',
                b'{"msg": "error"}', b'{"error": "a", "error": "b"}', b'{"error": "\xff"}', b'{"error": 1e400}',
                b'{"error": "a\xed\xa0\x80"}', b'{"error": "\x01"}', b'{"error": 1,}', b"", b'{"error": "\\ud83d\\ude00"}',
                b'{"error": {"k": "\\u2028", "": [[]]}}', b'{"error": 5, "type": null}', b'{"error": 012}']  # fmt: skip
    cases: list[dict[str, Any]] = []
    want: list[dict[str, Any]] = []
    for ctype in ("application/json", "application/json; charset=utf-8", "text/plain", PROTO):
        for payload in payloads:
            cases += [{"kind": kind, "content_type": ctype, **_payload(payload)} for kind in ("try_again", "failure")]
            message = failure_reported(ctype, payload)
            want += [{"yes": is_try_again(ctype, payload), "message": ""},
                     {"yes": message is not None, "message": message or ""}]  # fmt: skip
    assert _differences(cases, _run(client_binary, cases), want) == []
