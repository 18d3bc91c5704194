"""A trial's timeline as a chart spec for :func:`faultload.store.html.charts`: what the HTML report draws.

Panels over trial seconds, each from the record alone: e2e latency p50/p99 of the OK requests by the bin
they completed in; completions and failures per second; errors per second by error class (each failed
HTTP attempt of the attempt log by its end, and each result that was itself an error by its request's
end); retries per second (submits sent again, polls after a request's first); requests in flight (the
router's, the client's); the server's open fds and RSS; ``/healthz`` latency (failed probes apart). The
per-request columns are binned here (:func:`faultload.store.html.time_edges`), the monitor's samples
kept as they are up to :data:`faultload.store.html.MAX_POINTS` and reduced to per-bin peaks past it.
Fault windows come from the fault log, applied to healed (a fault never healed is shaded to the end).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from faultload.record.history import AttemptKind, ErrorClass, History, Outcome
from faultload.record.samples import MonitorSamples
from faultload.record.trial import TrialResult
from faultload.store.html import binned_quantiles, panel, peaks, per_second, series, time_edges, values

# Fault windows by link (the PNG timeline's hues).
FAULT_COLOURS = {"edge": "#d62728", "backend": "#ff7f0e", "router": "#9467bd", "server": "#8c564b"}
ERROR_COLOURS = {
    ErrorClass.CONNECT: "#9467bd",
    ErrorClass.RESET: "#d62728",
    ErrorClass.TIMEOUT: "#ff7f0e",
    ErrorClass.HTTP_404: "#8c564b",
    ErrorClass.HTTP_4XX: "#e377c2",
    ErrorClass.HTTP_5XX: "#7f7f7f",
    ErrorClass.SERVER_FAILED: "#bcbd22",
    ErrorClass.INTEGRITY: "#17becf",
    ErrorClass.DECODE: "#1f77b4",
    ErrorClass.OTHER: "#333333",
}
# Results that were themselves errors: no failed HTTP status marks them in the attempt log.
_RESULT_ERRORS = (ErrorClass.SERVER_FAILED, ErrorClass.INTEGRITY, ErrorClass.DECODE)
_POLL_HELD = 408  # a long poll's hold ending: the poll cycle, not an error


def timeline(result: TrialResult, marks: Iterable[tuple[float, str]] = ()) -> dict[str, Any]:
    """The chart spec of ``result``: its panels, fault windows and the ``marks`` (trial seconds, label)."""
    marks = [{"t": round(t, 3), "label": label} for t, label in marks]
    windows = fault_windows(result)
    edges = time_edges(_end_s(result, [m["t"] for m in marks] + [w["end"] or w["start"] for w in windows]))
    h = result.history
    x = values(edges[:-1], 3)
    panels = [_latency(h, edges, x), _completions(h, edges, x), _errors(h, edges, x), _retries(h, edges, x)]
    if result.monitor is not None and result.monitor.samples["t"].size:
        panels += _monitor_panels(result.monitor, edges)
    return {
        "end_s": float(edges[-1]),
        "bin_s": float(edges[1] - edges[0]),
        "panels": panels,
        "faults": windows,
        "marks": marks,
    }


def fault_windows(result: TrialResult) -> list[dict[str, Any]]:
    """Each fault that took effect, from its apply to its heal (``end`` None: never healed)."""
    if result.fault_log is None:
        return []
    return [
        {
            "start": round(float(r.applied_at_s), 3),
            "end": None if r.healed_at_s is None else round(float(r.healed_at_s), 3),
            "label": r.fault.to_spec(),
            "color": FAULT_COLOURS.get(r.fault.link, "#d62728"),
        }
        for r in result.fault_log.records
        if r.applied and r.applied_at_s is not None
    ]


def error_times(history: History) -> dict[ErrorClass, np.ndarray]:
    """Error class -> when each error was met: a failed attempt (transport error, 404, other 4xx but a
    poll's 408, 5xx) at its end, a result that was an error at its request's end. Without an attempt log
    (none kept), each request's last error at its end."""
    a = history.attempts
    done = history["done"]
    if a["row"].size == 0:
        codes, times = history["error"], done
    else:
        status = a["status"].astype(np.int64)
        codes = np.zeros(status.size, dtype=np.int64)
        codes[status < 0] = -status[status < 0]
        codes[(status >= 400) & (status < 500) & (status != _POLL_HELD)] = ErrorClass.HTTP_4XX
        codes[status == 404] = ErrorClass.HTTP_404
        codes[status >= 500] = ErrorClass.HTTP_5XX
        content = np.isin(history["error"], _RESULT_ERRORS) & np.isfinite(done)
        codes = np.concatenate([codes, history["error"][content]])
        times = np.concatenate([a["end"].astype(np.float64), done[content]])
    return {cls: times[codes == cls] for cls in ErrorClass if cls is not ErrorClass.NONE and (codes == cls).any()}


def retry_times(history: History) -> dict[str, np.ndarray]:
    """``submit``: submits sent again (each request's but its first), ``poll``: polls after each request's
    first, by their start; empty without an attempt log."""
    a = history.attempts
    out = {}
    for name, kind in (("submit", AttemptKind.SUBMIT), ("poll", AttemptKind.POLL)):
        chosen = a["kind"] == kind
        rows, start = a["row"][chosen], a["start"][chosen].astype(np.float64)
        order = np.lexsort((start, rows))
        rows, start = rows[order], start[order]
        again = np.ones(rows.size, dtype=bool)
        again[:1] = False
        again[1:] = rows[1:] == rows[:-1]
        out[name] = start[again]
    return out


def _end_s(result: TrialResult, more: list[float]) -> float:
    """The last second the timeline shows: the load, the last event recorded, sample or probe."""
    h, mon = result.history, result.monitor
    times = [
        result.load_s,
        *more,
        *(float(np.nanmax(c)) for c in (h["done"], h["submit_start"]) if np.isfinite(c).any()),
    ]
    if mon is not None:
        times += [float(t.max()) for t in (mon.samples["t"], mon.healthz_t) if t.size]
    return max([t for t in times if math.isfinite(t)] + [1e-3])


def _latency(h: History, edges: np.ndarray, x: list) -> dict[str, Any]:
    ok = (h["outcome"] == Outcome.OK) & np.isfinite(h["done"])
    done = h["done"][ok]
    q = binned_quantiles(done, done - h["submit_start"][ok], edges, (0.5, 0.99)) * 1000
    return panel(
        "latency",
        "e2e latency of OK requests, by completion time",
        "ms (log)",
        x,
        [series("p50", q[0], "#1f77b4"), series("p99", q[1], "#d62728")],
        log=True,
    )


def _completions(h: History, edges: np.ndarray, x: list) -> dict[str, Any]:
    outcome = h["outcome"]
    failed = (outcome != Outcome.OK) & (outcome != Outcome.PENDING)
    when = np.where(np.isfinite(h["done"]), h["done"], h["submit_end"])  # a rejected submit has no done
    return panel(
        "completions",
        "requests completed per second",
        "per s",
        x,
        [
            series("OK", per_second(h["done"][outcome == Outcome.OK], edges), "#2ca02c", "step", 1),
            series("ended not OK", per_second(when[failed], edges), "#d62728", "step", 1),
        ],
    )


def _errors(h: History, edges: np.ndarray, x: list) -> dict[str, Any]:
    found = error_times(h)
    shown = [series(cls.key, per_second(t, edges), ERROR_COLOURS[cls], "step", 1) for cls, t in found.items()]
    source = "failed attempts and error results" if h.attempts["row"].size else "requests' last error (no attempt log)"
    return panel(
        "errors",
        f"errors per second by class ({source})",
        "per s",
        x,
        shown or [series("none", np.zeros(len(x)), "#2ca02c", "step", 0)],
    )


def _retries(h: History, edges: np.ndarray, x: list) -> dict[str, Any]:
    if h.attempts["row"].size == 0:
        nothing = np.full(len(x), np.nan)
        return panel(
            "retries",
            "retries per second (no attempt log: not known)",
            "per s",
            x,
            [series("submits again", nothing, "#ff7f0e")],
        )
    again = retry_times(h)
    return panel(
        "retries",
        "retries per second: submits sent again, polls after a request's first",
        "per s",
        x,
        [
            series("submits again", per_second(again["submit"], edges), "#ff7f0e", "step", 1),
            series("polls again", per_second(again["poll"], edges), "#7f7f7f", "step", 1),
        ],
    )


def _measured(column: np.ndarray) -> np.ndarray:
    """A sample column with its unmeasured (-1) values as NaN."""
    column = np.asarray(column, dtype=np.float64)
    return np.where(column >= 0, column, np.nan)


def _monitor_panels(mon: MonitorSamples, edges: np.ndarray) -> list[dict[str, Any]]:
    s = mon.samples
    names = ("router_in_flight", "client_in_flight", "fds", "rss") + (("engine_fds",) if "engine_fds" in s else ())
    t, cols = peaks(s["t"], {name: _measured(s[name]) for name in names}, edges)
    x = values(t, 3)
    limit = f" (soft limit {mon.fd_limit[0]})" if mon.fd_limit else ""
    fds = [series("server", cols["fds"], "#8c564b", decimals=0)]
    if "engine_fds" in cols and np.isfinite(cols["engine_fds"]).any():
        fds.append(series("engine", cols["engine_fds"], "#9467bd", decimals=0))
    ok = mon.healthz_ok.astype(bool)
    latency_ms = mon.healthz_latency_s * 1000
    ht, probes = peaks(
        mon.healthz_t, {"ok": np.where(ok, latency_ms, np.nan), "failed": np.where(~ok, latency_ms, np.nan)}, edges
    )
    return [
        panel(
            "in_flight",
            "requests in flight",
            "requests",
            x,
            [
                series("router", cols["router_in_flight"], "#1f77b4", decimals=0),
                series("client outstanding", cols["client_in_flight"], "#7f7f7f", decimals=0, dash=True),
            ],
        ),
        panel("fds", f"server open fds{limit}", "fds", x, fds),
        panel("rss", "server RSS", "MiB", x, [series("server", cols["rss"] / 2**20, "#17becf", decimals=1)]),
        panel(
            "healthz",
            f"/healthz latency ({mon.healthz_failures} of {mon.healthz_t.size} probes failed)",
            "ms",
            values(ht, 3),
            [series("ok", probes["ok"], "#bcbd22", "points"), series("failed", probes["failed"], "#d62728", "points")],
        ),
    ]
