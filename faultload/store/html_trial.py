"""One trial as one HTML file (``faultload run --html PATH``): header, timeline, faults, verdict table.

The header names the target, its switches, the load's shape and the verdicts in sum; the timeline is
:func:`faultload.store.html_timeline.timeline`'s, each fault window shaded; each invariant is a row of the
verdict table, held / VIOLATED / unknown / skipped (an invariant this trial did not judge: the training
ones without a training mix) each in its own colour and word. A violation is marked on the timeline only
where the record says when it was first seen: a :class:`~faultload.checker.inputs.Verdict` carries no
time (its detail is a line of text), and only ``no_collapse``'s has one, the watchdog's
``CollapseVerdict.at_s``; every other violation is listed as not placed in time, never given a guessed one.
The numbers are the JSON report's (:func:`faultload.store.report.build_report`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from faultload.checker.compose import CHECKERS
from faultload.checker.inputs import Verdict
from faultload.checker.training import TRAINING_CHECKERS
from faultload.model.switches import switches_text
from faultload.model.trial import TrialConfig
from faultload.record.trial import TrialResult
from faultload.store.html import charts, counted, esc, facts, page, table, write_page
from faultload.store.html_timeline import FAULT_COLOURS, timeline
from faultload.store.report import build_report
from faultload.version import installed_version

COLLAPSE = "no_collapse"  # judge.collapse_verdict's name: the one verdict whose time the record keeps
STATES = {True: "held", False: "violated", None: "unknown"}
WORDS = {"held": "held ✓", "violated": "VIOLATED ✗", "unknown": "unknown ?", "skipped": "skipped –"}
_TRAINING = {name for name, _ in TRAINING_CHECKERS}


@dataclass(frozen=True)
class Row:
    """One invariant's line of the verdict table."""

    name: str
    state: str  # held | violated | unknown | skipped
    verdict: Verdict | None  # None: skipped
    seen_s: float | None = None  # trial seconds a violation was first seen, where the record says


def write_trial_html(result: TrialResult, verdicts: Sequence[Verdict] | None, path: str | Path) -> Path:
    """Write ``result``'s report page to ``path`` (whole or not at all); its path."""
    return write_page(trial_page(result, verdicts), path)


def trial_page(
    result: TrialResult, verdicts: Sequence[Verdict] | None, chart_html: Callable[[dict[str, Any]], str] | None = None
) -> str:
    """The page, as text (``verdicts`` None: the trial was not judged). ``chart_html``: another rendering of
    the timeline's spec (``bench/html_report.py`` draws it with matplotlib), and then the page has no script."""
    report = build_report(result, list(verdicts) if verdicts is not None else None)
    rows = verdict_rows(result, verdicts)
    marks = [(r.seen_s, _mark_label(result, r)) for r in rows if r.seen_s is not None]
    spec = timeline(result, marks)
    title, summary = _summary(result.config, rows, verdicts is not None)
    body = "\n".join(
        [
            f"<h1>{esc(title)}</h1>",
            summary,
            facts(_facts(result, report)),
            "<h2>Timeline</h2>",
            _timeline_note(spec, rows, chart_html is None),
            (chart_html or charts)(spec),
            "<h2>Faults</h2>",
            _faults_table(report["faults"]["applied"]),
            "<h2>Invariants</h2>",
            _verdict_table(rows),
            f'<p class="note">faultload {esc(installed_version())}; {len(result.history)} requests recorded, '
            f"binned by {spec['bin_s']:g} s.</p>",
        ]
    )
    return page(title, body, charts=chart_html is None)


def verdict_rows(result: TrialResult, verdicts: Sequence[Verdict] | None) -> list[Row]:
    """The verdicts in judging order, then every invariant the trial did not judge (skipped)."""
    if verdicts is None:
        return []
    rows = [Row(v.name, STATES[v.ok], v, first_seen_s(result, v)) for v in verdicts]
    judged = {v.name for v in verdicts}
    known = [name for name, _ in CHECKERS + TRAINING_CHECKERS] + [COLLAPSE]
    return rows + [Row(name, "skipped", None) for name in known if name not in judged]


def first_seen_s(result: TrialResult, verdict: Verdict) -> float | None:
    """When a violation was first seen, trial seconds, where the record keeps it (the collapse's onset); None
    for every other verdict: its time, if any, is only in the words of its detail."""
    if verdict.ok is False and verdict.name == COLLAPSE and result.verdict is not None:
        return float(result.verdict.at_s)
    return None


def _mark_label(result: TrialResult, row: Row) -> str:
    return f"{row.name}: {result.verdict.kind}" if row.name == COLLAPSE and result.verdict else row.name


def _summary(config: TrialConfig, rows: list[Row], judged: bool) -> tuple[str, str]:
    """The page's title and the verdicts in sum (each violation linked to its row)."""
    counts = {state: sum(r.state == state for r in rows) for state in WORDS}
    overall = (
        "not judged" if not judged else "VIOLATED" if counts["violated"] else "unknown" if counts["unknown"] else "held"
    )
    title = f"faultload trial: {config.target}: {overall}"
    spans = counted(counts, WORDS)
    violated = [f'<a href="#inv-{esc(r.name)}">{esc(r.name)}</a>' for r in rows if r.state == "violated"]
    tail = f" — violated: {', '.join(violated)}" if violated else ""
    return title, f'<p class="summary">{spans or "no invariant judged"}{tail}</p>'


