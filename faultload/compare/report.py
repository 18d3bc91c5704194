"""A comparison shown: the Markdown table (``--markdown-out``, the README's before/after tables) and its PNG."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from faultload.compare.judge import interval_of, ratio_of
from faultload.store.junit import Case, Suite
from faultload.store.plot import pyplot

if TYPE_CHECKING:  # the runner runs trials; what shows a comparison only reads them
    from faultload.compare.runner import SideTrial

_COLOURS = {"baseline": "tab:blue", "candidate": "tab:orange"}


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "B":
        return f"{value / 1024:.1f} KiB"
    if unit == "s":
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    return f"{value:.3g}{' ' + unit if unit else ''}"


def _number(value: float | None) -> str:
    return "—" if value is None else "∞" if math.isinf(value) else f"{value:.3f}"


def _verdict(row: dict[str, Any]) -> str:
    if row["unknown"]:
        return "unknown"
    return "worse" if row["worse"] else "ok"


def _interval(row: dict[str, Any]) -> str:
    ci = interval_of(row)
    return "—" if ci is None else f"{_number(ci[0])} – {_number(ci[1])}"


def _bound(row: dict[str, Any]) -> str:
    """The threshold with the side a worse ratio is on: ``≤ 1.15`` for a cost, ``≥ 0.87`` for throughput."""
    return ("≤ " if row["higher_is_worse"] else "≥ ") + f"{row['threshold']:g}"


def table_rows(result: dict[str, Any]) -> tuple[list[str], list[tuple[dict[str, Any], list[str]]]]:
    """The table's head and, per metric, (its row of the JSON, its cells): both medians, the ratio with its
    interval, the threshold and the verdict (``ok``, ``worse`` or ``unknown``): ``--markdown-out``'s and
    ``--html``'s."""
    level = round(100 * result.get("confidence", 0.95))
    head = ["metric", "baseline", "candidate", "ratio", f"{level}% interval", "threshold", "verdict"]
    return head, [
        (
            row,
            [
                row["name"],
                _fmt(row["baseline_median"], row["unit"]),
                _fmt(row["candidate_median"], row["unit"]),
                _number(ratio_of(row)),
                _interval(row),
                _bound(row),
                _verdict(row),
            ],
        )
        for row in result["metrics"]
    ]


def verdict_text(result: dict[str, Any]) -> str:
    """``ok``, or ``worse: a, b`` and ``unknown: c``: the comparison in sum."""
    verdict = "ok" if result["ok"] else ("worse: " + ", ".join(result["worse"]) if result["worse"] else "")
    if result["unknown"]:
        verdict = (verdict + "; " if verdict else "") + "unknown: " + ", ".join(result["unknown"])
    return verdict


def markdown_table(result: dict[str, Any]) -> str:
    """One row per metric: both medians, the ratio with its interval, the threshold and the verdict."""
    head, rows = table_rows(result)
    lines = [
        f"`{result['baseline']}` → `{result['candidate']}`, {result['repeats']} trials each (ABBA order)",
        "",
        "| " + " | ".join(head) + " |",
        "| --- | ---: | ---: | ---: | :---: | ---: | --- |",
    ]
    for row, cells in rows:
        cells[-1] = "**worse**" if cells[-1] == "worse" else cells[-1]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + ["", f"Verdict: {verdict_text(result)}", ""])


def junit_suite(result: dict[str, Any]) -> Suite:
    """``--junit-xml``'s suite: one case per metric (worse: a failure with its ratio, interval and threshold;
    unknown: skipped with why), then one per trial (an error when it failed to run)."""
    level = round(100 * result.get("confidence", 0.95))
    cases = [_metric_case(row, level) for row in result["metrics"]]
    trials = result.get("trials") or []
    for trial in trials:
        error, name = trial.get("error"), f"{trial['order']:02d}-{trial['side']}"
        cases.append(
            Case(
                "faultload.compare.trials",
                name,
                "error" if error else "passed",
                f"harness error: {error}" if error else "",
                trial.get("wall_s"),
            )
        )
    properties = {
        "baseline": result["baseline"],
        "candidate": result["candidate"],
        "repeats": result["repeats"],
        "confidence": result.get("confidence", 0.95),
    }
    wall_s = sum(t.get("wall_s") or 0.0 for t in trials) if trials else None
    return Suite("faultload.compare", cases, properties, wall_s)


def _metric_case(row: dict[str, Any], level: int) -> Case:
    if row["unknown"]:  # a side's trial measured None (no server pid, no /healthz probe), or no trial ran
        measured = " and ".join(
            f"{sum(v is not None for v in row[f'{side}_values'])} of {len(row[f'{side}_values'])} {side} trials"
            for side in ("baseline", "candidate")
        )
        return Case("faultload.compare", row["name"], "skipped", f"not judged: measured in {measured}")
    if row["worse"]:
        return Case(
            "faultload.compare",
            row["name"],
            "failure",
            f"worse: ratio {_number(ratio_of(row))}, {level}% interval {_interval(row)}, "
            f"threshold {_bound(row)} (candidate / baseline)",
        )
    return Case("faultload.compare", row["name"])


def write_plot(result: dict[str, Any], trials: Sequence[SideTrial], path: str | Path) -> Path:
    """Two panels: every trial's completions per second (one colour per side), and each metric's ratio with
    its interval against its threshold. PlotUnavailable without matplotlib."""
    plt = pyplot()
    path = Path(path)
    fig, (timeline, ratios) = plt.subplots(2, 1, figsize=(11, 8), constrained_layout=True)
    labelled: set[str] = set()
    for trial in trials:
        t, rate = trial.timeline
        label = None if trial.side in labelled else f"{trial.side}: {trial.build.text}"
        labelled.add(trial.side)
        timeline.step(t, rate, where="post", color=_COLOURS[trial.side], alpha=0.6, label=label)
    timeline.set_xlabel("trial time (s)")
    timeline.set_ylabel("completions/s")
    timeline.legend(loc="upper right", fontsize=8)
    rows = [r for r in result["metrics"] if r["ratio"] is not None and None not in r["ci"]]  # finite ones only
    for y, row in enumerate(rows):
        low, high = row["ci"]
        colour = "tab:red" if row["worse"] else "tab:gray"
        ratios.plot([low, high], [y, y], color=colour, linewidth=3)
        ratios.plot([row["ratio"]], [y], "o", color=colour)
        ratios.plot([row["threshold"]], [y], "|", color="black", markersize=14)
    ratios.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
    ratios.set_yticks(range(len(rows)), [r["name"] for r in rows])
    ratios.set_xscale("log")
    ratios.set_xlabel("candidate / baseline (interval; | = threshold)")
    fig.suptitle(f"{result['baseline']} vs {result['candidate']}, {result['repeats']} trials each")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
