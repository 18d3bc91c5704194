"""The known-bug trials are valid, round-trip through a repro file, and reach only the profiles that ask."""

from __future__ import annotations

import dataclasses

import pytest

from faultload.model.anchors import Anchor
from faultload.model.codec import config_from_dict, config_to_dict
from faultload.model.family import CONTRACTS, SKYRL_CONTRACT
from faultload.model.faults import FaultSchedule
from faultload.model.sdk import (
    SDK_BACKOFF_CAP_S,
    SDK_KEEPALIVE_EXPIRY_S,
    SDK_POLL_TIMEOUT_S,
)
from faultload.strategies import known
from faultload.strategies.edges import EDGE_TRIALS
from faultload.strategies.known import KNOWN_FAULTS, KNOWN_SHAPES, known_trial_config
from faultload.strategies.limits import NIGHTLY
from faultload.suite.profiles import get_profile
from faultload.suite.properties import LOST, PROPERTIES, TRAINING, Property, known_configs

RETRIEVED_TTL_S = SKYRL_CONTRACT.retrieved_ttl_s
COMPLETED_TTL_S = SKYRL_CONTRACT.completed_ttl_s

PROP = Property("bounded_retries", ("retry_amplification",), ("attempts_per_request",), known=("completion_burst",))


@pytest.mark.parametrize("name", sorted(KNOWN_SHAPES))
def test_known_trials_are_valid_and_round_trip(name: str) -> None:
    config = known_trial_config(name, "skyrl==0.4.0", 0.05, ("keepalive",), NIGHTLY)
    config.validate()
    faults = KNOWN_FAULTS[name](config.shape) if name in KNOWN_FAULTS else FaultSchedule()
    assert config.faults == faults and config.regress == ("keepalive",)
    assert config.direct_edge is (not faults.faults)  # a trial with an edge fault goes through the edge proxy
    assert config_from_dict(config_to_dict(config)) == config


def test_completion_burst_polls_just_before_the_idle_expiry() -> None:
    shape = KNOWN_SHAPES["completion_burst"](0.05)
    assert shape.delay_polls.fraction == 1.0
    assert shape.delay_polls.after_s == pytest.approx(SDK_KEEPALIVE_EXPIRY_S - 0.1)
    assert shape.time_scale == 0.05


def test_only_profiles_that_ask_run_known_trials() -> None:
    assert known_configs(get_profile("ci"), PROP, "skyrl==0.4.0", ()) == []
    assert known_configs(get_profile("confirm"), PROP, "skyrl==0.4.0", ()) == []
    nightly = known_configs(get_profile("nightly"), PROP, "skyrl==0.4.0", ("rich-access-log",))
    assert [c.shape.requests for c in nightly] == [6000] and nightly[0].regress == ("rich-access-log",)
    assert nightly[0].proxies == "on"  # the nightly stack routes through Toxiproxy for every trial


def test_unknown_known_trial_is_named() -> None:
    with pytest.raises(ValueError, match="unknown known-bug trial 'nope'"):
        known_trial_config("nope", "skyrl==0.4.0", 0.05, (), NIGHTLY)


def test_known_trials_bypass_the_edge_proxy() -> None:
    # The keep-alive race lives on the client's own connection to the server.
    config = known_trial_config("completion_burst", "skyrl==0.4.0", 0.05, (), NIGHTLY)
    assert config.direct_edge is True and config.uses_proxies


def test_direct_edge_refuses_edge_faults() -> None:
    import dataclasses

    from faultload.model.faults import Fault, FaultSchedule

    config = known_trial_config("completion_burst", "skyrl==0.4.0", 0.05, (), NIGHTLY)
    edge = dataclasses.replace(config, faults=FaultSchedule((Fault("edge", "down", start_s=1.0, duration_s=1.0),)))
    with pytest.raises(ValueError, match="direct_edge leaves the edge proxy out"):
        edge.validate()
    backend = dataclasses.replace(
        config, faults=FaultSchedule((Fault("backend", "down", start_s=1.0, duration_s=1.0),))
    )
    backend.validate()


