"""Trial bundles (faultload.store.bundle) and ``faultload check`` (faultload.store.check), without a server.

Each recorded type's JSON round trip; a hand-built TrialResult written and
loaded back judges and reports as the original; check's output, exit codes and
argument errors (exit 2, one line).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from faultload.checker.budgets import Budgets
from faultload.checker.inputs import Verdict
from faultload.checker.judge import judge
from faultload.cli import main as cli
from faultload.model.faults import parse_fault
from faultload.model.training import TrainingMix
from faultload.record.collapse import CollapseVerdict, Signal
from faultload.record.faults import AppliedFault, FaultLog
from faultload.record.history import ErrorClass, Outcome
from faultload.record.samples import MonitorSamples, ProcessSnapshot
from faultload.record.serverlog import ServerLogSummary, classify_log
from faultload.record.training import TrainingOp, TrainingRecorder
from faultload.record.trial import TrialResult
from faultload.store import report
from faultload.store.bundle import StoredTrial, WorkerSummary, load_bundle, write_bundle
from faultload.store.check import check_bundle
from tests.unit.test_report import result  # noqa: F401 - the hand-built TrialResult fixture

LOG = """2026-11-30 07:50:14,170 - INFO - uvicorn.error: Started server process [6256]
2026-11-30 07:50:20,004 - ERROR - skyrl: Backend-forwarded sample failed (request_id=12)
OSError: [Errno 24] Too many open files
2026-11-30 07:50:21,500 - ERROR - skyrl: something odd 0x7f00 happened
2026-11-30 07:50:22,000 - WARNING - skyrl: slow
"""
COLLAPSE = CollapseVerdict(
    "fd_exhaustion",
    12.4996,
    ["server fds 970 >= 97% of its limit 1000 at t=12.5s"],
    [Signal("event_loop_stall", 13.4991, "/healthz failing from t=13.5s")],
)
FAULTS = FaultLog(
    (
        AppliedFault(
            0, parse_fault("edge:reset_peer:timeout=0@1+2"), 1.0012, 3.0034, 100.0, 102.0, removed_by="schedule"
        ),
        AppliedFault(1, parse_fault("router:stall@2+60"), 2.5, None, 101.5, None, error="boom"),
    ),
    99.0,
)


def _dicts(verdicts) -> list[dict]:
    return [v.to_dict() for v in verdicts]


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# --------------------------------------------------------------------------- round trips


def test_the_collapse_verdict_round_trips_exactly_and_its_report_form_is_unchanged() -> None:
    assert CollapseVerdict.from_dict(json.loads(json.dumps(COLLAPSE.to_dict(exact=True)))) == COLLAPSE
    assert COLLAPSE.to_dict()["at_s"] == 12.5 and COLLAPSE.to_dict()["consequences"][0]["at_s"] == 13.5
    assert Signal.from_dict(COLLAPSE.consequences[0].to_dict(exact=True)) == COLLAPSE.consequences[0]


def test_the_server_log_summary_round_trips_with_every_occurrence() -> None:
    summary = classify_log(LOG)
    assert summary.classes  # the log has errors to keep
    back = ServerLogSummary.from_dict(json.loads(json.dumps(summary.to_dict(exact=True))))
    assert back.to_dict(exact=True) == summary.to_dict(exact=True)
    assert back.to_dict() == summary.to_dict()  # the report's form, without the times
    for name, cls in summary.classes.items():
        np.testing.assert_array_equal(back.classes[name].times, cls.times)
        np.testing.assert_array_equal(back.classes[name].request_ids, cls.request_ids)
        assert back.classes[name].request_ids.dtype == np.int64
    assert "times" not in summary.to_dict()["classes"][0]


def test_monitor_samples_round_trip(result: TrialResult) -> None:  # noqa: F811
    monitor = dataclasses.replace(result.monitor, fd_limit=(1024, 4096), notes=["a note"])
    back = MonitorSamples.from_dict(json.loads(json.dumps(monitor.to_dict())))
    assert set(back.samples) == set(monitor.samples)
    for name, col in monitor.samples.items():
        np.testing.assert_array_equal(back.samples[name], col)
    for name in ("healthz_t", "healthz_latency_s", "healthz_ok"):
        np.testing.assert_array_equal(getattr(back, name), getattr(monitor, name))
    assert back.healthz_ok.dtype == bool
    assert (back.baseline, back.drained, back.fd_limit, back.notes) == (
        monitor.baseline,
        monitor.drained,
        (1024, 4096),
        ["a note"],
    )
    assert ProcessSnapshot.from_dict(None) is None


def test_budgets_verdicts_workers_and_the_fault_log_round_trip(result: TrialResult) -> None:  # noqa: F811
    budgets = Budgets(clean_log_allow=("x+",), fds_slack=7)
    assert Budgets.from_mapping(json.loads(json.dumps(budgets.to_dict()))) == budgets
    verdict = Verdict(name="bounded_fds", ok=False, figure=4.5, budget=3, head="detail")
    assert Verdict.from_dict(json.loads(json.dumps(verdict.to_dict()))) == verdict
    worker = result.workers[1]
    assert WorkerSummary.from_dict(json.loads(json.dumps(worker.to_dict()))) == worker
    assert worker.error_examples == result.workers[1].error_examples
    assert FaultLog.from_dict(json.loads(json.dumps(FAULTS.to_dict()))) == FAULTS


# --------------------------------------------------------------------------- bundles


@pytest.fixture
def full(result: TrialResult) -> TrialResult:  # noqa: F811
    """The report's TrialResult with everything a trial can record: faults, a log, a collapse, completions."""
    result.fault_log = FAULTS
    result.server_log = classify_log(LOG)
    result.verdict = COLLAPSE
    result.start_epoch = 99.0
    result.load_stopped_s = 2.0
    result.stopped_early = True
    result.router_completed_s = {100: 0.25, 101: 0.5}
    result.topology = {"edge": "127.0.0.1:1 -> 127.0.0.1:2"}
    result.cleanup_errors = ["one"]
    return result


