"""Regression switches on the sample-forwarding path of a launched SkyRL server.

Runs under the target's Python, imported by ``skyrl_patches`` (see there).
SkyRL 0.4.0 forwards a sample to the inference router in
``skyrl.tinker.extra.skyrl_train_inference_forwarding`` and fixed three costs
of 0.3.0's forwarding there; each switch below undoes one of them, the other
two and everything else staying the release's:

- ``httpx-forwarding``: the router is called through 0.3.0's
  ``httpx.AsyncClient`` pool instead of the release's aiohttp session;
- ``json-decode``: the router's body is decoded with the standard library's
  ``json.loads`` (what 0.3.0's ``httpx.Response.json()`` ran) instead of
  orjson;
- ``proto-per-poll``: a forwarded result is stored as ``SampleOutput`` JSON
  text and encoded to proto by every ``retrieve_future`` that returns it,
  instead of encoded once at completion and served as-is.

Each switch takes the api module namespace and a ``need(namespace, name,
why)`` that returns ``namespace[name]`` or raises the launcher's PatchError.
"""

from __future__ import annotations

import contextlib
import json
import sys
import types
from typing import Any, AsyncIterator, Callable

import aiohttp
import httpx

Need = Callable[[dict, str, str], Any]


def forwarding(ns: dict, need: Need) -> tuple[type, dict]:
    """The forwarding client class and its module's namespace."""
    client_cls = need(ns, "SkyRLTrainInferenceForwardingClient", "sample forwarding client")
    return client_cls, vars(sys.modules[client_cls.__module__])


def members(cls: type) -> dict:
    """The names a class has, its bases' included, for ``need`` to check."""
    return dict.fromkeys(dir(cls))


# --------------------------------------------------------------------------- httpx-forwarding


class HttpxConnectError(aiohttp.ClientConnectorError):
    """httpx's connect failure as the aiohttp error the release retries once."""

    def __init__(self, message: str) -> None:
        OSError.__init__(self, message)
        self._conn_key = None
        self._os_error = OSError(message)

    def __str__(self) -> str:
        return self.args[0]


class HttpxConnectTimeout(aiohttp.ConnectionTimeoutError):
    """httpx's connect timeout as the aiohttp error the release retries once."""


class HttpxReadTimeout(aiohttp.SocketTimeoutError):
    """httpx's read timeout as the aiohttp error the release reports as "timed out ... (read timeout)"."""


# The httpx errors the release's _forward_with_retry acts on, by their aiohttp
# counterparts. Any other httpx error propagates as itself: not retried, like
# aiohttp's read/write/disconnect errors.
_TRANSLATED = (
    (httpx.ConnectTimeout, HttpxConnectTimeout),
    (httpx.ConnectError, HttpxConnectError),
    (httpx.ReadTimeout, HttpxReadTimeout),
)
_TRANSLATED_HTTPX_ERRORS = tuple(httpx_error for httpx_error, _ in _TRANSLATED)


class _HttpxResponse:
    """The part of an aiohttp response ``_forward`` reads, over a read httpx response."""

    def __init__(self, response: httpx.Response) -> None:
        self.status = response.status_code
        self.headers = response.headers
        self._content = response.content

    async def read(self) -> bytes:
        return self._content


