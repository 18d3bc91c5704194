"""Mutant regressions of SkyRL 0.4.0 that bite only past a thousand requests in flight: caps and evictions.

Runs under the target's Python, imported by ``skyrl_mutants`` (found the way it
finds ``skyrl_forwarding``). Each is a mistake a pull request could plausibly
make to bound the server's memory or its load on the engine; each serves a few
hundred requests in flight as the release does, so only a trial that holds
thousands at once meets it (the known trial ``size_burst``; ``results-capped``
only past ten thousand results owed at once: nightly's ``size_flood``).
"""

from __future__ import annotations

import functools
import types
from typing import Callable

if __package__:
    from .skyrl_forwarding import Need, forwarding, members  # the harness's tests: a package module
else:
    from skyrl_forwarding import Need, forwarding, members  # inside the target: beside this file on sys.path

# store-capped: "at most 1,000 futures in memory", the oldest dropped first.
STORE_CAP = 1000
# results-capped: "keep at most 10,000 finished results; past that the sweep drops the oldest finished first".
RESULTS_CAP = 10_000
# forwarding-pool-default: aiohttp's own default connection limit, what a connector built without `limit=` has.
AIOHTTP_DEFAULT_LIMIT = 100
# forwarding-semaphore: "at most vLLM's max_num_seqs (256) forwards at once, so a burst cannot flood the engine".
FORWARD_SEMAPHORE = 256


def _store(ns: dict, need: Need) -> type:
    return need(ns, "ExternalFutureStore", "in-memory future store, the sampling path these mutants patch")


def store_capped(ns: dict, need: Need) -> str:
    """``create`` drops the oldest entries past ``STORE_CAP`` (a bound on memory): past a thousand requests in
    flight, pending futures are evicted before their results arrive, and their clients get 404."""
    store_cls = _store(ns, need)
    need(members(store_cls), "create", "the asample handler's future creation")
    create = store_cls.create

    @functools.wraps(create)
    def create_within_cap(self, model_id, request_data):
        request_id = create(self, model_id, request_data)
        while len(self._entries) > STORE_CAP:
            del self._entries[next(iter(self._entries))]
        return request_id

    store_cls.create = create_within_cap
    return f"store-capped: at most {STORE_CAP} futures, the oldest dropped"


def results_capped(ns: dict, need: Need) -> str:
    """The sweep also bounds the finished results it keeps (clients that never come back): past ``RESULTS_CAP``
    completed entries it drops the oldest completed first, delivered or not. A result polled seconds after it
    completed is evicted once ten thousand others completed after it and are still unread."""
    store_cls = _store(ns, need)
    need(members(store_cls), "_sweep", "the store's TTL sweep")
    sweep = store_cls._sweep

    @functools.wraps(sweep)
    def sweep_within_cap(self, now):
        sweep(self, now)
        finished = sorted(
            (entry.completed_at, request_id)
            for request_id, entry in self._entries.items()
            if entry.completed_at is not None
        )
        for _, request_id in finished[: max(0, len(finished) - RESULTS_CAP)]:
            del self._entries[request_id]

    store_cls._sweep = sweep_within_cap
    return f"results-capped: the sweep keeps at most {RESULTS_CAP} finished results, the oldest dropped"


def forwarding_pool_default(ns: dict, need: Need) -> str:
    """The forwarding connector built without ``limit=`` ("backpressure is the router's job"): aiohttp's default
    of 100 connections, whatever ``forwarding_inference_max_connections`` says (None: unlimited)."""
    _store(ns, need)
    _, module = forwarding(ns, need)
    aiohttp = need(module, "aiohttp", "the forwarding client's aiohttp")

    def connector_without_limit(*args, limit=None, **kwargs):
        return aiohttp.TCPConnector(*args, **kwargs)

    module["aiohttp"] = types.SimpleNamespace(**{**vars(aiohttp), "TCPConnector": connector_without_limit})
    return f"forwarding-pool-default: the forwarding connector at aiohttp's default {AIOHTTP_DEFAULT_LIMIT} connections"


def forwarding_semaphore(ns: dict, need: Need) -> str:
    """A module-level ``asyncio.Semaphore(256)`` around each forward ("no more than vLLM's max_num_seqs at once"):
    what the router and the engine would queue, the server queues instead, unseen by any timer."""
    client_cls, module = forwarding(ns, need)
    _store(ns, need)
    asyncio = need(module, "asyncio", "the forwarding client's asyncio")
    need(members(client_cls), "_forward_with_retry", "the forward and its retry")
    forward = client_cls._forward_with_retry
    gate: list = []  # created on first use, on the serving loop

    @functools.wraps(forward)
    async def gated_forward(self, sample_req, model_id, *, base_model=None):
        if not gate:
            gate.append(asyncio.Semaphore(FORWARD_SEMAPHORE))
        async with gate[0]:
            return await forward(self, sample_req, model_id, base_model=base_model)

    client_cls._forward_with_retry = gated_forward
    return f"forwarding-semaphore: at most {FORWARD_SEMAPHORE} forwards at once"


MUTANTS: dict[str, Callable[[dict, Need], str]] = {
    "store-capped": store_capped,
    "results-capped": results_capped,
    "forwarding-pool-default": forwarding_pool_default,
    "forwarding-semaphore": forwarding_semaphore,
}
