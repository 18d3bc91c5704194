"""The wait for a shared stack's server fds to settle between suite trials (``faultload.run.stack.wait_fds_settle``).

Driven by a fake clock and a scripted fd count (test doubles for the server's /proc reading); the real
server's drain is what the integration tiers' suite sessions wait on.
"""

from __future__ import annotations

from faultload.run.stack import wait_fds_settle


class Script:
    """fds(t): the count at fake time t; sleeping advances the clock."""

    def __init__(self, fds) -> None:
        self.now = 0.0
        self.fds = fds
        self.reads = 0

    def read(self):
        self.reads += 1
        return self.fds(self.now)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _wait(script: Script, target: int = 41, timeout_s: float = 60.0, still_s: float = 10.0):
    return wait_fds_settle(script.read, target, timeout_s, still_s, clock=lambda: script.now, sleep=script.sleep)


def test_fds_already_back_or_the_process_gone_is_settled_at_once():
    assert _wait(Script(lambda t: 30)) is None
    assert _wait(Script(lambda t: None)) is None


def test_fds_draining_to_the_target_settle():
    script = Script(lambda t: max(41, 200 - int(t * 10)))
    assert _wait(script) is None and 15.0 <= script.now <= 16.0


def test_fds_that_stop_going_down_end_the_wait_after_still_s_not_the_whole_timeout():
    script = Script(lambda t: 120 if t < 3 else 99)  # drops once at 3 s, then keeps 99
    reason = _wait(script)
    assert reason == "server fds not back at baseline: 99 vs 41, none released in 10s (after 13s of 60s)"
    assert 13.0 <= script.now <= 13.5


def test_fds_still_going_down_slowly_use_the_whole_timeout():
    script = Script(lambda t: 200 - int(t // 5))  # one fewer every 5 s: never still for 10 s
    assert _wait(script) == "server fds not back at baseline after 60s (188 vs 41)"
    assert 60.0 <= script.now <= 60.5 and script.reads <= 60 / 0.25 + 2
