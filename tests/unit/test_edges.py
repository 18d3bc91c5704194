"""The contract-edge trials (``faultload.strategies.edges``): plain values, derived from each family's contract.

Each trial must put the client inside its TTL measured from the contract's anchor, and past it measured from any
earlier event: the arithmetic is checked here, on the values alone; the matrix's TTL rows run them on a server.
"""

from __future__ import annotations

import dataclasses

import pytest

from faultload.model.family import HATCHERY_CONTRACT, SKYRL_CONTRACT, TUFT_CONTRACT
from faultload.strategies.edges import EDGE, EDGE_TRIALS, completed_ttl_edge, created_ttl_edge, retrieved_ttl_edge

SWEEP_S = 30.0  # SkyRL's sweep interval: an entry lives up to this long past its TTL


def test_completed_ttl_edge_comes_back_inside_the_ttl_from_completion_and_past_it_from_creation() -> None:
    edge = completed_ttl_edge(SKYRL_CONTRACT, 1.0)
    ttl, gen = SKYRL_CONTRACT.completed_ttl_s, edge.router.gen_seconds
    back = edge.shape.delay_polls.after_s
    assert edge.shape.delay_polls.fraction == 1.0 and edge.router.max_num_seqs >= edge.shape.requests
    assert back - gen == pytest.approx(EDGE * ttl)  # from completion: inside
    assert back > ttl + SWEEP_S  # from creation: past the TTL and the sweep after it


def test_retrieved_ttl_edge_delivers_late_and_only_the_delivery_clock_keeps_the_result() -> None:
    edge = retrieved_ttl_edge(SKYRL_CONTRACT, 1.0)
    retrieved, completed = SKYRL_CONTRACT.retrieved_ttl_s, SKYRL_CONTRACT.completed_ttl_s
    delivery = edge.shape.delay_polls.after_s
    back = delivery + edge.shape.abandon_polls.after_s
    assert edge.router.mode == "immediate" and edge.shape.abandon_polls.fraction == 1.0
    assert delivery < completed  # the result is there at the first poll
    assert back - delivery == pytest.approx(EDGE * retrieved)  # from the delivery: inside
    assert back > completed + SWEEP_S  # the completed clock no longer keeps it
    assert retrieved < delivery  # from the completion (at 0): past the retrieved TTL before the first poll
    (blackhole,) = edge.faults.faults
    assert (blackhole.link, blackhole.kind, blackhole.stream) == ("edge", "timeout", "downstream")
    assert blackhole.start_s < delivery < blackhole.start_s + blackhole.duration_s


def test_created_ttl_edge_comes_back_inside_the_ttl_from_creation() -> None:
    """hatchery's only clock runs from creation: results at once, every first poll EDGE of it after submit; SkyRL,
    whose clocks run from completion and delivery, has no such trial."""
    edge = created_ttl_edge(HATCHERY_CONTRACT, 1.0)
    assert edge.router.mode == "immediate" and edge.shape.delay_polls.fraction == 1.0
    assert edge.shape.delay_polls.after_s == pytest.approx(EDGE * HATCHERY_CONTRACT.created_ttl_s)
    assert created_ttl_edge(SKYRL_CONTRACT, 1.0) is None


@pytest.mark.parametrize("name", sorted(EDGE_TRIALS))
def test_an_edge_trial_is_scaled_with_the_trial_and_absent_without_its_rule(name) -> None:
    contract = next(c for c in (SKYRL_CONTRACT, HATCHERY_CONTRACT) if EDGE_TRIALS[name](c, 1.0) is not None)
    full, scaled = EDGE_TRIALS[name](contract, 1.0), EDGE_TRIALS[name](contract, 0.05)
    assert scaled.shape == dataclasses.replace(full.shape, time_scale=0.05)  # SDK seconds in the shape
    if full.router.mode == "latency":
        assert scaled.router.gen_seconds == pytest.approx(full.router.gen_seconds * 0.05)
    assert [f.start_s for f in scaled.faults.faults] == pytest.approx([f.start_s * 0.05 for f in full.faults.faults])
    scaled.shape.validate()
    scaled.router.validate()
    assert EDGE_TRIALS[name](TUFT_CONTRACT, 0.05) is None


def test_nightly_draws_poll_just_inside_and_just_outside_each_ttl_of_the_family() -> None:
    """The draws meet each TTL on both sides; a family without TTLs gets no such landmark, ci none at all."""
    from hypothesis import HealthCheck, find, settings

    from faultload.strategies.edges import AROUND_EDGE_SHARES, around_edges
    from faultload.strategies.limits import CI, NIGHTLY
    from faultload.strategies.trials import trial_configs

    ttls = (SKYRL_CONTRACT.retrieved_ttl_s, SKYRL_CONTRACT.completed_ttl_s)
    assert around_edges(SKYRL_CONTRACT) == tuple(sorted(s * t for t in ttls for s in AROUND_EDGE_SHARES))
    assert min(AROUND_EDGE_SHARES) < 1 < max(AROUND_EDGE_SHARES)
    assert around_edges(TUFT_CONTRACT) == ()
    assert NIGHTLY.draws_around_edges and not CI.draws_around_edges
    assert max(around_edges(SKYRL_CONTRACT)) <= NIGHTLY.max_poll_after_s
    quick = settings(database=None, max_examples=3000, suppress_health_check=list(HealthCheck))
    outside = max(around_edges(SKYRL_CONTRACT))
    found = find(
        trial_configs("skyrl==0.4.0", 0.05, (), NIGHTLY),
        lambda c: c.shape.delay_polls.after_s == outside,
        settings=quick,
    )
    assert found.shape.delay_polls.after_s == outside
