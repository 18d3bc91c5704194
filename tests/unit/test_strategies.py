"""The strategies build valid, JSON-round-tripping trials and shrink to their documented minimal examples.

Pure and fast: nothing here starts a process.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

import faultload.strategies as S
from faultload.client.arrivals import arrival_offsets
from faultload.model.codec import config_from_dict, config_to_dict
from faultload.model.family import HATCHERY_CONTRACT, SKYRL_CONTRACT, TUFT_CONTRACT
from faultload.model.faults import Fault, FaultSchedule
from faultload.model.router import RouterConfig
from faultload.model.shape import ClientPolicy, LoadShape, PollBehaviour
from faultload.store.repro import build_repro, load_repro, write_repro
from faultload.strategies.faults import OUTAGE_KINDS, chain, outage_durations

TARGET = "skyrl==0.4.0"
SCALE = 0.05
# Hypothesis's explain phase re-runs a shrunk example to say which parts of it mattered: 90 of the 94 s
# test_minimal_trial_config took (cProfile, Hypothesis 6.170). These tests read the example, not the
# explanation, so they skip it, as the suite's own profiles do (suite/session.py FULL_PHASES).
NO_EXPLAIN = tuple(p for p in Phase if p is not Phase.explain)
FAST = settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def minimal(strategy):
    return find(strategy, lambda x: True, settings=settings(database=None, max_examples=2000, phases=NO_EXPLAIN))


# ---------------------------------------------------------------- validity and round trips


@FAST
@given(S.trial_configs(TARGET, SCALE))
def test_generated_trials_are_valid(config):
    config.validate()
    shape = config.shape
    assert shape.time_scale == SCALE
    assert shape.delay_polls.after_s + shape.abandon_polls.after_s <= S.CI.max_poll_after_s
    held = min(shape.requests, shape.max_outstanding or shape.requests)
    assert held * shape.result_tokens * shape.num_samples * 16 <= max(S.CI.max_in_flight_result_bytes, 16 * held)
    assert config.proxies == "on"
    assert set(config.fatal_faults) <= S.FATAL
    if config.router.mode == "barrier":
        assert 1 <= config.router.barrier <= held


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(S.trial_configs(TARGET, SCALE, limits=S.NIGHTLY))
def test_nightly_trials_are_valid(config):
    config.validate()
    shape = config.shape
    held = min(shape.requests, shape.max_outstanding or shape.requests)
    # the server's queued work fits the scaled poll timeout: 100 held at 0.05 with the SDK's 45 s
    result_kib = shape.result_tokens * shape.num_samples * 16 / 1024
    assert held <= S.NIGHTLY.max_faithful_held(shape.policy.poll_timeout_s, SCALE, result_kib) <= 100
    if shape.requests > held:
        assert 0 < shape.max_outstanding  # a shape bigger than that always caps what is in flight


def test_faithful_hold_follows_the_poll_timeout_and_the_scale():
    limits = S.NIGHTLY
    assert limits.max_faithful_held(45.0, 0.05) == 100  # 0.25 x 2.25 s / (2 x 2.8 ms)
    assert limits.max_faithful_held(15.0, 0.05) == 33
    assert limits.max_faithful_held(45.0, 0.05, result_kib=360.0) == 61  # + 3.6 ms for the result
    assert limits.max_faithful_held(45.0, 1.0) == 2008
    assert limits.max_faithful_held(5.0, 0.001) == 1  # never below one request
    assert limits.replace(max_backlog_share=0.5).max_faithful_held(45.0, 0.05) == 200


def test_requests_fit_half_the_wall_bound_through_the_cap():
    from faultload.strategies.shapes import wall_fitting_requests

    late = (PollBehaviour(0.5, 418.0), PollBehaviour())
    # 36 held, each for (1 + 209) SDK s = 10.5 s at 0.05: 28 rounds fit 300 s
    assert wall_fitting_requests(7919, 36, late, 0.05, S.NIGHTLY) == 28 * 36
    assert wall_fitting_requests(500, 0, late, 0.05, S.NIGHTLY) == 500  # one burst: one round
    assert wall_fitting_requests(7919, 36, (PollBehaviour(), PollBehaviour()), 0.05, S.NIGHTLY) == 7919
    assert wall_fitting_requests(100, 1, late, 1.0, S.NIGHTLY) == 1  # never below one round


def test_barrier_waves_fit_half_the_wall_bound_even_if_each_times_out():
    from faultload.strategies.routers import barrier_fitting_requests

    shape = LoadShape(requests=8192, max_outstanding=58, time_scale=SCALE, workers=4)
    barrier = RouterConfig(mode="barrier", barrier=58, barrier_timeout_s=4.0)
    # 300 s / 4 s = 75 waves of 58 (the nightly replay: 142 waves, 590 s)
    assert barrier_fitting_requests(shape, barrier, S.NIGHTLY) == 75 * 58
    assert barrier_fitting_requests(shape, RouterConfig(mode="latency"), S.NIGHTLY) == 8192
    one_wave = LoadShape(requests=500, max_outstanding=0, time_scale=SCALE)
    assert (
        barrier_fitting_requests(one_wave, RouterConfig(mode="barrier", barrier=1, barrier_timeout_s=80.0), S.NIGHTLY)
        == 500
    )  # never below the requests held at once


@FAST
@given(S.trial_configs(TARGET, SCALE, limits=S.NIGHTLY))
def test_drawn_barrier_trials_fit_their_wall_bound(config):
    shape, router = config.shape, config.router
    config.validate()
    if router.mode == "barrier":
        waves = -(-shape.requests // router.barrier)
        held = min(shape.requests, shape.max_outstanding or shape.requests)
        assert waves * router.barrier_timeout_s <= 0.5 * config.max_wall_s or shape.requests == held


def test_faithful_cap_lowers_only_a_hold_above_the_limit():
    from faultload.strategies.shapes import faithful_cap

    assert faithful_cap(300, 0, 401) == 0  # one burst of 300 fits
    assert faithful_cap(300, 0, 133) == 133  # a storm's shorter timeout: capped
    assert faithful_cap(8192, 3717, 401) == 401
    assert faithful_cap(8192, 200, 401) == 200
    assert faithful_cap(10, 0, 0) == 1


@FAST
@given(S.load_shapes(SCALE))
def test_shapes_round_trip_through_json(shape):
    assert LoadShape.from_json(shape.to_json()) == shape


@FAST
@given(S.trial_configs(TARGET, SCALE, regress=("retention",)))
def test_trial_configs_round_trip_through_json(config):
    data = json.loads(json.dumps(config_to_dict(config)))
    assert config_from_dict(data) == config


@FAST
@given(S.fault_schedules(SCALE, S.CI.replace(max_faults=4)))
def test_fault_schedules_round_trip(schedule):
    assert FaultSchedule.from_json(schedule.to_json()) == schedule


def test_fixes_round_trip_and_old_repros_without_them_load():
    config = dataclasses.replace(S.minimal_trial_config(TARGET, SCALE), fixes=("plain-tracebacks",))
    data = json.loads(json.dumps(config_to_dict(config)))
    assert data["fixes"] == ["plain-tracebacks"] and config_from_dict(data) == config
    del data["fixes"]
    assert config_from_dict(data).fixes == ()


def test_config_from_dict_names_unknown_fields():
    data = config_to_dict(S.minimal_trial_config(TARGET, SCALE))
    data["bogus"] = 1
    with pytest.raises(ValueError, match="bogus"):
        config_from_dict(data)
    data = config_to_dict(S.minimal_trial_config(TARGET, SCALE))
    data["router"]["speed"] = 3
    with pytest.raises(ValueError, match="router.*speed"):
        config_from_dict(data)


def test_repro_file_round_trip(tmp_path):
    from faultload.checker.budgets import Budgets
    from faultload.checker.inputs import Verdict

    config = S.minimal_trial_config(TARGET, SCALE, regress=("retention",))
    verdicts = [
        Verdict(name="no_lost_results", ok=False, figure=3, budget=0, head="3 lost"),
        Verdict(name="bounded_fds", ok=True, figure=20, budget=100, head="ok"),
    ]
    budgets = Budgets().replace({"healthz_p99_s": 2.0})
    repro = build_repro(
        config,
        verdicts,
        {"no_lost_results": {"ok": False, "figure": 3, "budget": 0}},
        budgets,
        checked=("no_lost_results",),
    )
    path = write_repro(repro, tmp_path, "r")
    data, loaded, loaded_budgets = load_repro(path)
    assert loaded == config
    assert loaded_budgets == budgets
    assert [v["name"] for v in data["failing"]] == ["no_lost_results"]
    assert data["seed"] == config.shape.seed and data["time_scale"] == SCALE and data["regress"] == ["retention"]


# ---------------------------------------------------------------- documented minimal examples


def test_minimal_trial_config():
    assert minimal(S.trial_configs(TARGET, SCALE)) == S.minimal_trial_config(TARGET, SCALE)
    assert minimal(S.trial_configs(TARGET, SCALE, ("retention",))) == S.minimal_trial_config(
        TARGET, SCALE, ("retention",)
    )


def test_minimal_shape():
    shape = minimal(S.load_shapes(SCALE))
    assert shape == S.minimal_shape(SCALE)
    assert (shape.requests, shape.result_tokens, shape.num_samples, shape.max_outstanding) == (1, 1, 1, 0)
    assert shape.arrival == "burst" and shape.abandon_polls == PollBehaviour() and shape.policy == ClientPolicy()


@pytest.mark.parametrize(
    "strategy, expected",
    [
        (S.request_counts(512), 1),
        (S.result_sizes(4096), 1),
        (S.sample_counts(8), 1),
        (S.outstanding_caps(300), 0),
        (S.outstanding_caps(100_000), 4096),
        (S.poll_behaviours(), PollBehaviour()),
        (S.client_policies(), ClientPolicy()),
        (S.arrivals(100), ("burst", 0.0, 1)),
        (S.clients(), "raw"),
        (S.fault_schedules(SCALE), FaultSchedule()),
    ],
)
def test_minimal_examples(strategy, expected):
    assert minimal(strategy) == expected


def test_minimal_affected_poll_behaviour_is_everyone_past_the_poll_timeout():
    assert find(
        S.poll_behaviours(), lambda p: p.fraction > 0, settings=settings(database=None, phases=NO_EXPLAIN)
    ) == PollBehaviour(1.0, 45.0)


def test_minimal_routers():
    shape = S.minimal_shape(SCALE)
    assert (
        minimal(S.router_configs(shape))
        == S.immediate_router(shape)
        == RouterConfig(mode="immediate", barrier=0, procs=1)
    )
    assert minimal(S.latency_routers(shape)) == RouterConfig(
        mode="latency", max_num_seqs=256, gen_seconds=0.05, procs=1
    )
    big = LoadShape(requests=300, max_outstanding=0, time_scale=SCALE)
    assert minimal(S.barrier_routers(big)) == RouterConfig(mode="barrier", barrier=300, barrier_timeout_s=1.0, procs=1)


def test_minimal_fault():
    assert minimal(S.faults(SCALE)) == Fault("edge", "reset_peer", {"timeout": 0}, start_s=0.0, duration_s=0.25)


# ---------------------------------------------------------------- directions, long outages, sequences

FIND = settings(
    database=None, max_examples=5000, derandomize=True, phases=NO_EXPLAIN, suppress_health_check=list(HealthCheck)
)
SHORTEST = 5.0 * SCALE  # the shortest window, 5 SDK s
# Each toxic kind's simplest attributes at SCALE (times scaled: 1,000 SDK ms -> 50 ms; rates divided).
SIMPLEST_ATTRIBUTES = {
    "latency": {"latency": 50, "jitter": 0},
    "timeout": {"timeout": 0},
    "reset_peer": {"timeout": 0},
    "slicer": {"average_size": 1, "size_variation": 0, "delay": 1},
    "limit_data": {"bytes": 0},
    "bandwidth": {"rate": 2000},
    "slow_close": {"delay": 50},
}


def _found(strategy, condition):
    return find(strategy, condition, settings=FIND)


@pytest.mark.parametrize("stream", ["downstream", "upstream", "both"])
@pytest.mark.parametrize("kind", sorted(SIMPLEST_ATTRIBUTES))
@pytest.mark.parametrize("link", ["edge", "backend"])
def test_each_toxic_kind_is_drawn_in_each_direction(link, kind, stream):
    """Minimal: that toxic at its simplest attributes, toxicity 1, from t=0 for the shortest window."""
    fault = _found(S.faults(SCALE), lambda f: (f.link, f.kind, f.stream) == (link, kind, stream))
    assert fault == Fault(link, kind, SIMPLEST_ATTRIBUTES[kind], stream=stream, start_s=0.0, duration_s=SHORTEST)


def test_toxicity_is_drawn_and_down_takes_no_direction():
    assert _found(S.faults(SCALE), lambda f: f.toxicity < 1) == Fault(
        "edge", "reset_peer", {}, toxicity=0.5, duration_s=SHORTEST
    )
    assert _found(S.faults(SCALE), lambda f: f.toxicity <= 0.1).toxicity == 0.1

    @FAST
    @given(S.faults(SCALE, S.NIGHTLY))
    def check(fault):
        if not fault.is_toxic:
            assert (fault.stream, fault.toxicity) == ("downstream", 1.0)

    check()


def test_outages_reach_past_the_completed_ttl_under_nightly():
    COMPLETED_TTL_S = SKYRL_CONTRACT.completed_ttl_s

    assert outage_durations(SKYRL_CONTRACT)[-5:] == (240.0, 360.0, 480.0, 600.0, 720.0)
    assert max(outage_durations(SKYRL_CONTRACT)) == 1.2 * COMPLETED_TTL_S == S.NIGHTLY.max_outage_s == 720.0
    assert 720.0 * SCALE <= S.NIGHTLY.max_wall_real_s / 10  # 36 s of a 600 s wall bound
    # Minimal outage >= 600 SDK s: the edge resetting every connection for 600 SDK s (30 s at 0.05).
    skyrl_faults = S.faults(SCALE, S.NIGHTLY, contract=SKYRL_CONTRACT)
    long = _found(skyrl_faults, lambda f: (f.duration_s or 0) >= 600 * SCALE)  # a restart has none
    assert long == Fault("edge", "reset_peer", {}, duration_s=600 * SCALE)
    for kind in ("down", "timeout", "limit_data"):
        assert _found(skyrl_faults, lambda f: f.kind == kind and (f.duration_s or 0) >= 720 * SCALE)


def test_outages_meet_each_familys_own_clocks():
    """TuFT's only clock is its 120 s poll hold; hatchery-core's hold is 600 s (its 3,600 s TTL is past any
    profile's outage bound); no family, the short windows alone."""
    from faultload.strategies.faults import DURATIONS_S

    assert outage_durations(TUFT_CONTRACT) == DURATIONS_S + (144.0,)
    assert outage_durations(HATCHERY_CONTRACT)[len(DURATIONS_S) :][:2] == (480.0, 720.0)
    assert outage_durations(None) == DURATIONS_S


def test_only_outages_get_the_long_windows_and_ci_keeps_them_short():
    @FAST
    @given(S.faults(SCALE, S.NIGHTLY), S.faults(SCALE, S.CI))
    def check(nightly, ci):
        bound = S.NIGHTLY.max_outage_s if nightly.kind in OUTAGE_KINDS else S.NIGHTLY.max_fault_s
        if nightly.kind == "restart":  # an instant: no window to bound
            assert nightly.duration_s is None
        else:
            assert nightly.duration_s <= bound * SCALE
        assert ci.duration_s <= max(S.CI.max_fault_s, S.CI.max_outage_s) * SCALE == 60.0 * SCALE

    check()


def _follows(schedule, first_kind=None, then_kind=None):
    return any(
        a.link == b.link and b.start_s == a.end_s and first_kind in (None, a.kind) and then_kind in (None, b.kind)
        for i, a in enumerate(schedule.faults)
        for b in schedule.faults[i + 1 :]
    )


def test_a_fault_may_start_exactly_when_another_ends_on_its_link():
    """Minimal: two shortest edge resets back to back."""
    first = Fault("edge", "reset_peer", {}, duration_s=SHORTEST)
    assert _found(S.fault_schedules(SCALE), _follows) == FaultSchedule(
        (first, Fault("edge", "reset_peer", {}, start_s=SHORTEST, duration_s=SHORTEST))
    )
    # A slow link that then goes down, on the backend:
    slow_then_down = _found(
        S.fault_schedules(SCALE), lambda s: _follows(s, "latency", "down") and s.faults[0].link == "backend"
    )
    assert slow_then_down == FaultSchedule(
        (
            Fault("backend", "latency", SIMPLEST_ATTRIBUTES["latency"], duration_s=SHORTEST),
            Fault("backend", "down", start_s=SHORTEST, duration_s=SHORTEST),
        )
    )


def test_faults_on_the_two_links_may_overlap():
    def overlapping(schedule):
        return any(
            a.link == "edge"
            and b.link == "backend"
            and a.start_s < b.end_s
            and b.start_s < a.end_s
            and a.anchor is None
            and b.anchor is None
            for a in schedule.faults
            for b in schedule.faults
        )

    # Minimal: the edge resetting every connection and the backend at one of its simplest faults (which one is
    # the shrinker's path through the swarm), both from t=0 for the shortest window.
    edge, backend = _found(S.fault_schedules(SCALE), overlapping).faults
    assert edge == Fault("edge", "reset_peer", {}, duration_s=SHORTEST)
    assert backend.kind in ("latency", "reset_peer") and backend == Fault(
        "backend", backend.kind, SIMPLEST_ATTRIBUTES[backend.kind], duration_s=SHORTEST
    )


def test_a_sequence_shrinks_to_one_fault_where_one_suffices():
    """The target is one whose search shrinks to one fault on 8 of 8 seeds, with or without a router kind added
    to the table (``backend:bandwidth`` did on 6 of 8, and adding a kind changed which: the search, not the
    shrinker, decided)."""
    found = _found(
        S.fault_schedules(SCALE),
        lambda s: any((f.link, f.kind, f.stream) == ("backend", "slow_close", "upstream") for f in s.faults),
    )
    assert found == FaultSchedule(
        (Fault("backend", "slow_close", SIMPLEST_ATTRIBUTES["slow_close"], stream="upstream", duration_s=SHORTEST),)
    )


def test_chain_starts_a_follower_at_its_links_last_end_only():
    slow = Fault("edge", "latency", {"latency": 50}, start_s=1.0, duration_s=2.0)
    down = Fault("edge", "down", start_s=9.0, duration_s=1.0)
    stall = Fault("router", "stall", start_s=9.0, duration_s=1.0)
    backend = Fault("backend", "down", start_s=9.0, duration_s=1.0)
    assert chain([(slow, False), (down, True)]) == (slow, dataclasses.replace(down, start_s=3.0))
    assert chain([(down, True)]) == (down,)  # nothing before it on its link: its own start
    assert chain([(slow, False), (backend, True), (stall, True)]) == (slow, backend, stall)
    assert chain([(Fault("edge", "down"), False), (down, True)])[1] == down  # the one before never ends


PROCESS = S.CI.replace(process_faults=True)


@pytest.mark.parametrize(
    "link, kind, expected",
    [
        # the shortest pause: 1 SDK s from t=0
        ("server", "pause", Fault("server", "pause", start_s=0.0, duration_s=SCALE)),
        ("router", "pause", Fault("router", "pause", start_s=0.0, duration_s=SCALE)),
        # a restart is an instant: the earliest one
        ("server", "restart", Fault("server", "restart", start_s=0.0)),
    ],
)
def test_each_process_fault_is_drawn_and_shrinks_to_its_minimum(link, kind, expected):
    found = find(
        S.faults(SCALE, PROCESS), lambda f: (f.link, f.kind) == (link, kind), settings=FIND
    )  # derandomized: never flaky
    assert found == expected


def test_process_pauses_last_1_to_60_sdk_seconds():
    longest = find(
        S.faults(1.0, PROCESS),
        lambda f: f.kind == "pause" and f.duration_s >= 60,
        settings=settings(database=None, max_examples=5000, derandomize=True, phases=NO_EXPLAIN),
    )
    assert longest.duration_s == 60.0

    @FAST
    @given(S.faults(1.0, PROCESS.replace(max_fault_s=120.0)))
    def check(fault):
        if fault.kind == "pause":
            assert 1.0 <= fault.duration_s <= 60.0 and fault.duration_s == int(fault.duration_s)

    check()


def test_process_faults_only_when_asked_and_restart_is_fatal():
    assert S.CI.process_faults is False and S.NIGHTLY.process_faults is True
    assert "server:restart" in S.FATAL and not {"server:pause", "router:pause"} & S.FATAL
    schedule = FaultSchedule(
        (Fault("server", "restart", start_s=1.0), Fault("server", "pause", start_s=2.0, duration_s=1.0))
    )
    assert S.fatal_kinds(schedule) == ("server:restart",)

    @FAST
    @given(S.faults(SCALE))
    def ci_draws_none(fault):
        assert not fault.is_process

    ci_draws_none()


# ---------------------------------------------------------------- what the suite needs to be able to draw


def test_ci_space_holds_the_retention_shape():
    """The retention regression needs: slow results, an abandoned first poll, a re-poll after TTL + sweep."""

    def retention_like(config):
        s, r = config.shape, config.router
        slow = (r.mode == "latency" and r.gen_seconds >= 1.0) or r.mode == "barrier"
        return slow and s.abandon_polls.fraction > 0 and s.abandon_polls.after_s >= 200 and s.requests >= 8

    # Only that the space holds one: the first found will do (shrinking it took most of this test's time).
    found = find(
        S.trial_configs(TARGET, SCALE),
        retention_like,
        settings=settings(
            database=None,
            max_examples=5000,
            derandomize=True,
            phases=(Phase.generate,),
            suppress_health_check=list(HealthCheck),
        ),
    )
    assert found.shape.abandon_polls.after_s >= 200


def test_limits_bound_the_router_wait():
    limits = S.CI.replace(max_result_wait_s=60.0, storms=False)

    @FAST
    @given(S.trial_configs(TARGET, SCALE, limits=limits))
    def check(config):
        s, r = config.shape, config.router
        held = min(s.requests, s.max_outstanding or s.requests)
        if r.mode == "latency":
            assert -(-held // r.max_num_seqs) * r.gen_seconds <= 60.0 * SCALE + 1e-9
        if r.mode == "barrier":
            assert r.barrier_timeout_s <= 60.0 * SCALE + 1e-9
        assert s.policy == ClientPolicy()

    check()


# ---------------------------------------------------------------- arrivals (the raw client's feeder)


@pytest.mark.parametrize("arrival", ["waves", "ramp", "poisson"])
def test_arrival_offsets_are_ordered_within_the_span_and_split_across_workers(arrival):
    shape = LoadShape(requests=100, arrival=arrival, arrival_span_s=40.0, arrival_waves=4, time_scale=0.5, seed=3)
    shape.validate()
    whole = arrival_offsets(shape, 0, 100)
    assert whole[0] == 0.0 and np.all(np.diff(whole) >= 0)
    assert whole[-1] <= 40.0 * 0.5 * (1.5 if arrival == "poisson" else 1.0)
    assert np.array_equal(np.concatenate([arrival_offsets(shape, 0, 37), arrival_offsets(shape, 37, 63)]), whole)
    if arrival == "waves":
        assert sorted(set(whole.tolist())) == [0.0, 5.0, 10.0, 15.0]


def test_burst_has_no_offsets_and_arrivals_need_the_raw_client():
    assert arrival_offsets(LoadShape(), 0, 10) is None
    with pytest.raises(ValueError, match="arrival"):
        LoadShape(arrival="trickle").validate()
    with pytest.raises(ValueError, match="raw"):
        LoadShape(client="sdk", arrival="ramp", arrival_span_s=5.0).validate()


# ---------------------------------------------------------------- the real SDK client


def _clients_drawn(target: str, limits: S.Limits, n: int = 300) -> list[LoadShape]:
    shapes = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(S.trial_configs(target, SCALE, limits=limits))
    def collect(config):
        shapes.append(config)

    collect()
    return shapes


def test_sdk_runs_a_share_of_ci_trials_and_only_what_it_can_run():
    configs = _clients_drawn(TARGET, S.CI)
    sdk = [c for c in configs if c.shape.client == "sdk"]
    assert 0.08 * len(configs) <= len(sdk) <= 0.4 * len(configs), (len(sdk), len(configs))
    for config in sdk:
        config.validate()
        s = config.shape
        assert (s.arrival, s.accept, s.policy) == ("burst", "proto", ClientPolicy())
        assert s.delay_polls == PollBehaviour() and s.abandon_polls == PollBehaviour()
        assert S.trials.sdk_outlasts_faults(config.faults, SCALE, SKYRL_CONTRACT)
    assert any(c.faults.faults for c in sdk)  # SDK trials meet faults too


@pytest.mark.parametrize(
    "target, limits",
    [
        (TARGET, S.CI.replace(sdk_fraction=0.0)),
        (TARGET, S.CI.replace(late_polls=True)),  # every trial abandons polls: the SDK cannot
        (TARGET, S.CI.replace(accepts=("json",))),
        ("skyrl==0.3.0", S.CI),  # answers JSON, which tinker 0.25 refuses
    ],
)
def test_sdk_never_drawn_where_it_cannot_run(target, limits):
    assert all(c.shape.client == "raw" for c in _clients_drawn(target, limits, n=100))


def test_minimal_sdk_shape_is_the_minimal_shape_with_the_sdk():
    found = find(S.load_shapes(SCALE), lambda s: s.client == "sdk", settings=settings(database=None, phases=NO_EXPLAIN))
    assert found == dataclasses.replace(S.minimal_shape(SCALE), client="sdk")


def test_sdk_reads_results_of_0_4_0_on():
    assert S.sdk_reads_results("skyrl==0.4.0") and S.sdk_reads_results("skyrl==1.0.0")
    assert not S.sdk_reads_results("skyrl==0.3.0")
    assert not S.sdk_reads_results("hatchery==0.3.0") and not S.sdk_reads_results("hatchery@/src/hatchery")
    assert S.sdk_reads_results("url=http://127.0.0.1:8000") and S.sdk_reads_results("skyrl@/src/skyrl")


def test_sdk_backoff_must_outlast_the_faults_at_the_scale():
    def fits(schedule, scale, contract=SKYRL_CONTRACT):
        return S.trials.sdk_outlasts_faults(schedule, scale, contract)

    assert fits(FaultSchedule(), SCALE)
    # ci: windows start within 40 SDK s and last up to 60 (x 0.05): they end by 5 s, within 0.75 x 15 s.
    assert fits(FaultSchedule((Fault("edge", "down", start_s=2.0, duration_s=3.0),)), SCALE)
    assert not fits(FaultSchedule((Fault("edge", "down", start_s=4.0, duration_s=6.0),)), SCALE)
    assert not fits(FaultSchedule((Fault("edge", "down"),)), SCALE)  # to the trial's end
    assert fits(FaultSchedule((Fault("edge", "down", start_s=4.0, duration_s=6.0),)), 1.0)
    # the family's own soonest loss: TuFT keeps results until it stops, hatchery forgets a future 3600 s after
    # creating it (135 s of backoff at 0.05); a fault to the trial's end never fits
    long_fault = FaultSchedule((Fault("edge", "down", start_s=4.0, duration_s=60.0),))
    assert fits(long_fault, SCALE, TUFT_CONTRACT) and fits(long_fault, SCALE, HATCHERY_CONTRACT)
    assert not fits(FaultSchedule((Fault("edge", "down", start_s=4.0, duration_s=90.0),)), SCALE, HATCHERY_CONTRACT)
    assert not fits(FaultSchedule((Fault("edge", "down"),)), SCALE, TUFT_CONTRACT)


def test_nightly_sdk_trials_fall_back_to_raw_for_long_faults():
    configs = _clients_drawn(TARGET, S.NIGHTLY, n=150)
    assert any(c.shape.client == "sdk" for c in configs)
    assert all(
        S.trials.sdk_outlasts_faults(c.faults, SCALE, SKYRL_CONTRACT) for c in configs if c.shape.client == "sdk"
    )


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"accept": "json"}, "accept json"),
        ({"delay_polls": PollBehaviour(0.5, 45.0)}, "delayed or abandoned"),
        ({"abandon_polls": PollBehaviour(1.0, 45.0)}, "delayed or abandoned"),
        ({"policy": ClientPolicy(poll_timeout_s=5.0)}, "policy"),
    ],
)
def test_validate_refuses_what_the_sdk_cannot_do(changes, message):
    dataclasses.replace(LoadShape(client="raw"), **changes).validate()
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(LoadShape(client="sdk"), **changes).validate()


