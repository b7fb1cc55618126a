"""Per-bin intervals for reliability diagrams (jaxcal.stats._resampling.intervals).

Oracles: scipy.stats.binomtest(...).proportion_ci ("wilson", "exact"),
scipy.stats.beta.ppf, jaxcal.reliability_curve for the bins, and the consistency
resamples of jaxcal._core.random for the bands.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import jaxcal
from jaxcal._core.binning import bin_edges_and_index
from jaxcal._core.random import seed_words
from jaxcal.stats._resampling.intervals import (
    _beta_quantile,
    clopper_pearson_interval,
    consistency_bands,
    reliability_intervals,
    wilson_interval,
)
from tests.helpers import assert_close, x64
from tests.resampling_data import consistency_labels

KEY = jax.random.key(7)
COUNTS = [(0, 1), (1, 1), (0, 10), (1, 10), (7, 10), (10, 10), (3, 1000), (50, 100), (9999, 10000)]


def _scipy_ci(k, n, confidence, method):
    return scipy.stats.binomtest(k, n).proportion_ci(confidence, method)


@pytest.mark.parametrize("confidence", [0.95, 0.683])
def test_wilson_matches_scipy(confidence):
    k, n = (np.array(c) for c in zip(*COUNTS, strict=True))
    ours = wilson_interval(k, n, confidence=confidence)
    for i, (ki, ni) in enumerate(COUNTS):
        ref = _scipy_ci(ki, ni, confidence, "wilson")
        assert_close([ours.low[i], ours.high[i]], [ref.low, ref.high], atol=1e-6)  # float32


@pytest.mark.parametrize("confidence", [0.95, 0.683])
def test_clopper_pearson_matches_scipy_in_float64(confidence):
    k, n = (np.array(c) for c in zip(*COUNTS, strict=True))
    with x64():
        ours = clopper_pearson_interval(k, n, confidence=confidence)
        assert ours.low.dtype == jnp.float64
    for i, (ki, ni) in enumerate(COUNTS):
        ref = _scipy_ci(ki, ni, confidence, "exact")
        # rtol: betainc's float64 accuracy (the bisection itself is exact to the last bit).
        assert_close([ours.low[i], ours.high[i]], [ref.low, ref.high], rtol=1e-9, atol=1e-12)


def test_clopper_pearson_float32_accuracy_as_documented():
    k = np.array([1, 7, 50, 9999, 50_000])
    n = np.array([10, 10, 100, 10_000, 100_000])
    ours = clopper_pearson_interval(k, n)
    for i in range(len(k)):
        ref = _scipy_ci(int(k[i]), int(n[i]), 0.95, "exact")
        tol = 2e-6 if n[i] <= 10_000 else 2e-5  # documented float32 betainc accuracy
        assert abs(float(ours.low[i]) - ref.low) < tol and abs(float(ours.high[i]) - ref.high) < tol


def test_clopper_pearson_float32_within_3e_7_up_to_a_million():
    rng = np.random.default_rng(3)
    n = rng.integers(1, 1_000_000, 500)
    k = np.minimum(np.floor(rng.random(500) * (n + 1)), n).astype(np.int64)
    ours = clopper_pearson_interval(k.astype(np.float32), n.astype(np.float32))
    low = scipy.stats.beta.ppf(0.025, np.maximum(k, 1), n - k + 1)
    high = scipy.stats.beta.ppf(0.975, k + 1, np.maximum(n - k, 1))
    low, high = np.where(k > 0, low, 0), np.where(k < n, high, 1)
    # jaxcal's betainc (JAX's was off by 2e-3 here, its prefactor cancelling terms of size n)
    assert np.abs(np.asarray(ours.low) - low).max() < 3e-7
    assert np.abs(np.asarray(ours.high) - high).max() < 3e-7


def test_beta_quantile_against_scipy():
    with x64():
        q = jnp.asarray([1e-6, 0.025, 0.5, 0.975, 0.999999])
        quantile = jax.jit(_beta_quantile)
        for a, b in [(0.5, 0.5), (1.0, 1.0), (3.0, 40.0), (200.0, 5.0)]:
            ours = quantile(q, jnp.full(5, a), jnp.full(5, b))
            # rtol: betainc's float64 accuracy; atol ~0: tiny quantiles compared relatively.
            assert_close(ours, scipy.stats.beta.ppf(np.asarray(q), a, b), rtol=1e-9, atol=1e-300)


def test_degenerate_counts():
    k = jnp.asarray([0, 0, 5])
    n = jnp.asarray([0, 5, 5])  # an empty bin, an all-0 bin, an all-1 bin
    for fn in (wilson_interval, clopper_pearson_interval):
        lo, hi = fn(k, n)
        assert_close(lo[0], 0.0) and assert_close(hi[0], 1.0)
        assert float(lo[1]) == 0.0 and 0 < float(hi[1]) < 1  # all-0 bin: positive width
        assert 0 < float(lo[2]) < 1 and float(hi[2]) == 1.0  # all-1 bin: positive width
        assert np.all(np.isfinite(np.asarray(lo))) and np.all(np.isfinite(np.asarray(hi)))


def test_intervals_under_jit_and_vmap():
    k = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    n = jnp.asarray([[5.0, 5.0], [5.0, 5.0]])
    for fn, transform in ((wilson_interval, jax.jit), (clopper_pearson_interval, jax.vmap)):
        direct, transformed = fn(k, n), transform(fn)(k, n)
        assert_close(direct.low, transformed.low)
        assert_close(direct.high, transformed.high)


def test_bad_counts():
    with pytest.raises(ValueError, match="`successes` must not exceed `trials`"):
        wilson_interval(jnp.asarray([3]), jnp.asarray([2]))
    with pytest.raises(ValueError, match="`successes` must hold non-negative whole numbers"):
        wilson_interval(jnp.asarray([1.5]), jnp.asarray([2]))
    with pytest.raises(ValueError, match="`trials` must hold non-negative whole numbers"):
        clopper_pearson_interval(jnp.asarray([0]), jnp.asarray([-2]))
    with pytest.raises(ValueError, match="`successes` must have the shape of `trials`"):
        clopper_pearson_interval(jnp.asarray([1, 2]), jnp.asarray([3]))
    with pytest.raises(ValueError, match="`confidence`"):
        wilson_interval(jnp.asarray([1]), jnp.asarray([3]), confidence=0.0)
    with pytest.raises(ValueError, match="`successes` must hold counts"):
        wilson_interval(np.asarray([1 + 2j]), jnp.asarray([3]))


# ---------------------------------------------------------------- reliability diagrams


def _data(n=800, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.beta(0.6, 0.6, n).astype(np.float32)
    y = (rng.random(n) < p).astype(np.int32)
    probs = rng.dirichlet(np.ones(3) * 0.5, n).astype(np.float32)
    labels = np.array([rng.choice(3, p=r / r.sum()) for r in probs.astype(np.float64)])
    return jnp.asarray(p), jnp.asarray(y), jnp.asarray(probs), jnp.asarray(labels.astype(np.int32))


P, Y, PM, YM = _data()
R = 64  # resamples of the band tests: one compiled kernel serves several tests


@pytest.mark.parametrize(
    ("multiclass", "options", "method"),
    [
        (False, {"n_bins": 10}, "wilson"),
        (False, {"n_bins": 6, "binning": "quantile", "closed": "left"}, "clopper-pearson"),
        (True, {"n_bins": 8}, "clopper-pearson"),
    ],
)
def test_reliability_intervals_use_the_ece_bins(multiclass, options, method):
    probs, labels = (PM, YM) if multiclass else (P, Y)
    ours = reliability_intervals(probs, labels, method=method, **options)
    curve = jaxcal.reliability_curve(probs, labels, **options)
    np.testing.assert_array_equal(ours.counts, curve.counts)
    assert_close(ours.edges, curve.edges)
    assert_close(ours.mean_accuracy, curve.mean_accuracy)
    assert_close(ours.mean_confidence, curve.mean_confidence)
    hits = np.round(np.asarray(curve.mean_accuracy) * np.asarray(curve.counts)).astype(int)
    counts = np.asarray(curve.counts)
    for b in range(len(counts)):
        if counts[b] == 0:
            assert float(ours.low[b]) == 0.0 and float(ours.high[b]) == 1.0
            continue
        ref = _scipy_ci(
            int(hits[b]), int(counts[b]), 0.95, "exact" if method != "wilson" else "wilson"
        )
        assert_close([ours.low[b], ours.high[b]], [ref.low, ref.high], atol=2e-6)  # float32
        assert float(ours.low[b]) <= float(ours.mean_accuracy[b]) <= float(ours.high[b])


def test_reliability_intervals_bad_inputs():
    with pytest.raises(ValueError, match="`method`"):
        reliability_intervals(P, Y, method="bootstrap")
    with pytest.raises(ValueError, match="`n_bins`"):
        reliability_intervals(P, Y, n_bins=0)
    with pytest.raises(ValueError, match="`labels`"):
        reliability_intervals(P, Y[:-1])


# ---------------------------------------------------------------- consistency bands


@pytest.mark.parametrize("multiclass", [False, True])
def test_consistency_bands_are_quantiles_of_the_resampled_accuracy(multiclass):
    probs = PM if multiclass else P
    r, n_bins = R, 8
    bands = consistency_bands(probs, key=KEY, n_resamples=r, n_bins=n_bins)
    # The same labels as consistency_test draws, binned by the oracle reliability_curve.
    labels = consistency_labels(seed_words(jax.random.split(KEY, r)), probs)
    curve = partial(jaxcal.reliability_curve, n_bins=n_bins)
    acc = np.stack([np.asarray(curve(probs, labels[i]).mean_accuracy) for i in range(r)])
    ref = np.quantile(acc.astype(np.float64), [0.025, 0.975], axis=0)
    assert_close(bands.low, ref[0], atol=1e-6)  # float32 quantile interpolation
    assert_close(bands.high, ref[1], atol=1e-6)  # float32 quantile interpolation
    observed = curve(probs, jnp.zeros(probs.shape[0], jnp.int32))
    np.testing.assert_array_equal(bands.counts, observed.counts)
    assert_close(bands.mean_confidence, observed.mean_confidence)


@pytest.mark.slow
def test_consistency_bands_cover_the_diagonal_and_shrink():
    n_bins = 5
    widths = []
    for n in (500, 8000):
        p = jnp.asarray(np.random.default_rng(n).random(n).astype(np.float32))
        b = consistency_bands(p, key=KEY, n_resamples=400, n_bins=n_bins)
        assert np.all(np.asarray(b.low) <= np.asarray(b.mean_confidence))
        assert np.all(np.asarray(b.mean_confidence) <= np.asarray(b.high))
        widths.append(np.asarray(b.high - b.low))
    ratio = widths[0] / widths[1]  # 16x the samples: bands 4x narrower
    assert np.all((ratio > 3.0) & (ratio < 5.3)), ratio


def test_consistency_bands_batch_size_and_bad_inputs():
    a = consistency_bands(P, key=KEY, n_resamples=R, n_bins=8)
    b = consistency_bands(P, key=KEY, n_resamples=R, n_bins=8, batch_size=3)
    np.testing.assert_array_equal(a.low, b.low)
    np.testing.assert_array_equal(a.high, b.high)
    with pytest.raises(ValueError, match="`probs`"):
        consistency_bands(P - 1, key=KEY)
    with pytest.raises(ValueError, match="`key`"):
        consistency_bands(P, key=3)
    with pytest.raises(ValueError, match="`n_resamples`"):
        consistency_bands(P, key=KEY, n_resamples=0)


def test_empty_bins_are_zero_in_the_bands():
    p = jnp.asarray(np.array([0.05, 0.1, 0.12, 0.93, 0.97], np.float32))
    b = consistency_bands(p, key=KEY, n_resamples=R, n_bins=10)
    empty = np.asarray(b.counts) == 0
    assert empty.any()
    assert np.all(np.asarray(b.low)[empty] == 0) and np.all(np.asarray(b.high)[empty] == 0)
    _, bins = bin_edges_and_index(p, 10, "uniform", "right", None)
    assert set(np.asarray(bins).tolist()) == set(np.flatnonzero(~empty).tolist())