def _facts(result: TrialResult, report: dict[str, Any]) -> list[tuple[str, str]]:
    config, router = result.config, result.config.router
    switches = switches_text(config.regress, config.fixes).lstrip(", ") or "none (as released)"
    lat = report["latency_s"]["e2e"]
    items = [
        ("target", f"{esc(config.target)} (version {esc(report['target']['version'])})"),
        ("switches", esc(switches)),
        ("shape", esc(_shape_text(config))),
        (
            "router",
            esc(
                f"{router.mode}: "
                + (
                    f"waves of {router.barrier or 'all'}"
                    if router.mode == "barrier"
                    else f"{router.max_num_seqs} at once, {router.gen_seconds:g} s each"
                    if router.mode == "latency"
                    else "answers at once"
                )
            ),
        ),
        ("faults", esc(", ".join(f.to_spec() for f in config.faults.faults) or "none")),
        (
            "requests",
            esc(
                f"{report['requested']}: {report['completed']} completed, {report['failed']} failed, "
                f"{report['not_finished']} not finished"
            ),
        ),
        ("load", esc(f"{report['throughput_per_s']:.0f}/s over {result.load_s:.1f} s ({result.wall_s:.1f} s wall)")),
        ("e2e latency", esc(" ".join(f"{k} {_ms(lat.get(k))}" for k in ("p50", "p90", "p99", "max")))),
    ]
    if result.verdict is not None:
        items.append(("collapse", esc(result.verdict.line())))
    notes = [
        name
        for name, on in (
            ("interrupted", result.interrupted),
            ("stopped early", result.stopped_early),
            ("cut off at the wall bound", result.cut_off),
        )
        if on
    ]
    if notes or result.error:
        items.append(("ended", esc("; ".join(notes + ([f"error: {result.error}"] if result.error else [])))))
    return items


def _shape_text(config: TrialConfig) -> str:
    s = config.shape
    parts = [
        f"{s.requests} requests of {s.num_samples}x{s.result_tokens} tokens",
        f"{s.workers} worker{'s' if s.workers != 1 else ''}",
        f"{s.client} client ({s.accept})",
        f"max outstanding {s.max_outstanding or 'none'}",
        f"arrival {s.arrival}" + (f" over {s.arrival_span_s:g} s" if s.arrival_span_s else ""),
        f"time scale {s.time_scale:g}",
        f"seed {s.seed}",
    ]
    for name, polls in (("delay polls", s.delay_polls), ("abandon polls", s.abandon_polls)):
        if polls.fraction:
            parts.append(f"{name} {polls.fraction:g}@{polls.after_s:g}")
    if s.training.enabled:
        parts.append(f"{s.training.trainers} trainers x {s.training.steps} steps")
    return ", ".join(parts)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _timeline_note(spec: dict[str, Any], rows: list[Row], interactive: bool) -> str:
    """What the shading and the red lines are; the violations that have no time on the timeline."""
    text = "Shaded: each fault from applied to healed (to the end when never healed)."
    if spec["marks"]:
        text += " Red line: where a violation was first seen."
    unplaced = [r.name for r in rows if r.state == "violated" and r.seen_s is None]
    if unplaced:
        text += f" Not placed in time (the verdict carries no time; see its detail): {', '.join(unplaced)}."
    if interactive:
        text += " Drag across a chart to zoom, double-click to zoom out; the cursor reads every chart at once."
    return f'<p class="note">{esc(text)}</p>'


def _faults_table(applied: list[dict[str, Any]]) -> str:
    if not applied:
        return '<p class="note">no fault scheduled</p>'
    rows = []
    for f in applied:
        swatch = f'<span class="swatch" style="background:{FAULT_COLOURS.get(f["fault"]["link"], "#d62728")}"></span>'
        rows.append(
            (
                "fault",
                [
                    swatch + esc(f["spec"]),
                    esc(_window_text(f)),
                    esc(f.get("requests_with_errors", "-")),
                    esc(f.get("retries_caused", "-")),
                ],
            )
        )
    return table(("fault", "in force (trial s)", "requests hit", "retries caused"), rows, {2: "num", 3: "num"})


def _window_text(f: dict[str, Any]) -> str:
    if f.get("error") or f.get("not_applied"):
        return f"never applied: {f.get('error') or f.get('not_applied')}"
    if f.get("applied_at_s") is None:
        return "never applied"
    if f.get("remove_error"):
        return f"{f['applied_at_s']:.2f} → never healed (removal failed: {f['remove_error']})"
    end = f.get("removed_at_s")
    return f"{f['applied_at_s']:.2f} → " + (f"{end:.2f}" if end is not None else "still in force at the end")


def _verdict_table(rows: list[Row]) -> str:
    if not rows:
        return '<p class="note">not judged</p>'
    cells = []
    for r in rows:
        v = r.verdict
        detail = (
            v.detail
            if v is not None
            else ("not judged: the trial ran no training mix" if r.name in _TRAINING else "not judged in this trial")
        )
        cells.append(
            (
                r.state,
                [
                    f'<span id="inv-{esc(r.name)}">{esc(r.name)}</span>',
                    f'<span class="state">{esc(WORDS[r.state])}</span>',
                    _number(v.figure if v else None),
                    _number(v.budget if v else None),
                    esc(f"t={r.seen_s:.2f} s" if r.seen_s is not None else "-"),
                    esc(detail),
                ],
            )
        )
    return table(
        ("invariant", "verdict", "figure", "budget", "first seen", "detail"),
        cells,
        {2: "num", 3: "num", 4: "num", 5: "detail"},
    )


def _number(value: float | int | None) -> str:
    if value is None:
        return "-"
    return esc(f"{value:.4g}" if isinstance(value, float) else value)
