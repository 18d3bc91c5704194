"""One self-contained HTML page that opens offline: the page shell and the chart helpers.

Every report page (the single trial's, :mod:`faultload.store.html_trial`; a matrix's, a comparison's or a
suite's later) is built from these: :func:`page` wraps a body with the style and, when it has charts, the
vendored uPlot and faultload's ``report.js``, all inlined; :func:`charts` places a chart spec (panels over
one time axis, fault windows, marks) as JSON for ``report.js`` to draw; the binning helpers turn per-request
columns into per-bin series on the server side, so the data a page carries grows with the trial's length
in bins (at most :data:`MAX_BINS`), never with its requests. The page's Content-Security-Policy forbids
every fetch (``default-src 'none'``): nothing it shows can come from the network.

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
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

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
    scripts = f"<script>\n{asset('uPlot.iife.min.js')}\n</script>\n<script>\n{asset('report.js')}</script>\n" if charts else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{esc(title)}</title>\n<style>\n{style}\n</style>\n</head>\n<body>\n{body}\n"
        + (f"<noscript><p class=\"chart-error\">the charts need JavaScript</p></noscript>\n{scripts}" if charts else "")
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


def table(head: Sequence[str], rows: Iterable[tuple[str, Sequence[str]]], cell_class: Mapping[int, str] | None = None) -> str:
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


# --------------------------------------------------------------------------- binning


def time_edges(end_s: float, max_bins: int = MAX_BINS) -> np.ndarray:
    """Bin edges from 0 past ``end_s``, a round width (1, 2, 2.5 or 5 times a power of ten) giving at most
    ``max_bins`` bins."""
    raw = max(end_s, 1e-3) / max_bins
    power = 10.0 ** math.floor(math.log10(raw))
    width = next(n * power for n in (*_NICE, 10.0) if n * power >= raw)
    return np.arange(0.0, math.ceil(end_s / width) * width + width / 2, width)[: max_bins + 1] if end_s > 0 \
        else np.array([0.0, width])


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


def peaks(times: np.ndarray, columns: Mapping[str, np.ndarray], edges: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
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
