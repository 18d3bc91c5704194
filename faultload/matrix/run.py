"""``faultload matrix``: does the suite catch the bugs it exists for, and stay quiet on a good build?

Each row is one ``pytest faultload`` session (a fresh stack: its own router,
Toxiproxy and server) on one target with some regression or fix switches, run as a
subprocess so rows cannot leak state into each other. The row's result is
read from the session's ``--faultload-summary-json``:

* ``caught`` — a property failed on violated invariants (``caught_by`` names
  them; the smallest repro of the row is reported);
* ``clean``  — every property passed, and the session judged at least the
  profile's ``min_judged_trials`` trials (a trial judges an invariant when
  its verdict is ok or violated, not unknown);
* ``error``  — the session could not judge the target (the stack did not
  start, the harness crashed, the row timed out, or it judged too few
  trials: ``not judged``): neither clean nor caught.

A row names the invariants that must catch it (``expected_caught_by``): a
row caught only by others is ``caught (unexpected: ...)`` and not as
expected — a regression caught for the wrong reason (a stall, a budget that
happened to trip) proves nothing about the bug the row is for. Expectations
may differ per profile (``MatrixRow.on``): while SkyRL 0.4.0 has finding 1,
the ``clean`` row is expected to be caught on nightly by the invariants that
finding violates, and the ``fixed`` row is the no-false-alarm row.

A row stops at its first failing property (pytest ``-x``) unless
``--all-properties`` is given: the row is caught from then on, and the rest
would only add wall time. The same rule applies to every row; a clean row
runs every property either way.

The JSON written by ``--json-out`` is a contract (``faultload.matrix/1``)::

    {"rows": [{"row", "target", "regress": [...], "fixes": [...], "expected": "clean"|"caught",
               "expected_caught_by": [...], "result": "clean"|"caught"|"error", "caught_by": [...],
               "unexpected": bool, "as_expected": bool, "judged_trials", "min_judged_trials",
               "invariants": {name: {"judged", "unknown", "skipped"}},
               "repro_requests", "repro_training_calls", "repro_path", "wall_s", ...}],
     "profile", "wall_s", "ok"}
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from faultload.compare.rows import COMPARE_REPEATS, compare_command, compare_outcome
from faultload.host.workspace import Workspace
from faultload.matrix.rows import DEFAULT_ROWS, FINDING_1_INVARIANTS, Expectation, MatrixRow
from faultload.model.switches import switches_text
from faultload.store.matrix_table import shown_result
from faultload.suite.profiles import get_profile

# The faultload package's folder: what each row's `pytest` is pointed at (the properties are in suite/).
PACKAGE_DIR = Path(__file__).resolve().parents[1]

SCHEMA = "faultload.matrix/1"
# The rows are data in faultload.matrix.rows; re-exported here, where their users have always found them.
__all__ = ["DEFAULT_ROWS", "FINDING_1_INVARIANTS", "Expectation", "MatrixRow", "SCHEMA", "RowResult",
           "judge_row", "judge_compare_row", "run_matrix", "select_rows"]


@dataclass
class RowResult:
    row: str
    target: str
    regress: list[str]
    expected: str
    result: str  # "clean" | "caught" | "error"
    fixes: list[str] = field(default_factory=list)
    expected_caught_by: list[str] = field(default_factory=list)
    caught_by: list[str] = field(default_factory=list)
    unexpected: bool = False  # caught, but by none of expected_caught_by
    judged_trials: int = 0
    min_judged_trials: int = 1
    invariants: dict[str, dict[str, int]] = field(default_factory=dict)  # judged/unknown/skipped per invariant
    repro_requests: int | None = None
    repro_training_calls: int = 0  # the smallest repro's forward_backward + optim_step beside its samples
    repro_path: str | None = None
    evidence: str | None = None  # the smallest repro's first violated invariant and its detail
    wall_s: float = 0.0
    properties: list[dict[str, Any]] = field(default_factory=list)
    trials: int = 0
    error: str | None = None
    why: str = ""

    as_expected: bool = False

    def settle(self) -> "RowResult":
        """Set ``unexpected`` and ``as_expected`` from the result and the expectation."""
        self.unexpected = bool(self.result == "caught" and self.expected_caught_by
                               and not set(self.caught_by) & set(self.expected_caught_by))
        self.as_expected = self.result == self.expected and not self.unexpected
        return self

    @property
    def shown(self) -> str:
        """The result as the table shows it: ``caught (unexpected: ...)`` when caught for the wrong reason."""
        return shown_result(asdict(self))


def select_rows(names: list[str] | None, rows: tuple[MatrixRow, ...] = DEFAULT_ROWS) -> list[MatrixRow]:
    """The rows named (in the order given), or all; ValueError naming an unknown one."""
    if not names:
        return list(rows)
    by_name = {r.name: r for r in rows}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"--rows: unknown row {unknown[0]!r}; known: {', '.join(by_name)}")
    return [by_name[n] for n in dict.fromkeys(names)]


def row_command(row: MatrixRow, profile: str, summary: Path, suite_dir: Path, *, all_properties: bool,
                python: str = sys.executable, session_s: float | None = None) -> list[str]:
    """The pytest command line that runs one row (``session_s``: override the profile's session time)."""
    cmd = [python, "-m", "pytest", str(suite_dir), "-p", "no:cacheprovider", "-q",
           "--faultload-profile", profile, "--faultload-target", row.target,
           "--faultload-summary-json", str(summary)]
    for name in row.regress:
        cmd += ["--faultload-regress", name]
    for name in row.fixes:
        cmd += ["--faultload-fix", name]
    if row.sdk:
        cmd += ["--faultload-sdk", row.sdk]
    if session_s is not None:
        cmd += ["--faultload-session-s", f"{session_s:g}"]
    if row.only:
        cmd += ["-k", row.only]
    if not all_properties:
        cmd.append("-x")
    return cmd


def judge_row(row: MatrixRow, summary: dict[str, Any] | None, returncode: int | None, wall_s: float,
              note: str | None = None, *, profile: str | None = None) -> RowResult:
    """A row's result from its session summary and pytest's exit code.

    ``profile`` (default: the summary's) picks the row's expectation and the
    fewest judged trials a clean result needs.
    """
    name = profile or (summary or {}).get("profile") or "ci"
    expectation = row.expectation(name)
    result = RowResult(row.name, row.target, list(row.regress), expectation.expected, "error", list(row.fixes),
                       expected_caught_by=list(expectation.caught_by),
                       min_judged_trials=get_profile(name).min_judged_trials,
                       wall_s=round(wall_s, 1), why=expectation.why or row.why)
    if summary is None:
        result.error = note or f"pytest exited {returncode} without a summary"
        return result.settle()
    props = summary.get("properties", [])
    result.properties = props
    result.trials = int(summary.get("trials", 0))
    result.judged_trials = int(summary.get("judged_trials", 0))
    result.invariants = summary.get("invariants", {}) or {}
    failed = [p for p in props if p.get("outcome") in ("failed", "error")]
    caught = [p for p in failed if p.get("violated")]
    broken = "; ".join(p.get("error") or f"{p['name']} failed without a violated invariant"
                       for p in failed if not p.get("violated"))
    unjudged = [p["name"] for p in props if not p.get("violated") and not p.get("judged_trials")]
    if caught:
        result.result = "caught"
        result.caught_by = list(dict.fromkeys(name for p in caught for name in p["violated"]))
        with_repro = [p for p in caught if p.get("repro_requests") is not None]
        if with_repro:
            smallest = min(with_repro, key=lambda p: p["repro_requests"])
            result.repro_requests = smallest["repro_requests"]
            result.repro_training_calls = smallest.get("repro_training_calls") or 0
            result.repro_path = smallest.get("repro_path")
            result.evidence = first_evidence(smallest)
        result.error = broken or None
    elif broken:
        result.error = broken
    elif note:
        result.error = note
    elif returncode not in (0, 1) or not props:
        result.error = f"pytest exited {returncode}" + ("" if props else " and ran no property")
    elif unjudged or result.judged_trials < result.min_judged_trials:
        result.error = (f"not judged: {result.judged_trials} judged trials, the {name} profile's minimum is "
                        f"{result.min_judged_trials}"
                        + (f"; judged nothing: {', '.join(unjudged)}" if unjudged else ""))
    else:
        result.result = "clean"
    return result.settle()


def judge_compare_row(row: MatrixRow, result: dict[str, Any] | None, returncode: int | None, wall_s: float,
                      note: str | None = None, *, profile: str = "ci") -> RowResult:
    """A comparison row's result from its ``faultload.compare/1`` JSON (every trial counts as judged)."""
    expectation = row.expectation(profile)
    out = RowResult(row.name, row.target, list(row.regress), expectation.expected, "error", list(row.fixes),
                    expected_caught_by=list(expectation.caught_by), min_judged_trials=2 * COMPARE_REPEATS,
                    wall_s=round(wall_s, 1), why=expectation.why or row.why)
    out.result, out.caught_by, out.error = compare_outcome(result, returncode)
    if note:
        out.result, out.error = "error", note
    trials = (result or {}).get("trials", [])
    out.trials = out.judged_trials = len(trials)
    if out.result == "clean" and out.judged_trials < out.min_judged_trials:
        out.result, out.error = "error", f"not judged: {out.judged_trials} trials ran, {out.min_judged_trials} needed"
    out.properties = [{"name": m["name"], "ratio": m["ratio"], "ci": m["ci"], "threshold": m["threshold"],
                       "unbounded": m.get("unbounded", False), "worse": m["worse"]}
                      for m in (result or {}).get("metrics", [])]
    return out.settle()


def row_timeout_s(profile_name: str, session_s: float | None = None) -> float:
    """A bound on one row's session: the profile's session time and shrink time, plus stack start-up."""
    profile = get_profile(profile_name)
    return (profile.session_s if session_s is None else session_s) + profile.shrink_s + 300.0


def run_row(row: MatrixRow, profile: str, workdir: Path, suite_dir: Path, *, all_properties: bool,
            cwd: Path, timeout_s: float, log: Callable[[str], None], session_s: float | None = None) -> RowResult:
    """Run one row's pytest session; its output goes to ``workdir/<row>.log``."""
    summary_path = workdir / f"{row.name}.summary.json"
    log_path = workdir / f"{row.name}.log"
    if row.baseline is not None:
        cmd = compare_command(row.baseline, row.build, summary_path, trial=row.compare_trial)
    else:
        cmd = row_command(row, profile, summary_path, suite_dir, all_properties=all_properties, session_s=session_s)
    started = time.monotonic()
    note = None
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                start_new_session=True)
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            note = f"row timed out after {timeout_s:.0f}s"
            returncode = _stop(proc)
        except BaseException:
            _stop(proc)
            raise
    summary = None
    if summary_path.is_file():
        try:
            summary = json.loads(summary_path.read_text())
        except ValueError as exc:
            note = note or f"unreadable summary: {exc}"
    judged = judge_compare_row if row.baseline is not None else judge_row
    result = judged(row, summary, returncode, time.monotonic() - started, note, profile=profile)
    log(f"{row.name}: {result.shown} (expected {result.expected}"
        + (f" by {', '.join(result.expected_caught_by)}" if result.expected_caught_by else "")
        + f") in {result.wall_s:.0f}s, {result.judged_trials} judged trials"
        + (f", caught by {', '.join(result.caught_by)}" if result.caught_by else "")
        + (f", repro {result.repro_requests} requests" if result.repro_requests is not None else "")
        + (f" + {result.repro_training_calls} training calls" if result.repro_training_calls else "")
        + (f"; {result.error}" if result.error else "")
        + (f"; {result.evidence}" if result.evidence else "") + f"; log {log_path}")
    return result


