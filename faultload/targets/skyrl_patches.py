"""Regression and fix switches and timer scaling applied inside a launched SkyRL server.

Runs under the target's Python (see skyrl_launch.py). Each regression undoes
one known upstream fix, so the suite can prove it would catch that bug; each
fix applies a candidate fix for a bug the suite found in a release, so the
suite can prove the fix works before it is upstream. Each switch checks its
patch point and fails with a clear message when a version lacks it.

Time scale S multiplies the server's retention timers, so the ratios between
them and the client's timers (45 s poll timeout, 30 s backoff cap) hold while a
trial runs S times faster:

- ``RETRIEVE_FUTURE_TIMEOUT_SECONDS`` (300 s: how long retrieve_future holds a poll)
- ``ExternalFutureStore._SWEEP_INTERVAL_SECONDS`` (30 s) and ``_PENDING_TTL_SECONDS`` (3600 s)
- the retrieved/completed TTLs the store is constructed with (300/600 s by
  default, or the ``--retrieved-ttl`` given), scaled in ``__init__``.
- ``HTTP_KEEP_ALIVE_TIMEOUT_SECONDS`` (75 s; 5 s under ``--regress
  keepalive``): uvicorn closes a connection idle this long. The client's own
  idle expiry (the SDK's 5 s) is scaled the same way, so whether the server
  or the client closes an idle connection first is what it is at full time.

The switches on the sample-forwarding path are in ``skyrl_forwarding``, found
the way this module is: as ``faultload.targets.skyrl_forwarding`` in the
harness's tests, beside this file on ``sys.path`` inside the target; the
mutants (bug classes a pull request could introduce, not undone fixes) are
in ``skyrl_mutants``, found the same way.

Versions without an in-memory future store (0.3.0 keeps futures in SQLite and
holds polls with a local 300 s constant) have nothing to scale; that is
reported in the applied list rather than silently ignored.
"""

from __future__ import annotations

import functools
import inspect
import logging
from datetime import timedelta
from typing import Any, Callable

from rich.logging import RichHandler
from starlette.requests import Request

if __package__:
    from . import (  # the harness's tests import this module as faultload.targets.skyrl_patches
        skyrl_forwarding,
        skyrl_mutants,
    )
else:
    import skyrl_forwarding  # inside the target: beside this file, on sys.path from skyrl_launch's __main__
    import skyrl_mutants

# Pre-fix retrieved TTL (SDK seconds) for the `retention` regression.
PRE_FIX_RETRIEVED_TTL_S = 120.0


class PatchError(RuntimeError):
    pass


def _need(ns: dict, name: str, why: str) -> Any:
    if name not in ns:
        raise PatchError(f"this skyrl version has no {name!r} ({why})")
    return ns[name]


def _scale_store(store_cls: type, scale: float, retrieved_override: float | None) -> None:
    store_cls._SWEEP_INTERVAL_SECONDS = store_cls._SWEEP_INTERVAL_SECONDS * scale
    store_cls._PENDING_TTL_SECONDS = store_cls._PENDING_TTL_SECONDS * scale
    original_init = store_cls.__init__

    @functools.wraps(original_init)
    def scaled_init(self, *, retrieved_ttl_sec=None, completed_ttl_sec=None):
        if retrieved_override is not None:
            retrieved_ttl_sec = retrieved_override
        retrieved = (retrieved_ttl_sec or store_cls._RETRIEVED_TTL_SECONDS) * scale
        completed = (completed_ttl_sec or store_cls._COMPLETED_TTL_SECONDS) * scale
        original_init(self, retrieved_ttl_sec=retrieved, completed_ttl_sec=completed)

    store_cls.__init__ = scaled_init


