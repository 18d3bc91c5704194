"""The watchdog's rules on synthetic monitor samples, and verdict ordering."""

from __future__ import annotations

import math

import pytest

from faultload.model.shape import LoadShape
from faultload.model.trial import TrialConfig
from faultload.model.watchdog import FaultWindow, WatchdogLimits
from faultload.run.watchdog import Watchdog, load_watchdog_limits
from faultload.run.watching import reconnect_s, watchdog_limits

LIMITS = WatchdogLimits(stall_window_s=10, no_progress_window_s=20, accept_window_s=5, confirm_s=3)


def feed(
    dog: Watchdog,
    t: float,
    fds: int = 100,
    queue: int = 0,
    backlog: int = 4096,
    overflows: int = 0,
    in_flight: int = 10,
    progress: tuple = (0,),
    alive: bool = True,
) -> None:
    dog.observe_sample(t, fds, queue, backlog, overflows, in_flight, progress, alive)


def test_healthy_samples_raise_nothing():
    dog = Watchdog(LIMITS, (20000, 20000))
    for i in range(100):
        feed(dog, i * 0.5, progress=(i,))
        dog.observe_probe(i * 0.5, 0.01, True)
    assert dog.verdict() is None
    assert not dog.should_stop(50.0)


def test_fd_exhaustion_fires_at_onset_with_limit_in_evidence():
    dog = Watchdog(LIMITS, (20000, 20000))
    feed(dog, 1.0, fds=5000, progress=(1,))
    feed(dog, 2.0, fds=19000, progress=(2,))
    feed(dog, 3.0, fds=19950, progress=(3,))
    verdict = dog.verdict()
    assert verdict is not None and verdict.kind == "fd_exhaustion"
    assert verdict.at_s == 3.0
    assert any("19950" in e and "20000" in e for e in verdict.evidence)
    assert not dog.should_stop(4.0) and dog.should_stop(6.0)  # confirm window of 3 s


def test_no_progress_needs_the_whole_window_and_outstanding_requests():
    dog = Watchdog(LIMITS, None)
    for i in range(30):  # 15 s idle: under the 20 s window
        feed(dog, i * 0.5, progress=(7,), in_flight=5)
    assert dog.verdict() is None
    dog2 = Watchdog(LIMITS, None)
    for i in range(60):  # 30 s idle with nothing outstanding: not a collapse
        feed(dog2, i * 0.5, progress=(7,), in_flight=0)
    assert dog2.verdict() is None
    dog3 = Watchdog(LIMITS, None)
    for i in range(60):
        feed(dog3, i * 0.5, progress=(7,), in_flight=5)
    verdict = dog3.verdict()
    assert verdict is not None and verdict.kind == "no_progress" and verdict.at_s == 0.0


EDGE_DOWN = FaultWindow(5.0, 45.0, "edge", "down")  # a 40 s partition: twice the 20 s window


def idle_trial(dog: Watchdog, until_s: float, from_s: float = 0.0, healthz_ok: bool = True, **sample) -> None:
    """Nothing moves (10 requests outstanding), a sample and a /healthz probe each 0.5 s (test double for the monitor)."""
    for i in range(int(from_s * 2), int(until_s * 2) + 1):
        t = i * 0.5
        dog.observe_probe(t, 0.002 if healthz_ok else 10.0, healthz_ok)
        feed(dog, t, progress=(3,), **sample)


def test_no_progress_during_an_edge_outage_with_a_healthy_server_is_the_faults():
    dog = Watchdog(LIMITS, None, faults=(EDGE_DOWN,))
    idle_trial(dog, 44.0)
    assert dog.verdict() is None and not dog.should_stop(44.0)
    dog = Watchdog(LIMITS, None, faults=(FaultWindow(5.0, math.inf, "edge", "timeout"),))  # not healed yet
    idle_trial(dog, 120.0)
    assert dog.verdict() is None


def test_the_same_idleness_without_the_fault_is_no_progress():
    dog = Watchdog(LIMITS, None)
    idle_trial(dog, 44.0)
    verdict = dog.verdict()
    assert verdict is not None and verdict.kind == "no_progress" and verdict.at_s == 0.0