def test_completion_burst_completes_in_bursts() -> None:
    # With the immediate router the keep-alive regression reset nothing: the
    # race needs results completing in bursts (faultload run's default router).
    config = known_trial_config("completion_burst", "skyrl==0.4.0", 0.05, ("keepalive",), NIGHTLY)
    router = config.router
    assert (router.mode, router.max_num_seqs, router.gen_seconds) == ("latency", 256, 1.0)
    router.validate()


@pytest.mark.parametrize("time_scale", [0.05, 1.0])
def test_half_open_delivery_heals_between_the_two_ttls(time_scale: float) -> None:
    """The results are written into the half-open edge while their first polls are held; the edge heals after
    the retrieved TTL and a sweep have passed since then, and the client's first re-poll after it (one poll
    timeout and one backoff cap at most) comes before the completed TTL: a correct retention still has them."""
    config = known_trial_config("half_open_delivery", "skyrl==0.4.0", time_scale, (), NIGHTLY)
    (fault,) = config.faults.faults
    written = config.router.gen_seconds / time_scale  # SDK seconds from submit (the polls are held at once)
    start, healed = fault.start_s / time_scale, (fault.start_s + fault.duration_s) / time_scale
    assert 0 < start < written < SDK_POLL_TIMEOUT_S
    sweep_interval = SDK_BACKOFF_CAP_S  # 0.4.0's sweep runs this often
    assert healed > written + RETRIEVED_TTL_S + sweep_interval
    assert healed + SDK_POLL_TIMEOUT_S + SDK_BACKOFF_CAP_S < written + COMPLETED_TTL_S
    assert config.router.max_num_seqs >= config.shape.requests  # every result written at once


def test_half_open_delivery_blackholes_both_ways() -> None:
    """Both streams, and no close: with responses alone blackholed the re-polls reach the server, each restarts
    the retrieved clock, and nothing is lost (measured); a timeout above 0 would close the connections."""
    (fault,) = known.half_open_faults(KNOWN_SHAPES["half_open_delivery"](0.05)).faults
    assert (fault.link, fault.kind, fault.stream, dict(fault.attributes)) == ("edge", "timeout", "both", {"timeout": 0})


def test_the_nightly_lost_results_property_runs_the_edges_half_open_delivery_and_restart_reuse() -> None:
    nightly = known_configs(get_profile("nightly"), LOST, "skyrl==0.4.0", ())
    edges = [EDGE_TRIALS[name](SKYRL_CONTRACT, 0.05) for name in ("completed_ttl_edge", "retrieved_ttl_edge")]
    assert [c.shape for c in nightly] == [edge.shape for edge in edges] + [
        KNOWN_SHAPES[name](0.05) for name in ("half_open_delivery", "restart_reuse")
    ]
    assert nightly[2].faults == known.half_open_faults(nightly[2].shape) and nightly[2].proxies == "on"
    assert nightly[3].faults == known.restart_faults(nightly[3].shape) and nightly[3].fatal_faults == (
        "server:restart",
    )


def test_ci_runs_the_contract_edge_trials_of_the_targets_family_only() -> None:
    """SkyRL has both TTLs: both edge trials, the second through the edge proxy (its fault); TuFT keeps results
    until it stops: none."""
    ci = known_configs(get_profile("ci"), LOST, "skyrl==0.4.0", ())
    assert [c.shape.requests for c in ci] == [8, 8]
    assert ci[0].faults.faults == () and ci[0].direct_edge
    assert [f.kind for f in ci[1].faults.faults] == ["timeout"] and not ci[1].direct_edge
    assert known_configs(get_profile("ci"), LOST, "tuft==0.2.2", ()) == []


