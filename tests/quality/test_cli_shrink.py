"""``faultload shrink``'s engine (faultload.suite.shrink) against a failure known in advance.

The trials are TEST DOUBLES: ``run`` returns an empty ``TrialResult`` (no stack) and the judge is
:class:`tests.quality.fakes.KnownFailure`'s rule (``no_lost_results`` violated iff at least 40 requests and a
``backend:down`` fault), so the test knows what the reduction must come to: the suite's greedy steps over
fresh "trials", bounded in count and time, and a repro that ``faultload replay`` loads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultload.checker.budgets import Budgets
from faultload.cli import main as cli
from faultload.model.codec import config_to_dict
from faultload.model.faults import Fault
from faultload.record.history import History
from faultload.record.trial import TrialResult
from faultload.store.repro import load_repro, write_repro
from faultload.suite.reducer import with_requests
from faultload.suite.shrink import Failure, load_failure, shrink, shrunk_repro
from tests.quality.fakes import FakeClock, KnownFailure, big_failure

DOWN = Fault("backend", "down", duration_s=1.0)


def _failure(known: KnownFailure):
    config = big_failure(DOWN)
    verdicts = known.verdicts(config)
    return Failure(config, tuple(v.name for v in verdicts if v.ok is False), verdicts, Budgets())


def _shrink(known: KnownFailure, clock: FakeClock | None = None, error: str | None = None, **bounds):
    ran: list = []

    def run(config) -> TrialResult:
        ran.append(config)
        if clock is not None:
            clock.advance(30.0)
        return TrialResult(config, History.empty(0), error=error)

    bounds = {"max_trials": 50, "time_limit_s": 3600.0, **bounds}
    shrunk = shrink(
        _failure(known),
        Budgets(),
        run,
        judge_trial=lambda result, budgets: known.verdicts(result.config),
        clock=clock or FakeClock(),
        **bounds,
    )
    return shrunk, ran


def test_a_failed_trial_shrinks_to_what_the_failure_needs() -> None:
    known = KnownFailure()
    shrunk, ran = _shrink(known)
    config = shrunk.config
    assert known.fails(config) and config.shape.requests < 256 and [f.kind for f in config.faults.faults] == ["down"]
    assert config.shape.abandon_polls.fraction == 0 and config.shape.arrival == "burst"
    assert [v.name for v in shrunk.verdicts if v.ok is False] == ["no_lost_results"]
    assert shrunk.trials == len(ran) == len(shrunk.steps) and shrunk.stopped is None
    assert any(not step["still_fails"] for step in shrunk.steps)  # "without backend:down" was tried and passed


def test_shrinking_stops_at_its_trial_and_time_bounds() -> None:
    shrunk, ran = _shrink(KnownFailure(), max_trials=3)
    assert len(ran) == 3 and shrunk.stopped == "--max-trials 3 reached"
    clock = FakeClock()
    shrunk, ran = _shrink(KnownFailure(), clock=clock, time_limit_s=100.0)  # 30 s a trial: 4 start, at 0-90 s
    assert len(ran) == 4 and shrunk.stopped == "--time-limit 100 s reached"


def test_a_harness_error_stops_shrinking_and_keeps_the_source_trial() -> None:
    known = KnownFailure()
    shrunk, ran = _shrink(known, error="load worker 0 crashed")
    assert len(ran) == 1 and shrunk.stopped == "harness error in a trial: load worker 0 crashed"
    assert shrunk.config == big_failure(DOWN)


def test_the_repro_replays_what_was_found(tmp_path: Path) -> None:
    known = KnownFailure()
    shrunk, _ = _shrink(known)
    stem, repro = shrunk_repro(_failure(known), shrunk, Budgets(), "run.json", 12.0)
    data, config, _budgets = load_repro(write_repro(repro, tmp_path, stem))
    assert config == shrunk.config and data["checked"] == ["no_lost_results"]
    assert data["found_by"]["shrink"]["from_requests"] == 256
    assert data["found_by"]["shrink"]["to_requests"] == shrunk.config.shape.requests


def test_a_json_report_is_a_source_and_one_that_violated_nothing_has_nothing_to_shrink(tmp_path, capsys) -> None:
    known = KnownFailure()
    config = big_failure(DOWN)
    report = {
        "report_version": 1,
        "config": config_to_dict(config),
        "invariants": [v.to_dict() for v in known.verdicts(config)],
    }
    (tmp_path / "run.json").write_text(json.dumps(report))
    failure = load_failure(tmp_path / "run.json")
    assert failure.config == config and failure.failing == ("no_lost_results",) and failure.budgets is None
    passing = {**report, "invariants": [v.to_dict() for v in known.verdicts(with_requests(config, 1))]}
    (tmp_path / "ok.json").write_text(json.dumps(passing))
    assert cli.main(["shrink", str(tmp_path / "ok.json"), "--workdir", str(tmp_path / "w")]) == 0
    assert "nothing to shrink" in capsys.readouterr().out
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "cannot read"),
        ("{}", "not a faultload bundle, JSON report or repro"),
        ("[", "not JSON"),
    ],
)
def test_a_bad_source_is_one_line_and_exit_2(tmp_path, capsys, content, message) -> None:
    path = tmp_path / "source.json"
    if content is not None:
        path.write_text(content)
    assert cli.main(["shrink", str(path), "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and not (tmp_path / "w").exists()
