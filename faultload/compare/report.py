"""A comparison shown: the Markdown table (``--markdown-out``, the README's before/after tables) and its PNG."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from faultload.compare.judge import interval_of, ratio_of
from faultload.compare.runner import SideTrial
from faultload.store.plot import pyplot

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
    return "**worse**" if row["worse"] else "ok"


def markdown_table(result: dict[str, Any]) -> str:
    """One row per metric: both medians, the ratio with its interval, the threshold and the verdict."""
    level = round(100 * result.get("confidence", 0.95))
    lines = [f"`{result['baseline']}` → `{result['candidate']}`, {result['repeats']} trials each (ABBA order)", "",
             f"| metric | baseline | candidate | ratio | {level}% interval | threshold | verdict |",
             "| --- | ---: | ---: | ---: | :---: | ---: | --- |"]
    for row in result["metrics"]:
        ratio, ci = _number(ratio_of(row)), interval_of(row)
        ci = "—" if ci is None else f"{_number(ci[0])} – {_number(ci[1])}"
        bound = ("≤ " if row["higher_is_worse"] else "≥ ") + f"{row['threshold']:g}"
        lines.append(f"| {row['name']} | {_fmt(row['baseline_median'], row['unit'])} | "
                     f"{_fmt(row['candidate_median'], row['unit'])} | {ratio} | {ci} | {bound} | {_verdict(row)} |")
    verdict = "ok" if result["ok"] else ("worse: " + ", ".join(result["worse"]) if result["worse"] else "")
    if result["unknown"]:
        verdict = (verdict + "; " if verdict else "") + "unknown: " + ", ".join(result["unknown"])
    return "\n".join(lines + ["", f"Verdict: {verdict}", ""])


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
