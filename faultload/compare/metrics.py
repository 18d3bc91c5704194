"""What a comparison measures, each read from one trial's JSON report (:func:`faultload.store.report.build_report`).

Read from the report, not the live result, so a comparison can be judged
again from stored reports. Each metric says which way is worse; a metric a
trial could not measure (no server pid, no ``/healthz`` probe, a load too
short for the monitor to sample) reads None and the comparison calls it
unknown: never worse, never fine. A figure that cannot be told from "not
measured" (server CPU 0 from one sample) is None too, so it never makes an
infinite ratio.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Report = Mapping[str, Any]

# The monitor samples the server every 0.5 s (run/monitor.py): its CPU is the last sample's minus the first's
# and its peaks are the largest sample. A load sampled fewer times than this (under a second) has server figures
# of a few 10 ms scheduler ticks and one look (a 250-request, 0.6 s trial: server CPU 0, a ratio of infinity):
# not measured. The same holds for /healthz probes (one every 0.5 s): the p99 of fewer is one probe.
MIN_SAMPLES = 3
MIN_PROBES = 3
# The smallest growth of a warm server's RSS that says it holds more: CPython's allocator takes memory an arena
# (1 MiB since 3.10) at a time and glibc's a heap top pad at a time, so a trial's growth under one arena is which
# page the allocator touched, not what the build keeps. Read below it, a growth is 0. Measured: the 0.4.0 sdist
# checkout against its release (ci, 250 requests in flight) grew 125 KiB on one side and 0 on the other in
# medians, a ratio of infinity on both RSS metrics, for code that is byte-identical.
RSS_RESOLUTION_BYTES = 1 << 20


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    higher_is_worse: bool
    read: Callable[[Report], float | None]
    about: str


def _get(report: Report, *path: str) -> Any:
    value: Any = report
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _ratio(top: Any, bottom: Any, scale: float = 1.0) -> float | None:
    if top is None or bottom is None or bottom <= 0:
        return None
    return scale * float(top) / float(bottom)


def _at_least(value: Any, least: int) -> bool:
    return isinstance(value, (int, float)) and value >= least


def _sampled(report: Report) -> bool:
    """Did the monitor sample the server often enough for its CPU and peaks to mean anything."""
    return _at_least(_get(report, "server", "samples"), MIN_SAMPLES)


def _server_cpu_ms(report: Report) -> float | None:
    cpu_s = _get(report, "server", "cpu_s")
    if not _sampled(report) or cpu_s is None or cpu_s <= 0:  # a serving server spends CPU: 0 is not measured
        return None
    return _ratio(cpu_s, _get(report, "attempts", "http_attempts"), 1000.0)


def _throughput(report: Report) -> float | None:
    return float(report["throughput_per_s"]) if report.get("load_s") else None


def _healthz_p99(report: Report) -> float | None:
    if not _at_least(_get(report, "server", "healthz_probes"), MIN_PROBES):
        return None
    return _percentile("server", "healthz_latency_s", "p99")(report)


def _percentile(*path: str) -> Callable[[Report], float | None]:
    def read(report: Report) -> float | None:
        value = _get(report, *path)
        return None if value is None else float(value)

    return read


def _growth_per(peak: str, baseline: str, *per: str, resolution: float = 0) -> Callable[[Report], float | None]:
    """(peak − baseline) of a server figure per ``per`` (a path in the report), when the load was sampled; a
    growth under ``resolution`` (the figure's own) is 0."""

    def read(report: Report) -> float | None:
        top, base = _get(report, "server", peak), _get(report, "server", baseline)
        if top is None or base is None or not _sampled(report):
            return None
        growth = max(0, top - base)
        return _ratio(growth if growth >= resolution else 0, _get(report, *per))

    return read


def _router_peak(report: Report) -> float | None:
    peak = _get(report, "router", "peak_in_flight")
    return float(peak) if isinstance(peak, (int, float)) and peak > 0 else None


def _attempts_per_request(report: Report) -> float | None:
    return _ratio(_get(report, "attempts", "http_attempts"), report.get("requested"))


METRICS: tuple[Metric, ...] = (
    Metric("server_cpu_ms_per_request", "ms", True, _server_cpu_ms, "server CPU per HTTP request"),
    Metric("throughput_per_s", "/s", False, _throughput, "completed requests per second of load (one burst)"),
    Metric("submit_p50_s", "s", True, _percentile("latency_s", "submit", "p50"), "asample's answer, median"),
    Metric("submit_p99_s", "s", True, _percentile("latency_s", "submit", "p99"), "asample's answer, p99"),
    Metric("e2e_p50_s", "s", True, _percentile("latency_s", "e2e", "p50"), "submit to result, median"),
    Metric("e2e_p99_s", "s", True, _percentile("latency_s", "e2e", "p99"), "submit to result, p99"),
    Metric("healthz_p99_s", "s", True, _healthz_p99, "/healthz latency, p99"),
    Metric(
        "fds_per_in_flight",
        "fds",
        True,
        _growth_per("peak_fds", "baseline_fds", "router", "peak_in_flight"),
        "server fds above baseline per request in flight",
    ),
    Metric(
        "rss_bytes_per_in_flight",
        "B",
        True,
        _growth_per(
            "peak_rss_bytes", "baseline_rss_bytes", "router", "peak_in_flight", resolution=RSS_RESOLUTION_BYTES
        ),
        "server RSS above baseline per request in flight",
    ),
    Metric(
        "rss_bytes_per_result",
        "B",
        True,
        _growth_per("peak_rss_bytes", "baseline_rss_bytes", "completed", resolution=RSS_RESOLUTION_BYTES),
        "server RSS above baseline per completed request (the results it holds)",
    ),
    Metric(
        "router_peak_in_flight",
        "",
        False,
        _router_peak,
        "completions the server had at the router at once, at the peak (fewer: it forwards less at once)",
    ),
    Metric("attempts_per_request", "", True, _attempts_per_request, "HTTP attempts per request"),
)
METRIC_NAMES = tuple(m.name for m in METRICS)


def read_metrics(report: Report) -> dict[str, float | None]:
    """Every metric of one trial's report (None: not measured)."""
    return {m.name: m.read(report) for m in METRICS}