def test_idleness_past_the_heal_by_the_window_is_no_progress_from_the_heal():
    dog = Watchdog(LIMITS, None, faults=(EDGE_DOWN,))
    idle_trial(dog, 64.5)  # 19.5 s after the heal: under the window
    assert dog.verdict() is None
    idle_trial(dog, 66.0, from_s=65.0)
    verdict = dog.verdict()
    assert verdict is not None and verdict.kind == "no_progress" and verdict.at_s == 45.0
    assert "edge:down healed" in verdict.evidence[0]


def test_after_a_heal_the_window_waits_out_the_clients_reconnect_allowance():
    dog = Watchdog(LIMITS, None, faults=(EDGE_DOWN,), reconnect_s=30.0)
    idle_trial(dog, 94.5)  # 49.5 s after the heal: under window 20 + reconnect 30
    assert dog.verdict() is None
    idle_trial(dog, 96.0, from_s=95.0)
    assert dog.verdict().kind == "no_progress" and dog.verdict().at_s == 45.0


def test_reconnect_allowance_is_the_clients_longest_timeout_then_its_backoff_cap():
    def allowance(client: str, scale: float) -> float:
        return reconnect_s(TrialConfig("skyrl==0.4.0", shape=LoadShape(client=client, time_scale=scale)))

    assert allowance("raw", 1.0) == 60.0 + 30.0
    assert allowance("raw", 0.05) == 60.0 * 0.05 + 30.0 * 0.05
    assert allowance("sdk", 0.05) == 60.0 * 0.05 + 30.0  # the SDK's backoff sleeps are not scaled


def test_faults_fed_as_they_are_recorded_excuse_the_same():
    dog = Watchdog(LIMITS, None)
    for i in range(0, 131):  # the runner records the heal at 45 s; the watchdog hears of it half a second late
        t = i * 0.5
        dog.observe_faults(() if t < 5.0 else (FaultWindow(5.0, math.inf if t <= 45.5 else 45.0, "edge", "down"),))
        dog.observe_probe(t, 0.002, True)
        feed(dog, t, progress=(3,))
        assert dog.verdict() is None or t >= 65.0
    assert dog.verdict().kind == "no_progress" and dog.verdict().at_s == 45.0


def test_a_failing_healthz_during_the_outage_is_still_the_servers():
    dog = Watchdog(LIMITS, None, faults=(EDGE_DOWN,))
    idle_trial(dog, 44.0, healthz_ok=False)
    verdict = dog.verdict()
    assert verdict is not None and verdict.kind == "event_loop_stall" and verdict.at_s == 0.0
    assert "no_progress" in dog.signals  # no excuse while the server itself is unwell


def test_router_and_backend_faults_excuse_too_the_server_being_healthy():
    for link, kind in (("router", "stall"), ("backend", "down")):
        dog = Watchdog(LIMITS, None, faults=(FaultWindow(0.0, 40.0, link, kind),))
        idle_trial(dog, 40.0)
        assert dog.verdict() is None, link


def test_an_edge_outage_excuses_none_of_the_servers_own_signals():
    dog = Watchdog(LIMITS, (20000, 20000), faults=(EDGE_DOWN,))
    for i in range(10, 40):
        feed(
            dog,
            float(i),
            progress=(3,),
            fds=19990 if i >= 30 else 100,
            queue=4096,
            backlog=4096,
            overflows=(i - 10) * 10,
        )
    assert {"accept_queue_overflow", "fd_exhaustion"} <= set(dog.signals) and "no_progress" not in dog.signals
    dog = Watchdog(LIMITS, None, faults=(EDGE_DOWN,))  # overflows elsewhere, the server's queue not pinned
    for i in range(10, 40):
        feed(dog, float(i), progress=(3,), queue=3, backlog=4096, overflows=(i - 10) * 10)
    assert dog.verdict() is None
    dog = Watchdog(LIMITS, None, faults=(EDGE_DOWN,))
    feed(dog, 10.0, alive=False)
    assert dog.verdict().kind == "server_exit"


def test_event_loop_stall_from_probes():
    dog = Watchdog(LIMITS, None)
    for i in range(10):
        dog.observe_probe(float(i), 0.01, True)
    for i in range(10, 25):
        dog.observe_probe(float(i), 10.0, False)
    verdict = dog.verdict()
    assert verdict is not None and verdict.kind == "event_loop_stall" and verdict.at_s == 10.0


