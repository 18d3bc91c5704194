"""The mutant regression switches (``targets/skyrl_mutants.py``) on test doubles, no server.

The harness's venv has no skyrl, so each test builds test doubles of what a
switch patches: a stand-in api namespace with a future store, and a stand-in
forwarding module (registered in ``sys.modules`` for the test only) whose
client's forward the test controls. A real 0.4.0 server under each switch is
the integration check (README, "Time scale and regressions";
``tests/integration/test_mutant_switches_integration.py``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import sys
import time
import types

import pytest

from faultload.targets import skyrl_mutants, skyrl_patches

SCALE = 0.05


class _Status(enum.Enum):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class _ErrorResponse:
    def __init__(self, error: str, status: str) -> None:
        self.error, self.status = error, status


class _Entry:
    """Test double of ExternalFuture: the fields ``complete`` and the held polls use."""

    def __init__(self) -> None:
        self.event, self.result, self.status = asyncio.Event(), None, _Status.PENDING


class _DoubleStore:
    """Test double of ExternalFutureStore: its timers, id counter, create and complete."""

    _SWEEP_INTERVAL_SECONDS, _PENDING_TTL_SECONDS, _RETRIEVED_TTL_SECONDS, _COMPLETED_TTL_SECONDS = 30, 3600, 300, 600

    def __init__(self, *, retrieved_ttl_sec=None, completed_ttl_sec=None) -> None:
        self.retrieved, self.completed = retrieved_ttl_sec, completed_ttl_sec
        self._next_request_id = -(int(time.time() * 1000) << 20) - 1
        self._entries: dict[int, _Entry] = {}
        self.completions: list[tuple[int, object, _Status]] = []

    def create(self, model_id, request_data) -> int:
        request_id = self._next_request_id
        self._next_request_id -= 1
        self._entries[request_id] = _Entry()
        return request_id

    async def complete(self, request_id, result_data, status) -> None:
        self.completions.append((request_id, result_data, status))
        entry = self._entries.get(request_id)
        if entry is not None:
            entry.result, entry.status = result_data, status
            entry.event.set()


class _DoubleClient:
    """Test double of SkyRLTrainInferenceForwardingClient: each forward waits for the test to answer it."""

    def __init__(self, store: _DoubleStore) -> None:
        self.external_future_store = store
        self.answers: dict[object, asyncio.Future] = {}
        self.forwards = 0
        self._session = None

    async def _forward_with_retry(self, sample_req, model_id, *, base_model=None):
        self.forwards += 1
        self.answers[sample_req] = asyncio.get_running_loop().create_future()
        return await self.answers[sample_req]

    async def call_and_store_result(self, request_id, sample_req, model_id, checkpoint_id, *, base_model=None):
        raise AssertionError("the release's method must be replaced by the switch under test")

    def _get_session(self):
        if self._session is None:
            self._session = object()
        return self._session


@pytest.fixture
def ns(monkeypatch) -> dict:
    """A stand-in api namespace; its forwarding client lives in a stand-in module, as in 0.4.0."""
    module = types.ModuleType("standin_forwarding_mutants")
    client_cls = type("SkyRLTrainInferenceForwardingClient", (_DoubleClient,), {"__module__": module.__name__})
    module.__dict__.update(
        {
            "SkyRLTrainInferenceForwardingClient": client_cls,
            "logger": logging.getLogger("test-mutants"),
            "RequestStatus": _Status,
            "types": types.SimpleNamespace(ErrorResponse=_ErrorResponse),
            "serialize_sample_output": lambda sequences, prompt_logprobs, topk: ("proto", sequences),
        }
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)

    async def wait_for_future(waiters, request_id, timeout):
        if request_id not in waiters:
            raise KeyError(request_id)
        return waiters[request_id]

    return {
        "SkyRLTrainInferenceForwardingClient": client_cls,
        "ExternalFutureStore": type("ExternalFutureStore", (_DoubleStore,), {}),
        "RETRIEVE_FUTURE_TIMEOUT_SECONDS": 300,
        "wait_for_future": wait_for_future,
    }


def _forwarded(ns: dict, regress: str, outcomes: list) -> tuple[_DoubleStore, _DoubleClient, list[int]]:
    """Patch ``ns`` with ``regress``, start one forward per outcome (all in flight at once), then answer them
    in order: a value is the router's answer, an exception a failed forward. Returns the store, client, ids."""
    skyrl_patches.apply_patches(ns, [regress], SCALE)
    store = ns["ExternalFutureStore"]()
    client = ns["SkyRLTrainInferenceForwardingClient"](store)

    async def go() -> list[int]:
        ids = [store.create("m", None) for _ in outcomes]
        tasks = [asyncio.create_task(client.call_and_store_result(i, n, "m", "c")) for n, i in enumerate(ids)]
        await asyncio.sleep(0)
        for n, outcome in enumerate(outcomes):
            if isinstance(outcome, Exception):
                client.answers[n].set_exception(outcome)
            else:
                client.answers[n].set_result(outcome)
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return ids

    return store, client, asyncio.run(go())