def _regress_retention(ns: dict) -> str:
    """Undo the retention fix: the retrieved-TTL clock starts even when the client is gone.

    Upstream fix: retrieve_future calls ``mark_retrieved`` only when
    ``not await req.is_disconnected()``, and the retrieved TTL went from 120 s
    to 300 s. Undone by making ``is_disconnected`` report False (it has no other
    caller in the app) and by the 120 s TTL (applied in ``apply_patches``).
    """
    _need(ns, "ExternalFutureStore", "in-memory future store")

    async def never_disconnected(self) -> bool:
        return False

    Request.is_disconnected = never_disconnected
    return "retention: is_disconnected() guard undone, retrieved TTL 120 s"


def _regress_keepalive(ns: dict) -> str:
    """Undo the keep-alive/backlog fix: uvicorn's 5 s keep-alive and default backlog.

    Upstream fix: ``HTTP_KEEP_ALIVE_TIMEOUT_SECONDS = 75`` and
    ``backlog=SKYRL_HTTP_CONNECTION_LIMIT`` in uvicorn.run; before it, idle SDK
    connections were closed during completion bursts and all reconnected at once.
    """
    _need(ns, "HTTP_KEEP_ALIVE_TIMEOUT_SECONDS", "keep-alive setting")
    _need(ns, "SKYRL_HTTP_CONNECTION_LIMIT", "accept backlog setting")
    ns["HTTP_KEEP_ALIVE_TIMEOUT_SECONDS"] = 5
    ns["SKYRL_HTTP_CONNECTION_LIMIT"] = 2048  # uvicorn's default backlog
    return "keepalive: keep-alive 5 s, backlog 2048"


def _regress_rich_access_log(ns: dict) -> str:
    """Undo the plain access-log handler: uvicorn's access log through RichHandler.

    Upstream fix: ``get_uvicorn_log_config`` routes ``uvicorn.access`` to a plain
    StreamHandler because RichHandler costs ~1.5 ms of event-loop CPU per record.
    """
    original = _need(ns, "get_uvicorn_log_config", "uvicorn log config")

    def rich_access_config() -> dict:
        config = original()
        config["handlers"]["access"] = dict(config["handlers"]["default"])
        return config

    ns["get_uvicorn_log_config"] = rich_access_config
    return "rich-access-log: uvicorn.access through RichHandler"


REGRESSIONS: dict[str, Callable[[dict], str]] = {
    "retention": _regress_retention,
    "keepalive": _regress_keepalive,
    "rich-access-log": _regress_rich_access_log,
    "httpx-forwarding": functools.partial(skyrl_forwarding.regress_httpx_forwarding, need=_need),
    "json-decode": functools.partial(skyrl_forwarding.regress_json_decode, need=_need),
    "proto-per-poll": functools.partial(skyrl_forwarding.regress_proto_per_poll, need=_need),
    # Bug classes rather than undone fixes (skyrl_mutants): each a plausible pull request's mistake.
    **{name: functools.partial(mutant, need=_need) for name, mutant in skyrl_mutants.MUTANTS.items()},
}


def _fix_plain_tracebacks(ns: dict) -> str:
    """Candidate fix for faultload's finding 1 on 0.4.0: log failures without Rich tracebacks.

    SkyRL logs every failed forward with ``logger.exception`` through
    ``RichHandler(rich_tracebacks=True)`` on its only event loop; rendering one
    costs ~0.7 s here (bench/rich_traceback.py), so a backend outage with a few
    hundred forwards in flight freezes the server for minutes. The fix: the
    handlers render tracebacks as plain text (``rich_tracebacks`` False in
    ``RICH_HANDLER_KWARGS``, which uvicorn's log config reads when the server
    starts, and on the ``skyrl`` logger's handlers made at import).
    """
    try:
        from skyrl.utils import log as skyrl_log  # local import: the patched module, which a version may lack
    except ImportError as exc:
        raise PatchError(f"this skyrl version has no skyrl.utils.log with Rich ({exc})") from exc
    kwargs = getattr(skyrl_log, "RICH_HANDLER_KWARGS", None)
    if not isinstance(kwargs, dict) or "rich_tracebacks" not in kwargs:
        raise PatchError("this skyrl version has no RICH_HANDLER_KWARGS['rich_tracebacks'] (Rich traceback setting)")
    kwargs["rich_tracebacks"] = False
    handlers = [h for h in logging.getLogger("skyrl").handlers if isinstance(h, RichHandler)]
    for handler in handlers:
        handler.rich_tracebacks = False
    return f"plain-tracebacks: rich_tracebacks off ({len(handlers)} skyrl handler(s) and uvicorn's)"


