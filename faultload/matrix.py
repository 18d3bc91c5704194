"""``faultload matrix``: does the suite catch the bugs it exists for, and stay quiet on a good build?

Each row is one ``pytest faultload`` session (a fresh stack: its own router,
Toxiproxy and server) on one target with some regression or fix switches, run as a
subprocess so rows cannot leak state into each other. The row's result is
read from the session's ``--faultload-summary-json``:

* ``caught`` — a property failed on violated invariants (``caught_by`` names
  them; the smallest repro of the row is reported);
* ``clean``  — every property passed;
* ``error``  — the session could not judge the target (the stack did not
  start, the harness crashed, the row timed out): neither clean nor caught.

A row stops at its first failing property (pytest ``-x``) unless
``--all-properties`` is given: the row is caught from then on, and the rest
would only add wall time. The same rule applies to every row; a clean row
runs every property either way.

The JSON written by ``--json-out`` is a contract (``faultload.matrix/1``)::

    {"rows": [{"row", "target", "regress": [...], "fixes": [...], "expected": "clean"|"caught",
               "result": "clean"|"caught"|"error", "caught_by": [...],
               "repro_requests", "repro_path", "wall_s", ...}],
     "profile", "wall_s", "ok"}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from faultload.targets.skyrl_patches import switches_text

SCHEMA = "faultload.matrix/1"


@dataclass(frozen=True)
class MatrixRow:
    """One (target, regression and fix switches) with the result the suite must give."""

    name: str
    target: str
    regress: tuple[str, ...]
    expected: str  # "clean" | "caught"
    why: str  # what the row proves (the upstream fix a regression switch undoes, the bug a fix mends)
    fixes: tuple[str, ...] = ()


DEFAULT_ROWS: tuple[MatrixRow, ...] = (
    MatrixRow("clean", "skyrl==0.4.0", (), "clean", "the release under test: no false alarm"),
    MatrixRow("fixed", "skyrl==0.4.0", (), "clean",
              "the release with finding 1's candidate fix (failures logged without Rich tracebacks): "
              "no false alarm once the stall the clean row can meet is gone", fixes=("plain-tracebacks",)),
    MatrixRow("retention", "skyrl==0.4.0", ("retention",), "caught",
              "retrieved-TTL clock started by dropped polls, TTL 120 s: lost results after a dropped poll"),
    MatrixRow("keepalive", "skyrl==0.4.0", ("keepalive",), "caught",
              "uvicorn's 5 s keep-alive and 2048 backlog: reconnect storms under completion bursts"),
    MatrixRow("rich-access-log", "skyrl==0.4.0", ("rich-access-log",), "caught",
              "access log through RichHandler: server CPU per request, throughput collapse"),
    MatrixRow("skyrl-0.3.0", "skyrl==0.3.0", (), "caught",
              "futures in SQLite, httpx forwarding: pool exhaustion and slow forwarding under bursts"),
)


@dataclass
class RowResult:
    row: str
    target: str
    regress: list[str]
    expected: str
    result: str  # "clean" | "caught" | "error"
    fixes: list[str] = field(default_factory=list)
    caught_by: list[str] = field(default_factory=list)
    repro_requests: int | None = None
    repro_path: str | None = None
    wall_s: float = 0.0
    properties: list[dict[str, Any]] = field(default_factory=list)
    trials: int = 0
    error: str | None = None
    why: str = ""

    @property
    def as_expected(self) -> bool:
        return self.result == self.expected


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
                python: str = sys.executable) -> list[str]:
    """The pytest command line that runs one row."""
    cmd = [python, "-m", "pytest", str(suite_dir), "-p", "no:cacheprovider", "-q",
           "--faultload-profile", profile, "--faultload-target", row.target,
           "--faultload-summary-json", str(summary)]
    for name in row.regress:
        cmd += ["--faultload-regress", name]
    for name in row.fixes:
        cmd += ["--faultload-fix", name]
    if not all_properties:
        cmd.append("-x")
    return cmd


def judge_row(row: MatrixRow, summary: dict[str, Any] | None, returncode: int | None, wall_s: float,
              note: str | None = None) -> RowResult:
    """A row's result from its session summary and pytest's exit code."""
    result = RowResult(row.name, row.target, list(row.regress), row.expected, "error", list(row.fixes),
                       wall_s=round(wall_s, 1), why=row.why)
    if summary is None:
        result.error = note or f"pytest exited {returncode} without a summary"
        return result
    props = summary.get("properties", [])
    result.properties = props
    result.trials = int(summary.get("trials", 0))
    failed = [p for p in props if p.get("outcome") in ("failed", "error")]
    caught = [p for p in failed if p.get("violated")]
    broken = "; ".join(p.get("error") or f"{p['name']} failed without a violated invariant"
                       for p in failed if not p.get("violated"))
    if caught:
        result.result = "caught"
        result.caught_by = list(dict.fromkeys(name for p in caught for name in p["violated"]))
        with_repro = [p for p in caught if p.get("repro_requests") is not None]
        if with_repro:
            smallest = min(with_repro, key=lambda p: p["repro_requests"])
            result.repro_requests = smallest["repro_requests"]
            result.repro_path = smallest.get("repro_path")
        result.error = broken or None
    elif broken:
        result.error = broken
    elif note:
        result.error = note
    elif returncode not in (0, 1) or not props:
        result.error = f"pytest exited {returncode}" + ("" if props else " and ran no property")
    else:
        result.result = "clean"
    return result


def row_timeout_s(profile_name: str) -> float:
    """A bound on one row's session: the profile's session time and shrink time, plus stack start-up."""
    from faultload.suite.profiles import get_profile

    profile = get_profile(profile_name)
    return profile.session_s + profile.shrink_s + 300.0


def run_row(row: MatrixRow, profile: str, workdir: Path, suite_dir: Path, *, all_properties: bool,
            cwd: Path, timeout_s: float, log: Callable[[str], None]) -> RowResult:
    """Run one row's pytest session; its output goes to ``workdir/<row>.log``."""
    summary_path = workdir / f"{row.name}.summary.json"
    log_path = workdir / f"{row.name}.log"
    cmd = row_command(row, profile, summary_path, suite_dir, all_properties=all_properties)
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
    result = judge_row(row, summary, returncode, time.monotonic() - started, note)
    log(f"{row.name}: {result.result} (expected {row.expected}) in {result.wall_s:.0f}s"
        + (f", caught by {', '.join(result.caught_by)}" if result.caught_by else "")
        + (f", repro {result.repro_requests} requests" if result.repro_requests is not None else "")
        + (f"; {result.error}" if result.error else "") + f"; log {log_path}")
    return result


