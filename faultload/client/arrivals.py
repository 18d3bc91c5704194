"""When each request may start: a ``LoadShape``'s arrival pattern as trial-second offsets.

Apart from :mod:`faultload.model.shape` (plain values, no numpy) because it
computes with numpy; the raw client's feeder reads it.
"""

from __future__ import annotations

import numpy as np

from faultload.model.shape import LoadShape


def arrival_offsets(shape: LoadShape, first: int, count: int):
    """Earliest start (trial seconds) of requests ``[first, first + count)``; None for a burst.

    A numpy float64 array; the same for a request whichever worker runs it.
    """
    if shape.arrival == "burst" or shape.arrival_span_s <= 0 or count <= 0:
        return None
    n = shape.requests
    span = shape.scaled(shape.arrival_span_s)
    index = np.arange(first, first + count, dtype=np.float64)
    if shape.arrival == "waves":
        waves = min(shape.arrival_waves, n)
        return np.floor(index * waves / n) * (span / waves)
    if shape.arrival == "ramp":
        return span * np.sqrt(index / n)
    gaps = np.random.default_rng(shape.seed).exponential(span / n, size=n)  # poisson
    return (np.cumsum(gaps) - gaps[0])[first : first + count]