# ---------------------------------------------------------------- the suite's reducer


@FAST
@given(S.trial_configs(TARGET, SCALE))
def test_reductions_are_valid_and_simpler(config):
    from faultload.suite.reducer import complexity, reductions

    configs = [config]
    if config.shape.client == "sdk":  # as --faultload-sdk makes it: its reductions (the raw client's too) stay valid
        configs.append(dataclasses.replace(config, shape=dataclasses.replace(config.shape, sdk="tinker==0.38.0")))
    for config in configs:
        for label, candidate in reductions(config):
            candidate.validate()
            assert candidate != config, label
            assert complexity(candidate) <= complexity(config) or label == "every request abandons", label


def test_profiles_are_registered():
    from faultload.suite.profiles import PROFILES

    assert set(PROFILES) == {"ci", "nightly", "confirm"}
    assert PROFILES["ci"].derandomize and not PROFILES["ci"].use_database
    assert PROFILES["nightly"].use_database and not PROFILES["nightly"].derandomize
    assert PROFILES["confirm"].max_examples == 1


def test_st_is_hypothesis():  # the strategies are plain Hypothesis strategies, composable by users
    assert isinstance(S.trial_configs(TARGET, SCALE), st.SearchStrategy)


def test_property_restrictions_shrink_to_their_own_minimum():
    """no_lost_results draws only late polls and slow routers; its minimum says so."""
    assert minimal(S.poll_behaviours(always=True)) == PollBehaviour(1.0, 45.0)
    limits = S.CI.replace(late_polls=True, router_modes=("latency", "barrier"))
    config = minimal(S.trial_configs(TARGET, SCALE, limits=limits))
    assert config.shape.abandon_polls == PollBehaviour(1.0, 45.0)
    assert config.router == RouterConfig(mode="latency", max_num_seqs=256, gen_seconds=0.05, procs=1)
    assert config.shape.requests == 1 and config.faults == FaultSchedule()