def _stop(proc: subprocess.Popen) -> int | None:
    """SIGINT the row's session (pytest then stops its stack), escalating to SIGKILL of its group."""
    import signal

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
               workdir: Path | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every row; the matrix as the JSON contract describes."""
    cwd = cwd or Path.cwd()
    suite_dir = Path(__file__).resolve().parent
    if workdir is None:  # kept: the JSON points at each row's log; under the workspace, not /tmp
        from faultload.workspace import Workspace

        workdir = Workspace.default().root / "matrix" / time.strftime("%Y%m%dT%H%M%S")
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results = []
    for row in rows:
        log(f"row {row.name}: {row.target}" + switches_text(row.regress, row.fixes)
            + f", profile {profile}, expected {row.expected}")
        results.append(run_row(row, profile, workdir, suite_dir, all_properties=all_properties, cwd=cwd,
                               timeout_s=row_timeout_s(profile), log=log))
    return {
        "schema": SCHEMA,
        "profile": profile,
        "wall_s": round(time.monotonic() - started, 1),
        "ok": all(r.as_expected for r in results),
        "logs": str(workdir),
        "rows": [asdict(r) for r in results],
    }


def markdown_table(matrix: dict[str, Any]) -> str:
    """The matrix as the README shows it."""
    lines = [
        f"Profile `{matrix['profile']}`, {matrix['wall_s'] / 60:.1f} min in all "
        f"({'every row as expected' if matrix['ok'] else 'NOT every row as expected'}).",
        "",
        "| row | target | regress | fix | expected | result | caught by | repro (requests) | wall |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in matrix["rows"]:
        result = r["result"] if r["result"] == r["expected"] else f"**{r['result']}**"
        lines.append(
            f"| {r['row']} | `{r['target']}` | {', '.join(r['regress']) or '—'} | "
            f"{', '.join(r.get('fixes', [])) or '—'} | {r['expected']} | {result} | "
            f"{', '.join(r['caught_by']) or '—'} | "
            f"{r['repro_requests'] if r['repro_requests'] is not None else '—'} | {r['wall_s'] / 60:.1f} min |"
        )
    return "\n".join(lines) + "\n"
