"""The ratio of two sides' medians and its confidence interval: scipy's bootstrap over the repeats.

Each side's repeats are resampled independently (the two builds' trials are
separate samples, not pairs: ABBA order cancels drift, it does not pair
trials), the statistic is median(candidate) / median(baseline), and the
interval is the bootstrap's percentile interval — BCa needs a jackknife that
a handful of repeats (and ties, frequent in counts) make degenerate.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class RatioEstimate:
    baseline_median: float
    candidate_median: float
    ratio: float
    ci: tuple[float, float]


def _median_ratio(baseline: np.ndarray, candidate: np.ndarray, axis: int = -1) -> np.ndarray:
    b, c = np.median(baseline, axis=axis), np.median(candidate, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b == c, 1.0, c / b)  # 0/0 (two sides that both measured none) is no change


def ratio_of_medians(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 9999,
    seed: int = 0,
) -> RatioEstimate:
    """Medians, their ratio (candidate / baseline) and its bootstrap interval; inf when only the baseline is 0."""
    b, c = np.asarray(baseline, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    if b.size == 0 or c.size == 0 or not (np.isfinite(b).all() and np.isfinite(c).all()):
        raise ValueError("each side needs at least one finite value")
    ratio = float(_median_ratio(b, c))
    if b.size == 1 and c.size == 1:
        return RatioEstimate(float(b[0]), float(c[0]), ratio, (ratio, ratio))
    with warnings.catch_warnings():  # all-equal resamples are fine here: the interval is then one point
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        with np.errstate(divide="ignore", invalid="ignore"):
            result = stats.bootstrap(
                (b, c),
                _median_ratio,
                paired=False,
                vectorized=True,
                method="percentile",
                confidence_level=confidence,
                n_resamples=resamples,
                random_state=np.random.default_rng(seed),
            )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if math.isnan(low) or math.isnan(high):  # every resample the same: the interval is the point
        low = high = ratio
    return RatioEstimate(float(np.median(b)), float(np.median(c)), ratio, (low, high))