class HttpxSession:
    """The part of an aiohttp ``ClientSession`` the forwarding client uses, over an ``httpx.AsyncClient``."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    @property
    def closed(self) -> bool:
        return self.client.is_closed

    async def close(self) -> None:
        await self.client.aclose()

    @contextlib.asynccontextmanager
    async def post(self, url: str, *, json: Any, headers: dict) -> AsyncIterator[_HttpxResponse]:
        try:
            response = await self.client.post(url, json=json, headers=headers)
        except _TRANSLATED_HTTPX_ERRORS as exc:
            aiohttp_error = next(ours for theirs, ours in _TRANSLATED if isinstance(exc, theirs))
            raise aiohttp_error(f"httpx {type(exc).__name__}: {exc}") from exc
        yield _HttpxResponse(response)


def httpx_client(max_connections: int | None, connect_timeout_s: float, read_timeout_s: float) -> httpx.AsyncClient:
    """0.3.0's pool (its limits, httpx's 5 s keep-alive expiry) with the release's deadlines.

    The deadlines are the release's aiohttp ones (connect, read; no write, pool
    or total deadline), so the client library and its pool are all that differ.
    """
    max_keepalive = max(max_connections // 4, 32) if max_connections is not None else None
    return httpx.AsyncClient(
        timeout=httpx.Timeout(None, connect=connect_timeout_s, read=read_timeout_s),
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_keepalive),
    )


def regress_httpx_forwarding(ns: dict, need: Need) -> str:
    """Undo aiohttp forwarding: the router is called through 0.3.0's httpx pool.

    Upstream fix: ``SkyRLTrainInferenceForwardingClient._get_session`` returns
    an aiohttp session because httpcore's pool rescans every connection for
    every request (~28 ms each at 512 in flight). Undone by a ``_get_session``
    returning an aiohttp-shaped wrapper over ``httpx.AsyncClient``; ``_forward``,
    its retry policy and ``aclose`` are the release's.
    """
    client_cls, module = forwarding(ns, need)
    need(members(client_cls), "_get_session", "aiohttp session; a version without it forwards through httpx already")
    connect_timeout_s = need(module, "_ROUTER_CONNECT_TIMEOUT_SECONDS", "router connect deadline")

    def httpx_session(self) -> HttpxSession:
        session = getattr(self, "_session", None)
        if session is None or session.closed:
            config = self.engine_config
            self._session = HttpxSession(
                httpx_client(
                    config.forwarding_inference_max_connections,
                    connect_timeout_s,
                    config.forwarding_inference_timeout_sec,
                )
            )
        return self._session

    client_cls._get_session = httpx_session
    return "httpx-forwarding: router calls through httpx.AsyncClient with 0.3.0's pool limits"


# --------------------------------------------------------------------------- json-decode


def regress_json_decode(ns: dict, need: Need) -> str:
    """Undo orjson decoding: the router's body goes through the standard library's ``json.loads``.

    Upstream fix: ``_forward`` decodes the body with ``orjson.loads``; 0.3.0
    called ``httpx.Response.json()``, i.e. ``json.loads(content)``, and caught
    ``ValueError``. Both build the same dicts and lists; the decoder is what
    differs. Undone by replacing the module's ``orjson`` global with that pair.
    """
    _, module = forwarding(ns, need)
    need(module, "orjson", "orjson body decoding")
    module["orjson"] = types.SimpleNamespace(loads=json.loads, JSONDecodeError=ValueError)
    return "json-decode: router bodies decoded with json.loads"


# --------------------------------------------------------------------------- proto-per-poll


def regress_proto_per_poll(ns: dict, need: Need) -> str:
    """Undo encode-once: a forwarded result is kept as JSON text and encoded to proto on every poll.

    Upstream fix: ``_forward`` encodes the router's answer straight to proto
    (``serialize_sample_output``), ``ExternalFutureStore.complete`` keeps those
    bytes and ``retrieve_future`` serves them as-is; a result kept as JSON is
    encoded once and cached (``cache_proto``). Undone: ``_forward`` returns a
    ``SampleOutput`` (0.3.0 built that model too), ``complete`` stores its JSON
    text, and ``cache_proto`` keeps nothing, so each ``retrieve_future`` that
    returns it runs the release's ``_serialize_proto_result`` (``json.loads``,
    ``model_validate``, encode) again.
    """
    _, module = forwarding(ns, need)
    need(module, "serialize_sample_output", "forwarded results encoded to proto at completion")
    need(ns, "_serialize_proto_result", "retrieve_future's JSON-to-proto encoding")
    store_cls = need(ns, "ExternalFutureStore", "in-memory future store")
    need(members(store_cls), "cache_proto", "proto cache for results kept as JSON")
    skyrl_types = need(module, "types", "skyrl.tinker.types (SampleOutput)")

    def sample_output(sequences, prompt_logprobs, topk_prompt_logprobs):
        generated = [
            skyrl_types.GeneratedSequence(stop_reason=stop_reason, tokens=tokens, logprobs=logprobs)
            for stop_reason, tokens, logprobs in sequences
        ]
        return skyrl_types.SampleOutput(
            sequences=generated, prompt_logprobs=prompt_logprobs, topk_prompt_logprobs=topk_prompt_logprobs
        )

    def keep_no_proto(self, request_id: int, proto: bytes) -> None:
        return None

    module["serialize_sample_output"] = sample_output
    store_cls.cache_proto = keep_no_proto
    return "proto-per-poll: forwarded results kept as SampleOutput JSON, encoded to proto on every poll"