def test_never_resolve_on_failure_completes_successes_only(ns):
    store, _, ids = _forwarded(ns, "never-resolve-on-failure", [b"ok", RuntimeError("backend down")])
    assert store.completions == [(ids[0], b"ok", _Status.COMPLETED)]  # the failed one: nothing, ever
    assert store._entries[ids[1]].status is _Status.PENDING and not store._entries[ids[1]].event.is_set()


def test_empty_200_on_failure_stores_an_empty_sample_as_completed(ns):
    store, _, ids = _forwarded(ns, "empty-200-on-failure", [RuntimeError("backend down")])
    assert store.completions == [(ids[0], ("proto", []), _Status.COMPLETED)]


def test_mixed_results_stores_results_under_the_last_started_id(ns):
    store, _, ids = _forwarded(ns, "mixed-results", [b"first", b"second", RuntimeError("down")])
    assert [(request_id, result) for request_id, result, _ in store.completions][:2] == [
        (ids[2], b"first"),
        (ids[2], b"second"),
    ]
    failed = store.completions[2]
    assert failed[0] == ids[2] and failed[2] is _Status.FAILED and failed[1].error == "down"  # the release's error
    assert store._entries[ids[0]].status is store._entries[ids[1]].status is _Status.PENDING


def test_truncated_result_drops_each_sequences_last_token(ns):
    skyrl_patches.apply_patches(ns, ["truncated-result"], SCALE)
    encode = sys.modules["standin_forwarding_mutants"].serialize_sample_output
    assert encode([("length", [1, 2, 3], [-0.1, -0.2, -0.3])], None, None) == (
        "proto",
        [("length", [1, 2], [-0.1, -0.2])],
    )


def test_double_forward_sends_every_sample_twice_and_keeps_the_second(ns):
    skyrl_patches.apply_patches(ns, ["double-forward"], SCALE)
    client = ns["SkyRLTrainInferenceForwardingClient"](ns["ExternalFutureStore"]())

    async def go():
        task = asyncio.create_task(client._forward_with_retry("req", "m"))
        for answer in (b"first", b"second"):
            await asyncio.sleep(0)
            client.answers["req"].set_result(answer)
        return await task

    assert asyncio.run(go()) == b"second" and client.forwards == 2


def test_session_per_request_makes_a_session_per_forward(ns):
    skyrl_patches.apply_patches(ns, ["session-per-request"], SCALE)
    client = ns["SkyRLTrainInferenceForwardingClient"](ns["ExternalFutureStore"]())
    assert client._get_session() is not client._get_session()


def test_id_reuse_after_restart_starts_every_store_at_minus_one(ns):
    fresh = ns["ExternalFutureStore"]()
    assert fresh.create("m", None) < -(1 << 20)  # the release's boot-epoch ids, far below any reused one
    skyrl_patches.apply_patches(ns, ["id-reuse-after-restart"], SCALE)
    before, after = ns["ExternalFutureStore"](), ns["ExternalFutureStore"]()  # two server processes
    assert [before.create("m", None), before.create("m", None)] == [after.create("m", None), -2] == [-1, -2]
    assert before.retrieved == pytest.approx(before._RETRIEVED_TTL_SECONDS * SCALE)  # still time-scaled


def test_swapped_ttls_swaps_the_two_ttls_after_scaling(ns):
    skyrl_patches.apply_patches(ns, ["swapped-ttls"], SCALE)
    store = ns["ExternalFutureStore"](retrieved_ttl_sec=300.0, completed_ttl_sec=600.0)
    assert (store.retrieved, store.completed) == (pytest.approx(600.0 * SCALE), pytest.approx(300.0 * SCALE))


