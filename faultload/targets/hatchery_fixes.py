"""Candidate fixes of what faultload found in hatchery-core, applied inside the target's Python (``--fix NAME``).

Applied by ``hatchery_patches.py`` once hatchery is imported: ``FIXES[name]`` takes its modules
(``tinker_compat``: ``hatchery.core.tinker_compat``, ``local_dev``: ``hatchery.core.local_dev``) and says what it
changed. Only the standard library is imported here, so faultload's reference page can read the docstrings.
"""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from typing import Any, Callable

RETRIEVE_PATH = "/api/v1/retrieve_future"
PROTO_TYPE = b"application/x-protobuf"
# An empty top-k cell of the proto's dense matrices: tinker's MASK_LOGPROB and token id 0, as SkyRL 0.4.0 fills it.
MASK_TOKEN, MASK_LOGPROB = 0, -99999.0


def sampling_session_answer(modules: dict[str, Any]) -> str:
    """Finding 11's candidate fix: ``create_sampling_session`` answers the sampling session, as the SDK reads it.

    hatchery-core 0.3.0 registers the new sampling session's answer as a future and answers the future's
    envelope (``request_id``, ``future_id``, ``status: pending``); every tinker release reads
    ``sampling_session_id`` from the answer itself (``CreateSamplingSessionResponse``) and fails with
    ``APIResponseValidationError``, so ``create_sampling_client(base_model=...)`` never works. The fix answers
    the inline result the route already built (``type``, ``sampling_session_id``, ...) directly.
    """
    compat = modules["tinker_compat"]
    envelope = compat._future_response

    def _future_response(job_id: str, user_id: str, operation: str, **kwargs: Any) -> dict:
        answer = envelope(job_id, user_id, operation, **kwargs)
        inline = kwargs.get("inline_result")
        return dict(inline) if operation == "create_sampling_session" and inline else answer

    compat._future_response = _future_response
    return "sampling-session-answer: create_sampling_session answers the sampling session, not a future"


def proto_sample_results(modules: dict[str, Any]) -> str:
    """Finding 12's candidate fix: a sample's result goes out as the SDK's ``SampleResponse`` proto when asked for.

    tinker 0.25 and later poll with ``Accept: application/x-protobuf`` and read a ``SampleResponse`` only as proto;
    hatchery-core 0.3.0 answers every result as JSON. The fix puts an ASGI middleware in front of the gateway (as
    ``retrieve_future`` would check the ``Accept`` header itself): a 200 JSON result with ``sequences``, polled
    by a client that asks for proto, is re-encoded with tinker's own ``tinker_public_pb2`` (tokens int32,
    logprobs float32, prompt logprobs float32 with NaN for none, top-k as dense matrices, empty cells masked as
    tinker masks them). Every other answer
    (a try-again, a failure, another operation's result, a client that asks for JSON) is left as it was.
    """
    local_dev = modules["local_dev"]
    create_app = local_dev.create_app
    pb = _tinker_public_pb2()

    def create_app_with_proto(*args: Any, **kwargs: Any) -> Any:
        app = create_app(*args, **kwargs)
        app.add_middleware(_ProtoSamples, pb=pb)
        return app

    local_dev.create_app = create_app_with_proto
    return "proto-sample-results: a sample's result is a SampleResponse proto when the client asks for proto"


def _tinker_public_pb2() -> Any:
    """tinker's generated proto module, loaded from its file (importing the ``tinker`` package would import its
    whole client, whose dependencies the target venv does not have)."""
    spec = importlib.util.find_spec("tinker")
    if spec is None or spec.origin is None:
        raise RuntimeError("proto-sample-results needs tinker (installed --no-deps beside hatchery-core)")
    path = Path(spec.origin).parent / "proto" / "tinker_public_pb2.py"
    module_spec = importlib.util.spec_from_file_location("tinker_public_pb2", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


class _ProtoSamples:
    """Pure ASGI middleware: re-encodes a JSON sample result of ``retrieve_future`` as proto for a client that
    asks for it (the body is held until complete: a result is one body)."""

    def __init__(self, app: Any, pb: Any) -> None:
        self.app, self.pb = app, pb

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        accept = dict(scope.get("headers") or ()).get(b"accept", b"")
        if scope["type"] != "http" or scope.get("path") != RETRIEVE_PATH or PROTO_TYPE not in accept:
            await self.app(scope, receive, send)
            return
        start: dict = {}
        chunks: list[bytes] = []

        async def capture(message: dict) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(chunks)
            proto = _as_proto(self.pb, body) if start.get("status") == 200 else None
            headers = list(start.get("headers") or ())
            if proto is not None:
                body = proto
                kept = [(k, v) for k, v in headers if k.lower() not in (b"content-type", b"content-length")]
                headers = kept + [(b"content-type", PROTO_TYPE), (b"content-length", str(len(body)).encode())]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, capture)


def _as_proto(pb: Any, body: bytes) -> bytes | None:
    """A JSON sample result as ``SampleResponse`` proto bytes; None for any other answer."""
    try:
        result = json.loads(body)
    except ValueError:
        return None
    if not isinstance(result, dict) or not isinstance(result.get("sequences"), list) or "error" in result:
        return None
    message = pb.SampleResponse()
    stop = {"stop": pb.STOP_REASON_STOP, "length": pb.STOP_REASON_LENGTH}
    for seq in result["sequences"]:
        tokens, logprobs = seq.get("tokens") or [], seq.get("logprobs")
        message.sequences.add(
            stop_reason=stop.get(seq.get("stop_reason"), pb.STOP_REASON_LENGTH),
            tokens=struct.pack(f"<{len(tokens)}i", *tokens),
            logprobs=struct.pack(f"<{len(logprobs)}f", *logprobs) if logprobs else b"",
        )
    prompt = result.get("prompt_logprobs")
    if prompt is not None:
        message.prompt_logprobs = struct.pack(f"<{len(prompt)}f", *[float("nan") if x is None else x for x in prompt])
    topk = result.get("topk_prompt_logprobs")
    if topk:
        k = max((len(row) for row in topk if row), default=1)
        ids: list[int] = []
        lps: list[float] = []
        for row in topk:
            row = list(row or [])
            ids += [int(t) for t, _ in row] + [MASK_TOKEN] * (k - len(row))
            lps += [float(lp) for _, lp in row] + [MASK_LOGPROB] * (k - len(row))
        message.topk_prompt_logprobs.CopyFrom(
            pb.TopkPromptLogprobs(
                prompt_length=len(topk),
                k=k,
                token_ids=struct.pack(f"<{len(ids)}i", *ids),
                logprobs=struct.pack(f"<{len(lps)}f", *lps),
            )
        )
    return message.SerializeToString()


FIXES: dict[str, Callable[[dict[str, Any]], str]] = {
    "sampling-session-answer": sampling_session_answer,
    "proto-sample-results": proto_sample_results,
}
