"""One self-contained HTML page that opens offline: the page shell and the chart helpers.

Every report page (a trial's, :mod:`faultload.store.html_trial`; a comparison's,
:mod:`faultload.compare.html`; a matrix's, :mod:`faultload.store.html_matrix`; a suite session's,
:mod:`faultload.store.html_suite`) is built from these: :func:`page` wraps a body with the style and, when
it has charts, the vendored uPlot and faultload's ``report.js``, all inlined; :func:`charts` places a chart
spec (panels over one time axis, fault windows, marks) as JSON for ``report.js`` to draw; the binning
helpers turn per-request columns into per-bin series on the server side, so the data a page carries grows
with the trial's length in bins (at most :data:`MAX_BINS`), never with its requests. Drawn on the server,
with no script: :func:`interval_chart` (estimates with their intervals against thresholds, inline SVG),
:func:`tally_grid` (rows x invariants, each cell's state and trial counts) and :func:`bar`. The page's
Content-Security-Policy forbids every fetch (``default-src 'none'``): nothing it shows can come from the
network; a link to a file on this machine (:func:`local_link`) is followed only when clicked.

Charting: uPlot (npm ``uplot`` 1.6.32, MIT, vendored in ``html_assets/`` with its license header), fed the
binned data as JSON, chosen by measurement over matplotlib rendered into the page. ``bench/html_report.py``
builds one synthetic trial's page each way from the same timeline spec (median of 5 builds and of 3
headless Chromium runs, ``--dump-dom``; 2 cores shared with another benchmark, so the browser's seconds
are noisy)::

    requests  option                   size     build   Chromium wall   charts drawn in the page
    4,096     uPlot + JSON             84 KB     4 ms      1.20 s        71 ms
    4,096     matplotlib SVG inlined  174 KB   767 ms      1.00 s        -
    4,096     matplotlib PNG base64   207 KB   746 ms      1.08 s        -
    131,072   uPlot + JSON             96 KB    40 ms      1.20 s       127 ms
    131,072   matplotlib SVG inlined  208 KB   815 ms      1.14 s        -
    131,072   matplotlib PNG base64   225 KB   785 ms      1.17 s        -

(matplotlib's import, 285-333 ms, once per process, is outside its builds.) uPlot's page is half the
size (61 KB of it are uPlot, the style and ``report.js``; the rest, 23-35 KB, is the page and its
binned data, whatever the requests) and is built 20-190 times faster, with no matplotlib to import or
render: ``--html`` needs no ``plot`` extra. Opening either costs the same, Chromium's start; uPlot's
drawing is a tenth of it. And its charts can be read: one cursor reads every panel at the same
instant, a drag zooms, a series toggles; a PNG is a picture, and matplotlib's SVG is glyphs and ticks
as paths.
"""

from __future__ import annotations

import functools
import html
import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Collection, Iterable, Mapping, Sequence

import numpy as np

from faultload.store.bundle import write_text_atomic

MAX_BINS = 240  # bins of a timeline: a page's data is bounded by this, not by the trial's requests
MAX_POINTS = 600  # a sampled series (monitor, /healthz) longer than this is reduced to its per-bin peaks
_NICE = (1.0, 2.0, 2.5, 5.0)
# Fetch nothing: inline script and style only, images only as data: URLs.
_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"


@functools.cache
def asset(name: str) -> str:
    """A file of ``html_assets/`` (installed with the package: ``[tool.setuptools.package-data]``)."""
    return resources.files("faultload.store").joinpath("html_assets", name).read_text(encoding="utf-8")


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, body: str, charts: bool = True) -> str:
    """The whole document: ``body`` with the style inlined, and (``charts``) uPlot and ``report.js`` after it."""
    style = asset("report.css") + ("\n" + asset("uPlot.min.css") if charts else "")
    scripts = (
        f"<script>\n{asset('uPlot.iife.min.js')}\n</script>\n<script>\n{asset('report.js')}</script>\n"
        if charts
        else ""
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>\n{style}\n</style>\n</head>\n<body>\n{body}\n"
        + (f'<noscript><p class="chart-error">the charts need JavaScript</p></noscript>\n{scripts}' if charts else "")
        + "</body>\n</html>\n"
    )


def write_page(text: str, path: str | Path) -> Path:
    """Write a page whole or not at all; its path."""
    path = Path(path)
    write_text_atomic(path, text)
    return path


