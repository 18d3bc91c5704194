"""A row a profile cannot judge is not run there, and is reported as skipped: never clean, never an error.

Unit tests of ``faultload matrix``'s row plumbing with a stand-in for running a row (a test double of the
pytest session a row runs; no suite runs here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from faultload.cli.exits import EXIT_OK, matrix_exit
from faultload.matrix.judge import RowResult
from faultload.matrix.row import NOT_RUN, Expectation, MatrixRow
from faultload.matrix.run import DEFAULT_ROWS, run_matrix, select_rows
from faultload.store.html_matrix import matrix_page
from faultload.store.junit import matrix_suite
from faultload.store.matrix_table import markdown_table

NIGHTLY_ONLY = MatrixRow(
    "nightly-only",
    "skyrl==0.4.0",
    ("retention",),
    "caught",
    "why",
    caught_by=("no_lost_results",),
    on=(("ci", Expectation(NOT_RUN, (), "it draws no training; nightly runs it")),),
)
EVERYWHERE = MatrixRow("everywhere", "skyrl==0.4.0", (), "clean", "why")


def _run(rows: list[MatrixRow], profile: str, tmp_path: Path) -> tuple[dict, list[str]]:
    """The matrix with each row that runs standing in as clean; the names of the rows it was asked to run."""
    asked: list[str] = []

    def spread(run: list[MatrixRow], run_one) -> list[RowResult]:
        asked.extend(r.name for r in run)
        return [RowResult(r.name, r.target, list(r.regress), "clean", "clean", judged_trials=9).settle() for r in run]

    return run_matrix(rows, profile, workdir=tmp_path, log=lambda _: None, spread=spread), asked


def test_a_row_not_run_on_the_profile_is_skipped_and_the_rest_keep_their_order(tmp_path: Path) -> None:
    matrix, asked = _run([NIGHTLY_ONLY, EVERYWHERE], "ci", tmp_path)
    assert asked == ["everywhere"]
    assert [(r["row"], r["result"], r["expected"]) for r in matrix["rows"]] == [
        ("nightly-only", "skipped", "skipped"),
        ("everywhere", "clean", "clean"),
    ]
    skipped = matrix["rows"][0]
    assert skipped["judged_trials"] == 0 and skipped["why"] == "it draws no training; nightly runs it"
    assert matrix["ok"] and matrix_exit(matrix["rows"]) == EXIT_OK


def test_the_same_row_runs_on_a_profile_that_can_judge_it(tmp_path: Path) -> None:
    _, asked = _run([NIGHTLY_ONLY, EVERYWHERE], "nightly", tmp_path)
    assert asked == ["nightly-only", "everywhere"]


def test_reports_show_a_row_not_run_as_skipped_never_as_passed(tmp_path: Path) -> None:
    matrix, _ = _run([NIGHTLY_ONLY, EVERYWHERE], "ci", tmp_path)
    table = markdown_table(matrix)
    assert "not run on this profile: nightly-only" in table
    assert "| nightly-only | `skyrl==0.4.0` | retention | — | not run | skipped (not run on this profile) |" in table
    cases = {c.name: c for c in matrix_suite(matrix).cases}
    assert cases["nightly-only"].outcome == "skipped" and "nightly runs it" in cases["nightly-only"].message
    assert cases["everywhere"].outcome == "passed"
    assert "1 not run here" in matrix_page(matrix)


def test_the_rows_ci_cannot_judge_are_not_run_there_and_say_where_they_are() -> None:
    not_on_ci = [r.name for r in DEFAULT_ROWS if not r.runs_on("ci")]
    assert not_on_ci == ["skyrl-0.3.0-training", "results-capped"]
    for row in select_rows(not_on_ci):
        assert row.runs_on("nightly") and "nightly runs it" in row.expectation("ci").why


def test_naming_a_row_the_profile_does_not_run_is_a_usage_error() -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("faultload")), "matrix", "--profile", "ci", "--rows", "results-capped"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "faultload: error: --rows: results-capped is not run on the ci profile: "
        + select_rows(["results-capped"])[0].expectation("ci").why
    ]
