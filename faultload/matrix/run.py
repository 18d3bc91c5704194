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
  trials: ``not judged``): neither clean nor caught;
* ``skipped`` — not run: the row's expectation on this profile is that the
  profile cannot judge it (it draws no training, or too few trials of the
  row's property); its ``why`` says so. Neither clean nor an error; naming
  such a row in ``--rows`` is a usage error.

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

    {"rows": [{"row", "target", "regress": [...], "fixes": [...], "expected": "clean"|"caught"|"skipped",
               "expected_caught_by": [...], "result": "clean"|"caught"|"error"|"skipped", "caught_by": [...],
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
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from faultload.compare.rows import compare_command
from faultload.host.workspace import Workspace
from faultload.matrix.judge import RowResult, judge_compare_row, judge_row, not_run_result
from faultload.matrix.rows import DEFAULT_ROWS, FINDING_1_INVARIANTS, Expectation, MatrixRow
from faultload.model.switches import switches_text
from faultload.suite.profiles import get_profile

# The faultload package's folder: what each row's `pytest` is pointed at (the properties are in suite/).
PACKAGE_DIR = Path(__file__).resolve().parents[1]

SCHEMA = "faultload.matrix/1"
CANCEL_POLL_S = 1.0  # how soon a running row sees that the matrix was cancelled
# The rows are data in faultload.matrix.rows, and a row's result is judged in faultload.matrix.judge; both
# re-exported here, where their users have always found them.
__all__ = [
    "DEFAULT_ROWS",
    "FINDING_1_INVARIANTS",
    "Expectation",
    "MatrixRow",
    "SCHEMA",
    "RowResult",
    "judge_row",
    "judge_compare_row",
    "run_matrix",
    "select_rows",
]


def select_rows(names: list[str] | None, rows: tuple[MatrixRow, ...] = DEFAULT_ROWS) -> list[MatrixRow]:
    """The rows named (in the order given), or all; ValueError naming an unknown one."""
    if not names:
        return list(rows)
    by_name = {r.name: r for r in rows}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"--rows: unknown row {unknown[0]!r}; known: {', '.join(by_name)}")
    return [by_name[n] for n in dict.fromkeys(names)]


def row_command(
    row: MatrixRow,
    profile: str,
    summary: Path,
    suite_dir: Path,
    *,
    all_properties: bool,
    python: str = sys.executable,
    session_s: float | None = None,
) -> list[str]:
    """The pytest command line that runs one row (``session_s``: override the profile's session time)."""
    cmd = [
        python,
        "-m",
        "pytest",
        str(suite_dir),
        "-p",
        "no:cacheprovider",
        "-q",
        "--faultload-profile",
        profile,
        "--faultload-target",
        row.target,
        "--faultload-summary-json",
        str(summary),
    ]
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


def row_timeout_s(profile_name: str, session_s: float | None = None) -> float:
    """A bound on one row's session: the profile's session time and shrink time, plus stack start-up."""
    profile = get_profile(profile_name)
    return (profile.session_s if session_s is None else session_s) + profile.shrink_s + 300.0


def run_row(
    row: MatrixRow,
    profile: str,
    workdir: Path,
    suite_dir: Path,
    *,
    all_properties: bool,
    cwd: Path,
    timeout_s: float,
    log: Callable[[str], None],
    session_s: float | None = None,
    cancel: threading.Event | None = None,
) -> RowResult:
    """Run one row's pytest session; its output goes to ``workdir/<row>.log`` (``cancel`` set: stop it, raising
    ``RowCancelled``)."""
    summary_path = workdir / f"{row.name}.summary.json"
    log_path = workdir / f"{row.name}.log"
    if row.baseline is not None:
        cmd = compare_command(row.baseline, row.build, summary_path, trial=row.compare_trial)
    else:
        cmd = row_command(row, profile, summary_path, suite_dir, all_properties=all_properties, session_s=session_s)
    started = time.monotonic()
    note = None
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=True
        )
        try:
            returncode: int | None = _wait(proc, timeout_s, cancel)
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
    log(
        f"{row.name}: {result.shown} (expected {result.expected}"
        + (f" by {', '.join(result.expected_caught_by)}" if result.expected_caught_by else "")
        + f") in {result.wall_s:.0f}s, {result.judged_trials} judged trials"
        + (f", caught by {', '.join(result.caught_by)}" if result.caught_by else "")
        + (f", repro {result.repro_requests} requests" if result.repro_requests is not None else "")
        + (f" + {result.repro_training_calls} training calls" if result.repro_training_calls else "")
        + (f"; {result.error}" if result.error else "")
        + (f"; {result.evidence}" if result.evidence else "")
        + f"; log {log_path}"
    )
    return result


class RowCancelled(Exception):
    """The row was stopped because the matrix was (Ctrl-C, or another row's harness error)."""


def _wait(proc: subprocess.Popen, timeout_s: float, cancel: threading.Event | None) -> int:
    """The session's exit code; TimeoutExpired past ``timeout_s``, RowCancelled once ``cancel`` is set."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return proc.wait(timeout=max(0.0, min(CANCEL_POLL_S, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                raise RowCancelled from None
            if time.monotonic() >= deadline:
                raise


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


def run_matrix(
    rows: list[MatrixRow],
    profile: str,
    *,
    all_properties: bool = False,
    cwd: Path | None = None,
    workdir: Path | None = None,
    log: Callable[[str], None] = print,
    session_s: float | None = None,
    home: str | None = None,
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
    run_one = functools.partial(
        run_row,
        profile=profile,
        workdir=workdir,
        suite_dir=suite_dir,
        all_properties=all_properties,
        cwd=cwd,
        timeout_s=row_timeout_s(profile, session_s),
        log=log,
        session_s=session_s,
    )
    for row in rows:
        expectation = row.expectation(profile)
        log(
            f"row {row.name}: {row.target}"
            + switches_text(row.regress, row.fixes)
            + f", profile {profile}, "
            + (
                f"not run on this profile: {expectation.why}"
                if not row.runs_on(profile)
                else f"expected {expectation.expected}"
                + (f" by {', '.join(expectation.caught_by)}" if expectation.caught_by else "")
            )
        )
    run = [row for row in rows if row.runs_on(profile)]
    ran = iter(spread(run, run_one) if spread is not None else [run_one(row) for row in run])
    results = [next(ran) if row.runs_on(profile) else not_run_result(row, profile) for row in rows]
    return {
        "schema": SCHEMA,
        "profile": profile,
        "session_s": session_s,
        "wall_s": round(time.monotonic() - started, 1),
        "ok": all(r.as_expected for r in results),
        "logs": str(workdir),
        "rows": [asdict(r) for r in results],
    }
