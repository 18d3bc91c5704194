"""Unit tests of ``faultload matrix``'s row logic, on hand-written session summaries
(test doubles of what ``--faultload-summary-json`` writes; no suite runs here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from faultload.matrix import DEFAULT_ROWS, MatrixRow, judge_row, markdown_table, row_command, select_rows

ROW = MatrixRow("retention", "skyrl==0.4.0", ("retention",), "caught", "why")


def prop(name: str, outcome: str, violated=(), repro_requests=None, error=None) -> dict:
    return {"nodeid": f"faultload/suite/test_properties.py::{name}", "name": name, "outcome": outcome,
            "violated": list(violated), "repro_requests": repro_requests,
            "repro_path": f"/r/{name}.json" if repro_requests else None, "error": error}


def summary(*props: dict) -> dict:
    return {"profile": "ci", "trials": 7, "properties": list(props)}


def test_default_rows_cover_the_issue() -> None:
    names = [r.name for r in DEFAULT_ROWS]
    assert names == ["clean", "fixed", "retention", "keepalive", "rich-access-log", "skyrl-0.3.0"]
    assert [r.expected for r in DEFAULT_ROWS] == ["clean", "clean", "caught", "caught", "caught", "caught"]
    assert [r.fixes for r in DEFAULT_ROWS][:2] == [(), ("plain-tracebacks",)]


def test_select_rows() -> None:
    assert [r.name for r in select_rows(["retention", "clean", "retention"])] == ["retention", "clean"]
    assert len(select_rows(None)) == len(DEFAULT_ROWS)
    with pytest.raises(ValueError, match="unknown row 'nope'"):
        select_rows(["nope"])


def test_row_command() -> None:
    cmd = row_command(ROW, "ci", Path("/tmp/s.json"), Path("/x/faultload"), all_properties=False, python="py")
    assert cmd[:4] == ["py", "-m", "pytest", "/x/faultload"]
    assert cmd[cmd.index("--faultload-regress") + 1] == "retention" and "-x" in cmd
    assert cmd[cmd.index("--faultload-summary-json") + 1] == "/tmp/s.json"
    assert "-x" not in row_command(ROW, "ci", Path("s"), Path("f"), all_properties=True)
    fixed = row_command(select_rows(["fixed"])[0], "ci", Path("s"), Path("f"), all_properties=False)
    assert fixed[fixed.index("--faultload-fix") + 1] == "plain-tracebacks" and "--faultload-regress" not in fixed


def test_caught_row_names_its_invariants_and_smallest_repro() -> None:
    s = summary(prop("test_no_lost_results", "failed", ["no_lost_results"], 3),
                prop("test_all_invariants", "failed", ["no_lost_results", "retry_amplification"], 1),
                prop("test_health", "passed"))
    r = judge_row(ROW, s, 1, 100.0)
    assert r.result == "caught" and r.as_expected
    assert r.caught_by == ["no_lost_results", "retry_amplification"]
    assert r.repro_requests == 1 and r.repro_path == "/r/test_all_invariants.json"


def test_clean_row() -> None:
    r = judge_row(ROW, summary(prop("a", "passed"), prop("b", "passed")), 0, 5.0)
    assert r.result == "clean" and not r.as_expected and r.caught_by == []


def test_infrastructure_failures_are_errors_not_catches() -> None:
    broken = summary(prop("a", "failed", error="could not start the stack for skyrl==0.4.0: boom"))
    r = judge_row(ROW, broken, 1, 5.0)
    assert r.result == "error" and "could not start the stack" in r.error
    assert judge_row(ROW, None, 4, 1.0).result == "error"
    assert judge_row(ROW, summary(), 5, 1.0).result == "error"  # no property ran
    timed_out = judge_row(ROW, summary(prop("a", "passed")), None, 9.0, note="row timed out after 900s")
    assert timed_out.result == "error" and timed_out.error == "row timed out after 900s"


def test_markdown_table() -> None:
    rows = [judge_row(ROW, summary(prop("a", "failed", ["no_lost_results"], 1)), 1, 120.0).__dict__,
            judge_row(DEFAULT_ROWS[0], summary(prop("a", "failed", ["healthz_latency"], 9)), 1, 60.0).__dict__]
    text = markdown_table({"profile": "ci", "wall_s": 180.0, "ok": False, "rows": rows})
    assert "NOT every row as expected" in text
    assert "| retention | `skyrl==0.4.0` | retention | — | caught | caught | no_lost_results | 1 | 2.0 min |" in text
    assert "| clean | `skyrl==0.4.0` | — | — | clean | **caught** | healthz_latency | 9 | 1.0 min |" in text


def test_cli_rejects_bad_rows_with_exit_2() -> None:
    proc = subprocess.run([str(Path(sys.executable).with_name("faultload")), "matrix", "--rows", "clean,nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "faultload: error: --rows: unknown row 'nope'; known: clean, fixed, retention, keepalive, rich-access-log, skyrl-0.3.0"]