def test_a_trained_trial_bundle_keeps_its_training_log_and_judges_it_again(full: TrialResult, tmp_path: Path) -> None:
    full.config = dataclasses.replace(
        full.config,
        engine="null",
        shape=dataclasses.replace(full.config.shape, training=TrainingMix(trainers=1, steps=1)),
    )
    recorder = TrainingRecorder()
    recorder.add(
        TrainingOp.FORWARD_BACKWARD,
        0,
        0,
        0.5,
        0.6,
        math.nan,
        3,
        Outcome.LOST,
        ErrorClass.HTTP_404,
        404,
        "retrieve_future 7: HTTP 404",
    )
    recorder.add(TrainingOp.HEARTBEAT, 0, 0, 1.0, 1.1, 1.1, 1, Outcome.OK)
    full.training = recorder.log()
    verdicts = judge(full, Budgets())
    write_bundle(full, Budgets(), verdicts, tmp_path / "b")
    stored = load_bundle(tmp_path / "b")
    assert _dicts(judge(stored, stored.budgets)) == _dicts(verdicts)
    by_name = {v.name: v for v in verdicts}
    assert by_name["training_futures"].ok is False and "1 lost" in by_name["training_futures"].detail
    assert report.build_report(stored, verdicts)["training"]["forward_backward"]["lost"] == 1


def test_an_older_bundle_without_training_json_loads_as_no_training(full: TrialResult, tmp_path: Path) -> None:
    write_bundle(full, Budgets(), judge(full, Budgets()), tmp_path / "b")
    (tmp_path / "b" / "training.json").unlink()
    assert load_bundle(tmp_path / "b").training is None


def test_a_bundle_gives_back_every_field_of_the_trial_it_stores(full: TrialResult, tmp_path: Path) -> None:
    """One record type: a stored trial is a ``TrialResult``, and each of its fields comes back from the
    bundle as it was written (a field added to the record is stored with no list to extend)."""
    write_bundle(full, Budgets(), judge(full, Budgets()), tmp_path / "b")
    stored = load_bundle(tmp_path / "b")
    assert isinstance(stored, TrialResult)
    for f in dataclasses.fields(TrialResult):
        if f.name != "history":  # its own round trip: History.save/load
            assert _as_data(getattr(stored, f.name)) == _as_data(getattr(full, f.name)), f.name


def _as_data(value) -> str:
    """A recorded value as JSON text (a record holding arrays compared by its ``to_dict``)."""
    return _json(value.to_dict() if hasattr(value, "to_dict") else value)


