"""Consistency test and the resampling plumbing it shares (jaxcal.stats._resampling.consistency).

Oracles: NumPy for p-values and label frequencies, the binomial law of the mean label,
and the metric itself; the draws and the fast path have their own files
(test_random.py, test_binned_null.py), the bootstrap intervals test_bootstrap_ci.py.
"""

from __future__ import annotations

import resource
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import jaxcal
from jaxcal.stats._resampling.consistency import _consistency_kernel, consistency_test
from tests.helpers import assert_close, x64
from tests.resampling_data import (
    ECE_VARIANTS,
    KEY,
    PM,
    YM,
    N,
    P,
    R,
    Y,
    binary_data,
    mean_label,
    mean_prob,
)

# ---------------------------------------------------------------- consistency test


def test_p_value_formula_and_dtype():
    res = consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=R)
    exceed = int(np.sum(np.asarray(res.null) >= float(res.statistic)))
    assert_close(res.p_value, (1 + exceed) / (R + 1))
    assert res.statistic.shape == () and res.p_value.shape == () and res.null.shape == (R,)
    assert res.p_value.dtype == jnp.float32


def test_ties_count_against_the_null():
    """A constant metric ties every resample: p = 1, never a spurious rejection."""
    res = consistency_test(mean_prob, P, Y, key=KEY, n_resamples=R)
    assert float(res.p_value) == 1.0
    np.testing.assert_array_equal(res.null, np.full(R, float(res.statistic), np.float32))
    # Certain predictions: every resample reproduces the data (fast path and generic).
    certain = jnp.asarray(np.tile(np.array([0.0, 1.0], np.float32), 250))
    for metric in (jaxcal.ece, lambda p, yy: jaxcal.ece(p, yy)):
        res = consistency_test(metric, certain, certain.astype(jnp.int32), key=KEY, n_resamples=R)
        assert float(res.p_value) == 1.0
        wrong = consistency_test(
            metric, certain, 1 - certain.astype(jnp.int32), key=KEY, n_resamples=R
        )
        assert float(wrong.p_value) == pytest.approx(1 / (R + 1))


def test_p_values_small_under_clear_miscalibration():
    p, y = binary_data(seed=4, power=3.0)  # true rate p**3: miscalibrated
    res = consistency_test(jaxcal.ece, p, y, key=KEY, n_resamples=R)
    assert float(res.p_value) == pytest.approx(1 / (R + 1))  # the smallest, never 0
    pm = PM**3 / jnp.sum(PM**3, axis=1, keepdims=True)  # sharpened: overconfident top label
    res = consistency_test(ECE_VARIANTS[2], pm, YM, key=KEY, n_resamples=R)
    assert float(res.p_value) <= 0.05


def test_p_values_roughly_uniform_under_the_null_under_vmap():
    """Size: 300 calibrated data sets (vmapped), their p-values are ~ U(0, 1)."""
    n, sets, r = 300, 300, 99
    rng = np.random.default_rng(11)
    p = jnp.asarray(rng.beta(2, 3, n).astype(np.float32))
    ys = jnp.asarray((rng.random((sets, n)) < np.asarray(p)[None]).astype(np.int32))
    keys = jax.random.split(jax.random.key(1), sets)
    metric = partial(jaxcal.ece, n_bins=10)
    pv = jax.vmap(lambda y, k: consistency_test(metric, p, y, key=k, n_resamples=r).p_value)(
        ys, keys
    )
    pv = np.asarray(pv)
    assert pv.min() >= 1 / (r + 1)
    # Rejection rates within binomial bands (4 sd) at three levels, and a KS check.
    for level in (0.05, 0.2, 0.5):
        rate = np.mean(pv <= level)
        assert abs(rate - level) < 4 * np.sqrt(level * (1 - level) / sets) + 1 / (r + 1)
    assert scipy.stats.kstest(pv, "uniform").statistic < 0.1


