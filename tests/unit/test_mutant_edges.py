"""The TTL mutants (``targets/skyrl_mutants_time.py``) and the size mutants (``skyrl_mutants_size.py``) on test
doubles, no server.

The harness's venv has no skyrl: each test builds a test double of SkyRL 0.4.0's
store (its entries' three timestamps, ``create``, ``_sweep``), config model and
forwarding module, applies one mutant through ``skyrl_patches.apply_patches`` as
the launcher does, and looks at what it changed. The real server under each
switch is the matrix's row.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import types
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pydantic
import pytest

from faultload.targets import skyrl_mutants_cost, skyrl_mutants_size, skyrl_mutants_time, skyrl_patches

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@dataclass
class _Entry:
    created_at: datetime
    request_id: int = 0
    result_proto: bytes | None = None
    completed_at: datetime | None = None
    retrieved_at: datetime | None = None


class _DoubleStore:
    """Test double of ExternalFutureStore: TTLs, entries and the release's ``_sweep``."""

    _SWEEP_INTERVAL_SECONDS, _PENDING_TTL_SECONDS, _RETRIEVED_TTL_SECONDS, _COMPLETED_TTL_SECONDS = 30, 3600, 300, 600

    def __init__(self, *, retrieved_ttl_sec=None, completed_ttl_sec=None) -> None:
        self._RETRIEVED_TTL_SECONDS = retrieved_ttl_sec or self._RETRIEVED_TTL_SECONDS
        self._COMPLETED_TTL_SECONDS = completed_ttl_sec or self._COMPLETED_TTL_SECONDS
        self._entries: dict[int, _Entry] = {}
        self._next = 0

    async def wait(self, request_id, timeout):  # the release's, replaced by lookup-by-scan
        raise AssertionError("replaced")

    def proto_result(self, request_id):
        entry = self._entries.get(request_id)
        return entry.result_proto if entry is not None else None

    def create(self, model_id, request_data) -> int:
        self._next -= 1
        self._entries[self._next] = _Entry(created_at=T0, request_id=self._next)
        return self._next

    def _sweep(self, now: datetime) -> None:
        def expired(entry: _Entry) -> bool:
            if entry.retrieved_at is not None:
                return (now - entry.retrieved_at).total_seconds() > self._RETRIEVED_TTL_SECONDS
            if entry.completed_at is not None:
                return (now - entry.completed_at).total_seconds() > self._COMPLETED_TTL_SECONDS
            return (now - entry.created_at).total_seconds() > self._PENDING_TTL_SECONDS

        for request_id in [rid for rid, entry in self._entries.items() if expired(entry)]:
            del self._entries[request_id]


class _DoubleClient:
    """Test double of SkyRLTrainInferenceForwardingClient: a forward waits ``FORWARD_S`` and counts who is inside."""

    FORWARD_S = 0.01

    def __init__(self) -> None:
        self.inside = self.most_inside = 0

    async def _forward_with_retry(self, sample_req, model_id, *, base_model=None):
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        await asyncio.sleep(self.FORWARD_S)
        self.inside -= 1
        return b"result"


@pytest.fixture
def ns(monkeypatch) -> dict:
    class EngineConfig(pydantic.BaseModel):  # test double of skyrl.tinker.config.EngineConfig's one field
        external_future_retrieved_ttl_sec: float = 300.0

    connectors: list[dict] = []
    module = types.ModuleType("standin_forwarding_edges")  # the forwarding client's module, registered for the test
    module.__dict__.update(
        asyncio=asyncio,
        connectors=connectors,
        aiohttp=types.SimpleNamespace(TCPConnector=lambda **kwargs: connectors.append(kwargs) or kwargs),
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)
    client_cls = type("SkyRLTrainInferenceForwardingClient", (_DoubleClient,), {"__module__": module.__name__})
    return {
        "ExternalFutureStore": type("ExternalFutureStore", (_DoubleStore,), {}),
        "EngineConfig": EngineConfig,
        "logger": logging.getLogger("test-mutant-edges"),
        "SkyRLTrainInferenceForwardingClient": client_cls,
    }


def _kept_at(ns: dict, regress: list[str], entry: _Entry, seconds: float) -> bool:
    """Whether ``entry`` survives a sweep ``seconds`` after T0 in a store built after ``regress`` (time scale 1)."""
    skyrl_patches.apply_patches(ns, regress, 1.0)
    store = ns["ExternalFutureStore"]()
    store._entries[1] = entry
    store._sweep(T0 + timedelta(seconds=seconds))
    return 1 in store._entries


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_completed_ttl_from_creation_sweeps_a_long_generation_early(ns):
    """Created at 0, completed at 240: the release keeps it to 840; the mutant sweeps it past 600."""
    entry = _Entry(created_at=_at(0), completed_at=_at(240))
    assert _kept_at(dict(ns), [], _Entry(**vars(entry)), 720)
    assert not _kept_at(ns, ["completed-ttl-from-creation"], entry, 720)


