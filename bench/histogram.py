"""faultload.record.histogram.Histogram vs hdrhistogram's HdrHistogram, on what faultload does with a histogram.

A benchmark, not a test. The call pattern is faultload's: a worker records a
numpy array of latencies at the end of its load (client/workers.py
``_histograms``: one ``record_many`` of ``done - submit_start``, NaN where a
request never finished), ships ``to_state()`` to the parent in a pickled
WorkerResult, and the report (report.py) does ``from_state`` per worker,
``merged``, then reads count/p50/p90/p99/max.

HdrHistogram (the ``hdrh`` package) records integers one at a time in Python
(``record_value``; it has no array call), so it is driven here in
microseconds, 1 µs .. 1e11 µs (the ~28 h that histogram.py covers), two ways:
``record_value`` per value, and (``hdr2u``) ``np.unique`` first, then
``record_value(v, count)`` per distinct value. It is measured at 2 significant figures (buckets
<= 0.8% wide, the nearest to histogram.py's 1%) and at 3 (its usual setting). Its
max is the bucket's upper edge, not the exact max that histogram.py keeps, and it
does not skip NaN: a wrapper would keep both in numpy, as timed here.

Measured, each over ``--repeat`` runs (the order of the contenders rotates
every run; the machine is shared and noisy, so read the medians and ratios):
record 131,072 values (the confirm run's count) + to_state; from_state and
merge of W worker states (W = 2, the confirm run, and 64, the most workers);
the summary read; serialized state size (pickle and JSON); percentile error
against numpy's exact nearest-rank percentile on three latency shapes (HDR's
rank is q% of n rounded, not rounded up as nearest rank's is, so in a sparse
tail part of its error is one rank, not its bucket width); import time and resident-set
growth of each module in a fresh interpreter that already has numpy.

Needs the ``bench`` extra (``pip install -e '.[bench]'``: hdrhistogram 0.10.8).

Usage: .faultload/venv/bin/python bench/histogram.py [--repeat R] [--values N]
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from hdrh.histogram import HdrHistogram
except ImportError:
    sys.exit("bench/histogram.py needs hdrhistogram: .faultload/venv/bin/pip install -e '.[bench]'")

from faultload.record.histogram import Histogram  # noqa: E402

_US = 1e6
_HIGHEST_US = 10**11


# --------------------------------------------------------------------------- the contenders


class Faultload:
    """faultload.record.histogram.Histogram used exactly as workers.py and report.py use it."""

    name = "histogram.py"

    def record_state(self, seconds: np.ndarray) -> dict:
        hist = Histogram()
        hist.record_many(seconds)
        return hist.to_state()

    def merged(self, states: list[dict]) -> Histogram:
        return Histogram.merged(Histogram.from_state(s) for s in states)

    def summary(self, hist: Histogram) -> dict:
        return hist.summary()


class Hdr:
    """HdrHistogram behind the same calls: NaN skipped and the exact max kept in numpy, as a wrapper must."""

    def __init__(self, figures: int, unique: bool) -> None:
        self.figures, self.unique = figures, unique
        self.name = f"hdr{figures}{'u' if unique else ''}"

    def record_state(self, seconds: np.ndarray) -> dict:
        values = seconds[np.isfinite(seconds)]
        hist = HdrHistogram(1, _HIGHEST_US, self.figures)
        micros = np.clip(np.rint(values * _US), 0, _HIGHEST_US).astype(np.int64)
        if self.unique:
            for value, count in zip(*(a.tolist() for a in np.unique(micros, return_counts=True))):
                hist.record_value(value, count)
        else:
            for value in micros.tolist():
                hist.record_value(value)
        return {"hdr": hist.encode(), "max": float(values.max()) if values.size else 0.0}

    def merged(self, states: list[dict]) -> tuple[HdrHistogram, float]:
        out = HdrHistogram(1, _HIGHEST_US, self.figures)
        for state in states:
            out.add(HdrHistogram.decode(state["hdr"]))
        return out, max((s["max"] for s in states), default=0.0)

    def summary(self, merged: tuple[HdrHistogram, float]) -> dict:
        hist, exact_max = merged
        total = hist.get_total_count()
        if not total:
            return {"count": 0, "p50": None, "p90": None, "p99": None, "max": None}
        at = hist.get_percentile_to_value_dict([50, 90, 99])
        return {"count": total, **{f"p{q}": min(at[q] / _US, exact_max) for q in (50, 90, 99)}, "max": exact_max}


CONTENDERS = [Faultload(), Hdr(2, False), Hdr(2, True), Hdr(3, False)]


# --------------------------------------------------------------------------- the data


def latencies(n: int, seed: int) -> dict[str, np.ndarray]:
    """Three latency shapes in seconds, each with ~1% NaN (requests that never finished)."""
    rng = np.random.default_rng(seed)
    shapes = {
        # like the confirm run's submit latency: p50 ~40 ms, a tail to seconds (5 ms .. 4 s mostly)
        "lognormal": np.exp(rng.normal(np.log(0.04), 1.3, n)),
        # a fast mode and a slow mode (queued behind a busy engine)
        "bimodal": np.where(
            rng.random(n) < 0.8, np.exp(rng.normal(np.log(0.005), 0.3, n)), np.exp(rng.normal(np.log(2.0), 0.4, n))
        ),
        # like the confirm run's e2e latency: narrow, around 15.7 s
        "e2e-like": rng.normal(15.7, 0.6, n).clip(0.001),
    }
    for values in shapes.values():
        values[rng.random(n) < 0.01] = np.nan
    return shapes


# --------------------------------------------------------------------------- timing


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def time_ops(values: np.ndarray, repeat: int) -> dict[str, dict[str, list[float]]]:
    """Seconds per operation, per contender, per run (the contenders' order rotates each run)."""
    per_worker = {w: np.array_split(values, w) for w in (2, 64)}
    runs: dict[str, dict[str, list[float]]] = {c.name: {} for c in CONTENDERS}
    for i in range(repeat):
        order = CONTENDERS[i % len(CONTENDERS) :] + CONTENDERS[: i % len(CONTENDERS)]
        for c in order:
            row = runs[c.name]
            took, _ = _timed(lambda: c.record_state(values))
            row.setdefault("record+to_state", []).append(took)
            for workers, parts in per_worker.items():
                states = [c.record_state(p) for p in parts]
                took, merged = _timed(lambda: c.merged(states))
                row.setdefault(f"from_state+merge x{workers}", []).append(took)
            took, _ = _timed(lambda: c.summary(merged))
            row.setdefault("summary", []).append(took)
    return runs


def state_sizes(values: np.ndarray) -> dict[str, tuple[int, int | None]]:
    """(pickled bytes, JSON bytes) of one worker's state; HDR's bytes blob has no JSON form as is."""
    sizes = {}
    for c in CONTENDERS:
        state = c.record_state(values)
        as_json = None if isinstance(state.get("hdr"), bytes) else len(json.dumps(state))
        if as_json is None:
            as_json = len(json.dumps({"hdr": state["hdr"].decode("ascii"), "max": state["max"]}))
        sizes[c.name] = (len(pickle.dumps(state)), as_json)
    return sizes


def errors(shapes: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Worst |relative error| of p50/p90/p99/max vs numpy's exact nearest-rank value, per shape."""
    out: dict[str, dict[str, float]] = {}
    for c in CONTENDERS:
        for shape, values in shapes.items():
            got = c.summary(c.merged([c.record_state(p) for p in np.array_split(values, 2)]))
            finite = values[np.isfinite(values)]
            exact = {f"p{q}": float(np.percentile(finite, q, method="inverted_cdf")) for q in (50, 90, 99)}
            exact["max"] = float(finite.max())
            out.setdefault(c.name, {})[shape] = max(abs(got[k] / exact[k] - 1) for k in exact)
    return out


_IMPORT_PROBE = """
import os, time, numpy
def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
rss0 = rss_kib()
t0 = time.perf_counter()
import {module}
took = time.perf_counter() - t0
print(took, rss_kib() - rss0)
"""


def import_costs(repeat: int) -> dict[str, tuple[float, float]]:
    """Median (import seconds, resident-set growth KiB) in a fresh interpreter that has numpy already."""
    modules = {"histogram.py": "faultload.record.histogram", "hdrh": "hdrh.histogram"}
    seen: dict[str, list[tuple[float, int]]] = {k: [] for k in modules}
    for i in range(repeat):
        for name in list(modules) if i % 2 == 0 else list(modules)[::-1]:
            out = subprocess.run(
                [sys.executable, "-c", _IMPORT_PROBE.format(module=modules[name])],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            seen[name].append((float(out[0]), int(out[1])))
    return {k: (statistics.median(t for t, _ in v), statistics.median(r for _, r in v)) for k, v in seen.items()}


# --------------------------------------------------------------------------- the report


def _columns(label: str, cells: list[str]) -> str:
    return f"{label:<26}" + "".join(f"{c:>12}" for c in cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--values", type=int, default=131_072)
    known = parser.parse_args()
    shapes = latencies(known.values, seed=17)
    names = [c.name for c in CONTENDERS]
    base = names[0]
    print(f"{known.values:,} values (lognormal, ~1% NaN), medians of {known.repeat} runs; ratio = contender / {base}")
    print(_columns("ms (median)", names + [f"{n}/stats" for n in names[1:]]))
    runs = time_ops(shapes["lognormal"], known.repeat)
    for op in runs[base]:
        med = {n: statistics.median(runs[n][op]) for n in names}
        print(_columns(op, [f"{1000 * med[n]:.2f}" for n in names] + [f"{med[n] / med[base]:.1f}x" for n in names[1:]]))
    record = {n: statistics.median(runs[n]["record+to_state"]) for n in names}
    print(_columns("ns per value recorded", [f"{1e9 * record[n] / known.values:.0f}" for n in names]))
    sizes = state_sizes(shapes["lognormal"])
    print(
        _columns(
            "state bytes, pickle",
            [f"{sizes[n][0]:,}" for n in names] + [f"{sizes[n][0] / sizes[base][0]:.2f}x" for n in names[1:]],
        )
    )
    print(
        _columns(
            "state bytes, JSON",
            [f"{sizes[n][1]:,}" for n in names] + [f"{sizes[n][1] / sizes[base][1]:.2f}x" for n in names[1:]],
        )
    )
    counts = [Histogram().counts.nbytes] + [
        HdrHistogram(1, _HIGHEST_US, c.figures).counts_len * 8 for c in CONTENDERS[1:]
    ]
    print(_columns("counts array bytes", [f"{b:,}" for b in counts]))
    print()
    print("worst |relative error| of p50/p90/p99/max vs numpy exact (nearest rank), 2 workers merged")
    print(_columns("shape", names))
    errs = errors(shapes)
    for shape in shapes:
        print(_columns(shape, [f"{errs[n][shape]:.3%}" for n in names]))
    print()
    print(f"import in a fresh interpreter with numpy loaded, medians of {known.repeat} runs")
    costs = import_costs(known.repeat)
    for name, (took, rss) in costs.items():
        print(_columns(name, [f"{1000 * took:.1f} ms", f"+{rss:,} KiB"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
