"""Faults anchored to protocol events, the swarm over fault kinds and start points, and the delivery race.

The runner tests here use doubles of the router, the pool and the event counters
(the harness's own unit tests: they check the runner's waiting and bookkeeping,
not a server); a real trial with an anchored fault is run through ``faultload
run`` against the real server and Toxiproxy (README "Faults").
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

import faultload.strategies as S
from faultload.faults.schedule import EVENT_POLL_S, FaultRunner
from faultload.model.anchors import ANCHOR_EVENTS, Anchor
from faultload.model.family import SKYRL_CONTRACT, TUFT_CONTRACT
from faultload.model.faults import Fault, FaultSchedule, parse_fault
from faultload.record.faults import AppliedFault, FaultLog
from faultload.router.completions import CompletionLog, count_completions, repeated_completions
from faultload.run.trial import _fault_events
from faultload.strategies.faults import (
    chain,
    delivery_races,
    fault_kinds,
    is_delivery_race,
    race_durations,
    start_points,
    swarm,
)

SCALE = 0.05
NO_EXPLAIN = tuple(p for p in Phase if p is not Phase.explain)
FIND = settings(
    database=None, max_examples=5000, derandomize=True, phases=NO_EXPLAIN, suppress_health_check=list(HealthCheck)
)
FAST = settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))


# ---------------------------------------------------------------- the spec and its JSON


@pytest.mark.parametrize(
    "spec, expect",
    [
        (
            "edge:timeout:timeout=0@result:1+0.2+20",
            Fault("edge", "timeout", {"timeout": 0}, start_s=0.2, duration_s=20, anchor=Anchor("result", 1)),
        ),
        ("edge:down@completion:5", Fault("edge", "down", anchor=Anchor("completion", 5))),
        ("edge:down@completion:5+1.5", Fault("edge", "down", start_s=1.5, anchor=Anchor("completion", 5))),
        ("router:stall@poll_timeout:2+0+3", Fault("router", "stall", duration_s=3, anchor=Anchor("poll_timeout", 2))),
        ("server:restart@result:3", Fault("server", "restart", anchor=Anchor("result", 3))),
        (
            "edge:latency:latency=100,stream=both@result:2+1+4",
            Fault(
                "edge", "latency", {"latency": 100}, stream="both", start_s=1, duration_s=4, anchor=Anchor("result", 2)
            ),
        ),
    ],
)
def test_anchored_spec_round_trips(spec: str, expect: Fault) -> None:
    fault = parse_fault(spec)
    assert fault == expect
    assert parse_fault(fault.to_spec()) == fault
    assert Fault.from_dict(json.loads(json.dumps(fault.to_dict()))) == fault
    assert fault.to_spec().split("@")[1].startswith(fault.anchor.to_spec())


def test_a_clock_faults_dict_has_no_anchor_and_an_old_one_loads() -> None:
    clock = parse_fault("edge:down@2+1")
    assert "anchor" not in clock.to_dict() and Fault.from_dict(clock.to_dict()) == clock
    schedule = FaultSchedule.parse(["edge:down@2+1", "edge:timeout:timeout=0@result:1+0.1+30"])
    assert FaultSchedule.from_json(schedule.to_json()) == schedule


@pytest.mark.parametrize(
    "spec, field",
    [
        ("edge:down@result", "fault.anchor"),
        ("edge:down@result:", "fault.anchor"),
        ("edge:down@result:x", "fault.anchor"),
        ("edge:down@result:1.5", "fault.anchor"),
        ("edge:down@result:0", "fault.anchor.count"),
        ("edge:down@lunch:1", "fault.anchor.event"),
        ("edge:down@result:1+1+2+3", "fault.start_s/duration_s"),
        ("edge:down@result:1+soon", "fault.start_s/duration_s"),
        ("edge:down@result:1+-1", "fault.start_s"),
        ("edge:down@result:1+0+0", "fault.duration_s"),
        ("server:pause@result:1", "fault.duration_s"),
        ("edge:down@soon", "fault.start_s/duration_s"),
    ],
)
def test_bad_anchored_spec_is_one_line_naming_the_field(spec: str, field: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_fault(spec)
    assert "\n" not in str(info.value) and str(info.value).startswith(field + ":"), str(info.value)


def test_anchor_from_dict_rejects_unknown_fields() -> None:
    data = parse_fault("edge:down@result:1").to_dict()
    with pytest.raises(ValueError, match=r"^fault\.anchor:"):
        Fault.from_dict({**data, "anchor": {"event": "result", "count": 1, "when": 2}})
    with pytest.raises(ValueError, match=r"^fault\.anchor\.count:"):
        Fault.from_dict({**data, "anchor": {"event": "result", "count": True}})


def test_applied_record_round_trips_with_its_event_and_reason() -> None:
    fault = parse_fault("edge:down@result:1+0+1")
    records = (
        AppliedFault(0, fault, event_at_s=1.5, applied_at_s=1.5, removed_at_s=2.5),
        AppliedFault(1, fault, not_applied="result:1 never came"),
    )
    log = FaultLog(records, 100.0)
    assert FaultLog.from_dict(json.loads(json.dumps(log.to_dict()))) == log
    old = {k: v for k, v in records[0].to_dict().items() if k not in ("event_at_s", "not_applied")}
    assert AppliedFault.from_dict(old) == AppliedFault(0, fault, applied_at_s=1.5, removed_at_s=2.5)
    assert not records[1].applied and log.active_at(2.0) == [fault]


# ---------------------------------------------------------------- the runner, with doubles


class RouterDouble:
    """A test double of the router's control calls: records each call's time (the runner's clock)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def _log(self, name: str) -> None:
        self.calls.append((name, time.monotonic()))

    def timed_fault(self, kind: str, seconds: float, *attributes: object) -> None:
        self._log(kind)

    def reset_faults(self) -> None:
        self._log("reset_faults")


class Counter:
    """A test double of an event counter (the live counters, the router's completion log): a count the test
    raises, and the time it reached each value."""

    def __init__(self) -> None:
        self.value = 0
        self.reached: dict[int, float] = {}

    def __call__(self) -> int:
        return self.value

    async def tick(self, times: int, every_s: float) -> None:
        for _ in range(times):
            await asyncio.sleep(every_s)
            self.value += 1
            self.reached[self.value] = time.monotonic()


def _run(
    schedule: FaultSchedule,
    counters: dict[str, Counter],
    ticks: int,
    every_s: float,
    wait_s: float,
    events_until_s: float | None = None,
) -> tuple[FaultRunner, RouterDouble, list[str]]:
    router = RouterDouble()

    async def run() -> tuple[FaultRunner, list[str]]:
        runner = FaultRunner(schedule, None, {}, router, events=counters, events_until_s=events_until_s)
        runner.start()
        await asyncio.gather(*(c.tick(ticks, every_s) for c in counters.values()))
        await runner.wait(wait_s)
        return runner, await runner.heal()

    runner, errors = asyncio.run(run())
    return runner, router, errors


def test_an_anchored_fault_applies_after_its_event_and_ends_its_duration_later() -> None:
    count, offset, duration, every = 3, 0.05, 0.1, 0.05
    counter = Counter()
    schedule = FaultSchedule.parse([f"router:stall@completion:{count}+{offset}+{duration}"])
    runner, router, errors = _run(schedule, {"completion": counter}, count + 2, every, wait_s=5.0)
    (record,) = runner.records()
    assert errors == [] and record.error is None and record.not_applied is None
    event_at = counter.reached[count] - runner.trial_start
    before = counter.reached[count - 1] - runner.trial_start
    assert before < record.event_at_s
    assert event_at <= record.event_at_s <= event_at + EVENT_POLL_S + every
    assert record.event_at_s + offset <= record.applied_at_s < record.event_at_s + offset + every
    assert record.event_at_s + offset + duration <= record.removed_at_s and record.removed_by == "schedule"
    assert router.calls[0][0] == "stall" and router.calls[0][1] - runner.trial_start == pytest.approx(
        record.applied_at_s, abs=every
    )


def test_a_fault_whose_event_never_comes_is_recorded_not_applied() -> None:
    counter = Counter()
    until = 0.2
    schedule = FaultSchedule.parse(["router:stall@result:5+0+1"])
    runner, router, _ = _run(schedule, {"result": counter}, 2, 0.01, wait_s=5.0, events_until_s=until)
    (record,) = runner.records()
    assert not record.applied and record.applied_at_s is None and router.calls == []
    assert record.not_applied is not None and "result:5 never came" in record.not_applied
    assert f"({counter.value} seen)" in record.not_applied


def test_a_load_that_ends_before_the_event_leaves_the_fault_not_applied_with_a_reason() -> None:
    counter = Counter()
    schedule = FaultSchedule.parse(["router:stall@result:5+0+1", "router:stall@result:1+30+1", "router:stall@60+1"])
    runner, router, _ = _run(schedule, {"result": counter}, 2, 0.01, wait_s=0.1)
    waiting, offset, clock = runner.records()
    assert router.calls == [] and not any(r.applied for r in runner.records())
    assert "before result:5 (2 seen)" in waiting.not_applied
    assert offset.event_at_s is not None and "before its offset after result:1" in offset.not_applied
    assert "before its start" in clock.not_applied


def test_an_anchor_without_its_counter_fails_before_the_trial() -> None:
    schedule = FaultSchedule.parse(["router:stall@poll_timeout:1+0+1"])
    with pytest.raises(ValueError, match=r"^schedule\.faults\[0\]\.anchor: no counter of 'poll_timeout'"):
        FaultRunner(schedule, None, {}, RouterDouble(), events={"result": Counter()})


class PoolDouble:
    """A test double of the load workers' pool: its live counters as the trial reads them."""

    def __init__(self) -> None:
        self.counts = {"completed": 0, "poll_timeouts": 0}

    def live(self) -> dict[str, int]:
        return dict(self.counts)


class CompletionsDouble:
    """A test double of the router handle: its completion count, from a real completion log."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def completion_count(self) -> int:
        return count_completions(self.directory)


def test_the_trial_counts_every_anchor_event_from_the_loads_start(tmp_path: Path) -> None:
    log = CompletionLog(str(tmp_path))
    log.record(1)  # an earlier trial's, on a shared stack
    pool = PoolDouble()
    events = _fault_events(CompletionsDouble(tmp_path), pool)
    assert set(events) == set(ANCHOR_EVENTS)
    assert {name: count() for name, count in events.items()} == dict.fromkeys(ANCHOR_EVENTS, 0)
    log.record(2)
    log.record(3)
    pool.counts.update(completed=4, poll_timeouts=1)
    assert (events["completion"](), events["result"](), events["poll_timeout"]()) == (2, 4, 1)


# ---------------------------------------------------------------- strategies: anchored starts, swarm, race


def test_anchored_starts_are_drawn_and_shrink_to_the_first_event() -> None:
    for event in ANCHOR_EVENTS:
        fault = find(S.faults(SCALE), lambda f, e=event: f.anchor is not None and f.anchor.event == e, settings=FIND)
        assert fault == Fault("edge", "reset_peer", {}, duration_s=5 * SCALE, anchor=Anchor(event, 1))
    clock_only = S.CI.replace(fault_anchors=())
    assert start_points(clock_only) == ("clock",)

    @FAST
    @given(S.fault_schedules(SCALE, clock_only))
    def check(schedule: FaultSchedule) -> None:
        assert all(f.anchor is None for f in schedule.faults)

    check()


def test_a_follower_starts_from_its_leaders_origin() -> None:
    leader = parse_fault("edge:latency:latency=50@result:2+1+3")
    follower = parse_fault("edge:down@7+1")
    assert chain([(leader, False), (follower, True)])[1] == parse_fault("edge:down@result:2+4+1")


def test_the_swarm_is_a_non_empty_subset_in_order_and_shrinks_to_everything() -> None:
    items = fault_kinds(S.NIGHTLY)
    assert find(swarm(items), lambda s: True, settings=FIND) == items
    assert find(swarm(items), lambda s: len(s) < len(items), settings=FIND) == items[:-1]  # the last left out
    assert len(find(swarm(items[:3]), lambda s: len(s) == 1, settings=FIND)) == 1

    @FAST
    @given(swarm(items))
    def check(subset: tuple[str, ...]) -> None:
        assert subset and [i for i in items if i in subset] == list(subset)

    check()


def test_a_schedule_of_one_later_kind_shrinks_as_without_a_swarm() -> None:
    """The swarm's flags shrink away: two faults of the last kind enabled, at clock 0, the shortest window."""
    kind = fault_kinds(S.NIGHTLY)[-1]
    found = find(
        S.fault_schedules(SCALE, S.NIGHTLY),
        lambda s: len(s.faults) >= 2 and all(f"{f.link}:{f.kind}" == kind for f in s.faults),
        settings=FIND,
    )
    shortest = min(f.duration_s for f in found.faults)
    assert len(found.faults) == 2 and found.faults[0] == found.faults[1]
    assert all(f.anchor is None and f.start_s == 0.0 and f.duration_s == shortest for f in found.faults)
    assert find(S.faults(SCALE, S.NIGHTLY, kinds=(kind,)), lambda f: True, settings=FIND).duration_s == shortest


def test_the_delivery_race_is_drawn_on_nightly_only_and_is_what_its_predicate_names() -> None:
    holds = race_durations(S.NIGHTLY, SKYRL_CONTRACT)
    assert race_durations(S.CI, SKYRL_CONTRACT) == () and holds == (379.0, 428.0, 476.0)
    assert all(SKYRL_CONTRACT.retrieved_ttl_s < d < SKYRL_CONTRACT.completed_ttl_s for d in holds)

    def raced(schedule: FaultSchedule) -> bool:
        return any(
            is_delivery_race(f, SCALE, SKYRL_CONTRACT) and f.anchor == Anchor("result", 1) for f in schedule.faults
        )

    found = find(S.fault_schedules(SCALE, S.NIGHTLY, SKYRL_CONTRACT), raced, settings=FIND)
    assert found == FaultSchedule(
        (parse_fault(f"edge:timeout:timeout=0,stream=both@result:1+0+{min(holds) * SCALE!r}"),)
    )

    @FAST
    @given(delivery_races(SCALE, S.NIGHTLY, SKYRL_CONTRACT), S.fault_schedules(SCALE, S.CI, SKYRL_CONTRACT))
    def check(race: Fault, ci: FaultSchedule) -> None:
        assert is_delivery_race(race, SCALE, SKYRL_CONTRACT) and race.anchor.event == "result"
        assert not any(is_delivery_race(f, SCALE, SKYRL_CONTRACT) for f in ci.faults)

    check()


def test_a_family_that_keeps_results_has_no_delivery_race() -> None:
    """TuFT keeps every result for as long as it runs: no hold can outlive a TTL it does not have."""
    assert race_durations(S.NIGHTLY, TUFT_CONTRACT) == () and race_durations(S.NIGHTLY, None) == ()


def test_the_completion_log_names_the_prompts_completed_more_than_once(tmp_path: Path) -> None:
    log = CompletionLog(str(tmp_path))
    for nonce in (5, 6, 5, 7, 5, 6):
        log.record(nonce)
    assert repeated_completions(tmp_path) == {5: 3, 6: 2}
    assert repeated_completions(tmp_path, since_epoch=time.time() + 60) == {}
