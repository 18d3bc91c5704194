"""What the real tinker SDK does per request, observed on its own HTTP traffic.

The SDK hides its request ids, retries and polls inside its own event loop
(a background thread). Its HTTP still goes through an ``httpx`` transport it
picks itself (pyqwest's, as the server's client config asks, or httpx's own),
so :class:`RecordingTransport` wraps *that* transport and sees every attempt
on the wire: an ``asample`` body carries the request's nonce in its prompt
tokens (:mod:`faultload.model.tokens`), its answer the server's request id, and a
``retrieve_future`` body that id again. :class:`SdkWire` turns those into the
same History columns and attempt rows the raw client writes (attempts, submit
retries, re-polls, transport errors, server id, last error class).

Per-request HTTP timeouts (the 45 s poll, the 60 s default, both as httpx
carries them in ``request.extensions["timeout"]``) are multiplied by the
trial's time scale, as every other client and server timer is; the SDK's
backoff sleeps and retry budgets are its own and are not.

Every method of :class:`SdkWire` runs on the SDK's thread except
:meth:`SdkWire.close`; one lock orders them, and nothing is recorded after
``close`` (so the attempt rows and the per-request counts always agree).
"""

from __future__ import annotations

import re
import threading
from typing import Any, Callable, Iterator

import httpx
import tinker
from tinker import _base_client, _constants

from faultload.client.counters import ACCEPTED as _ACCEPTED
from faultload.client.counters import ATTEMPTS as _ATTEMPTS
from faultload.client.counters import POLL_TIMEOUTS as _POLL_TIMEOUTS
from faultload.client.job import WorkerJob
from faultload.client.sdk_rules import is_try_again
from faultload.client.sdk_timers import scaled_limits, scaled_pyqwest_transport
from faultload.model import tokens
from faultload.model.tokens import NONCE_INDEX_BITS
from faultload.record.history import (
    TRY_AGAIN,
    AttemptKind,
    AttemptRecorder,
    ErrorClass,
    History,
    bump_count,
    server_id_key,
)

_SAMPLE_PATH = "/api/v1/asample"
_POLL_PATH = "/api/v1/retrieve_future"
# The prompt's first three tokens: the faultload mark, then the nonce's two halves.
_PROMPT = re.compile(rb'"tokens"\s*:\s*\[\s*%d\s*,\s*(\d+)\s*,\s*(\d+)' % tokens.PROMPT_MARK)
# A request id as a server writes it: SkyRL's signed 64-bit integers (quoted or not), TuFT's UUIDs.
_REQUEST_ID = re.compile(rb'"request_id"\s*:\s*"?([^",}\s]+)')
_CHAIN_DEPTH = 8


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it (``__cause__``, else ``__context__``), outermost first, bounded."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < _CHAIN_DEPTH:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]


def attempt_kind(path: str) -> AttemptKind | None:
    """SUBMIT for an asample URL path, POLL for retrieve_future, None for the SDK's other calls."""
    if path.endswith(_SAMPLE_PATH):
        return AttemptKind.SUBMIT
    if path.endswith(_POLL_PATH):
        return AttemptKind.POLL
    return None


def status_error(kind: AttemptKind, status: int) -> ErrorClass | None:
    """The error class the raw client notes for an HTTP answer (None: not an error).

    asample: 5xx, else 4xx. retrieve_future: 404 (the id is gone), 400 (the
    server's failure report), 408 none (try again), other 4xx/5xx by range.
    """
    if status < 400 or (kind == AttemptKind.POLL and status == 408):
        return None
    if status >= 500:
        return ErrorClass.HTTP_5XX
    if kind == AttemptKind.POLL and status == 404:
        return ErrorClass.HTTP_404
    if kind == AttemptKind.POLL and status == 400:
        return ErrorClass.SERVER_FAILED
    return ErrorClass.HTTP_4XX


