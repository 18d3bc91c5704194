"""A comparison as one HTML file (``faultload compare --html PATH``): its ratios charted, its table, its trials.

Built from the ``faultload.compare/1`` result alone (:func:`faultload.compare.judge.judge_comparison`), with
the page shell and chart helpers of :mod:`faultload.store.html`: per metric the ratio candidate / baseline as
a dot, its interval as a bar, its threshold as a line with its worse side shaded, each worse metric in red
and each unknown one (a side did not measure it) said as unknown, never drawn as ok; the table
``--markdown-out`` writes, row for row (:func:`faultload.compare.report.table_rows`); each side's trials in
the order they ran. Given the trials themselves (the comparison's ``SideTrial`` list), the page also
draws each trial's completions per second over trial time, a colour per side (uPlot, as the trial page's
timeline); from the JSON alone it has no script.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from faultload.compare.judge import interval_of, ratio_of
from faultload.compare.report import table_rows, verdict_text
from faultload.store.html import (
    MAX_BINS,
    Interval,
    charts,
    counted,
    esc,
    facts,
    interval_chart,
    page,
    panel,
    series,
    table,
    values,
    write_page,
)

if TYPE_CHECKING:
    from faultload.compare.runner import SideTrial

SIDE_COLOURS = {"baseline": "#1f77b4", "candidate": "#ff7f0e"}  # the PNG's (compare.report): tab:blue, tab:orange
WORDS = {"worse": "worse", "unknown": "unknown", "ok": "ok"}


def write_compare_html(result: Mapping[str, Any], trials: Sequence[SideTrial] | None, path: str | Path) -> Path:
    """Write the comparison's page to ``path`` (whole or not at all); its path."""
    return write_page(compare_page(result, trials), path)


def compare_page(result: Mapping[str, Any], trials: Sequence[SideTrial] | None = None) -> str:
    """The page, as text (``trials`` None or empty: no timeline chart)."""
    head, rows = table_rows(dict(result))
    states = [metric_state(row) for row, _ in rows]
    overall = "ok" if result["ok"] else "WORSE" if result["worse"] else "unknown"
    title = f"faultload compare: {result['baseline']} → {result['candidate']}: {overall}"
    spec = _timelines(trials) if trials and any(t.timeline[1].size for t in trials) else None
    level = round(100 * result.get("confidence", 0.95))
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="summary">{counted({s: states.count(s) for s in WORDS}, WORDS)} — {esc(verdict_text(dict(result)))}</p>',
        facts(
            [
                ("baseline", esc(result["baseline"])),
                ("candidate", esc(result["candidate"])),
                (
                    "trials",
                    esc(
                        f"{result['repeats']} per build, ABBA order (baseline, candidate, candidate, "
                        "baseline, …), each on a fresh stack"
                    ),
                ),
                ("interval", esc(f"{level}%, bootstrap over the repeats")),
            ]
        ),
        "<h2>Ratios</h2>",
        '<p class="note">Candidate / baseline per metric, log axis: the dot is the ratio of the medians, the bar '
        f"its {level}% interval, the black line the threshold with its worse side shaded, the dashed line 1 (no "
        "change). A metric is worse only when the ratio is past its threshold and the whole interval is on the "
        "worse side of 1; unknown when a side did not measure it.</p>",
        interval_chart(
            [_interval(row, state) for (row, _), state in zip(rows, states)],
            f"candidate / baseline ({level}% interval)",
        ),
        "<h2>Table</h2>",
        f'<p class="note">{esc(result["baseline"])} → {esc(result["candidate"])}, {result["repeats"]} trials each '
        "(ABBA order)</p>",
        table(
            head,
            [
                (
                    state,
                    [
                        f'<span id="metric-{esc(row["name"])}">{esc(cells[0])}</span>',
                        *(esc(c) for c in cells[1:-1]),
                        f'<span class="state">{esc(cells[-1])}</span>',
                    ],
                )
                for (row, cells), state in zip(rows, states)
            ],
            {1: "num", 2: "num", 3: "num", 5: "num"},
        ),
        f'<p class="summary">Verdict: {esc(verdict_text(dict(result)))}</p>',
        "<h2>Trials</h2>",
        (charts(spec) if spec else '<p class="note">No timeline: the page was written from the JSON alone.</p>'),
        _trials_table(result.get("trials") or []),
    ]
    return page(title, "\n".join(body), charts=spec is not None)


