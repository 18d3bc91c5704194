"""Mutant regressions of a launched SkyRL server's sampling path: bug classes, not undone fixes.

Runs under the target's Python, imported by ``skyrl_patches`` (found the way
``skyrl_forwarding`` is). The switches in ``skyrl_patches`` and
``skyrl_forwarding`` each undo one fix SkyRL made; each switch here is a
mistake a pull request to 0.4.0's sampling path could plausibly make — one
line or a few, in the release's own functions — so the suite can show which
invariant catches each class of bug: liveness (a future never resolved, a
wake-up lost), timing (a long poll given up early, a blocking call on the
event loop), retention (TTLs too short or swapped), integrity (results
mixed, truncated, or empty), identity (ids reused across restarts, an
unknown id answered 500) and cost (every sample forwarded twice, a session
per forward).

Each switch takes the api module namespace and ``need`` (see
``skyrl_forwarding``). Every one patches 0.4.0's in-memory future store or
the forwarding client that completes it; 0.3.0 keeps futures in SQLite and
is refused by name (``'ExternalFutureStore'``).
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, Callable

if __package__:
    from . import skyrl_mutants_cost, skyrl_mutants_size, skyrl_mutants_time  # the harness's tests: package modules
    from .skyrl_forwarding import Need, forwarding, members
    from .skyrl_mutants_keep import KEEP_MUTANTS
else:  # inside the target: beside this file on sys.path
    import skyrl_mutants_cost
    import skyrl_mutants_size
    import skyrl_mutants_time
    from skyrl_forwarding import Need, forwarding, members
    from skyrl_mutants_keep import KEEP_MUTANTS

# blocking-call: what one synchronous call on the event loop costs per asample (a sync audit-log write with
# fsync, or a sync HTTP call to a quota service, takes milliseconds; time.sleep stands for it).
BLOCKING_CALL_S = 0.01
# early-408: the hold (SDK seconds, scaled like the release's 300) a developer tuning for tests left in.
EARLY_408_HOLD_S = 1
# pending-ttl-short: an hour written as 60, as if the store counted minutes.
SHORT_PENDING_TTL_S = 60.0


def _store(ns: dict, need: Need) -> type:
    """The in-memory future store class: every mutant's patch point, or the reason this version has none."""
    return need(ns, "ExternalFutureStore", "in-memory future store, the sampling path these mutants patch")


def _client(ns: dict, need: Need) -> tuple[type, dict]:
    _store(ns, need)
    return forwarding(ns, need)


def _method(cls: type, name: str, why: str, need: Need) -> Any:
    """``cls.name`` (its bases' included), or the launcher's PatchError naming it."""
    need(members(cls), name, why)
    return getattr(cls, name)


# --------------------------------------------------------------------------- call_and_store_result


def _error_result(module: dict) -> Callable[[Exception], tuple[Any, Any]]:
    """The release's failure branch: an ErrorResponse stored as FAILED."""
    return lambda exc: (module["types"].ErrorResponse(error=str(exc), status="failed"), module["RequestStatus"].FAILED)


def _call_and_store(ns: dict, need: Need, on_failure: Callable[[dict], Callable], *, shared_id: bool = False) -> None:
    """``call_and_store_result`` as the release writes it, but for its failure branch or the id it stores under.

    ``on_failure(module)`` gives what a failed forward stores, ``(result, status)``,
    or None to store nothing. ``shared_id``: the request id is kept on the client
    (one object shared by every forward in flight) and read back after the await.
    """
    client_cls, module = _client(ns, need)
    _method(client_cls, "call_and_store_result", "the forwarding task that resolves a future", need)
    for name, why in (
        ("logger", "skyrl's logger"),
        ("RequestStatus", "request statuses"),
        ("types", "skyrl.tinker.types"),
        ("serialize_sample_output", "proto results"),
    ):
        need(module, name, why)
    logger, completed, failure = module["logger"], module["RequestStatus"].COMPLETED, on_failure(module)

    async def call_and_store_result(self, request_id, sample_req, model_id, checkpoint_id, *, base_model=None):
        if shared_id:
            self._request_id = request_id
        try:
            result, status = await self._forward_with_retry(sample_req, model_id, base_model=base_model), completed
        except Exception as exc:
            logger.exception("Backend-forwarded sample failed (request_id=%s)", request_id)
            stored = failure(exc)
            if stored is None:
                return
            result, status = stored
        await self.external_future_store.complete(self._request_id if shared_id else request_id, result, status)

    client_cls.call_and_store_result = call_and_store_result