def classify_exception(exc: BaseException) -> ErrorClass:
    """The ErrorClass of an exception the SDK (or its transport) raised.

    The SDK wraps what went wrong (``ValueError`` from an ``APIStatusError``,
    ``APIConnectionError`` from an ``httpx`` error from pyqwest's or the OS's),
    so the whole chain is read: a server's failure report or HTTP status
    first, then a timeout (a connect timeout included, as the raw client
    counts it), a reset, a refused connect.
    """
    chain = list(_chain(exc))
    for e in chain:
        if isinstance(e, tinker.RequestFailedError):
            return ErrorClass.SERVER_FAILED
        if isinstance(e, tinker.APIStatusError):
            kind = attempt_kind(e.request.url.path) if e.request is not None else None
            return status_error(kind or AttemptKind.SUBMIT, e.status_code) or ErrorClass.HTTP_4XX
    for e in chain:
        if isinstance(e, (httpx.TimeoutException, TimeoutError, tinker.APITimeoutError)):
            return ErrorClass.TIMEOUT
    for e in chain:
        if isinstance(e, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            return ErrorClass.RESET
        if isinstance(e, ConnectionRefusedError):
            return ErrorClass.CONNECT
    for e in chain:
        if isinstance(e, httpx.ConnectError):
            # pyqwest reports every connection failure as ConnectionError -> httpx.ConnectError,
            # a reset of an open connection included; only its message tells them apart.
            text = str(e).lower()
            return ErrorClass.RESET if "reset" in text or "closed" in text else ErrorClass.CONNECT
        if isinstance(e, (httpx.ReadError, httpx.WriteError, httpx.CloseError, httpx.RemoteProtocolError)):
            return ErrorClass.RESET
        if isinstance(e, httpx.ProtocolError):
            return ErrorClass.DECODE
    return ErrorClass.OTHER


class SdkWire:
    """One worker's SDK attempts, written into its History as the raw client would."""

    def __init__(
        self,
        job: WorkerJob,
        history: History,
        examples: dict[str, str],
        add_counter: Callable[[int, int], None],
        now: Callable[[], float],
    ) -> None:
        self.job = job
        self.history = history
        self.examples = examples
        self._add_counter = add_counter  # (slot, delta): the live counters, ATTEMPTS, ACCEPTED and POLL_TIMEOUTS only
        self.now = now
        self._attempts = AttemptRecorder()
        self._lock = threading.Lock()
        self._closed = False
        self._by_server_id: dict[int, int] = {}
        self._submitted: set[int] = set()
        self._polled: set[int] = set()
        self.unmapped = 0  # sample/poll attempts whose request could not be told (never expected)
        # The last answered poll's status per row: 200 means a result arrived.
        self.last_poll_status: dict[int, int] = {}

    # ------------------------------------------------------------------ which request

    def row_of_sample(self, body: bytes) -> int | None:
        """The History row of an asample body, from the nonce in its prompt; None if not ours."""
        m = _PROMPT.search(body)
        if m is None:
            return None
        nonce = tokens.nonce_of([tokens.PROMPT_MARK, int(m.group(1)), int(m.group(2))])
        if nonce is None or nonce >> NONCE_INDEX_BITS != self.job.nonce_salt:
            return None
        row = (nonce & ((1 << NONCE_INDEX_BITS) - 1)) - self.job.first
        return row if 0 <= row < self.job.count else None

    def row_of_poll(self, body: bytes) -> int | None:
        m = _REQUEST_ID.search(body)
        return self._by_server_id.get(server_id_key(m.group(1).decode(errors="replace"))) if m else None

    # ------------------------------------------------------------------ events (SDK thread)

    def begin(self, row: int, kind: AttemptKind) -> bool:
        """Count one attempt of ``row``; False once closed (nothing more is recorded)."""
        with self._lock:
            if self._closed:
                return False
            h = self.history
            bump_count(h["attempts"], row)
            seen = self._submitted if kind == AttemptKind.SUBMIT else self._polled
            if row in seen:  # a re-submit (retry, or the SDK re-sampling after a 410) or a re-poll
                bump_count(h["submit_retries"] if kind == AttemptKind.SUBMIT else h["repolls"], row)
            seen.add(row)
            self._add_counter(_ATTEMPTS, 1)
            return True

    def answered(self, row: int, kind: AttemptKind, started: float, status: int, body: bytes, size: int) -> None:
        """An HTTP answer arrived whole: its status, and (asample 200) the server's request id."""
        with self._lock:
            if self._closed:
                return
            h = self.history
            end = self.now()
            try_again = kind == AttemptKind.POLL and status == 200 and is_try_again("application/json", body)
            self._attempts.add(row, kind, started, end, TRY_AGAIN if try_again else status)
            error = status_error(kind, status)
            if error is not None:
                h["error"][row] = error
                what = "asample" if kind == AttemptKind.SUBMIT else "retrieve_future"
                self.examples.setdefault(error.key, f"{what}: HTTP {status}: {body[:200]!r}"[:300])
            if kind == AttemptKind.SUBMIT:
                h["submit_end"][row] = end
                if 200 <= status < 300:  # any 2xx, as the SDK (SkyRL answers 200, TuFT 202)
                    m = _REQUEST_ID.search(body)
                    if m is None:
                        h["error"][row] = ErrorClass.DECODE
                        self.examples.setdefault("decode", f"asample: no request_id in {body[:200]!r}")
                        return
                    server_id = server_id_key(m.group(1).decode(errors="replace"))
                    if h["server_id"][row] == 0:
                        self._add_counter(_ACCEPTED, 1)
                    h["server_id"][row] = server_id
                    self._by_server_id[server_id] = row
            else:
                self.last_poll_status[row] = status
                if status == 200 and not try_again:
                    h["result_bytes"][row] = min(size, 0xFFFFFFFF)

    def failed(self, row: int, kind: AttemptKind, started: float, exc: BaseException) -> None:
        """A transport error ended the attempt (before or during the answer)."""
        with self._lock:
            if self._closed:
                return
            h = self.history
            error = classify_exception(exc)
            end = self.now()
            self._attempts.add(row, kind, started, end, -int(error))
            bump_count(h["transport_errors"], row)
            h["error"][row] = error
            if kind == AttemptKind.POLL and error == ErrorClass.TIMEOUT:
                self._add_counter(_POLL_TIMEOUTS, 1)
            if kind == AttemptKind.SUBMIT:
                h["submit_end"][row] = end
            what = "asample" if kind == AttemptKind.SUBMIT else "retrieve_future"
            self.examples.setdefault(error.key, f"{what}: {type(exc).__name__}: {exc}"[:300])

    def lost_track(self) -> None:
        with self._lock:
            self.unmapped += 1

    def close(self) -> dict:
        """Stop recording and return the attempt columns (called on the worker's own thread)."""
        with self._lock:
            self._closed = True
            return self._attempts.columns()


class _RecordingStream(httpx.AsyncByteStream):
    """The answer's body as the SDK reads it; records the attempt when it ends (whole or broken)."""

    def __init__(self, inner: Any, wire: SdkWire, row: int, kind: AttemptKind, started: float, status: int) -> None:
        self._inner = inner
        self._wire = wire
        self._row = row
        self._kind = kind
        self._started = started
        self._status = status
        self._done = False

    async def __aiter__(self):
        # Keep the body of an asample answer (small: its request id); only count a poll's.
        keep = self._kind == AttemptKind.SUBMIT
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in self._inner:
                size += len(chunk)
                if keep:
                    chunks.append(chunk)
                yield chunk
        except Exception as exc:
            self._done = True
            self._wire.failed(self._row, self._kind, self._started, exc)
            raise
        self._done = True
        self._wire.answered(self._row, self._kind, self._started, self._status, b"".join(chunks), size)

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            if not self._done:  # closed unread: the status is all the SDK saw
                self._done = True
                self._wire.answered(self._row, self._kind, self._started, self._status, b"", 0)


class RecordingTransport(httpx.AsyncBaseTransport):
    """Wraps the SDK's own transport: scales each request's timeouts, records sample and poll attempts."""

    def __init__(self, inner: httpx.AsyncBaseTransport, wire: SdkWire, time_scale: float) -> None:
        self._inner = inner
        self._wire = wire
        self._scale = time_scale

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout")
        if self._scale != 1.0 and isinstance(timeout, dict):
            request.extensions["timeout"] = {
                k: (v * self._scale if v is not None else None) for k, v in timeout.items()
            }
        kind = attempt_kind(request.url.path)
        if kind is None:  # sessions, heartbeats, config: not a sample request's attempt
            return await self._inner.handle_async_request(request)
        wire = self._wire
        body = request.content  # the SDK sends buffered JSON bodies
        row = wire.row_of_sample(body) if kind == AttemptKind.SUBMIT else wire.row_of_poll(body)
        if row is None:
            wire.lost_track()
            return await self._inner.handle_async_request(request)
        if not wire.begin(row, kind):
            return await self._inner.handle_async_request(request)
        started = wire.now()
        try:
            response = await self._inner.handle_async_request(request)
        except Exception as exc:
            wire.failed(row, kind, started, exc)
            raise
        if response.is_closed:  # a transport that hands back its body already read
            wire.answered(row, kind, started, response.status_code, response.content, len(response.content))
            return response
        response.stream = _RecordingStream(response.stream, wire, row, kind, started, response.status_code)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def recording_client_class(base: type, wire: SdkWire, time_scale: float) -> type:
    """A subclass of the SDK's httpx client class whose transports (its own choice) are wrapped."""

    class RecordedClient(base):  # type: ignore[misc, valid-type]
        def __init__(self, **kwargs: Any) -> None:
            kwargs["limits"] = scaled_limits(kwargs.get("limits", _constants.DEFAULT_CONNECTION_LIMITS), time_scale)
            super().__init__(**kwargs)
            self._transport = RecordingTransport(self._transport, wire, time_scale)
            self._mounts = {
                pattern: (RecordingTransport(t, wire, time_scale) if t is not None else None)
                for pattern, t in self._mounts.items()
            }

    return RecordedClient


class installed:
    """Context manager: the SDK builds its httpx clients from a recording subclass while inside.

    ``tinker._base_client.AsyncHttpxClientWrapper`` is the class the SDK
    instantiates for every ``AsyncTinker``, and ``_default_pyqwest_transport``
    builds its transport (:func:`scaled_pyqwest_transport`) (one per 50 concurrent requests per
    pool, as it decides); the SDK's construction is otherwise unchanged. The
    worker process runs one SDK client, so the swap is that process's alone.
    """

    def __init__(self, wire: SdkWire, time_scale: float) -> None:
        self._wire = wire
        self._scale = time_scale
        self._saved: type | None = None
        self._saved_pyqwest: Callable[[], httpx.AsyncBaseTransport] | None = None

    def __enter__(self) -> "installed":
        self._saved = _base_client.AsyncHttpxClientWrapper
        self._saved_pyqwest = _base_client._default_pyqwest_transport
        _base_client.AsyncHttpxClientWrapper = recording_client_class(self._saved, self._wire, self._scale)
        _base_client._default_pyqwest_transport = scaled_pyqwest_transport(self._saved_pyqwest, self._scale)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._saved is not None:
            _base_client.AsyncHttpxClientWrapper = self._saved
            _base_client._default_pyqwest_transport = self._saved_pyqwest