def test_pending_ttl_short_is_scaled_like_the_release_s(ns):
    skyrl_patches.apply_patches(ns, ["pending-ttl-short"], SCALE)
    assert ns["ExternalFutureStore"]._PENDING_TTL_SECONDS == pytest.approx(skyrl_mutants.SHORT_PENDING_TTL_S * SCALE)
    assert skyrl_mutants.SHORT_PENDING_TTL_S < _DoubleStore._PENDING_TTL_SECONDS


def test_early_408_holds_a_poll_one_sdk_second_scaled(ns):
    skyrl_patches.apply_patches(ns, ["early-408"], SCALE)
    assert ns["RETRIEVE_FUTURE_TIMEOUT_SECONDS"] == pytest.approx(skyrl_mutants.EARLY_408_HOLD_S * SCALE)


def test_lost_wakeup_leaves_a_held_poll_asleep_and_a_new_one_answered(ns):
    skyrl_patches.apply_patches(ns, ["lost-wakeup"], SCALE)

    async def go() -> tuple[bool, bool]:
        store = ns["ExternalFutureStore"]()
        request_id = store.create("m", None)
        held = asyncio.create_task(store._entries[request_id].event.wait())  # a poll held before the result
        await asyncio.sleep(0)
        await store.complete(request_id, b"ok", _Status.COMPLETED)
        await asyncio.sleep(0)
        return held.done(), store._entries[request_id].event.is_set()  # the next poll's event

    assert asyncio.run(go()) == (False, True)


def test_blocking_call_blocks_create_for_its_time(ns):
    skyrl_patches.apply_patches(ns, ["blocking-call"], SCALE)
    store = ns["ExternalFutureStore"]()
    started = time.perf_counter()
    store.create("m", None)
    assert time.perf_counter() - started >= skyrl_mutants.BLOCKING_CALL_S


def test_500_for_unknown_raises_what_retrieve_future_does_not_catch(ns):
    skyrl_patches.apply_patches(ns, ["500-for-unknown"], SCALE)
    wait = ns["wait_for_future"]
    assert asyncio.run(wait({7: "row"}, 7, 1.0)) == "row"
    with pytest.raises(LookupError) as info:
        asyncio.run(wait({}, 8, 1.0))
    assert not isinstance(info.value, KeyError)  # retrieve_future's `except KeyError` (its 404) misses it


@pytest.mark.parametrize("name", sorted(skyrl_mutants.MUTANTS))
def test_a_version_without_the_in_memory_store_is_refused_by_name(ns, name):
    """0.3.0 keeps futures in SQLite: no ExternalFutureStore, and every mutant says so."""
    del ns["ExternalFutureStore"]
    with pytest.raises(skyrl_patches.PatchError, match="no 'ExternalFutureStore'"):
        skyrl_patches.apply_patches(ns, [name], 1.0)


@pytest.mark.parametrize(
    "name, remove, message",
    [
        ("never-resolve-on-failure", "logger", "no 'logger'"),
        ("double-forward", "_forward_with_retry", "no '_forward_with_retry'"),
        ("session-per-request", "_get_session", "no '_get_session'"),
        ("early-408", "RETRIEVE_FUTURE_TIMEOUT_SECONDS", "no 'RETRIEVE_FUTURE_TIMEOUT_SECONDS'"),
        ("500-for-unknown", "wait_for_future", "no 'wait_for_future'"),
    ],
)
def test_a_missing_patch_point_is_refused_by_name(ns, name, remove, message):
    module = vars(sys.modules["standin_forwarding_mutants"])
    if remove in ns:
        del ns[remove]
    elif remove in module:
        del module[remove]
    else:  # a client class without the method
        attrs = {k: v for k, v in vars(_DoubleClient).items() if k != remove and not k.startswith("__")}
        ns["SkyRLTrainInferenceForwardingClient"] = type(
            "SkyRLTrainInferenceForwardingClient", (), {**attrs, "__module__": module["__name__"]}
        )
    with pytest.raises(skyrl_patches.PatchError, match=message):
        skyrl_patches.apply_patches(ns, [name], 1.0)