def never_resolve_on_failure(ns: dict, need: Need) -> str:
    """A failed forward logs its error and returns before ``complete``: its future stays pending, polled forever."""
    _call_and_store(ns, need, lambda module: lambda exc: None)
    return "never-resolve-on-failure: a failed forward never completes its future"


def empty_200_on_failure(ns: dict, need: Need) -> str:
    """A failed forward stores an empty sample as COMPLETED ("don't make the SDK raise"): a 200 with no result."""
    _call_and_store(
        ns,
        need,
        lambda module: (
            lambda exc: (module["serialize_sample_output"]([], None, None), module["RequestStatus"].COMPLETED)
        ),
    )
    return "empty-200-on-failure: a failed forward answers 200 with zero sequences"


def mixed_results(ns: dict, need: Need) -> str:
    """The request id kept on the client (``self._request_id``) across the forward's await: a race that stores
    one request's result under whichever id the last forward to start wrote there."""
    _call_and_store(ns, need, _error_result, shared_id=True)
    return "mixed-results: results stored under the id of the last forward started"


# --------------------------------------------------------------------------- the forward itself


def truncated_result(ns: dict, need: Need) -> str:
    """An off-by-one slice meant to strip a stop token drops every sequence's last token and logprob."""
    _, module = _client(ns, need)
    encode = need(module, "serialize_sample_output", "forwarded results encoded to proto")

    @functools.wraps(encode)
    def serialize_sample_output(sequences, prompt_logprobs, topk_prompt_logprobs):
        cut = [(stop_reason, tokens[:-1], logprobs[:-1]) for stop_reason, tokens, logprobs in sequences]
        return encode(cut, prompt_logprobs, topk_prompt_logprobs)

    module["serialize_sample_output"] = serialize_sample_output
    return "truncated-result: each sequence's last token dropped"


def double_forward(ns: dict, need: Need) -> str:
    """``_forward_with_retry``'s retry runs after a success too: every sample forwarded twice, the second kept."""
    client_cls, _ = _client(ns, need)
    forward = _method(client_cls, "_forward_with_retry", "the forward and its retry", need)

    @functools.wraps(forward)
    async def forward_twice(self, sample_req, model_id, *, base_model=None):
        await forward(self, sample_req, model_id, base_model=base_model)
        return await forward(self, sample_req, model_id, base_model=base_model)

    client_cls._forward_with_retry = forward_twice
    return "double-forward: every sample forwarded to the router twice"


def session_per_request(ns: dict, need: Need) -> str:
    """``_get_session``'s cache check dropped: a new aiohttp session (and connection) per forward, the old one
    left unclosed for the garbage collector."""
    client_cls, _ = _client(ns, need)
    get_session = _method(client_cls, "_get_session", "the shared aiohttp session", need)

    @functools.wraps(get_session)
    def new_session(self):
        self._session = None
        return get_session(self)

    client_cls._get_session = new_session
    return "session-per-request: a new aiohttp session per forward, never closed"


# --------------------------------------------------------------------------- the store and retrieve_future


def _wrap_init(store_cls: type, after: Callable[[Any], None] | None = None, swap: bool = False) -> None:
    """Wrap the store's ``__init__`` (before the time scale wraps it): swap its TTL keywords, or run ``after``."""
    original = store_cls.__init__

    @functools.wraps(original)
    def init(self, *, retrieved_ttl_sec=None, completed_ttl_sec=None):
        if swap:
            retrieved_ttl_sec, completed_ttl_sec = completed_ttl_sec, retrieved_ttl_sec
        original(self, retrieved_ttl_sec=retrieved_ttl_sec, completed_ttl_sec=completed_ttl_sec)
        if after is not None:
            after(self)

    store_cls.__init__ = init


def id_reuse_after_restart(ns: dict, need: Need) -> str:
    """The boot-epoch id space replaced by a counter from -1: every server process hands out -1, -2, ... again,
    so a poll of a pre-restart id finds whichever new request got that id."""
    store_cls = _store(ns, need)

    def restart_ids(store) -> None:
        need(vars(store), "_next_request_id", "the store's request id counter")
        store._next_request_id = -1

    _wrap_init(store_cls, after=restart_ids)
    return "id-reuse-after-restart: request ids start at -1 in every server process"


def swapped_ttls(ns: dict, need: Need) -> str:
    """The store built with its two TTLs under each other's keyword: an undelivered result is kept 300 s, not 600."""
    _wrap_init(_store(ns, need), swap=True)
    return "swapped-ttls: completed (undelivered) TTL 300 s, retrieved TTL 600 s"


