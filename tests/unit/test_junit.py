"""``--junit-xml``: what run / confirm, matrix and compare judged, written as JUnit XML and read back with
junitparser (a parser that is not ours). Built from plain data as each command holds it; no server."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from faultload.checker.compose import to_report
from faultload.checker.inputs import Verdict
from faultload.cli.main import main
from faultload.compare.judge import SCHEMA as COMPARE_SCHEMA
from faultload.compare.judge import CompareSettings, judge_metric
from faultload.compare.metrics import METRICS
from faultload.compare.report import junit_suite
from faultload.matrix.run import SCHEMA as MATRIX_SCHEMA
from faultload.matrix.run import MatrixRow, judge_compare_row, judge_row
from faultload.store.junit import matrix_suite, trial_suite, write_junit

LOST = "1 of 64 accepted requests lost: nonce 7 (server id 12) polled 404 at 3.2 s … \x1b[31m"


def _read(path: Path):
    """The file's only suite, and its cases by (classname, name)."""
    (suite,) = list(JUnitXml.fromfile(str(path)))
    return suite, {(case.classname, case.name): case for case in suite}


def _only(case, kind):
    """The case's one result, asserted to be of ``kind``."""
    (result,) = case.result
    assert isinstance(result, kind), (case.name, case.result)
    return result


def trial_report(verdicts: list[Verdict], **changes) -> dict:
    """The fields of a trial's JSON report (store.report.build_report) the JUnit suite reads."""
    return {
        "requested": 64,
        "completed": 64,
        "failed": 0,
        "not_finished": 0,
        "wall_s": 12.5,
        "target": {"spec": "skyrl==0.4.0", "version": "0.4.0"},
        "config": {"target": "skyrl==0.4.0", "regress": ["retention"], "fixes": ["plain-tracebacks"]},
        "invariants": to_report(verdicts),
        "interrupted": False,
        "error": None,
        **changes,
    }


VERDICTS = [
    Verdict(name="result_integrity", ok=True, figure=0, budget=0, head="no result damaged"),
    Verdict(name="no_lost_results", ok=False, figure=1, budget=0, head=LOST),
    Verdict(name="bounded_rss", ok=None, figure=None, budget=512, head="checker crashed: ValueError: no samples"),
]


def test_each_verdict_is_a_case_violated_failed_unknown_skipped_held_passed(tmp_path: Path) -> None:
    path = write_junit([trial_suite(trial_report(VERDICTS), "confirm")], tmp_path / "trial.xml")
    suite, cases = _read(path)
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 1, 0, 1)
    assert suite.time == pytest.approx(12.5)
    assert cases[("faultload.confirm", "result_integrity")].is_passed
    assert cases[("faultload.confirm", "trial")].is_passed
    # the detail line as the message; a terminal escape is not XML and is replaced, the ellipsis kept
    assert _only(cases[("faultload.confirm", "no_lost_results")], Failure).message == LOST.replace("\x1b", "\ufffd")
    skipped = _only(cases[("faultload.confirm", "bounded_rss")], Skipped)
    assert skipped.message == "checker crashed: ValueError: no samples"
    properties = {p.name: p.value for p in suite.properties()}
    assert properties["target"] == "skyrl==0.4.0" and properties["target_version"] == "0.4.0"
    assert (properties["regress"], properties["fixes"]) == ("retention", "plain-tracebacks")
    assert sorted(os.listdir(tmp_path)) == ["trial.xml"]  # written whole: no temporary file left


@pytest.mark.parametrize(
    "changes, says",
    [
        ({"error": "server exited 1 before it answered /healthz"}, "harness error: server exited 1"),
        ({"interrupted": True}, "interrupted"),
    ],
)
def test_a_harness_error_or_an_interrupt_is_an_error_never_a_pass(tmp_path: Path, changes: dict, says: str) -> None:
    held = [Verdict(name="result_integrity", ok=True, figure=0, budget=0, head="")]
    suite, cases = _read(write_junit([trial_suite(trial_report(held, **changes))], tmp_path / "t.xml"))
    assert says in _only(cases[("faultload.run", "trial")], Error).message
    assert (suite.tests, suite.errors) == (2, 1)