def test_batch_size_does_not_change_the_result():
    """The draws are the same for every batch size: ece/mce (integer per-bin counts) and
    metrics of integer sums are bitwise identical; other float metrics may differ in the
    last bit (XLA can vectorise a reduction differently at another vmap width)."""
    ref = consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=R)
    res = consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=R, batch_size=7)
    np.testing.assert_array_equal(res.null, ref.null)
    assert res.p_value == ref.p_value
    generic = [
        consistency_test(mean_label, PM, YM, key=KEY, n_resamples=R, batch_size=b)
        for b in (5, None)
    ]
    np.testing.assert_array_equal(generic[0].null, generic[1].null)


def test_resample_prefix_is_stable():
    """Resample r depends on split(key, R)[r] only: fewer resamples give a prefix."""
    a = consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=R)
    b = consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=R // 2)
    np.testing.assert_array_equal(a.null[: R // 2], b.null)


@pytest.mark.slow
def test_null_of_mean_label_has_binomial_spread():
    res = consistency_test(mean_label, P, Y, key=KEY, n_resamples=2000)
    p = np.asarray(P, np.float64)
    null = np.asarray(res.null, np.float64)
    assert abs(null.mean() - p.mean()) < 4.5 * np.sqrt(np.sum(p * (1 - p))) / N / np.sqrt(2000)
    # rel: the sd of 2000 draws has a sampling error of 1 / sqrt(2 * 2000) = 1.6 %; 5 sd.
    assert null.std() == pytest.approx(np.sqrt(np.sum(p * (1 - p))) / N, rel=0.08)


def test_resample_predictions_bootstraps_the_predictions():
    fixed = consistency_test(mean_prob, P, Y, key=KEY, n_resamples=R)
    assert np.ptp(np.asarray(fixed.null)) == 0
    moving = consistency_test(mean_prob, P, Y, key=KEY, n_resamples=800, resample_predictions=True)
    sd = np.std(np.asarray(P, np.float64)) / np.sqrt(N)
    # rel: the sd of 800 draws has a sampling error of 2.5 %; 4 sd.
    assert np.std(np.asarray(moving.null)) == pytest.approx(sd, rel=0.1)


@pytest.mark.slow
def test_resample_predictions_draws_labels_from_the_resampled_predictions():
    res = consistency_test(mean_label, PM, YM, key=KEY, n_resamples=400, resample_predictions=True)
    assert np.all(np.isfinite(np.asarray(res.null)))
    w = jnp.asarray(np.random.default_rng(2).random(N).astype(np.float32))
    res = consistency_test(
        mean_label, P, Y, key=KEY, n_resamples=400, weights=w, resample_predictions=True
    )
    expected = float(jnp.sum(w * P) / jnp.sum(w))  # E[weighted mean label] = weighted mean p
    assert abs(float(jnp.mean(res.null)) - expected) < 0.01


def test_float64_under_x64():
    with x64():
        p, y = jnp.asarray(P, jnp.float64), Y
        res = consistency_test(jaxcal.ece, p, y, key=KEY, n_resamples=R)
        assert res.null.dtype == jnp.float64 and res.p_value.dtype == jnp.float64
        assert_close(res.statistic, jaxcal.ece(p, y))


def test_jit_and_no_recompilation():
    metric_a = partial(jaxcal.ece, n_bins=9)
    consistency_test(metric_a, P, Y, key=KEY, n_resamples=R)
    before = _consistency_kernel._cache_size()
    # An equal partial (a new object) and new data reuse the compiled kernel.
    consistency_test(partial(jaxcal.ece, n_bins=9), P + 0, Y, key=jax.random.key(9), n_resamples=R)
    assert _consistency_kernel._cache_size() == before
    jitted = jax.jit(lambda p, y, k: consistency_test(metric_a, p, y, key=k, n_resamples=R))
    res = jitted(P, Y, KEY)
    np.testing.assert_array_equal(
        res.null, consistency_test(metric_a, P, Y, key=KEY, n_resamples=R).null
    )


def test_bad_inputs():
    with pytest.raises(ValueError, match="`metric` must be a callable"):
        consistency_test("ece", P, Y, key=KEY)
    with pytest.raises(ValueError, match="`n_resamples` must be an integer >= 1"):
        consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=0)
    with pytest.raises(ValueError, match="`batch_size`"):
        consistency_test(jaxcal.ece, P, Y, key=KEY, batch_size=0)
    with pytest.raises(ValueError, match="`resample_predictions`"):
        consistency_test(jaxcal.ece, P, Y, key=KEY, resample_predictions="yes")
    with pytest.raises(ValueError, match="`key`"):
        consistency_test(jaxcal.ece, P, Y, key=0)
    with pytest.raises(ValueError, match="`key`"):
        consistency_test(jaxcal.ece, P, Y, key=jax.random.split(KEY, 2))
    with pytest.raises(ValueError, match="`probs`"):
        consistency_test(jaxcal.ece, P + 1, Y, key=KEY)
    with pytest.raises(ValueError, match="`labels`"):
        consistency_test(jaxcal.ece, P, Y[:-1], key=KEY)
    with pytest.raises(ValueError, match="`n_bins`"):
        consistency_test(partial(jaxcal.ece, n_bins=0), P, Y, key=KEY)
    with pytest.raises(ValueError, match="0-d float"):
        consistency_test(lambda p, y: p, P, Y, key=KEY)
    with pytest.raises(ValueError, match="`metric` must accept a `weights=`"):
        consistency_test(lambda p, y: jnp.mean(p), P, Y, key=KEY, weights=jnp.ones(N))


# ---------------------------------------------------------------- memory bound (slow)


@pytest.mark.slow
def test_5000_resamples_at_n_1e5_with_bounded_memory():
    n = 100_000
    p, y = binary_data(n=n, seed=12)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    metric = partial(jaxcal.ece, n_bins=15)
    res = consistency_test(
        lambda a, b: metric(a, b), p, y, key=KEY, n_resamples=5000, batch_size=100
    )
    fast = consistency_test(metric, p, y, key=KEY, n_resamples=5000)
    grown_gib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 2**20
    assert res.null.shape == (5000,) and grown_gib < 4, grown_gib
    assert_close(fast.null, res.null, rtol=1e-6, atol=1e-7)  # float32 round-off of gap_norm
    assert fast.p_value == res.p_value


@pytest.mark.parametrize(
    ("key", "match"),
    [
        (None, r"`key` must be a JAX PRNG key .*got None"),
        ("a", r"`key` must be a JAX PRNG key .*got 'a'"),
        (0, r"`key` must be a JAX PRNG key; got the int 0. Pass jax.random.key\(0\)"),
        (2**70, r"`key` must be a JAX PRNG key; got the int"),
    ],
)
def test_bad_keys_name_key(key, match):
    # D18: key=None gave "None is not a valid value for jnp.array", without naming `key`.
    with pytest.raises(ValueError, match=match):
        consistency_test(jaxcal.ece, P, Y, key=key, n_resamples=R)
    with pytest.raises(ValueError, match=match):
        jaxcal.bootstrap_ci(jaxcal.ece, P, Y, key=key, n_resamples=R)


def test_one_resample_is_refused():
    # D27: n_resamples=1 gave p = 1 and a zero-width interval, whatever the data.
    match = r"`n_resamples` must be at least 2 .*got 1"
    with pytest.raises(ValueError, match=match):
        consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=1)
    with pytest.raises(ValueError, match=match):
        jaxcal.bootstrap_ci(jaxcal.ece, P, Y, key=KEY, n_resamples=1)
    with pytest.raises(ValueError, match=match):
        jaxcal.paired_bootstrap(jaxcal.ece, P, P, Y, key=KEY, n_resamples=1)
    with pytest.raises(ValueError, match=match):
        jaxcal.consistency_bands(P, key=KEY, n_resamples=1)
    with pytest.raises(ValueError, match=match):
        jaxcal.corp_bands(P, Y, key=KEY, n_resamples=1)