def pending_ttl_short(ns: dict, need: Need) -> str:
    """``_PENDING_TTL_SECONDS = 60``, an hour written in minutes: a forward pending over a minute is swept."""
    store_cls = _store(ns, need)
    _method(store_cls, "_PENDING_TTL_SECONDS", "the pending futures' TTL", need)
    store_cls._PENDING_TTL_SECONDS = SHORT_PENDING_TTL_S
    return f"pending-ttl-short: pending TTL {SHORT_PENDING_TTL_S:g} s"


def lost_wakeup(ns: dict, need: Need) -> str:
    """``complete`` sets a fresh Event (what ``dataclasses.replace`` does to a field made ``init=False``), not
    the one held polls wait on: a result wakes no held poll, the client's next poll finds it at once."""
    store_cls = _store(ns, need)
    complete = _method(store_cls, "complete", "the store's completion", need)

    @functools.wraps(complete)
    async def complete_with_a_new_event(self, request_id, result_data, status):
        entry = self._entries.get(request_id)
        if entry is not None:
            entry.event = asyncio.Event()
        await complete(self, request_id, result_data, status)

    store_cls.complete = complete_with_a_new_event
    return "lost-wakeup: completion sets an Event no held poll waits on"


def blocking_call(ns: dict, need: Need) -> str:
    """A synchronous call (an audit-log write, a quota check) in ``create``, i.e. on the event loop per asample."""
    store_cls = _store(ns, need)
    create = _method(store_cls, "create", "the asample handler's future creation", need)

    @functools.wraps(create)
    def create_after_a_blocking_call(self, model_id, request_data):
        time.sleep(BLOCKING_CALL_S)
        return create(self, model_id, request_data)

    store_cls.create = create_after_a_blocking_call
    return f"blocking-call: {BLOCKING_CALL_S * 1000:g} ms blocking the event loop per asample"


def early_408(ns: dict, need: Need) -> str:
    """``RETRIEVE_FUTURE_TIMEOUT_SECONDS = 1`` (a value for tests, committed): the long poll answers 408 after
    1 SDK s instead of 300 (scaled like the release's)."""
    _store(ns, need)
    need(ns, "RETRIEVE_FUTURE_TIMEOUT_SECONDS", "retrieve_future's long-poll hold")
    ns["RETRIEVE_FUTURE_TIMEOUT_SECONDS"] = EARLY_408_HOLD_S
    return f"early-408: long-poll hold {EARLY_408_HOLD_S} s"


class FutureNotFound(LookupError):
    """What the mutant ``wait_for_future`` raises for an unknown id; ``retrieve_future`` catches only KeyError."""


def unknown_id_500(ns: dict, need: Need) -> str:
    """``wait_for_future`` raises its own ``FutureNotFound(LookupError)`` for an unknown id while
    ``retrieve_future`` still catches ``KeyError``: an unknown or expired id answers 500, not 404."""
    _store(ns, need)
    wait = need(ns, "wait_for_future", "retrieve_future's lookup of ids the in-memory store lacks")

    @functools.wraps(wait)
    async def wait_for_future(waiters, request_id, timeout):
        try:
            return await wait(waiters, request_id, timeout)
        except KeyError as exc:
            raise FutureNotFound(request_id) from exc

    ns["wait_for_future"] = wait_for_future
    return "500-for-unknown: an unknown future id raises past retrieve_future's 404"


MUTANTS: dict[str, Callable[[dict, Need], str]] = {
    "never-resolve-on-failure": never_resolve_on_failure,
    "early-408": early_408,
    "lost-wakeup": lost_wakeup,
    "id-reuse-after-restart": id_reuse_after_restart,
    "500-for-unknown": unknown_id_500,
    "blocking-call": blocking_call,
    "mixed-results": mixed_results,
    "pending-ttl-short": pending_ttl_short,
    "swapped-ttls": swapped_ttls,
    "truncated-result": truncated_result,
    "empty-200-on-failure": empty_200_on_failure,
    "double-forward": double_forward,
    "session-per-request": session_per_request,
    **skyrl_mutants_time.MUTANTS,  # the TTLs' anchors and lengths
    **skyrl_mutants_size.MUTANTS,  # caps and evictions past a thousand in flight
    **skyrl_mutants_cost.MUTANTS,  # a cost per request that grows with what the store holds
    **KEEP_MUTANTS,  # what the store keeps: results never released, a sweeper that dies (skyrl_mutants_keep)
}