def test_retrieved_ttl_from_completion_sweeps_a_late_delivery_at_once(ns):
    """Completed at 0, delivered at 510: the release keeps it to 810; the mutant's clock ran out at 300."""
    entry = _Entry(created_at=_at(0), completed_at=_at(0), retrieved_at=_at(510))
    assert _kept_at(dict(ns), [], _Entry(**vars(entry)), 755)
    assert not _kept_at(ns, ["retrieved-ttl-from-completion"], entry, 520)


def test_retrieved_ttl_short_changes_the_configs_default_not_a_given_value(ns):
    skyrl_patches.apply_patches(ns, ["retrieved-ttl-short"], 1.0)
    assert ns["EngineConfig"]().external_future_retrieved_ttl_sec == skyrl_mutants_time.SHORT_RETRIEVED_TTL_S
    assert ns["EngineConfig"](external_future_retrieved_ttl_sec=300.0).external_future_retrieved_ttl_sec == 300.0
    assert skyrl_mutants_time.SHORT_RETRIEVED_TTL_S < 150.0  # under the SDK's two missed polls


def test_store_capped_drops_the_oldest_future_past_its_cap(ns):
    skyrl_patches.apply_patches(ns, ["store-capped"], 1.0)
    store = ns["ExternalFutureStore"]()
    ids = [store.create("m", None) for _ in range(skyrl_mutants_size.STORE_CAP + 5)]
    assert list(store._entries) == ids[5:]


def test_results_capped_sweeps_the_oldest_finished_results_past_its_cap_and_keeps_pending_ones(ns):
    skyrl_patches.apply_patches(ns, ["results-capped"], 1.0)
    store = ns["ExternalFutureStore"]()
    cap = skyrl_mutants_size.RESULTS_CAP
    ids = [store.create("m", None) for _ in range(cap + 7)]
    for i, request_id in enumerate(ids[: cap + 5]):  # newest first: the drop order is by completion, not creation
        store._entries[request_id].completed_at = T0 + timedelta(milliseconds=cap + 5 - i)
    store._sweep(T0 + timedelta(seconds=60))  # inside every TTL: only the cap evicts
    assert set(store._entries) == set(ids) - set(ids[cap : cap + 5])


def test_forwarding_pool_default_builds_the_connector_without_its_limit(ns):
    skyrl_patches.apply_patches(ns, ["forwarding-pool-default"], 1.0)
    module = sys.modules["standin_forwarding_edges"]
    module.aiohttp.TCPConnector(limit=0, keepalive_timeout=2)
    assert module.connectors == [{"keepalive_timeout": 2}]  # aiohttp's default limit (100) applies


def test_forwarding_semaphore_holds_at_most_its_count_of_forwards_at_once(ns):
    skyrl_patches.apply_patches(ns, ["forwarding-semaphore"], 1.0)
    client = ns["SkyRLTrainInferenceForwardingClient"]()

    async def burst() -> None:
        await asyncio.gather(
            *(client._forward_with_retry(i, "m") for i in range(skyrl_mutants_size.FORWARD_SEMAPHORE + 50))
        )

    asyncio.run(burst())
    assert client.most_inside == skyrl_mutants_size.FORWARD_SEMAPHORE


def test_lookup_by_scan_finds_the_same_future_by_walking_the_entries(ns):
    """The double's entries carry their ``request_id`` as the release's do; the scan finds the same one."""
    skyrl_patches.apply_patches(ns, ["lookup-by-scan"], 1.0)
    store = ns["ExternalFutureStore"]()
    ids = [store.create("m", None) for _ in range(3)]
    store._entries[ids[1]].result_proto = b"result"
    assert store.proto_result(ids[1]) == b"result" and store.proto_result(12345) is None
    with pytest.raises(KeyError):
        asyncio.run(store.wait(12345, 0.01))


def test_sweep_on_create_sweeps_before_every_create(ns):
    skyrl_patches.apply_patches(ns, ["sweep-on-create"], 1.0)
    store = ns["ExternalFutureStore"]()
    store._entries[1] = _Entry(created_at=T0, completed_at=T0)  # completed long ago: past its TTL now
    store.create("m", None)
    assert 1 not in store._entries and len(store._entries) == 1


@pytest.mark.parametrize(
    "name", sorted({**skyrl_mutants_time.MUTANTS, **skyrl_mutants_size.MUTANTS, **skyrl_mutants_cost.MUTANTS})
)
def test_a_version_without_the_in_memory_store_is_refused_by_name(ns, name):
    del ns["ExternalFutureStore"]
    with pytest.raises(skyrl_patches.PatchError, match="no 'ExternalFutureStore'"):
        skyrl_patches.apply_patches(ns, [name], 1.0)