def test_a_bundle_judges_and_reports_as_the_trial_it_stores(full: TrialResult, tmp_path: Path) -> None:
    budgets = Budgets(fds_slack=5)
    verdicts = judge(full, budgets)
    write_bundle(full, budgets, verdicts, tmp_path / "b")
    stored = load_bundle(tmp_path / "b")
    assert stored.budgets == budgets and _dicts(stored.verdicts) == _dicts(verdicts)
    assert stored.phases_s == full.phases_s and "judge" in stored.phases_s  # as stored, before judged again
    assert _dicts(judge(stored, stored.budgets)) == _dicts(verdicts)
    stored.phases_s["judge"] = full.phases_s["judge"]  # judging it again timed that judging, not the trial's
    assert _json(report.build_report(stored, verdicts)) == _json(report.build_report(full, verdicts))
    assert stored.verdict == COLLAPSE and stored.router_completed_s == {100: 0.25, 101: 0.5}
    assert stored.versions["target"] == "skyrl==0.4.0" and stored.versions["faultload"]
    printed = report.render_text(report.build_report(full, verdicts)).splitlines()
    lines = (tmp_path / "b" / "verdicts.txt").read_text().splitlines()
    assert (
        lines == [ln for ln in printed if ln in lines] and len(lines) == len(verdicts) + 3
    )  # + VERDICT, evidence, then


def _bundle(full: TrialResult, tmp_path: Path, budgets: Budgets = Budgets()) -> Path:
    return write_bundle(full, budgets, judge(full, budgets), tmp_path / "b")


