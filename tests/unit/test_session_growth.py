"""The session's growth (``session_growth``) through the suite's runner and summary, on a test-double executor.

TEST DOUBLES: the executor is :class:`tests.quality.fakes.KnownFailure` (no server, every trial passes) given
hand-made trial starts; what is checked is where the session's verdict goes: judged when the last property
ends, failing that property with a line of its own, and named in the summary JSON as the matrix reads it.
"""

from __future__ import annotations

import dataclasses

from faultload.checker.budgets import MIB
from faultload.checker.growth import TrialStart
from faultload.matrix.rows import MatrixRow
from faultload.matrix.run import judge_row
from faultload.suite.properties import Property
from tests.quality.fakes import KnownFailure, make_runner, trial

LOST = Property("lost", ("no_lost_results",), ())  # steers by nothing: check() needs no Hypothesis context
NODE = "tests/unit/test_session_growth.py::test_p"


@dataclasses.dataclass
class _Growing(KnownFailure):
    """TEST DOUBLE executor: every trial passes; its shared server grows ``mib_per_k`` per 1,000 requests."""

    mib_per_k: float = 0.0
    trial_starts: list = dataclasses.field(default_factory=list)

    def run(self, config):
        served = sum(1000 for _ in self.trial_starts)
        self.trial_starts.append(TrialStart(1, served, int(500 * MIB + served / 1000 * self.mib_per_k * MIB), 40))
        return super().run(config)


def _session(tmp_path, mib_per_k: float):
    runner = make_runner(tmp_path, _Growing(min_requests=10**6, mib_per_k=mib_per_k))
    runner.begin(NODE, remaining=0)
    for requests in range(1, 7):
        runner.check(LOST, trial(requests))
    runner.end()
    return runner


def test_a_growing_server_fails_the_last_property_and_the_matrix_sees_it(tmp_path) -> None:
    runner = _session(tmp_path, mib_per_k=20.0)
    assert runner.session_growth.ok is False
    assert runner.not_judged(NODE).startswith("session: session_growth violated: the server grows")
    summary = runner.summary_dict({NODE: "failed"})
    prop = summary["properties"][0]
    assert prop["violated"] == ["session_growth"] and prop["error"] is None
    assert summary["session_growth"]["ok"] is False and len(summary["session_growth"]["trial_starts"]) == 6
    assert any(line.startswith("  session: session_growth FAILED") for line in runner.summary_lines())
    row = MatrixRow("r", "skyrl==0.4.0", ("keep-delivered",), "caught", "", caught_by=("session_growth",))
    assert judge_row(row, summary, 1, 1.0, profile="ci").result == "caught"


def test_a_flat_server_passes(tmp_path) -> None:
    runner = _session(tmp_path, mib_per_k=0.0)
    assert runner.session_growth.ok is True and runner.session_failure(NODE) is None
    summary = runner.summary_dict({NODE: "passed"})
    assert summary["properties"][0]["violated"] == [] and summary["session_growth"]["ok"] is True


def test_only_the_last_property_judges_the_session(tmp_path) -> None:
    runner = make_runner(tmp_path, _Growing(min_requests=10**6, mib_per_k=20.0))
    runner.begin(NODE, remaining=1)
    for requests in range(1, 7):
        runner.check(LOST, trial(requests))
    runner.end()
    assert runner.session_growth is None and runner.summary_dict()["session_growth"] is None
