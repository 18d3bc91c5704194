"""Mergeable latency histograms that never keep individual samples.

Log-spaced buckets (about 1% wide) from 10 µs to ~28 hours: percentiles are
accurate to a bucket's width, memory is fixed (~18 KB of counts; the sparse
state of 131,072 latencies pickles to ~5 KB), and worker histograms merge by
adding counts.

Written here rather than taken from hdrhistogram (0.10.8 ships cp311 wheels)
because faultload records a whole numpy array at once, and HdrHistogram has
no array call: its ``record_value`` runs in Python per value. Measured by
``bench/histogram.py`` (131,072 values, medians of 9 runs): recording is ~40x
slower per value there (561 ns vs 14 ns at 2 significant figures; 387 ns
even after collapsing repeats with np.unique), merging worker states 2-7x
and reading the summary 3-16x slower; it would still need
numpy beside it to skip NaN and keep the exact max; and it pulls in
setuptools>=83 and pbr at run time. It wins on state size (2.5 KB vs 5.0 KB
pickled at 2 figures) and, at 3 figures, on accuracy (<=0.04% vs <=0.9% off
numpy's exact p50/p90/p99/max), neither of which faultload needs: each
worker ships its History beside the state (85 B a request, ~5.6 MB for a
confirm-run worker's 65,536), and the report promises percentiles to a 1%
bucket, no finer.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

_MIN_S = 1e-5
_GROWTH = 1.01
_BUCKETS = int(math.log(1e5 / _MIN_S, _GROWTH)) + 2


class Histogram:
    """Counts of durations in log buckets, plus the exact max."""

    def __init__(self) -> None:
        self.counts = np.zeros(_BUCKETS, dtype=np.int64)
        self.max = 0.0

    def record(self, seconds: float) -> None:
        self.record_many(np.asarray([seconds], dtype=np.float64))

    def record_many(self, seconds: np.ndarray) -> None:
        values = np.asarray(seconds, dtype=np.float64)
        values = values[np.isfinite(values)]
        if values.size == 0:
            return
        clipped = np.maximum(values, _MIN_S)
        index = np.minimum((np.log(clipped / _MIN_S) / math.log(_GROWTH)).astype(np.int64) + 1, _BUCKETS - 1)
        index[values < _MIN_S] = 0
        np.add.at(self.counts, index, 1)
        self.max = max(self.max, float(values.max()))

    def merge(self, other: "Histogram") -> None:
        self.counts += other.counts
        self.max = max(self.max, other.max)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def percentile(self, q: float) -> float | None:
        """Upper edge of the bucket holding the q-th percentile (q in [0, 100])."""
        total = self.total
        if total == 0:
            return None
        rank = max(1, math.ceil(q / 100.0 * total))
        index = int(np.searchsorted(np.cumsum(self.counts), rank))
        upper = _MIN_S * _GROWTH**index
        return min(upper, self.max)

    def summary(self) -> dict[str, float | int | None]:
        """The report's percentile block: p50/p90/p99/max and the count."""
        return {
            "count": self.total,
            "p50": self.percentile(50),
            "p90": self.percentile(90),
            "p99": self.percentile(99),
            "max": self.max if self.total else None,
        }

    def to_state(self) -> dict[str, Any]:
        """Sparse, picklable/JSON-able form for crossing process boundaries."""
        nonzero = np.nonzero(self.counts)[0]
        return {"index": nonzero.tolist(), "count": self.counts[nonzero].tolist(), "max": self.max}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Histogram":
        hist = cls()
        hist.counts[np.asarray(state["index"], dtype=np.int64)] = np.asarray(state["count"], dtype=np.int64)
        hist.max = float(state["max"])
        return hist

    @classmethod
    def merged(cls, parts: Iterable["Histogram"]) -> "Histogram":
        out = cls()
        for part in parts:
            out.merge(part)
        return out
