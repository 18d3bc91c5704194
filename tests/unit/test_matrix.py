"""Unit tests of ``faultload matrix``'s row logic, on hand-written session summaries
(test doubles of what ``--faultload-summary-json`` writes; no suite runs here)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from faultload.matrix.row import Expectation
from faultload.matrix.rows import FINDING_5_INVARIANTS
from faultload.matrix.run import (
    DEFAULT_ROWS,
    FINDING_1_INVARIANTS,
    MatrixRow,
    judge_compare_row,
    judge_row,
    row_command,
    run_row,
    select_rows,
)
from faultload.store.matrix_table import markdown_table

ROW = MatrixRow("retention", "skyrl==0.4.0", ("retention",), "caught", "why", caught_by=("no_lost_results",))
CLEAN = MatrixRow("clean", "skyrl==0.4.0", (), "clean", "why")


def prop(name: str, outcome: str, violated=(), repro_requests=None, error=None, judged=1) -> dict:
    return {
        "nodeid": f"faultload/suite/test_properties.py::{name}",
        "name": name,
        "outcome": outcome,
        "violated": list(violated),
        "repro_requests": repro_requests,
        "judged_trials": judged,
        "repro_path": f"/r/{name}.json" if repro_requests else None,
        "error": error,
    }


def summary(*props: dict, judged: int | None = None, profile: str = "ci") -> dict:
    total = sum(p["judged_trials"] for p in props) if judged is None else judged
    return {
        "profile": profile,
        "trials": 7,
        "judged_trials": total,
        "properties": list(props),
        "invariants": {
            "no_lost_results": {"judged": total, "unknown": 0, "skipped": 0},
            "bounded_cpu": {"judged": 0, "unknown": total, "skipped": 1},
        },
    }


def passed(n: int = 7) -> list[dict]:
    return [prop(f"p{i}", "passed") for i in range(n)]


COMPARISON_ROWS = [
    "a-a",
    "rich-access-log-cost",
    "a-a-long-result",
    "httpx-forwarding-cost",
    "proto-per-poll-cost",
    "json-decode-cost",
    "a-a-store",
    "lookup-by-scan-cost",
    "sweep-on-create-cost",
]
MUTANT_ROWS = [
    "never-resolve-on-failure",
    "early-408",
    "id-reuse-after-restart",
    "500-for-unknown",
    "blocking-call",
    "mixed-results",
    "pending-ttl-short",
    "swapped-ttls",
    "truncated-result",
    "empty-200-on-failure",
    "session-per-request",
    "double-forward",
]
TTL_ROWS = ["completed-ttl-from-creation", "retrieved-ttl-from-completion", "retrieved-ttl-short"]
SIZE_ROWS = ["store-capped", "results-capped", "forwarding-pool-default", "forwarding-semaphore"]
KEEP_ROWS = ["keep-delivered", "evict-pending-only", "naive-completed-at", "sweep-counts-bytes"]


def test_default_rows_cover_the_issue() -> None:
    names = [r.name for r in DEFAULT_ROWS]
    assert names == [
        "clean",
        "fixed",
        "retention",
        "keepalive",
        "rich-access-log",
        "skyrl-0.3.0",
        "skyrl-0.3.0-training",
        "newest-sdk",
        "newest-sdk-fixed",
        *COMPARISON_ROWS,
        *MUTANT_ROWS,
        "lost-wakeup",
        *TTL_ROWS,
        *SIZE_ROWS,
        *KEEP_ROWS,
        "tuft",
        "tuft-newest-sdk",
        "tuft-newest-sdk-fixed",
    ]
    # rich-access-log: clean, a blind spot of the absolute budgets said as an expectation (its -cost row catches it)
    assert [r.expected for r in DEFAULT_ROWS][:15] == [
        "caught",
        "clean",
        "caught",
        "caught",
        "clean",
        "caught",
        "caught",
        "caught",
        "clean",
        "clean",
        "caught",
        "clean",
        "caught",
        "caught",
        "caught",
    ]
    # the newest SDK's rows: the release through it (finding 6), and through it with every candidate fix
    assert [(r.sdk, r.fixes[-1]) for r in DEFAULT_ROWS[7:9]] == [
        ("tinker==0.38.0", "retain-until-expiry"),
        ("tinker==0.38.0", "sample-sequence-ids"),
    ]
    keepalive = next(r for r in DEFAULT_ROWS if r.name == "keepalive")
    # caught on every profile: ci's real-SDK trials meet the reset race (unprovoked_resets), nightly's bursts too
    assert [keepalive.expectation(p) for p in ("ci", "nightly")] == [
        Expectation("caught", ("unprovoked_resets",), keepalive.why)
    ] * 2
    assert [r.name for r in DEFAULT_ROWS if r.baseline] == COMPARISON_ROWS
    assert [r.fixes for r in DEFAULT_ROWS][:2] == [
        (),
        ("plain-tracebacks", "keepalive-past-sdk", "retain-until-expiry"),
    ]
    # every regression switch that is a cost has its comparison row; each A/A row has the size of the rows it vouches for
    costs = {r.regress for r in DEFAULT_ROWS if r.baseline and r.regress}
    assert costs == {
        ("rich-access-log",),
        ("httpx-forwarding",),
        ("proto-per-poll",),
        ("json-decode",),
        ("lookup-by-scan",),
        ("sweep-on-create",),
    }
    aa_sizes = {r.compare_trial for r in DEFAULT_ROWS if r.baseline and not r.regress}
    assert {r.compare_trial for r in DEFAULT_ROWS if r.baseline} == aa_sizes


def test_every_switch_is_a_row_that_names_invariants_or_metrics_that_exist() -> None:
    """A switch without a row is never shown caught; a row whose caught_by names an invariant no checker
    reports (or a metric the comparison does not read) could never come out as expected."""
    from faultload.checker.compose import CHECKERS, TRAINING_CHECKERS
    from faultload.compare.metrics import METRIC_NAMES
    from faultload.model.switches import REGRESSIONS

    assert {s for r in DEFAULT_ROWS for s in r.regress} == set(REGRESSIONS)
    # the watchdog's (judge.py) and the session's shared server (suite.runner)
    invariants = {name for name, _ in CHECKERS + TRAINING_CHECKERS} | {"no_collapse", "session_growth"}
    for row in DEFAULT_ROWS:
        known = set(METRIC_NAMES) if row.baseline else invariants
        for profile in ("ci", "nightly"):
            assert set(row.expectation(profile).caught_by) <= known, (row.name, profile)
    restart_only = [r.name for r in DEFAULT_ROWS if r.expectation("ci").expected != r.expected]
    assert "id-reuse-after-restart" in restart_only
    # an expired id shows 500-for-unknown too, and ci's abandoned polls meet one: caught on every profile
    unknown = next(r for r in DEFAULT_ROWS if r.name == "500-for-unknown")
    assert unknown.expectation("ci") == unknown.expectation("nightly") and unknown.expected == "caught"


def test_the_row_lists_outside_python_name_real_rows() -> None:
    """The --rows help, .ci/run and the nightly workflow spell rows out; a typo there would fail at run time."""
    root = Path(__file__).resolve().parents[2]
    names = [r.name for r in DEFAULT_ROWS]
    matrix_help = subprocess.run(
        [sys.executable, "-m", "faultload", "matrix", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "1000"},
    ).stdout  # no wrapping
    assert "default all: " + ", ".join(names) + ")" in " ".join(matrix_help.split())
    for path in (root / ".ci" / "run", root / ".github" / "workflows" / "nightly.yml"):
        for listed in re.findall(r"--rows ([\w,.-]+)", path.read_text()):
            assert set(listed.split(",")) <= set(names), f"{path}: {listed}"


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
    assert "--faultload-sdk" not in cmd
    newest = row_command(select_rows(["newest-sdk"])[0], "ci", Path("s"), Path("f"), all_properties=False)
    assert newest[newest.index("--faultload-sdk") + 1] == "tinker==0.38.0"
    fixed = row_command(select_rows(["fixed"])[0], "ci", Path("s"), Path("f"), all_properties=False)
    assert fixed[fixed.index("--faultload-fix") + 1] == "plain-tracebacks" and "--faultload-regress" not in fixed
    assert "-k" not in fixed
    training = row_command(
        select_rows(["skyrl-0.3.0-training"])[0], "nightly", Path("s"), Path("f"), all_properties=False
    )
    assert training[training.index("-k") + 1] == "test_training"  # the row runs the training property alone


def test_caught_row_names_its_invariants_and_smallest_repro() -> None:
    s = summary(
        prop("test_no_lost_results", "failed", ["no_lost_results"], 3),
        prop("test_all_invariants", "failed", ["no_lost_results", "retry_amplification"], 1),
        prop("test_health", "passed"),
    )
    r = judge_row(ROW, s, 1, 100.0)
    assert r.result == "caught" and r.as_expected
    assert r.caught_by == ["no_lost_results", "retry_amplification"]
    assert r.repro_requests == 1 and r.repro_path == "/r/test_all_invariants.json"
    assert r.evidence is None  # a summary without details (written before they were kept) names none


def test_a_caught_row_quotes_its_smallest_repro_s_figure() -> None:
    small = prop("test_bounded_resources", "failed", ["bounded_cpu"], 1200)
    small["evidence"] = {"bounded_cpu": "over budget: 2.310 ms of server CPU per HTTP request vs 2.005 ms"}
    big = prop("test_health", "failed", ["healthz_latency"], 4000)
    big["evidence"] = {"healthz_latency": "p99 9 s"}
    r = judge_row(CLEAN, summary(big, small), 1, 100.0)
    assert r.evidence == "bounded_cpu: over budget: 2.310 ms of server CPU per HTTP request vs 2.005 ms"
    small["evidence"] = {"bounded_cpu": "x" * 1000}
    cut = judge_row(CLEAN, summary(small), 1, 100.0).evidence
    assert len(cut) == 400 and cut.endswith("…")


def test_clean_row() -> None:
    r = judge_row(ROW, summary(*passed()), 0, 5.0)
    assert r.result == "clean" and not r.as_expected and r.caught_by == []
    assert judge_row(CLEAN, summary(*passed()), 0, 5.0).as_expected


def test_a_row_that_judged_too_few_trials_is_an_error_never_clean() -> None:
    few = judge_row(CLEAN, summary(*passed(3)), 0, 5.0)  # 3 judged < ci's minimum
    assert few.result == "error" and few.error.startswith("not judged: 3 judged trials") and not few.as_expected
    assert few.shown == "error: not judged"
    skipped = [prop(f"p{i}", "passed", judged=0) for i in range(7)]  # every example cut by a time bound
    r = judge_row(CLEAN, summary(*skipped), 0, 5.0)
    assert r.result == "error" and "judged nothing: p0, p1" in r.error
    one_unjudged = passed(7) + [prop("p7", "passed", judged=0)]
    assert judge_row(CLEAN, summary(*one_unjudged), 0, 5.0).result == "error"


def test_a_row_caught_by_other_invariants_is_unexpected() -> None:
    wrong = judge_row(ROW, summary(prop("test_health", "failed", ["healthz_latency"], 5)), 1, 5.0)
    assert wrong.result == "caught" and wrong.unexpected and not wrong.as_expected
    assert wrong.shown == "caught (unexpected: healthz_latency)"
    also = judge_row(ROW, summary(prop("t", "failed", ["healthz_latency", "no_lost_results"], 5)), 1, 5.0)
    assert also.as_expected and not also.unexpected


def test_the_clean_rows_expectation_is_finding_1_on_ci_and_findings_1_and_5_on_nightly() -> None:
    clean = select_rows(["clean"])[0]
    ci = clean.expectation("ci")
    assert ci.expected == "caught" and ci.caught_by == FINDING_1_INVARIANTS
    assert select_rows(["fixed"])[0].expectation("ci").expected == "clean"  # the no-false-alarm row
    nightly = clean.expectation("nightly")
    assert nightly.expected == "caught" and nightly.caught_by == FINDING_1_INVARIANTS + FINDING_5_INVARIANTS
    stall = summary(prop("test_bounded_retries", "failed", ["retry_amplification"], 3360), profile="nightly")
    assert judge_row(clean, stall, 1, 5.0).as_expected
    half_open = summary(prop("test_no_lost_results", "failed", ["no_lost_results"], 4), profile="nightly")
    assert judge_row(clean, half_open, 1, 5.0).as_expected
    other = summary(prop("test_result_integrity", "failed", ["result_integrity"], 4), profile="nightly")
    assert judge_row(clean, other, 1, 5.0).unexpected
    quiet = summary(*passed(40), profile="nightly")
    assert judge_row(clean, quiet, 0, 5.0).result == "clean" and not judge_row(clean, quiet, 0, 5.0).as_expected
    fixed = select_rows(["fixed"])[0]
    assert fixed.expectation("nightly").expected == "clean"
    assert all(
        r.expectation(p).caught_by
        for r in DEFAULT_ROWS
        for p in ("ci", "nightly")
        if r.expectation(p).expected == "caught"
    )


def test_every_regression_row_on_the_release_is_built_on_finding_1s_fix() -> None:
    """A regression row whose suite session runs on 0.4.0 without finding 1's fix can be caught by the release's
    own stall (the invariants blocking-call's row names) in place of its regression; comparison rows measure a
    fault-free burst against the bare release, so they stay on it."""
    from faultload.matrix.mutant_rows import REGRESSION_BASE_FIXES

    sessions = [r for r in DEFAULT_ROWS if r.target == "skyrl==0.4.0" and r.regress and r.baseline is None]
    assert len(sessions) >= 25
    assert [r.name for r in sessions if not set(REGRESSION_BASE_FIXES) <= set(r.fixes)] == []
    assert "plain-tracebacks" in REGRESSION_BASE_FIXES
    assert all(not r.fixes for r in DEFAULT_ROWS if r.baseline is not None and r.target == r.baseline)


def test_infrastructure_failures_are_errors_not_catches() -> None:
    broken = summary(prop("a", "failed", error="could not start the stack for skyrl==0.4.0: boom"))
    r = judge_row(ROW, broken, 1, 5.0)
    assert r.result == "error" and "could not start the stack" in r.error
    assert judge_row(ROW, None, 4, 1.0).result == "error"
    assert judge_row(ROW, summary(), 5, 1.0).result == "error"  # no property ran
    timed_out = judge_row(ROW, summary(*passed()), None, 9.0, note="row timed out after 900s")
    assert timed_out.result == "error" and timed_out.error == "row timed out after 900s"


def test_markdown_table() -> None:
    rows = [
        judge_row(ROW, summary(prop("a", "failed", ["no_lost_results"], 1)), 1, 120.0).__dict__,
        judge_row(DEFAULT_ROWS[1], summary(prop("a", "failed", ["healthz_latency"], 9)), 1, 60.0).__dict__,
    ]
    text = markdown_table({"profile": "ci", "wall_s": 180.0, "ok": False, "rows": rows})
    assert "NOT every row as expected" in text
    assert (
        "| retention | `skyrl==0.4.0` | retention | — | caught by no_lost_results | caught | no_lost_results "
        "| 1 (min 7) | 1 | 2.0 min |"
    ) in text
    assert (
        "| fixed | `skyrl==0.4.0` | — | plain-tracebacks, keepalive-past-sdk, retain-until-expiry | clean "
        "| **caught** | healthz_latency | 1 (min 7) | 9 | 1.0 min |"
    ) in text
    assert "| row | no_lost_results | bounded_cpu |" in text
    assert "| retention | 1 / 0 / 0 | **0** / 1 / 1 |" in text
    assert "Not judged: retention: bounded_cpu; fixed: bounded_cpu." in text


def test_cli_rejects_bad_rows_with_exit_2() -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("faultload")), "matrix", "--rows", "clean,nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "faultload: error: --rows: unknown row 'nope'; known: " + ", ".join(r.name for r in DEFAULT_ROWS)
    ]


def test_cli_rejects_a_negative_session_time_with_exit_2() -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("faultload")), "matrix", "--session-s", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["faultload: error: --session-s: expected a number of seconds >= 0, got '-1'"]


def test_row_command_passes_the_session_time() -> None:
    cmd = row_command(ROW, "ci", Path("s"), Path("f"), all_properties=False, session_s=0.5)
    assert cmd[cmd.index("--faultload-session-s") + 1] == "0.5"


def test_a_real_row_whose_trials_were_all_skipped_is_error_not_judged(tmp_path: Path) -> None:
    """The real suite (pytest faultload in a subprocess) with no session time: no trial may start,
    every example is skipped by the time bound, and the row is an error, never clean."""
    out = tmp_path / "m.json"
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("faultload")),
            "matrix",
            "--profile",
            "ci",
            "--rows",
            "clean",
            "--session-s",
            "0",
            "--json-out",
            str(out),
            "--logs",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 3, proc.stderr  # not judged: the rig's, not the server's (cli.exits.EXIT_HARNESS)
    import json

    row = json.loads(out.read_text())["rows"][0]
    assert row["result"] == "error" and row["error"].startswith("not judged") and not row["as_expected"]
    assert row["judged_trials"] == 0 and row["trials"] == 0
    assert all(t["judged"] == 0 and t["skipped"] > 0 for t in row["invariants"].values())
    assert "error: not judged" in proc.stdout


# ----------------------------------------------------------------------------- comparison rows

COST = MatrixRow(
    "rich-access-log-cost",
    "skyrl==0.4.0",
    ("rich-access-log",),
    "caught",
    "why",
    caught_by=("server_cpu_ms_per_request",),
    baseline="skyrl==0.4.0",
)


def _compared(worse=(), unknown=(), trials=10, error=None) -> dict:
    return {
        "schema": "faultload.compare/1",
        "worse": list(worse),
        "unknown": list(unknown),
        "trials": [{"order": i, "error": error} for i in range(trials)],
        "metrics": [
            {
                "name": "server_cpu_ms_per_request",
                "ratio": 1.3,
                "ci": [1.2, 1.4],
                "threshold": 1.15,
                "worse": bool(worse),
            }
        ],
        "ok": not worse and not unknown,
    }


def test_a_comparison_row_is_caught_by_the_metric_that_is_worse() -> None:
    r = judge_compare_row(COST, _compared(worse=["server_cpu_ms_per_request"]), 1, 200.0)
    assert r.result == "caught" and r.caught_by == ["server_cpu_ms_per_request"] and r.as_expected
    r = judge_compare_row(COST, _compared(worse=["e2e_p99_s"]), 1, 200.0)
    assert r.result == "caught" and r.unexpected and not r.as_expected  # caught for the wrong reason


def test_a_comparison_row_is_clean_only_when_every_metric_was_judged_on_every_trial() -> None:
    aa = dataclasses.replace(COST, name="a-a", regress=(), expected="clean", caught_by=())
    assert judge_compare_row(aa, _compared(), 0, 200.0).result == "clean"
    r = judge_compare_row(aa, _compared(unknown=["healthz_p99_s"]), 1, 200.0)
    assert r.result == "error" and "unknown healthz_p99_s" in r.error
    assert judge_compare_row(aa, _compared(trials=4), 0, 200.0).error.startswith("not judged: 4 trials ran")
    assert "trial(s) failed to run" in judge_compare_row(aa, _compared(error="boom"), 0, 200.0).error
    assert judge_compare_row(aa, None, 2, 3.0).error == "faultload compare exited 2 without a result"


def test_a_comparison_row_runs_faultload_compare_on_its_two_builds(tmp_path, monkeypatch) -> None:
    """run_row with a stand-in for the subprocess (a test double): the command it would run."""
    seen = {}

    class Done:
        pid = 0

        def __init__(self, cmd, **kwargs):
            seen["cmd"] = cmd
            out = cmd[cmd.index("--json-out") + 1]
            Path(out).write_text(json.dumps(_compared(worse=["server_cpu_ms_per_request"])))

        def wait(self, timeout=None):
            return 1

    monkeypatch.setattr("faultload.matrix.run.subprocess.Popen", Done)
    r = run_row(COST, "ci", tmp_path, tmp_path, all_properties=False, cwd=tmp_path, timeout_s=10.0, log=lambda m: None)
    cmd = seen["cmd"]
    assert cmd[1:4] == ["-m", "faultload", "compare"]
    assert cmd[cmd.index("--baseline") + 1] == "skyrl==0.4.0"
    assert cmd[cmd.index("--candidate") + 1] == "skyrl==0.4.0+regress=rich-access-log"
    assert cmd[cmd.index("--requests") + 1] == "4096"  # the default trial: the 4,096 barrier burst
    assert r.result == "caught" and r.as_expected
    big = dataclasses.replace(COST, compare_trial=("--requests", "512", "--result-tokens", "8192"))
    run_row(big, "ci", tmp_path, tmp_path, all_properties=False, cwd=tmp_path, timeout_s=10.0, log=lambda m: None)
    cmd = seen["cmd"]
    assert cmd[cmd.index("--requests") + 1] == "512" and cmd[cmd.index("--result-tokens") + 1] == "8192"
