"""The watchdog's rules on synthetic monitor samples, and verdict ordering."""

from __future__ import annotations

import pytest

from faultload.model.watchdog import WatchdogLimits
from faultload.run.watchdog import Watchdog, load_watchdog_limits

LIMITS = WatchdogLimits(stall_window_s=10, no_progress_window_s=20, accept_window_s=5, confirm_s=3)


def feed(dog: Watchdog, t: float, fds: int = 100, queue: int = 0, backlog: int = 4096, overflows: int = 0,
         in_flight: int = 10, progress: tuple = (0,), alive: bool = True) -> None:
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
    dog = Watchdog(LIMITS, None)
    for i in range(80):  # 40 s silent and stalled while a process fault is in force, excused each turn
        t = i * 0.5
        feed(dog, t, progress=(7,), in_flight=5)
        dog.observe_probe(t, 10.0, False)
        dog.excuse(t)
    assert dog.verdict() is None
    for i in range(80, 130):  # then 25 s more of it unexcused: the windows count from the last excuse
        t = i * 0.5
        feed(dog, t, progress=(7,), in_flight=5)
        dog.observe_probe(t, 10.0, False)
    assert dog.signals["event_loop_stall"].at_s == 40.0
    assert dog.signals["no_progress"].at_s == 39.5  # the last excused sample