# Past the tinker SDK's idle connections: pyqwest's pool keeps them 90 s (the SDK samples through it).
KEEPALIVE_PAST_SDK_S = 120


def _fix_keepalive_past_sdk(ns: dict) -> str:
    """Candidate fix for faultload's finding 4 on 0.4.0: a keep-alive longer than the SDK keeps idle connections.

    0.4.0's ``HTTP_KEEP_ALIVE_TIMEOUT_SECONDS = 75`` was chosen to outlast
    httpx's 5 s idle expiry; the SDK now samples through pyqwest, whose pool
    keeps an idle connection 90 s. The server then closes connections the
    client still holds, and a request sent as the close arrives is reset.
    The fix: keep idle connections longer than any client does (120 s).
    """
    _need(ns, "HTTP_KEEP_ALIVE_TIMEOUT_SECONDS", "keep-alive setting")
    ns["HTTP_KEEP_ALIVE_TIMEOUT_SECONDS"] = KEEPALIVE_PAST_SDK_S
    return f"keepalive-past-sdk: keep-alive {KEEPALIVE_PAST_SDK_S} s"


def _fix_retain_until_expiry(ns: dict) -> str:
    """Candidate fix for faultload's finding 5 on 0.4.0: a result believed delivered is kept its completed TTL.

    0.4.0 marks a result retrieved when ``retrieve_future`` has built the
    response and the client is not seen gone, and sweeps it the retrieved
    TTL (300 s) later. A response written into a connection that delivers
    nothing (a half-open path: the kernel takes the bytes, the client never
    gets them, its re-polls never arrive) is no delivery, yet it shortens the
    result's life from the completed TTL (600 s) to 300 s; a client that
    retries for ever and comes back between the two finds a 404. The server
    cannot know a write reached the client, so the fix keeps a delivered
    result for ``max(delivered + retrieved TTL, completed + completed TTL)``:
    ``mark_retrieved`` starts the retrieved clock no earlier than ``completed
    TTL - retrieved TTL`` after completion (the release's sweep is unchanged;
    the store's TTLs are the instance's, so scaled and ``--retrieved-ttl``).
    """
    store_cls = _need(ns, "ExternalFutureStore", "in-memory future store")
    original = getattr(store_cls, "mark_retrieved", None)
    if original is None:
        raise PatchError("this skyrl version has no 'ExternalFutureStore.mark_retrieved' (delivery clock)")

    @functools.wraps(original)
    def mark_retrieved(self, request_id: int) -> None:
        original(self, request_id)
        entry = self._entries.get(request_id)
        if entry is None or entry.completed_at is None or entry.retrieved_at is None:
            return
        grace = timedelta(seconds=self._COMPLETED_TTL_SECONDS - self._RETRIEVED_TTL_SECONDS)
        entry.retrieved_at = max(entry.retrieved_at, entry.completed_at + grace)

    store_cls.mark_retrieved = mark_retrieved
    return "retain-until-expiry: a delivered result kept until its completed TTL at least"