def charts(spec: Mapping[str, Any]) -> str:
    """The chart area and its spec, for ``report.js``: ``{"end_s", "panels": [{"id", "title", "unit", "log",
    "x", "series": [{"label", "y", "color", "kind": line|step|points, "dash"}]}], "faults": [{"start", "end"
    (None: never healed), "label", "color"}], "marks": [{"t", "label"}]}``."""
    data = json.dumps(spec, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return f'<div id="charts"></div>\n<script type="application/json" id="faultload-charts">{data}</script>'


def panel(pid: str, title: str, unit: str, x: list, series: list[dict[str, Any]], log: bool = False) -> dict[str, Any]:
    """One chart of a :func:`charts` spec: its ``series`` over the shared ``x``."""
    return {"id": pid, "title": title, "unit": unit, "log": log, "x": x, "series": series}


def series(
    label: str, y: np.ndarray, color: str, kind: str = "line", decimals: int = 2, dash: bool = False
) -> dict[str, Any]:
    """One series of a :func:`panel`: ``kind`` line, step or points; NaN a gap."""
    return {"label": label, "y": values(y, decimals), "color": color, "kind": kind, "dash": dash}


def table(
    head: Sequence[str], rows: Iterable[tuple[str, Sequence[str]]], cell_class: Mapping[int, str] | None = None
) -> str:
    """A table of ``rows``: (the row's css class, its cells already escaped); ``cell_class``: column -> css
    class of its cells (``num``: right-aligned figures)."""
    cell_class = cell_class or {}
    lines = ["<table>", "<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead>", "<tbody>"]
    for css, cells in rows:
        tds = "".join(f'<td class="{cell_class.get(i, "")}">{c}</td>' for i, c in enumerate(cells))
        lines.append(f'<tr class="{esc(css)}">{tds}</tr>')
    return "\n".join(lines + ["</tbody>", "</table>"])


def facts(items: Iterable[tuple[str, str]]) -> str:
    """A definition list of (name, value already escaped)."""
    return '<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def local_link(path: str | Path | None, text: str | None = None) -> str:
    """A link to a file on this machine (a ``file:`` URL, absolute: it fetches nothing until clicked), or ``-``."""
    if not path:
        return "-"
    return f'<a href="{esc(Path(path).absolute().as_uri())}">{esc(path if text is None else text)}</a>'


def counted(counts: Mapping[str, int], words: Mapping[str, str]) -> str:
    """``N word`` for each state counted at least once, in ``words``' order, each in its state's colour."""
    return "".join(f'<span class="{esc(s)}">{counts[s]} {esc(w)}</span>' for s, w in words.items() if counts.get(s))


def bar(parts: Sequence[tuple[str, int, str]]) -> str:
    """A stacked bar of (css class, count, what) as wide as its share of their sum, its counts in words after it."""
    total = sum(n for _, n, _ in parts)
    segments = (
        "".join(
            f'<span class="seg {esc(css)}" style="width:{100 * n / total:.2f}%" title="{n} {esc(what)}"></span>'
            for css, n, what in parts
            if n
        )
        if total
        else ""
    )
    words = ", ".join(f"{n} {what}" for _, n, what in parts if n) or "none"
    return f'<span class="bar">{segments}</span> <span class="bar-text">{esc(words)}</span>'


# --------------------------------------------------------------------------- rows x invariants

CELL_WORDS = {"caught": "caught", "clean": "clean", "unknown": "unknown", "skipped": "skipped", "none": "—"}


def tally_state(tally: Mapping[str, int] | None, hit: bool) -> str:
    """One invariant in one row: ``caught`` (violated there), ``clean`` (judged by a trial, never caught),
    ``unknown`` (judged by none, left unknown by some: never clean), ``skipped`` (judged by none, its examples
    not run), ``none`` (no trial of the row asserted it)."""
    if hit:
        return "caught"
    if not tally:
        return "none"
    if tally.get("judged"):
        return "clean"
    return "unknown" if tally.get("unknown") else "skipped" if tally.get("skipped") else "none"


def tally_grid(
    names: Sequence[str],
    rows: Iterable[tuple[str, str, Mapping[str, Mapping[str, int]], Collection[str]]],
    hit_word: str = "caught",
) -> str:
    """A table of ``rows`` x ``names``: each row (its label, already escaped; its css class; its tallies by
    invariant, ``{"judged", "unknown", "skipped"}``; the invariants it was caught by), each cell its state
    (:func:`tally_state`; a caught one called ``hit_word``, in word and css class) and its trials judged /
    unknown / skipped."""
    body = []
    for label, css, tallies, hit in rows:
        cells = [label]
        for name in names:
            t = tallies.get(name)
            state = tally_state(t, name in hit)
            word = hit_word if state == "caught" else CELL_WORDS[state]
            kind = hit_word if state == "caught" else state
            counts = f'<span class="counts">{t["judged"]} / {t["unknown"]} / {t["skipped"]}</span>' if t else ""
            cells.append(f'<span class="cell {esc(kind)}" data-invariant="{esc(name)}">{esc(word)}</span>{counts}')
        body.append((css, cells))
    head = ("", *(name.replace("_", "_\u200b") for name in names))  # a long name breaks after an underscore
    return f'<div class="scroll grid">{table(head, body)}</div>'


# --------------------------------------------------------------------------- estimates against thresholds


@dataclass(frozen=True)
class Interval:
    """One row of :func:`interval_chart`: an estimate and its interval against a threshold."""

    label: str
    state: str  # worse | ok | unknown: the row's colour and word
    point: float | None = None  # None: not measured, nothing drawn; 0 and infinity are drawn at the axis' ends
    low: float | None = None
    high: float | None = None
    threshold: float | None = None
    worse_above: bool = True  # the threshold's worse side: above it (a cost) or below it (throughput)
    note: str = ""  # written after the row's end


_ROW, _LEFT, _RIGHT, _WIDTH, _TOP = 28, 230, 250, 980, 8
_STROKE = {"worse": "#b00000", "ok": "#3b6ea5", "unknown": "#8a5a00"}


def interval_chart(rows: Sequence[Interval], axis: str) -> str:
    """``rows`` on one log axis as inline SVG, drawn here (no script): an interval a bar, its estimate a dot,
    the threshold a black line with its worse side shaded, 1 (no change) dashed; a value past the axis (0,
    infinity) at its end. Each row a ``<g class="row STATE" data-label=...>``."""
    finite = [v for r in rows for v in (r.point, r.low, r.high, r.threshold) if v is not None and 0 < v < math.inf]
    lo, hi = min(finite + [1.0]) / 1.15, max(finite + [1.0]) * 1.15
    if hi / lo < 1.6:  # a narrow range: widened about its middle, so the bars are not the whole axis
        mid, half = math.sqrt(lo * hi), math.sqrt(1.6)
        lo, hi = mid / half, mid * half
    span = _WIDTH - _LEFT - _RIGHT

    def x(v: float) -> float:
        clipped = min(max(v, lo), hi) if v > 0 else lo
        return _LEFT + span * math.log(clipped / lo) / math.log(hi / lo)

    bottom = _TOP + _ROW * len(rows)
    out = [f'<svg class="intervals" viewBox="0 0 {_WIDTH} {bottom + 34}" role="img" aria-label="{esc(axis)}">']
    for t in _ticks(lo, hi):
        out.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{_TOP}" y2="{bottom}" stroke="#e4e4e4"/>'
            f'<text x="{x(t):.1f}" y="{bottom + 14}" text-anchor="middle" class="tick">{t:g}</text>'
        )
    out.append(
        f'<line x1="{x(1.0):.1f}" x2="{x(1.0):.1f}" y1="{_TOP}" y2="{bottom}" stroke="#000" stroke-dasharray="4 3"/>'
    )
    for i, r in enumerate(rows):
        out.append(_interval_row(r, _TOP + _ROW * i + _ROW / 2, x))
    out.append(
        f'<text x="{_LEFT + span / 2:.1f}" y="{bottom + 30}" text-anchor="middle" class="axis">{esc(axis)}</text>'
    )
    return "\n".join(out + ["</svg>"])


