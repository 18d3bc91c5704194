"""Mutant regressions of SkyRL 0.4.0's result TTLs: a clock measured from the wrong event, or shorter than promised.

Runs under the target's Python, imported by ``skyrl_mutants`` (found the way it
finds ``skyrl_forwarding``). Each is a mistake a pull request to the in-memory
store could plausibly make; each still serves every result a client polls for
promptly, so only a client that comes back late in a TTL, measured from the
event the contract anchors it to, meets it (``faultload/strategies/edges.py``).

The store's ``_sweep`` decides each entry's expiry in a local ``expired``
function: the anchor mutants replace ``_sweep`` with the release's own, but for
the one clock they get wrong.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

if __package__:
    from .skyrl_forwarding import Need, members  # the harness's tests: a package module
else:
    from skyrl_forwarding import Need, members  # inside the target: beside this file on sys.path

# retrieved-ttl-short: the retry grace cut to two minutes, counting one poll timeout (45 s) and one backoff (30 s)
# of the SDK's re-poll, where two misses in a row span 150 s.
SHORT_RETRIEVED_TTL_S = 120.0


def _age(now: datetime, at: datetime) -> float:
    return (now - at).total_seconds()


def _store(ns: dict, need: Need) -> type:
    return need(ns, "ExternalFutureStore", "in-memory future store, the TTLs these mutants change")


def _sweep_by(ns: dict, need: Need, expired: Callable[[Any, Any, datetime], bool]) -> None:
    """The release's ``_sweep`` (evict what ``expired`` says, log the count) with another expiry rule."""
    store_cls = _store(ns, need)
    need(members(store_cls), "_sweep", "the store's TTL sweep")
    logger = need(ns, "logger", "skyrl's logger")

    def _sweep(self, now: datetime) -> None:
        expired_ids = [request_id for request_id, entry in self._entries.items() if expired(self, entry, now)]
        for request_id in expired_ids:
            del self._entries[request_id]
        if expired_ids:
            logger.info("Evicted %d expired external futures", len(expired_ids))

    store_cls._sweep = _sweep


def _expiry_from(retrieved_anchor: str, completed_anchor: str) -> Callable[[Any, Any, datetime], bool]:
    """The release's expiry rule with each TTL measured from the entry's ``*_anchor`` timestamp instead."""

    def expired(store, entry, now: datetime) -> bool:
        if entry.retrieved_at is not None:
            return _age(now, getattr(entry, retrieved_anchor) or entry.retrieved_at) > store._RETRIEVED_TTL_SECONDS
        if entry.completed_at is not None:
            return _age(now, getattr(entry, completed_anchor)) > store._COMPLETED_TTL_SECONDS
        return _age(now, entry.created_at) > store._PENDING_TTL_SECONDS

    return expired


def completed_ttl_from_creation(ns: dict, need: Need) -> str:
    """A completed result's TTL measured from its creation ("one clock per entry, from ``created_at``"): a
    result whose generation took long is swept that much sooner after it completes."""
    _sweep_by(ns, need, _expiry_from("retrieved_at", "created_at"))
    return "completed-ttl-from-creation: a completed result's TTL runs from its creation"


def retrieved_ttl_from_completion(ns: dict, need: Need) -> str:
    """A delivered result's grace measured from its completion (``completed_at`` where ``retrieved_at`` was
    meant): a result delivered late in its life is swept at once after that delivery."""
    _sweep_by(ns, need, _expiry_from("completed_at", "completed_at"))
    return "retrieved-ttl-from-completion: a delivered result's grace runs from its completion"


def retrieved_ttl_short(ns: dict, need: Need) -> str:
    """``external_future_retrieved_ttl_sec``'s default 300 -> 120: the retry grace cut to two minutes to hold less
    memory, under the SDK's worst-case re-poll gap (150 s); the is_disconnected guard is kept (unlike
    ``--regress retention``). The config's CLI reads the field's default when the server starts, after this."""
    _store(ns, need)
    config_cls = need(ns, "EngineConfig", "the server's config model")
    field = need(config_cls.model_fields, "external_future_retrieved_ttl_sec", "the delivered results' grace")
    field.default = SHORT_RETRIEVED_TTL_S
    config_cls.model_rebuild(force=True)
    return f"retrieved-ttl-short: retrieved TTL {SHORT_RETRIEVED_TTL_S:g} s"


MUTANTS: dict[str, Callable[[dict, Need], str]] = {
    "completed-ttl-from-creation": completed_ttl_from_creation,
    "retrieved-ttl-from-completion": retrieved_ttl_from_completion,
    "retrieved-ttl-short": retrieved_ttl_short,
}
