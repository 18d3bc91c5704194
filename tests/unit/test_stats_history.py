"""Histogram (stats.py), History (history.py) and nonces (tokens.py).

Result decoding is tests/unit/test_result_check.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from faultload.model import tokens
from faultload.record.histogram import Histogram
from faultload.record.history import COLUMNS, MAX_COUNT, ErrorClass, History, Outcome, bump_count

BUCKET = 1.01  # the histogram's bucket growth factor: one bucket is ~1% wide

# --------------------------------------------------------------------------- Histogram


def _data(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Log-normal latencies from ~100 µs to minutes, plus a few exact values.
    return np.concatenate([np.exp(rng.normal(-2.0, 2.0, n)), [1e-5, 0.5, 0.5, 3.0]])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 99, 99.9, 100])
def test_percentile_within_one_bucket_of_exact(seed, q):
    values = _data(seed, 5000)
    hist = Histogram()
    hist.record_many(values)
    got = hist.percentile(q)
    # The histogram answers the upper edge of the bucket holding the nearest-rank value.
    exact = float(np.percentile(values, q, method="inverted_cdf"))
    assert exact * (1 - 1e-9) <= got <= exact * BUCKET * (1 + 1e-9), (q, exact, got)
    # ... which is also within about a bucket of numpy's default (interpolated) percentile.
    interpolated = float(np.percentile(values, q))
    assert got == pytest.approx(interpolated, rel=0.011)


def test_record_one_by_one_equals_record_many():
    values = _data(3, 300)
    a, b = Histogram(), Histogram()
    for v in values:
        a.record(float(v))
    b.record_many(values)
    assert np.array_equal(a.counts, b.counts) and a.max == b.max


def test_record_ignores_non_finite_and_keeps_exact_max():
    hist = Histogram()
    hist.record_many(np.array([np.nan, np.inf, -np.inf, 0.2, 0.7]))
    assert hist.total == 2
    assert hist.max == 0.7
    assert hist.percentile(100) == 0.7  # capped at the exact max, never above it


def test_tiny_and_zero_durations_land_in_the_lowest_bucket():
    hist = Histogram()
    hist.record_many(np.array([0.0, 1e-9, 5e-6]))
    assert hist.total == 3
    assert hist.counts[0] == 3
    assert hist.percentile(50) <= 1e-5


def test_merge_equals_histogram_of_union():
    a_values, b_values = _data(4, 2000), _data(5, 3000) * 3
    a, b, union = Histogram(), Histogram(), Histogram()
    a.record_many(a_values)
    b.record_many(b_values)
    union.record_many(np.concatenate([a_values, b_values]))
    merged = Histogram.merged([a, b])
    assert np.array_equal(merged.counts, union.counts)
    assert merged.max == union.max
    assert merged.summary() == union.summary()
    a.merge(b)
    assert np.array_equal(a.counts, union.counts)
    assert merged.total == a_values.size + b_values.size


def test_state_round_trip_through_json():
    hist = Histogram()
    hist.record_many(_data(6, 1000))
    state = json.loads(json.dumps(hist.to_state()))  # crosses processes / files as plain JSON
    back = Histogram.from_state(state)
    assert np.array_equal(back.counts, hist.counts)
    assert back.max == hist.max
    assert back.summary() == hist.summary()


def test_empty_histogram():
    hist = Histogram()
    assert hist.total == 0
    assert hist.percentile(50) is None
    assert hist.summary() == {"count": 0, "p50": None, "p90": None, "p99": None, "max": None}
    back = Histogram.from_state(hist.to_state())
    assert back.total == 0 and back.summary()["max"] is None
    assert Histogram.merged([]).summary()["count"] == 0


def test_summary_percentiles_are_ordered():
    hist = Histogram()
    hist.record_many(_data(7, 4000))
    s = hist.summary()
    assert s["count"] == 4004
    assert s["p50"] <= s["p90"] <= s["p99"] <= s["max"]


# --------------------------------------------------------------------------- History


def _history(n: int, worker: int, outcomes: list[Outcome]) -> History:
    h = History.empty(n)
    h["worker"][:] = worker
    h["nonce"][:] = np.arange(n) + 1000 * worker
    h["submit_start"][:] = np.linspace(0.0, 1.0, n)
    h["done"][:] = h["submit_start"] + 0.5
    h["attempts"][:] = 2
    for i, outcome in enumerate(outcomes):
        h["outcome"][i] = outcome
    return h


def test_empty_history_columns():
    h = History.empty(5)
    assert len(h) == 5
    assert set(h.columns) == set(COLUMNS)
    for name, dtype in COLUMNS.items():
        assert h[name].dtype == dtype and h[name].shape == (5,)
    for name in ("submit_start", "submit_end", "done"):
        assert np.isnan(h[name]).all()
    assert h.count(Outcome.PENDING) == 5
    assert len(History.empty(0)) == 0


def test_merge_and_count():
    a = _history(3, 0, [Outcome.OK, Outcome.OK, Outcome.LOST])
    b = _history(4, 1, [Outcome.OK, Outcome.CORRUPT, Outcome.PENDING, Outcome.OK])
    m = History.merge([a, b])
    assert len(m) == 7
    assert m.count(Outcome.OK) == 4
    assert m.count(Outcome.LOST) == 1
    assert m.count(Outcome.CORRUPT) == 1
    assert m.count(Outcome.PENDING) == 1
    assert m.count(Outcome.GAVE_UP) == 0
    assert list(m["worker"]) == [0, 0, 0, 1, 1, 1, 1]
    assert list(m["nonce"][3:]) == [1000, 1001, 1002, 1003]
    assert sum(m.count(o) for o in Outcome) == len(m)
    for name, dtype in COLUMNS.items():
        assert m[name].dtype == dtype
    assert len(History.merge([])) == 0
    assert len(History.merge([History.empty(0), a])) == 3  # a crashed worker's empty history merges


@pytest.mark.parametrize("name", ["history.npz", "history", "history.data"])
def test_save_load_round_trip(tmp_path, name):
    """save(path) then load(path) gives back the same columns, whatever the file is called."""
    h = History.merge([_history(5, 0, [Outcome.OK] * 5), _history(3, 2, [Outcome.GAVE_UP])])
    h["error"][5] = ErrorClass.TIMEOUT
    path = tmp_path / name
    h.save(str(path))
    back = History.load(str(path))
    assert len(back) == len(h)
    for col, dtype in COLUMNS.items():
        assert back[col].dtype == dtype
        np.testing.assert_array_equal(back[col], h[col])


def test_history_is_compact():
    n = 10_000
    h = History.empty(n)
    assert h.nbytes / n < 200
    assert h.nbytes == sum(np.dtype(d).itemsize for d in COLUMNS.values()) * n


def test_error_class_keys_are_stable():
    assert ErrorClass.HTTP_404.key == "http_404"
    assert ErrorClass.INTEGRITY.key == "integrity"
    assert [o.value for o in Outcome] == list(range(7))


# --------------------------------------------------------------------------- tokens


@pytest.mark.parametrize("nonce", [0, 1, 12345, (1 << 20) - 1, 1 << 20, (7 << 24) | 99, (1 << 40) - 1])
@pytest.mark.parametrize("extra", [0, 5])
def test_prompt_tokens_and_nonce_of_are_inverse(nonce, extra):
    prompt = tokens.prompt_tokens(nonce, extra)
    assert len(prompt) == 3 + extra
    assert prompt[0] == tokens.PROMPT_MARK
    assert tokens.nonce_of(prompt) == nonce


@pytest.mark.parametrize("nonce", [-1, 1 << 40])
def test_prompt_tokens_out_of_range(nonce):
    with pytest.raises(ValueError, match="out of range"):
        tokens.prompt_tokens(nonce)


@pytest.mark.parametrize("prompt", [[], [tokens.PROMPT_MARK, 1], [1, 2, 3], [tokens.PROMPT_MARK + 1, 0, 5]])
def test_nonce_of_foreign_prompt_is_none(prompt):
    assert tokens.nonce_of(prompt) is None


def test_outputs_differ_between_nonces_and_samples():
    a = tokens.output_tokens(5, 0, 64)
    assert a.dtype == np.int32 and a.shape == (64,)
    assert (a >= 0).all() and (a < tokens.VOCAB).all()
    assert not np.array_equal(a, tokens.output_tokens(6, 0, 64))
    assert not np.array_equal(a, tokens.output_tokens(5, 1, 64))
    lp = tokens.output_logprobs(5, 0, 64)
    assert lp.dtype == np.float32 and (lp <= 0).all() and (lp > -1).all()


def test_bump_count_saturates_instead_of_wrapping():
    """A retry loop with no count limit (the SDK's, and so the raw client's) can pass uint16."""
    h = History.empty(2)
    h["repolls"][0] = MAX_COUNT - 1
    for _ in range(3):
        bump_count(h["repolls"], 0)
    bump_count(h["repolls"], 1)
    assert h["repolls"].tolist() == [MAX_COUNT, 1]