def test_every_property_with_known_trials_runs_them_in_its_test() -> None:
    """A property's known trials run through its test's ``@_property(PROPERTY)``, which applies them as explicit
    examples; one whose test is built otherwise would never run them."""
    import inspect
    import re
    from pathlib import Path

    from faultload.suite import properties

    source = (Path(properties.__file__).parent / "test_properties.py").read_text()
    built = set(re.findall(r"^@_property\((\w+)", source, flags=re.M))
    with_known = {
        name for name, value in inspect.getmembers(properties) if isinstance(value, properties.Property) and value.known
    }
    assert with_known and with_known <= built
    assert "known_configs(" in source.split("def _property")[0]  # _known, which _property applies


@pytest.mark.parametrize("time_scale", [0.05, 1.0])
def test_restart_reuse_polls_the_first_wave_after_the_second_is_accepted(time_scale: float) -> None:
    """The restart comes after the first wave's submits and before the second wave; the first wave's late polls
    come after the second wave's arrival plus a restart's real start-up, and the second wave's own polls before
    its results' completed TTL (a correct server still has them: no loss on a good build)."""
    config = known_trial_config("restart_reuse", "skyrl==0.4.0", time_scale, (), NIGHTLY)
    shape, (fault,) = config.shape, config.faults.faults
    assert (fault.link, fault.kind) == ("server", "restart") and config.fatal_faults == ("server:restart",)
    # after the first wave's last generation: every one of its 8 was accepted, however slow the submits
    assert fault.anchor == Anchor("completion", shape.requests // 2)
    restart = fault.start_s / time_scale
    second_wave = shape.arrival_span_s / shape.arrival_waves
    first_polls = shape.delay_polls.after_s
    assert shape.arrival == "waves" and shape.arrival_waves == 2 and shape.delay_polls.fraction == 1.0
    assert 0 < restart < second_wave < first_polls
    assert max(second_wave, restart + SKYRL_CONTRACT.restart_s / time_scale) < first_polls
    assert first_polls < COMPLETED_TTL_S  # the second wave's results, complete on arrival, are still kept
    assert config.direct_edge is False  # a trial with a fault goes through the proxies like the drawn ones


def test_restart_reuse_waits_for_a_slow_familys_start_up() -> None:
    """twinkle-kit's restart takes ~29 s (Ray, Serve, a warm-up sample): its second wave comes after its
    ``restart_s``, not SkyRL's 15 s, and its first polls as long after; SkyRL's trial is as it was."""
    skyrl = known_trial_config("restart_reuse", "skyrl==0.4.0", 0.05, (), NIGHTLY)
    twinkle = known_trial_config("restart_reuse", "twinkle==0.5.1", 0.05, (), NIGHTLY)
    assert skyrl is not None and twinkle is not None
    assert skyrl.shape == KNOWN_SHAPES["restart_reuse"](0.05)
    wave = twinkle.shape.scaled(twinkle.shape.arrival_span_s / 2)
    assert wave >= CONTRACTS["twinkle"].restart_s > SKYRL_CONTRACT.restart_s
    assert twinkle.shape.delay_polls.after_s - twinkle.shape.arrival_span_s / 2 == known.RESTART_POLL_AFTER_WAVE_S
    # a family whose completed TTL ends before its first polls cannot keep the rule in this trial
    slow = dataclasses.replace(SKYRL_CONTRACT, restart_s=40.0)
    assert known.restart_waves(KNOWN_SHAPES["restart_reuse"](0.05), slow) is None


def test_every_property_is_listed_and_has_its_test() -> None:
    """``PROPERTIES`` holds every Property of the module, and each drives exactly one test of
    ``test_properties.py`` (``@_property(PROPERTY)``): a new property cannot be forgotten by either."""
    import inspect
    import re
    from pathlib import Path

    from faultload.suite import properties

    defined = {name for name, value in inspect.getmembers(properties) if isinstance(value, properties.Property)}
    listed = {name for name, value in inspect.getmembers(properties) if any(value is p for p in properties.PROPERTIES)}
    assert defined == listed
    source = (Path(properties.__file__).parent / "test_properties.py").read_text()
    drawn = re.findall(r"^@_property\((\w+)", source, flags=re.M)
    assert sorted(drawn) == sorted(listed)


@pytest.mark.parametrize("prop", [p for p in PROPERTIES if p is not TRAINING], ids=lambda p: p.name)
def test_a_sampling_only_target_draws_trials_it_can_run_on_every_profile(prop: Property):
    """TuFT's launch serves no training and runs no null engine: on nightly (which trains) its properties draw
    no trainers, so each drawn and known trial validates (the training property itself is skipped)."""
    from hypothesis import HealthCheck, given, settings

    from faultload.strategies import trial_configs
    from faultload.suite.properties import property_limits

    profile = get_profile("nightly")
    limits = property_limits(profile, prop, "tuft==0.2.2")
    assert limits.max_trainers == 0 and property_limits(profile, prop, "skyrl==0.4.0").max_trainers > 0

    @settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(trial_configs("tuft==0.2.2", profile.time_scale, (), limits))
    def each(config):
        config.validate()
        assert config.engine == "sleeper" and not config.shape.training.enabled

    each()
    for config in known_configs(profile, prop, "tuft==0.2.2", ()):
        config.validate()


def test_size_flood_owes_16384_results_at_once_at_full_time_on_nightly_only() -> None:
    """Every submit comes before the first poll, so the server owes every result at once; at full time, so the
    wait before the polls is inside every TTL; run by the combined property (every invariant), nightly only."""
    from faultload.client.arrivals import arrival_offsets
    from faultload.suite.properties import COMBINED

    (config,) = known_configs(get_profile("nightly"), COMBINED, "skyrl==0.4.0", ())
    shape = config.shape
    last_submit = float(arrival_offsets(shape, 0, shape.requests).max())
    first_poll = shape.scaled(shape.delay_polls.after_s)
    assert shape.requests >= 16384 and shape.delay_polls.fraction == 1.0 and shape.time_scale == 1.0
    assert last_submit < first_poll
    assert shape.delay_polls.after_s < SKYRL_CONTRACT.completed_ttl_s  # polled inside the completed TTL
    assert config.router.mode == "immediate" and config.direct_edge
    assert known_configs(get_profile("ci"), COMBINED, "skyrl==0.4.0", ()) == []


def test_size_burst_holds_2048_at_the_router_at_full_time_on_ci() -> None:
    """ci's 0.05 would cut the client's connect timeout to 0.25 s and its poll cycle to 2.25 s, under what a
    server spends accepting thousands at once: the burst runs at full time, every request still generating at
    the router when the last arrives."""
    from faultload.client.arrivals import arrival_offsets
    from faultload.suite.properties import PROPERTIES

    bounded = next(p for p in PROPERTIES if "size_burst" in p.known)
    configs = [c for c in known_configs(get_profile("ci"), bounded, "skyrl==0.4.0", ()) if c.shape.requests == 2048]
    (config,) = configs
    shape = config.shape
    assert get_profile("ci").time_scale < 1.0 and shape.time_scale == 1.0
    last_submit = float(arrival_offsets(shape, 0, shape.requests).max())
    assert config.router.mode == "latency" and config.router.max_num_seqs >= shape.requests
    assert config.router.gen_seconds > last_submit


def test_a_known_trial_whose_late_poll_or_hold_outlasts_the_trial_wall_is_not_drawn() -> None:
    """twinkle-kit keeps results 86,400 s: its release hold (75 minutes at 0.05) and its retrieved-TTL edge's
    late polls (58 minutes) cannot fit a trial's wall, so they are not drawn, where SkyRL's (300/600 s TTLs) are;
    a trial cut at its wall would never make the polls it is for."""
    ci, nightly = get_profile("ci"), get_profile("nightly")
    for name, profile in (("release_hold", ci), ("retrieved_ttl_edge", nightly)):
        args = (profile.time_scale, (), profile.limits)
        skyrl = known_trial_config(name, "skyrl==0.4.0", *args)
        assert (
            skyrl is not None
            and skyrl.hold_s + skyrl.shape.scaled(known._latest_poll_s(skyrl.shape)) <= skyrl.max_wall_s
        )
        assert known_trial_config(name, "twinkle==0.5.1", *args) is None
