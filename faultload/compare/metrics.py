"""What a comparison measures, each read from one trial's JSON report (:func:`faultload.store.report.build_report`).

Read from the report, not the live result, so a comparison can be judged
again from stored reports. Each metric says which way is worse; a metric a
trial could not measure (no server pid, no ``/healthz`` probe) reads None
and the comparison calls it unknown, never fine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Report = Mapping[str, Any]


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


def _server_cpu_ms(report: Report) -> float | None:
    return _ratio(_get(report, "server", "cpu_s"), _get(report, "attempts", "http_attempts"), 1000.0)


def _throughput(report: Report) -> float | None:
    return float(report["throughput_per_s"]) if report.get("load_s") else None


def _percentile(*path: str) -> Callable[[Report], float | None]:
    def read(report: Report) -> float | None:
        value = _get(report, *path)
        return None if value is None else float(value)
    return read


def _growth_per_in_flight(peak: str, baseline: str) -> Callable[[Report], float | None]:
    """(peak − baseline) per request in flight at the router's exact peak."""
    def read(report: Report) -> float | None:
        top, base = _get(report, "server", peak), _get(report, "server", baseline)
        if top is None or base is None:
            return None
        return _ratio(max(0, top - base), _get(report, "router", "peak_in_flight"))
    return read


def _attempts_per_request(report: Report) -> float | None:
    return _ratio(_get(report, "attempts", "http_attempts"), report.get("requested"))


METRICS: tuple[Metric, ...] = (
    Metric("server_cpu_ms_per_request", "ms", True, _server_cpu_ms, "server CPU per HTTP request"),
    Metric("throughput_per_s", "/s", False, _throughput, "completed requests per second of load"),
    Metric("e2e_p50_s", "s", True, _percentile("latency_s", "e2e", "p50"), "submit to result, median"),
    Metric("e2e_p99_s", "s", True, _percentile("latency_s", "e2e", "p99"), "submit to result, p99"),
    Metric("healthz_p99_s", "s", True, _percentile("server", "healthz_latency_s", "p99"), "/healthz latency, p99"),
    Metric("fds_per_in_flight", "fds", True, _growth_per_in_flight("peak_fds", "baseline_fds"),
           "server fds above baseline per request in flight"),
    Metric("rss_bytes_per_in_flight", "B", True, _growth_per_in_flight("peak_rss_bytes", "baseline_rss_bytes"),
           "server RSS above baseline per request in flight"),
    Metric("attempts_per_request", "", True, _attempts_per_request, "HTTP attempts per request"),
)
METRIC_NAMES = tuple(m.name for m in METRICS)


def read_metrics(report: Report) -> dict[str, float | None]:
    """Every metric of one trial's report (None: not measured)."""
    return {m.name: m.read(report) for m in METRICS}