def _fix_sample_sequence_ids(ns: dict) -> str:
    """Candidate fix for faultload's finding 6 on 0.4.0: asample answers one sequence id per sample.

    tinker 0.26 and later stamp each sampled sequence with the id the server
    gave it at submission (``sample_sequence_ids`` in the asample answer, one
    per requested sample) and assert the answer carried them; 0.4.0's
    ``FutureResponse`` has no such field, so every ``sample_async`` of those
    SDKs raises ``AssertionError`` once its result has arrived. The fix:
    asample answers ``<request_id>:<i>`` for each of its ``num_samples``
    (the route is registered again with the wider answer model, since FastAPI
    filters an answer through the model it was registered with).
    """
    app = _need(ns, "app", "FastAPI app")
    answer_cls = _need(ns, "FutureResponse", "asample's answer model")
    route = next((r for r in app.router.routes if getattr(r, "path", None) == "/api/v1/asample"), None)
    if route is None:
        raise PatchError("this skyrl version has no /api/v1/asample route")
    original = route.endpoint
    signature = inspect.signature(original)

    class SampleFutureResponse(answer_cls):  # type: ignore[misc, valid-type]
        sample_sequence_ids: list[str] | None = None

    @functools.wraps(original)
    async def asample(*args: Any, **kwargs: Any) -> Any:
        answer = await original(*args, **kwargs)
        request = signature.bind(*args, **kwargs).arguments["request"]
        ids = [f"{answer.request_id}:{i}" for i in range(request.num_samples)]
        return SampleFutureResponse(**answer.model_dump(), sample_sequence_ids=ids)

    app.router.routes.remove(route)
    app.post("/api/v1/asample", response_model=SampleFutureResponse)(asample)
    return "sample-sequence-ids: asample answers one sequence id per sample"


FIXES: dict[str, Callable[[dict], str]] = {
    "plain-tracebacks": _fix_plain_tracebacks,
    "keepalive-past-sdk": _fix_keepalive_past_sdk,
    "retain-until-expiry": _fix_retain_until_expiry,
    "sample-sequence-ids": _fix_sample_sequence_ids,
}


def unknown_switch(regress, fixes) -> str | None:
    """What is wrong with the switch names ("unknown fix 'x'; known: ..."), or None.

    The harness checks the same names first (``faultload.model.switches``); this
    module runs inside the target's Python, where faultload is not installed.
    """
    for names, known, what in ((regress, REGRESSIONS, "regression"), (fixes, FIXES, "fix")):
        for name in names:
            if name not in known:
                return f"unknown {what} {name!r}; known: {', '.join(sorted(known))}"
    return None


def apply_patches(ns: dict, regress: list[str], time_scale: float, fixes: list[str] = ()) -> list[str]:
    """Apply regressions, fixes and timer scaling to the api module namespace ``ns``."""
    problem = unknown_switch(regress, fixes)
    if problem:
        raise PatchError(problem)
    applied = [REGRESSIONS[name](ns) for name in regress] + [FIXES[name](ns) for name in fixes]
    store_cls = ns.get("ExternalFutureStore")
    retrieved_override = PRE_FIX_RETRIEVED_TTL_S if "retention" in regress else None
    if store_cls is None:
        applied.append("time-scale: no in-memory future store in this version; nothing to scale")
        return applied
    _scale_store(store_cls, time_scale, retrieved_override)
    if "RETRIEVE_FUTURE_TIMEOUT_SECONDS" in ns:
        ns["RETRIEVE_FUTURE_TIMEOUT_SECONDS"] = ns["RETRIEVE_FUTURE_TIMEOUT_SECONDS"] * time_scale
    scaled = "retrieve hold, sweep interval and store TTLs"
    if "HTTP_KEEP_ALIVE_TIMEOUT_SECONDS" in ns:
        ns["HTTP_KEEP_ALIVE_TIMEOUT_SECONDS"] = ns["HTTP_KEEP_ALIVE_TIMEOUT_SECONDS"] * time_scale
        scaled += f", keep-alive ({ns['HTTP_KEEP_ALIVE_TIMEOUT_SECONDS']:g} s)"
    applied.append(f"time-scale: x{time_scale:g} on {scaled}")
    return applied