def test_requests_that_did_not_complete_fail_the_trial_case(tmp_path: Path) -> None:
    report = trial_report(
        [Verdict(name="result_integrity", ok=True, figure=0, budget=0, head="")], completed=60, failed=3, not_finished=1
    )
    _, cases = _read(write_junit([trial_suite(report)], tmp_path / "t.xml"))
    assert (
        _only(cases[("faultload.run", "trial")], Failure).message
        == "60 of 64 requests completed (3 failed, 1 not finished)"
    )


def _prop(name: str, violated=(), judged: int = 4) -> dict:
    """One property of a session summary (what --faultload-summary-json writes), as tests/unit/test_matrix.py's."""
    return {
        "name": name,
        "outcome": "failed" if violated else "passed",
        "violated": list(violated),
        "judged_trials": judged,
        "repro_requests": 16 if violated else None,
        "repro_path": f"/r/{name}.json" if violated else None,
        "error": None,
    }


def _summary(*props: dict) -> dict:
    judged = sum(p["judged_trials"] for p in props)
    return {
        "profile": "ci",
        "trials": 9,
        "judged_trials": judged,
        "properties": list(props),
        "invariants": {
            "no_lost_results": {"judged": judged, "unknown": 0, "skipped": 0},
            "bounded_cpu": {"judged": 0, "unknown": 3, "skipped": 1},
        },
    }


RETENTION = MatrixRow("retention", "skyrl==0.4.0", ("retention",), "caught", "why", caught_by=("no_lost_results",))


def _matrix() -> dict:
    """A faultload.matrix/1 result (run_matrix's form) of rows judged by the matrix's own code."""
    compared = judge_compare_row(
        MatrixRow("a-a", "skyrl==0.4.0", (), "clean", "why", baseline="skyrl==0.4.0"), _comparison(), 1, 90.0
    )
    rows = [
        judge_row(RETENTION, _summary(_prop("p1", violated=["no_lost_results"])), 1, 60.0),  # caught, as expected
        judge_row(dataclasses.replace(RETENTION, name="missed"), _summary(_prop("p1"), _prop("p2")), 0, 61.0),
        judge_row(MatrixRow("unjudged", "skyrl==0.4.0", (), "clean", "why"), _summary(_prop("p1", judged=0)), 0, 5.0),
        judge_row(
            MatrixRow("false-alarm", "skyrl==0.4.0", (), "clean", "why"),
            _summary(_prop("p1", violated=["no_lost_results"])),
            1,
            30.0,
        ),
        compared,
    ]
    return {
        "schema": MATRIX_SCHEMA,
        "profile": "ci",
        "session_s": None,
        "wall_s": 246.0,
        "ok": all(r.as_expected for r in rows),
        "logs": "/tmp/matrix",
        "rows": [dataclasses.asdict(r) for r in rows],
    }


def test_matrix_rows_and_their_invariants(tmp_path: Path) -> None:
    suite, cases = _read(write_junit([matrix_suite(_matrix())], tmp_path / "matrix.xml"))

    def case(row: str, name: str | None = None):
        return cases[("faultload.matrix", row) if name is None else (f"faultload.matrix.{row}", name)]

    # caught as expected: the row and its catching invariant pass; an invariant no trial judged is skipped
    assert case("retention").is_passed and case("retention", "no_lost_results").is_passed
    assert case("retention").time == pytest.approx(60.0)
    assert (
        _only(case("retention", "bounded_cpu"), Skipped).message == "not judged: 0 judged, 3 unknown, 1 skipped trials"
    )
    # expected caught, came out clean: the row fails, and so does the invariant that should have caught it
    assert _only(case("missed"), Failure).message == "expected caught by no_lost_results, got clean"
    assert (
        "expected to catch the row, but held in 8 judged trials"
        in _only(case("missed", "no_lost_results"), Failure).message
    )
    # error: not judged is an error with its reason, never a pass nor a skip
    assert "got error: not judged: 0 judged trials" in _only(case("unjudged"), Error).message
    # a violation on a row expected clean
    assert _only(case("false-alarm"), Failure).message == "expected clean, got caught"
    assert (
        "violated on a row expected clean (repro: /r/p1.json)"
        in _only(case("false-alarm", "no_lost_results"), Failure).message
    )
    # a comparison row: one case per metric; worse fails, unknown is skipped
    assert _only(case("a-a"), Failure).message == "expected clean, got caught"
    assert (
        "violated on a row expected clean (ratio " in _only(case("a-a", "server_cpu_ms_per_request"), Failure).message
    )
    assert _only(case("a-a", "healthz_p99_s"), Skipped).message == "not judged: a side did not measure it"
    assert case("a-a", "throughput_per_s").is_passed
    rows, invariants = 5, 2 + 2 + 2 + 2 + 3
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (rows + invariants, 6, 1, 6)
    assert {p.name: p.value for p in suite.properties()}["profile"] == "ci"


