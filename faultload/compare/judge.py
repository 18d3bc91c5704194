"""Judge a comparison: per metric, the medians, the ratio, its interval, and whether the candidate is worse.

A metric is worse when its ratio (candidate / baseline) is past the metric's
threshold in its worse direction *and* the whole interval lies on that side
of 1: a shift the repeats cannot tell from noise is not flagged, however
large its point estimate. The thresholds (``[tool.faultload.compare]``) were
calibrated from A/A runs on this 2-core machine (pyproject.toml says with
which numbers); a metric either side did not measure is unknown, and an
unknown metric makes the comparison not ok (unknown is never fine). A ratio
past any number (the baseline measured 0) is judged as the infinity it is,
and written as null with ``"unbounded": true``, so the JSON stays strict.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultload.compare.metrics import METRIC_NAMES, METRICS, Metric, read_metrics
from faultload.compare.stats import ratio_of_medians
from faultload.host.settings import read_faultload_table

SCHEMA = "faultload.compare/1"
# candidate / baseline past which a metric is worse: above for costs, below for throughput
DEFAULT_THRESHOLDS: Mapping[str, float] = {
    "server_cpu_ms_per_request": 1.15,
    "throughput_per_s": 0.87,
    "submit_p50_s": 1.25,
    "submit_p99_s": 1.5,
    "e2e_p50_s": 1.25,
    "e2e_p99_s": 1.5,
    "healthz_p99_s": 2.0,
    "fds_per_in_flight": 1.5,
    "rss_bytes_per_in_flight": 1.5,
    "rss_bytes_per_result": 1.5,
    "router_peak_in_flight": 0.8,
    "attempts_per_request": 1.10,
}


@dataclass(frozen=True)
class CompareSettings:
    thresholds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    confidence: float = 0.95
    resamples: int = 9999

    def validate(self) -> None:
        for name, value in self.thresholds.items():
            if name not in METRIC_NAMES:
                raise ValueError(f"compare threshold {name!r}: unknown metric; known: {', '.join(METRIC_NAMES)}")
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"compare threshold {name}: {value!r} is not a positive number")
        for metric in METRICS:
            value = self.thresholds[metric.name]
            if metric.higher_is_worse and value < 1 or not metric.higher_is_worse and value > 1:
                side = ">= 1 (higher is worse)" if metric.higher_is_worse else "<= 1 (lower is worse)"
                raise ValueError(f"compare threshold {metric.name}: {value} must be {side}")
        if not 0.5 <= self.confidence < 1:
            raise ValueError(f"compare confidence: {self.confidence} is not in [0.5, 1)")
        if not (isinstance(self.resamples, int) and 100 <= self.resamples <= 1_000_000):
            raise ValueError(f"compare resamples: {self.resamples!r} is not a whole number in 100..1000000")


def load_compare_settings(pyproject: Path | None) -> CompareSettings:
    """Defaults, replaced key by key by ``[tool.faultload.compare]`` (metric names, ``confidence``, ``resamples``)."""
    table = dict(read_faultload_table(pyproject, "compare"))
    extra = {k: table.pop(k) for k in ("confidence", "resamples") if k in table}
    settings = CompareSettings({**DEFAULT_THRESHOLDS, **table}, **extra)
    try:
        settings.validate()
    except ValueError as exc:
        raise ValueError(f"{pyproject} [tool.faultload.compare]: {exc}") from None
    return settings


def _is_worse(metric: Metric, ratio: float, ci: tuple[float, float], threshold: float) -> bool:
    if metric.higher_is_worse:
        return ratio > threshold and ci[0] > 1.0
    return ratio < threshold and ci[1] < 1.0


def judge_metric(
    metric: Metric,
    baseline: Sequence[float | None],
    candidate: Sequence[float | None],
    settings: CompareSettings,
    seed: int = 0,
) -> dict[str, Any]:
    """One metric's row of the ``faultload.compare/1`` JSON."""
    threshold = settings.thresholds[metric.name]
    row: dict[str, Any] = {
        "name": metric.name,
        "unit": metric.unit,
        "higher_is_worse": metric.higher_is_worse,
        "threshold": threshold,
        "baseline_values": list(baseline),
        "candidate_values": list(candidate),
    }
    if not baseline or not candidate or any(v is None for v in (*baseline, *candidate)):
        return {
            **row,
            "baseline_median": None,
            "candidate_median": None,
            "ratio": None,
            "ci": None,
            "worse": False,
            "unknown": True,
        }
    estimate = ratio_of_medians(
        baseline, candidate, confidence=settings.confidence, resamples=settings.resamples, seed=seed
    )
    unbounded = not all(math.isfinite(x) for x in (estimate.ratio, *estimate.ci))
    return {
        **row,
        "baseline_median": estimate.baseline_median,
        "candidate_median": estimate.candidate_median,
        "ratio": _finite(estimate.ratio),
        "ci": [_finite(x) for x in estimate.ci],
        "unbounded": unbounded,
        "worse": _is_worse(metric, estimate.ratio, estimate.ci, threshold),
        "unknown": False,
    }


def _finite(value: float) -> float | None:
    """A ratio for strict JSON: an infinite one (the baseline's median or a resample's is 0) is null."""
    return value if math.isfinite(value) else None


def ratio_of(row: Mapping[str, Any]) -> float | None:
    """A judged row's ratio as a number again: infinity where the JSON wrote an unbounded one as null."""
    if row["ratio"] is None and row.get("unbounded"):
        return math.inf
    return row["ratio"]


def interval_of(row: Mapping[str, Any]) -> tuple[float, float] | None:
    """A judged row's interval as numbers again (an unbounded end is infinity)."""
    if row["ci"] is None:
        return None
    low, high = (math.inf if x is None else x for x in row["ci"])
    return low, high


def comparison_json(result: Mapping[str, Any]) -> str:
    """The ``faultload.compare/1`` text; strict JSON (no ``Infinity``), which every parser reads."""
    return json.dumps(result, indent=2, allow_nan=False, default=str) + "\n"


def judge_comparison(
    baseline: str,
    candidate: str,
    baseline_reports: Sequence[Mapping[str, Any]],
    candidate_reports: Sequence[Mapping[str, Any]],
    settings: CompareSettings,
    trials: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The ``faultload.compare/1`` JSON from each side's trial reports (in the order they ran)."""
    b = [read_metrics(r) for r in baseline_reports]
    c = [read_metrics(r) for r in candidate_reports]
    rows = [
        judge_metric(m, [x[m.name] for x in b], [x[m.name] for x in c], settings, seed=i) for i, m in enumerate(METRICS)
    ]
    worse = [r["name"] for r in rows if r["worse"]]
    unknown = [r["name"] for r in rows if r["unknown"]]
    return {
        "schema": SCHEMA,
        "baseline": baseline,
        "candidate": candidate,
        "repeats": min(len(baseline_reports), len(candidate_reports)),
        "metrics": rows,
        "worse": worse,
        "unknown": unknown,
        "confidence": settings.confidence,
        "trials": [dict(t) for t in trials],
        "ok": not worse and not unknown,
    }


def settings_dict(settings: CompareSettings) -> dict[str, Any]:
    return dataclasses.asdict(settings)