def _check(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = cli.main(["check", *argv])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_check_prints_the_stored_verdicts_and_exits_1_on_a_violation(full, tmp_path, capsys) -> None:
    path = _bundle(full, tmp_path)
    code, out, err = _check(capsys, str(path), "--json-out", str(tmp_path / "c.json"))
    assert (code, err) == (1, "")
    stored = (path / "verdicts.txt").read_text().splitlines()
    assert out[0].startswith(f"bundle {path}: target skyrl==0.4.0 (version 0.4.0), 12 requests")
    assert out[1:-1] == stored and out[-1] == "same verdicts as stored"
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["changed"] == [] and data["invariants"] == data["stored_invariants"]


def test_check_finds_nothing_violated_when_every_verdict_held(tmp_path) -> None:
    trial = StoredTrial(**{**_minimal(), "verdicts": [Verdict(name="x", ok=True, figure=1, budget=2, head="held")]})
    write_bundle(trial, Budgets(), trial.verdicts, tmp_path / "b")
    out = tmp_path / "out.txt"
    with out.open("w") as fh:
        violated = check_bundle(tmp_path / "b", out=fh)
    assert violated is False, out.read_text()
    assert "[VIOLATED]" not in out.read_text()


def _minimal() -> dict:
    """A trial whose every request went well (the invariants' own test history and monitor)."""
    from faultload.model.trial import TrialConfig
    from tests.invariant_doubles import make_history, make_monitor

    return dict(
        config=TrialConfig(target="skyrl==0.4.0"),
        history=make_history(),
        workers=[],
        monitor=make_monitor(),
        fault_log=None,
        server_log=classify_log(""),
        verdict=None,
        router_completed_s={},
        budgets=Budgets(),
        verdicts=[],
        versions={},
        router_stats={"peak_in_flight": 50},
        load_s=10.0,
        load_stopped_s=10.0,
    )


def test_a_budget_changes_a_verdict_and_check_says_which(full, tmp_path, capsys) -> None:
    path = _bundle(full, tmp_path)
    code, out, _ = _check(capsys, str(path))
    assert "[ok      ] retry_amplification" in "\n".join(out)
    code, out, _ = _check(
        capsys, str(path), "--budget", "attempts_per_request_max=2", "--budget", "attempts_per_request=2"
    )
    assert code == 1
    assert any(line.startswith("[VIOLATED] retry_amplification") for line in out)
    assert out[0].endswith(
        "judged again with the stored budgets with attempts_per_request_max=2, attempts_per_request=2"
    )
    assert out[-1] == "changed by the budgets: retry_amplification (ok -> VIOLATED)"


def test_check_says_when_the_verdicts_differ_from_the_stored_ones(full, tmp_path, capsys) -> None:
    path = _bundle(full, tmp_path)
    verdicts = json.loads((path / "verdicts.json").read_text())
    verdicts[0]["ok"] = True  # as if the checker had changed since the bundle was written
    (path / "verdicts.json").write_text(json.dumps(verdicts))
    code, out, _ = _check(capsys, str(path))
    assert out[-1].startswith("DIFFERS from the stored verdicts, a faultload bug")
    assert "no_lost_results (ok -> VIOLATED)" in out[-1]


# --------------------------------------------------------------------------- bad input: exit 2, one line


@pytest.mark.parametrize(
    "budget, needle",
    [
        ("nonsense=1", "budget override: unknown budget 'nonsense'; known: fds_per_in_flight"),
        ("fds_slack=abc", "budget override: budget fds_slack: 'abc' is not a whole number"),
        ("fds_slack", "budget override: 'fds_slack' is not NAME=VALUE"),
        ("healthz_p99_s=0", "budget override: budget healthz_p99_s: 0.0 must be > 0"),
    ],
)
def test_a_bad_budget_is_one_line_and_exit_2(full, tmp_path, capsys, budget, needle) -> None:
    path = _bundle(full, tmp_path)
    code, out, err = _check(capsys, str(path), "--budget", budget)
    assert (code, out) == (2, [])
    assert err.splitlines() == [f"faultload: error: {err.splitlines()[0].removeprefix('faultload: error: ')}"]
    assert needle in err


def test_not_a_bundle_is_one_line_and_exit_2(full, tmp_path, capsys) -> None:
    cases = {
        "missing": f"{tmp_path / 'missing'}: no such directory",
        "empty": f"{tmp_path / 'empty'}: no bundle.json (not a faultload bundle?)",
    }
    (tmp_path / "empty").mkdir()
    for name, message in cases.items():
        assert _check(capsys, str(tmp_path / name)) == (2, [], f"faultload: error: {message}\n")
    path = _bundle(full, tmp_path)
    (path / "bundle.json").write_text(json.dumps({"bundle_version": 99}))
    assert (
        _check(capsys, str(path))[2]
        == f"faultload: error: {path / 'bundle.json'}: bundle_version 99; this faultload reads 1\n"
    )
    (path / "bundle.json").write_text(json.dumps({"bundle_version": 1}))
    (path / "trial.json").write_text("{")
    assert _check(capsys, str(path))[2].startswith(f"faultload: error: {path / 'trial.json'}: not JSON")
    (path / "trial.json").write_text("{}")
    assert _check(capsys, str(path))[2] == (
        f"faultload: error: {path}: not a whole faultload bundle (KeyError: 'workers')\n"
    )
    code, out, err = _check(capsys)
    assert code == 2 and err == "faultload: error: the following arguments are required: BUNDLE\n"


# --------------------------------------------------------------------------- the suite's repros


def test_the_suite_writes_a_bundle_beside_each_repro_and_names_it(full, tmp_path, capsys) -> None:
    from faultload.host.workspace import Workspace
    from faultload.store.repro import figures_of
    from faultload.suite.executor import TrialOutcome
    from faultload.suite.repros import write_property_repro
    from faultload.suite.state import PropertyState

    budgets = Budgets()
    verdicts = judge(full, budgets)
    state = PropertyState("tests/p.py::test_p", first_failure_requests=12, failures=1)
    state.best = (full.config, TrialOutcome(verdicts, figures_of(verdicts), 12, 5.0, result=full))
    path = write_property_repro(state, "ci", Workspace(tmp_path), budgets)
    repro = json.loads(path.read_text())
    assert state.bundle_path == path.with_suffix(".bundle") and repro["bundle"] == str(state.bundle_path)
    assert repro["check"] == f"faultload check {state.bundle_path}"
    assert _dicts(load_bundle(state.bundle_path).verdicts) == _dicts(verdicts)
    assert _check(capsys, str(state.bundle_path))[1][-1] == "same verdicts as stored"


def test_a_verdict_stored_before_notes_were_kept_is_the_same_verdict(full, tmp_path, capsys) -> None:
    """A bundle written before verdicts kept head and notes apart stores the whole line as the detail; judged
    again, the same line split into head and notes says the same: no DIFFERS."""
    path = _bundle(full, tmp_path)
    verdicts = json.loads((path / "verdicts.json").read_text())
    for verdict in verdicts:
        for key in ("head", "notes", "cases"):
            verdict.pop(key, None)
    (path / "verdicts.json").write_text(json.dumps(verdicts))
    code, out, _ = _check(capsys, str(path))
    assert not out[-1].startswith("DIFFERS"), out[-1]
