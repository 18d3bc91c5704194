"""Mutant regressions of SkyRL 0.4.0 whose cost per request grows with what the store holds.

Runs under the target's Python, imported by ``skyrl_mutants`` (found the way it
finds ``skyrl_forwarding``). Each serves every request correctly and, on a
trial of a few hundred requests, costs too little more to pass any absolute
budget; at a burst of thousands held at once each request pays for every
other. Only a comparison with the build it changes sees it (the matrix's
``-cost`` rows, the suite's comparative property).
"""

from __future__ import annotations

import functools
import sys
from datetime import datetime, timezone
from typing import Callable

if __package__:
    from .skyrl_forwarding import Need, members  # the harness's tests: a package module
else:
    from skyrl_forwarding import Need, members  # inside the target: beside this file on sys.path


def _store(ns: dict, need: Need) -> type:
    return need(ns, "ExternalFutureStore", "in-memory future store, the sampling path these mutants patch")


def _scan(store, request_id: int):
    """The entry whose ``request_id`` is this one, found by walking every entry."""
    return next((entry for entry in store._entries.values() if entry.request_id == request_id), None)


def lookup_by_scan(ns: dict, need: Need) -> str:
    """``wait`` and ``proto_result`` find a future by walking the entries for its ``request_id`` (what a store
    refactored toward an ordered list of futures does): every poll pays for every result the store holds."""
    store_cls = _store(ns, need)
    for name in ("wait", "proto_result"):
        need(members(store_cls), name, "the poll's lookup of its future")
    module = vars(sys.modules[store_cls.__module__])
    asyncio, types = need(module, "asyncio", "the store's asyncio"), need(module, "types", "skyrl.tinker.types")

    async def wait(self, request_id: int, timeout: float):
        entry = _scan(self, request_id)
        if entry is None:
            raise KeyError(request_id)
        try:
            await asyncio.wait_for(entry.event.wait(), timeout)
        except asyncio.TimeoutError:
            return None
        return entry.status, types.RequestType.EXTERNAL, entry.result_data

    def proto_result(self, request_id: int) -> bytes | None:
        entry = _scan(self, request_id)
        return entry.result_proto if entry is not None else None

    store_cls.wait, store_cls.proto_result = wait, proto_result
    return "lookup-by-scan: each poll finds its future by walking every entry"


def sweep_on_create(ns: dict, need: Need) -> str:
    """``create`` sweeps the store before adding an entry ("evict eagerly, not every 30 s"): every asample
    walks every future the store holds."""
    store_cls = _store(ns, need)
    for name in ("create", "_sweep"):
        need(members(store_cls), name, "the asample handler's future creation and the TTL sweep")
    create = store_cls.create

    @functools.wraps(create)
    def create_after_a_sweep(self, model_id, request_data):
        self._sweep(datetime.now(timezone.utc))
        return create(self, model_id, request_data)

    store_cls.create = create_after_a_sweep
    return "sweep-on-create: every asample sweeps the whole store first"


MUTANTS: dict[str, Callable[[dict, Need], str]] = {
    "lookup-by-scan": lookup_by_scan,
    "sweep-on-create": sweep_on_create,
}