def test_accept_queue_overflow_needs_pinned_queue_and_rising_overflows():
    dog = Watchdog(LIMITS, None)
    for i in range(20):  # pinned but no overflow growth
        feed(dog, float(i), queue=4096, backlog=4096, overflows=0, progress=(i,))
    assert dog.verdict() is None
    dog2 = Watchdog(LIMITS, None)
    for i in range(20):
        feed(dog2, float(i), queue=4096, backlog=4096, overflows=i * 10, progress=(i,))
    verdict = dog2.verdict()
    assert verdict is not None and verdict.kind == "accept_queue_overflow"


def test_server_exit_stops_at_once():
    dog = Watchdog(LIMITS, None)
    feed(dog, 5.0, alive=False)
    assert dog.should_stop(5.0)
    assert dog.verdict().kind == "server_exit"


def test_verdict_names_first_cause_and_orders_consequences():
    dog = Watchdog(LIMITS, (20000, 20000))
    feed(dog, 0.0, progress=(0,))
    feed(dog, 1.0, fds=19990, progress=(1,))  # fd exhaustion at t=1
    for i in range(2, 40):  # then nothing moves and /healthz fails
        feed(dog, float(i), fds=19990, progress=(1,))
        dog.observe_probe(float(i), 10.0, False)
    dog.observe_log("fd_exhaustion", 30.0, "log line")  # already raised: keeps the first onset
    verdict = dog.verdict(["15 'Too many open files' lines in the server log"])
    assert verdict.kind == "fd_exhaustion" and verdict.at_s == 1.0
    kinds = [c.kind for c in verdict.consequences]
    assert kinds == sorted(kinds, key=lambda k: dog.signals[k].at_s)
    assert set(kinds) == {"event_loop_stall", "no_progress"}
    assert "Too many open files" in verdict.evidence[-1]
    assert verdict.line().startswith("collapse: fd_exhaustion at t=1s")


def test_limits_validate_and_load(tmp_path):
    with pytest.raises(ValueError, match="fd_fraction"):
        WatchdogLimits(fd_fraction=1.5).validate()
    py = tmp_path / "pyproject.toml"
    py.write_text("[tool.faultload.watchdog]\nstall_window_s = 12\n")
    assert load_watchdog_limits(py).stall_window_s == 12
    py.write_text("[tool.faultload.watchdog]\nbogus = 1\n")
    with pytest.raises(ValueError, match="bogus"):
        load_watchdog_limits(py)


def test_an_excused_stretch_is_not_a_collapse_and_the_windows_start_again_after_it():
    dog = Watchdog(LIMITS, None, faults=(FaultWindow(0.0, 39.5, "server", "pause"),))
    for i in range(80):  # 40 s silent and stalled while a process fault is in force
        t = i * 0.5
        feed(dog, t, progress=(7,), in_flight=5)
        dog.observe_probe(t, 10.0, False)
    assert dog.verdict() is None
    for i in range(80, 130):  # then 25 s more of it unexcused: the windows count from the last excuse
        t = i * 0.5
        feed(dog, t, progress=(7,), in_flight=5)
        dog.observe_probe(t, 10.0, False)
    assert dog.signals["event_loop_stall"].at_s == 40.0
    assert dog.signals["no_progress"].at_s == 39.5  # the last excused sample


def test_no_progress_waits_out_the_idleness_the_trial_asked_for() -> None:
    """A first poll delayed 720 SDK s (36 s at 0.05) after a result the immediate router wrote at once: 36 s with
    nothing completed or received is the client's plan, not a collapse (the window covers it, plus 10 s)."""
    from faultload.model.router import RouterConfig
    from faultload.model.shape import PollBehaviour

    shape = LoadShape(requests=1, time_scale=0.05, delay_polls=PollBehaviour(1.0, 720.0))
    config = TrialConfig("skyrl==0.4.0", shape=shape, router=RouterConfig(mode="immediate"))
    assert watchdog_limits(config).no_progress_window_s == pytest.approx(46.0)
    shape = LoadShape(requests=1, time_scale=0.05, abandon_polls=PollBehaviour(1.0, 240.0))
    assert (
        watchdog_limits(
            TrialConfig("skyrl==0.4.0", shape=shape, router=RouterConfig(mode="immediate"))
        ).no_progress_window_s
        == WatchdogLimits().no_progress_window_s
    )  # 12 s + 10 < 30