SETTINGS = CompareSettings(resamples=999)
_BY_NAME = {m.name: m for m in METRICS}


def _comparison(trial_error: str | None = None) -> dict:
    """A faultload.compare/1 result: CPU per request worse, throughput unchanged, /healthz p99 not measured."""
    metrics = [
        judge_metric(_BY_NAME["server_cpu_ms_per_request"], [1.0, 1.02, 0.99], [1.6, 1.62, 1.58], SETTINGS),
        judge_metric(_BY_NAME["throughput_per_s"], [500.0, 505.0, 498.0], [501.0, 499.0, 503.0], SETTINGS),
        judge_metric(_BY_NAME["healthz_p99_s"], [0.1, None, 0.1], [0.1, 0.1, 0.1], SETTINGS),
    ]
    trials = [
        {"order": i, "side": side, "wall_s": 10.0 + i, "error": trial_error if i == 1 else None}
        for i, side in enumerate(["baseline", "candidate", "candidate", "baseline", "baseline", "candidate"])
    ]
    return {
        "schema": COMPARE_SCHEMA,
        "baseline": "skyrl==0.4.0",
        "candidate": "skyrl==0.4.0+regress=rich-access-log",
        "repeats": 3,
        "metrics": metrics,
        "worse": [m["name"] for m in metrics if m["worse"]],
        "unknown": [m["name"] for m in metrics if m["unknown"]],
        "confidence": 0.95,
        "trials": trials,
        "ok": False,
    }


def test_compare_metrics_worse_fail_unknown_skip_and_a_failed_trial_errs(tmp_path: Path) -> None:
    result = _comparison(trial_error="server exited 1")
    assert result["worse"] == ["server_cpu_ms_per_request"] and result["unknown"] == ["healthz_p99_s"]
    suite, cases = _read(write_junit([junit_suite(result)], tmp_path / "compare.xml"))
    message = _only(cases[("faultload.compare", "server_cpu_ms_per_request")], Failure).message
    cpu = result["metrics"][0]
    assert message == (
        f"worse: ratio {cpu['ratio']:.3f}, 95% interval {cpu['ci'][0]:.3f} – {cpu['ci'][1]:.3f}, "
        "threshold ≤ 1.15 (candidate / baseline)"
    )
    assert (
        _only(cases[("faultload.compare", "healthz_p99_s")], Skipped).message
        == "not judged: measured in 2 of 3 baseline trials and 3 of 3 candidate trials"
    )
    assert cases[("faultload.compare", "throughput_per_s")].is_passed
    assert _only(cases[("faultload.compare.trials", "01-candidate")], Error).message == "harness error: server exited 1"
    assert cases[("faultload.compare.trials", "00-baseline")].time == pytest.approx(10.0)
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (3 + 6, 1, 1, 1)
    properties = {p.name: p.value for p in suite.properties()}
    assert properties["candidate"] == "skyrl==0.4.0+regress=rich-access-log"


COMPARE = ["--baseline", "skyrl==0.4.0", "--candidate", "skyrl==0.4.0"]


@pytest.mark.parametrize("argv", [["run"], ["confirm"], ["matrix"], ["compare", *COMPARE]])
def test_a_junit_path_in_a_missing_folder_is_one_line_and_exit_2(argv, capsys, tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "r.xml"
    assert main([*argv, "--junit-xml", str(missing)], environ={"FAULTLOAD_HOME": str(tmp_path / "home")}) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"faultload: error: --junit-xml: no such directory: {missing.parent}"
    assert not (tmp_path / "home").exists()  # nothing installed, started or written