def _interval_row(r: Interval, y: float, x) -> str:
    colour = _STROKE.get(r.state, "#555")
    parts = [
        f'<g class="row {esc(r.state)}" data-label="{esc(r.label)}"><title>{esc(r.label)}: {esc(r.note)}</title>',
        f'<text x="{_LEFT - 8}" y="{y + 4:.1f}" text-anchor="end" fill="{colour}">{esc(r.label)}</text>',
    ]
    if r.threshold is not None:
        edge = _WIDTH - _RIGHT if r.worse_above else _LEFT
        left, right = sorted((x(r.threshold), edge))
        parts.append(
            f'<rect x="{left:.1f}" y="{y - _ROW / 2 + 3:.1f}" width="{right - left:.1f}" height="{_ROW - 6}" '
            'fill="#d62728" fill-opacity="0.09"/>'
            f'<line x1="{x(r.threshold):.1f}" x2="{x(r.threshold):.1f}" y1="{y - _ROW / 2 + 3:.1f}" '
            f'y2="{y + _ROW / 2 - 3:.1f}" stroke="#000" stroke-width="2"/>'
        )
    if r.low is not None and r.high is not None:
        parts.append(
            f'<line x1="{x(r.low):.1f}" x2="{x(r.high):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}" '
            'stroke-width="6" stroke-linecap="round" stroke-opacity="0.55"/>'
        )
    if r.point is not None:
        parts.append(f'<circle cx="{x(r.point):.1f}" cy="{y:.1f}" r="5" fill="{colour}" stroke="#fff"/>')
    parts.append(
        f'<text x="{_WIDTH - _RIGHT + 10}" y="{y + 4:.1f}" fill="{colour}" class="note">{esc(r.note)}</text></g>'
    )
    return "".join(parts)