def metric_state(row: Mapping[str, Any]) -> str:
    """``unknown`` (a side did not measure it), ``worse`` or ``ok``."""
    return "unknown" if row["unknown"] else "worse" if row["worse"] else "ok"


def _interval(row: Mapping[str, Any], state: str) -> Interval:
    ci = interval_of(row)
    ratio = ratio_of(row)
    if state == "unknown":
        note = "unknown: not measured"
    else:
        shown = "∞" if ratio is not None and math.isinf(ratio) else f"{ratio:.3f}"
        note = f"{shown} [{_end(ci[0])} – {_end(ci[1])}] {'WORSE' if state == 'worse' else 'ok'}"
    return Interval(
        row["name"],
        state,
        ratio,
        ci[0] if ci else None,
        ci[1] if ci else None,
        row["threshold"],
        bool(row["higher_is_worse"]),
        note,
    )


def _end(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.3g}"


def _timelines(trials: Sequence[SideTrial]) -> dict[str, Any]:
    """One panel: every trial's completions per second, in bins of a common width (its timeline's, coarser
    when there would be more than :data:`MAX_BINS`)."""
    width = next((float(t.timeline[0][1] - t.timeline[0][0]) for t in trials if t.timeline[0].size > 1), 1.0)
    longest = max(t.timeline[1].size for t in trials)
    factor = max(1, math.ceil(longest / MAX_BINS))
    bins = max(1, math.ceil(longest / factor))
    shown = []
    for t in sorted(trials, key=lambda t: t.order):
        rate = np.full(bins * factor, np.nan)
        rate[: t.timeline[1].size] = t.timeline[1]
        groups = rate.reshape(bins, factor)
        counts = np.isfinite(groups).sum(axis=1)
        mean = np.where(counts > 0, np.nansum(groups, axis=1) / np.maximum(counts, 1), np.nan)
        shown.append(
            series(f"{t.order:02d} {t.side}", mean, SIDE_COLOURS[t.side], "step", 1, dash=t.side == "candidate")
        )
    x = values(np.arange(bins) * width * factor, 3)
    return {
        "end_s": bins * width * factor,
        "bin_s": width * factor,
        "faults": [],
        "marks": [],
        "panels": [
            panel(
                "completions",
                "each trial's completions per second (baseline solid, candidate dashed)",
                "per s",
                x,
                shown,
            )
        ],
    }


def _trials_table(trials: Sequence[Mapping[str, Any]]) -> str:
    if not trials:
        return '<p class="note">no trial ran</p>'
    rows = []
    for t in trials:
        violated = t.get("violated") or []
        state = (
            "error"
            if t.get("error")
            else "violated"
            if violated
            else "unknown"
            if t.get("invariants_ok") is None
            else "held"
        )
        invariants = (
            "VIOLATED: " + ", ".join(violated) if violated else "unknown" if t.get("invariants_ok") is None else "held"
        )
        swatch = f'<span class="swatch" style="background:{SIDE_COLOURS.get(t["side"], "#777")}"></span>'
        rows.append(
            (
                state,
                [
                    esc(f"{t['order']:02d}"),
                    swatch + esc(t["side"]),
                    esc(t.get("build", "")),
                    esc(f"{t['completed']} / {t['requested']}"),
                    esc(f"{t['wall_s']:.1f}"),
                    esc(f"{t['load_s']:.1f}"),
                    f'<span class="state">{esc(invariants)}</span>',
                    esc(t.get("error") or "-"),
                ],
            )
        )
    return table(
        ("#", "side", "build", "completed / requested", "wall s", "load s", "invariants", "error"),
        rows,
        {0: "num", 3: "num", 4: "num", 5: "num", 7: "detail"},
    )