def test_a_known_trial_is_skipped_only_where_the_family_forwards_too_few_at_once_to_serve_it():
    """SkyRL forwards every sample at once: every known trial runs as measured (the contract-edge ones where its
    contract has the TTL). hatchery forwards one at a time: a burst of long generations (completion_burst: 6,000
    of 20 SDK s) would take hours, so it is skipped; the immediate router's trials run."""
    from faultload.strategies.known import KNOWN_SHAPES, known_trial_config

    def runs(name: str, target: str) -> bool:
        return known_trial_config(name, target, SCALE, (), S.CI) is not None

    assert all(runs(name, TARGET) for name in KNOWN_SHAPES)
    assert runs("completed_ttl_edge", TARGET) and runs("retrieved_ttl_edge", TARGET)
    assert not runs("created_ttl_edge", TARGET)
    assert not runs("completion_burst", "hatchery==0.3.0") and not runs("size_burst", "hatchery==0.3.0")
    assert runs("cpu_sample", "hatchery==0.3.0")
    # its created-TTL edge polls 0.8 of 3,600 s late, 144 s at 0.05: past the ci wall (120 s), within nightly's
    assert not runs("created_ttl_edge", "hatchery==0.3.0")
    assert known_trial_config("created_ttl_edge", "hatchery==0.3.0", SCALE, (), S.NIGHTLY) is not None