def _ticks(lo: float, hi: float, most: int = 9) -> list[float]:
    """Round values in [lo, hi] to label a log axis: 1-2-5 per decade on a wide one, a round step on a narrow one."""
    if hi / lo >= 8:
        decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        for mantissas in ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0)):
            ticks = [m * 10.0**e for e in decades for m in mantissas if lo <= m * 10.0**e <= hi]
            if len(ticks) >= 3:
                return ticks[:: max(1, math.ceil(len(ticks) / most))]
    power = 10.0 ** math.floor(math.log10(hi - lo))
    step = next(n * power / 10 for n in (*_NICE, 10.0, 20.0, 25.0, 50.0) if (hi - lo) / (n * power / 10) <= most)
    return [round(k * step, 10) for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]


# --------------------------------------------------------------------------- binning


def time_edges(end_s: float, max_bins: int = MAX_BINS) -> np.ndarray:
    """Bin edges from 0 past ``end_s``, a round width (1, 2, 2.5 or 5 times a power of ten) giving at most
    ``max_bins`` bins."""
    raw = max(end_s, 1e-3) / max_bins
    power = 10.0 ** math.floor(math.log10(raw))
    width = next(n * power for n in (*_NICE, 10.0) if n * power >= raw)
    return (
        np.arange(0.0, math.ceil(end_s / width) * width + width / 2, width)[: max_bins + 1]
        if end_s > 0
        else np.array([0.0, width])
    )


def per_second(times: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Events per second in each bin (``times`` NaN are left out)."""
    counts, _ = np.histogram(times[np.isfinite(times)], bins=edges)
    return counts / np.diff(edges)


def binned_quantiles(times: np.ndarray, values: np.ndarray, edges: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """``values``' quantiles (numpy's linear method) per bin of their ``times``: shape (len(qs), bins), NaN in
    an empty bin. Sorted once, not per bin."""
    keep = np.isfinite(times) & np.isfinite(values) & (times >= edges[0]) & (times <= edges[-1])
    bins = np.clip(np.searchsorted(edges, times[keep], side="right") - 1, 0, edges.size - 2)
    order = np.lexsort((values[keep], bins))
    bins, ordered = bins[order], values[keep][order]
    counts = np.bincount(bins, minlength=edges.size - 1)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    out = np.full((len(qs), edges.size - 1), np.nan)
    full = counts > 0
    for i, q in enumerate(qs):
        pos = starts[full] + q * (counts[full] - 1)
        low, high = np.floor(pos).astype(np.int64), np.ceil(pos).astype(np.int64)
        out[i, full] = ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
    return out


def peaks(
    times: np.ndarray, columns: Mapping[str, np.ndarray], edges: np.ndarray
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``(x, columns)`` as they are when there are at most :data:`MAX_POINTS` times; else each column's
    largest value in each bin of ``edges`` (x: the bin starts; NaN where a bin has no finite value), so a
    spike is never averaged away."""
    if times.size <= MAX_POINTS:
        return times, dict(columns)
    bins = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, edges.size - 2)
    out = {}
    for name, values in columns.items():
        top = np.full(edges.size - 1, -np.inf)
        finite = np.isfinite(values)
        np.maximum.at(top, bins[finite], values[finite])
        out[name] = np.where(np.isfinite(top), top, np.nan)
    return edges[:-1], out


def values(column: np.ndarray, decimals: int) -> list[float | None]:
    """A series for the JSON: rounded, NaN and inf as null (a gap in the chart)."""
    column = np.round(np.asarray(column, dtype=np.float64), decimals)
    return [None if not math.isfinite(v) else (int(v) if decimals <= 0 else v) for v in column.tolist()]