def first_evidence(prop: dict[str, Any], limit: int = 400) -> str | None:
    """``name: detail`` of a caught property's first violated invariant, cut to ``limit`` characters."""
    evidence = prop.get("evidence") or {}
    for name in prop.get("violated") or ():
        if name in evidence:
            text = f"{name}: {evidence[name]}"
            return text if len(text) <= limit else text[:limit - 1] + "…"
    return None


def _stop(proc: subprocess.Popen) -> int | None:
    """SIGINT the row's session (pytest then stops its stack), escalating to SIGKILL of its group."""
    for sig, wait_s in ((signal.SIGINT, 60.0), (signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            return proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    return proc.poll()


def run_matrix(rows: list[MatrixRow], profile: str, *, all_properties: bool = False, cwd: Path | None = None,
               workdir: Path | None = None, log: Callable[[str], None] = print,
               session_s: float | None = None, home: str | None = None,
               spread: Callable[[list[MatrixRow], Callable[[MatrixRow], RowResult]], list[RowResult]] | None = None,
               ) -> dict[str, Any]:
    """Run every row; the matrix as the JSON contract describes (``session_s``: each row's session time;
    ``home``: the workspace the logs go under when ``workdir`` is None, the caller's $FAULTLOAD_HOME;
    ``spread``: runs the rows, e.g. over a Ray cluster's nodes (``matrix.spread``); default one after another)."""
    cwd = cwd or Path.cwd()
    suite_dir = PACKAGE_DIR
    if workdir is None:  # kept: the JSON points at each row's log; under the workspace, not /tmp
        workdir = Workspace.default(home).root / "matrix" / time.strftime("%Y%m%dT%H%M%S")
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    run_one = functools.partial(run_row, profile=profile, workdir=workdir, suite_dir=suite_dir,
                                all_properties=all_properties, cwd=cwd, timeout_s=row_timeout_s(profile, session_s),
                                log=log, session_s=session_s)
    for row in rows:
        expectation = row.expectation(profile)
        log(f"row {row.name}: {row.target}" + switches_text(row.regress, row.fixes)
            + f", profile {profile}, expected {expectation.expected}"
            + (f" by {', '.join(expectation.caught_by)}" if expectation.caught_by else ""))
    results = spread(rows, run_one) if spread is not None else [run_one(row) for row in rows]
    return {
        "schema": SCHEMA,
        "profile": profile,
        "session_s": session_s,
        "wall_s": round(time.monotonic() - started, 1),
        "ok": all(r.as_expected for r in results),
        "logs": str(workdir),
        "rows": [asdict(r) for r in results],
    }