def test_a_family_that_forwards_one_at_a_time_draws_routers_it_can_serve_in_time():
    """hatchery's routers: a barrier of one, or a queue of one generation at a time that fits the wait and wall
    bounds; SkyRL's draws are those it always had."""
    from faultload.model.family import SKYRL_CONTRACT
    from faultload.strategies.routers import router_fits

    shapes, routers = [], []

    @settings(max_examples=150, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(S.trial_configs("hatchery==0.3.0", SCALE, limits=S.CI))
    def collect(config):
        shapes.append(config.shape)
        routers.append(config.router)

    collect()
    assert {r.mode for r in routers} >= {"immediate", "latency"}
    assert all(router_fits(s, r, S.CI, HATCHERY_CONTRACT) for s, r in zip(shapes, routers))
    assert all(r.barrier <= 1 for r in routers if r.mode == "barrier")
    slow = RouterConfig(mode="latency", max_num_seqs=256, gen_seconds=4.0)
    big = LoadShape(requests=256, time_scale=SCALE)
    assert router_fits(big, slow, S.CI, SKYRL_CONTRACT) and not router_fits(big, slow, S.CI, HATCHERY_CONTRACT)


def test_late_polls_prefer_the_sdks_timers_then_the_familys_own_landmarks():
    """SkyRL's landmarks are its TTLs' (the pre-fix retrieved TTL and its sweep, the retrieved TTL past two
    backoffs); a family without TTLs gets the SDK's alone, and every landmark lies inside the family's longest
    TTL, where a late poll is still owed its result."""
    from faultload.model.sdk import SDK_BACKOFF_CAP_S, SDK_KEEPALIVE_EXPIRY_S, SDK_POLL_TIMEOUT_S
    from faultload.strategies.shapes import poll_landmarks

    sdk_head = (SDK_POLL_TIMEOUT_S, SDK_POLL_TIMEOUT_S + SDK_BACKOFF_CAP_S)
    race = SDK_KEEPALIVE_EXPIRY_S - 0.1
    assert poll_landmarks(SKYRL_CONTRACT) == (
        *sdk_head,
        200.0,
        SKYRL_CONTRACT.retrieved_ttl_s + 2 * SDK_BACKOFF_CAP_S + 40.0,
        race,
    )
    assert poll_landmarks(TUFT_CONTRACT) == poll_landmarks(HATCHERY_CONTRACT) == (*sdk_head, race)
    for contract in (SKYRL_CONTRACT, TUFT_CONTRACT, HATCHERY_CONTRACT):
        assert contract.longest_ttl_s is None or max(poll_landmarks(contract)) < contract.longest_ttl_s


def test_a_tuft_trials_late_polls_never_wait_for_skyrls_ttls():
    """Drawn with every poll late and only at landmarks, a TuFT trial's delays are the SDK's timers."""
    from faultload.strategies.shapes import poll_landmarks

    limits = S.CI.replace(late_polls=True)
    delays = set()

    @settings(max_examples=60, database=None, suppress_health_check=list(HealthCheck), deadline=None)
    @given(S.trial_configs("tuft==0.2.2", SCALE, limits=limits))
    def collect(config):
        delays.add(config.shape.abandon_polls.after_s)

    collect()
    assert delays and delays <= set(poll_landmarks(TUFT_CONTRACT))
