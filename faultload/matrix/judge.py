"""A matrix row's result from what its session left: the suite's summary JSON, or a comparison's
``faultload.compare/1`` JSON, and the exit code.

Apart from running the rows (``faultload.matrix.run``, which re-exports these): judging reads plain data only,
so a row's result is judged, and tested, without a session or a subprocess.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from faultload.compare.rows import COMPARE_REPEATS, compare_outcome
from faultload.matrix.row import NOT_RUN, Expectation, MatrixRow
from faultload.store.matrix_table import shown_result
from faultload.suite.profiles import get_profile


@dataclass
class RowResult:
    """One row as the matrix reports it (the JSON contract's row)."""

    row: str
    target: str
    regress: list[str]
    expected: str
    result: str  # "clean" | "caught" | "error" | "skipped" (NOT_RUN: the row's expectation on the profile)
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
        self.unexpected = bool(
            self.result == "caught"
            and self.expected_caught_by
            and not set(self.caught_by) & set(self.expected_caught_by)
        )
        self.as_expected = self.result == self.expected and not self.unexpected
        return self

    @property
    def shown(self) -> str:
        """The result as the table shows it: ``caught (unexpected: ...)`` when caught for the wrong reason."""
        return shown_result(asdict(self))


def _error_result(row: MatrixRow, expectation: Expectation, min_judged_trials: int, wall_s: float) -> RowResult:
    """A row's result before its session's output is read: an error until that output says otherwise."""
    return RowResult(
        row.name,
        row.target,
        list(row.regress),
        expectation.expected,
        "error",
        list(row.fixes),
        expected_caught_by=list(expectation.caught_by),
        min_judged_trials=min_judged_trials,
        wall_s=round(wall_s, 1),
        why=expectation.why or row.why,
    )


def not_run_result(row: MatrixRow, profile: str) -> RowResult:
    """A row whose expectation on ``profile`` is that it is not run there: ``skipped``, with the reason; never
    clean (nothing was judged), never an error (the row's own definition leaves it out)."""
    expectation = row.expectation(profile)
    result = _error_result(row, expectation, get_profile(profile).min_judged_trials, 0.0)
    result.result = NOT_RUN
    return result.settle()


def _take_smallest_repro(result: RowResult, caught: list[dict[str, Any]]) -> None:
    """The smallest repro among the caught properties', and its evidence: what the row's line and JSON show."""
    with_repro = [p for p in caught if p.get("repro_requests") is not None]
    if not with_repro:
        return
    smallest = min(with_repro, key=lambda p: p["repro_requests"])
    result.repro_requests = smallest["repro_requests"]
    result.repro_training_calls = smallest.get("repro_training_calls") or 0
    result.repro_path = smallest.get("repro_path")
    result.evidence = first_evidence(smallest)


def judge_row(
    row: MatrixRow,
    summary: dict[str, Any] | None,
    returncode: int | None,
    wall_s: float,
    note: str | None = None,
    *,
    profile: str | None = None,
) -> RowResult:
    """A row's result from its session summary and pytest's exit code.

    ``profile`` (default: the summary's) picks the row's expectation and the
    fewest judged trials a clean result needs.
    """
    name = profile or (summary or {}).get("profile") or "ci"
    result = _error_result(row, row.expectation(name), get_profile(name).min_judged_trials, wall_s)
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
    broken = "; ".join(
        p.get("error") or f"{p['name']} failed without a violated invariant" for p in failed if not p.get("violated")
    )
    unjudged = [p["name"] for p in props if not p.get("violated") and not p.get("judged_trials")]
    if caught:
        result.result = "caught"
        result.caught_by = list(dict.fromkeys(name for p in caught for name in p["violated"]))
        _take_smallest_repro(result, caught)
        result.error = broken or None
    elif broken:
        result.error = broken
    elif note:
        result.error = note
    elif returncode not in (0, 1) or not props:
        result.error = f"pytest exited {returncode}" + ("" if props else " and ran no property")
    elif unjudged or result.judged_trials < result.min_judged_trials:
        result.error = (
            f"not judged: {result.judged_trials} judged trials, the {name} profile's minimum is "
            f"{result.min_judged_trials}" + (f"; judged nothing: {', '.join(unjudged)}" if unjudged else "")
        )
    else:
        result.result = "clean"
    return result.settle()


def judge_compare_row(
    row: MatrixRow,
    result: dict[str, Any] | None,
    returncode: int | None,
    wall_s: float,
    note: str | None = None,
    *,
    profile: str = "ci",
) -> RowResult:
    """A comparison row's result from its ``faultload.compare/1`` JSON (every trial counts as judged)."""
    out = _error_result(row, row.expectation(profile), 2 * COMPARE_REPEATS, wall_s)
    out.result, out.caught_by, out.error = compare_outcome(result, returncode)
    if note:
        out.result, out.error = "error", note
    trials = (result or {}).get("trials", [])
    out.trials = out.judged_trials = len(trials)
    if out.result == "clean" and out.judged_trials < out.min_judged_trials:
        out.result, out.error = "error", f"not judged: {out.judged_trials} trials ran, {out.min_judged_trials} needed"
    out.properties = [
        {
            "name": m["name"],
            "ratio": m["ratio"],
            "ci": m["ci"],
            "threshold": m["threshold"],
            "unbounded": m.get("unbounded", False),
            "worse": m["worse"],
        }
        for m in (result or {}).get("metrics", [])
    ]
    return out.settle()


def first_evidence(prop: dict[str, Any], limit: int = 400) -> str | None:
    """``name: detail`` of a caught property's first violated invariant, cut to ``limit`` characters."""
    evidence = prop.get("evidence") or {}
    for name in prop.get("violated") or ():
        if name in evidence:
            text = f"{name}: {evidence[name]}"
            return text if len(text) <= limit else text[: limit - 1] + "…"
    return None
