"""Bootstrap intervals and the paired bootstrap (jaxcal.stats._resampling.bootstrap).

Oracles: NumPy quantiles, scipy.stats.bootstrap for BCa (given our bootstrap
distribution), the standard error of the mean, and bootstrap_ci itself for the paired
differences.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import jaxcal
from jaxcal.stats._resampling.bootstrap import _bootstrap_kernel, bootstrap_ci, paired_bootstrap
from tests.helpers import assert_close, x64
from tests.resampling_data import KEY, PM, YM, N, P, R, Y, binary_data, mean_label, mean_prob

# ---------------------------------------------------------------- bootstrap intervals


def test_bootstrap_resamples_pairs_with_replacement():
    res = bootstrap_ci(mean_prob, P, Y, key=KEY, n_resamples=800)
    sd = np.std(np.asarray(P, np.float64)) / np.sqrt(N)
    # rel: the sd of 800 draws has a sampling error of 2.5 %; 4 sd.
    assert np.std(np.asarray(res.samples)) == pytest.approx(sd, rel=0.1)
    assert abs(np.mean(np.asarray(res.samples)) - float(res.estimate)) < 4.5 * sd / np.sqrt(800)
    # Pairs stay together: resampling (p, y) with y == (p > 0.5) keeps that relation.
    y = (P > 0.5).astype(jnp.int32)
    agree = bootstrap_ci(
        lambda p, yy: jnp.mean((yy == (p > 0.5).astype(jnp.int32)).astype(jnp.float32)),
        P,
        y,
        key=KEY,
        n_resamples=50,
    )
    np.testing.assert_array_equal(agree.samples, np.ones(50, np.float32))


def test_interval_methods_from_the_same_samples():
    pct = bootstrap_ci(jaxcal.brier_score, P, Y, key=KEY, n_resamples=R)
    basic = bootstrap_ci(jaxcal.brier_score, P, Y, key=KEY, n_resamples=R, method="basic")
    np.testing.assert_array_equal(pct.samples, basic.samples)
    q = np.quantile(np.asarray(pct.samples, np.float64), [0.025, 0.975])
    assert_close([pct.low, pct.high], q, rtol=1e-6)  # float32 quantile interpolation
    est = float(pct.estimate)
    # rtol: float32 quantile interpolation, as above.
    assert_close([basic.low, basic.high], [2 * est - q[1], 2 * est - q[0]], rtol=1e-6)
    for res in (pct, basic):
        assert float(res.low) < est < float(res.high)


@pytest.mark.slow
def test_intervals_shrink_like_one_over_sqrt_n():
    widths = []
    for n in (400, 1600, 6400):
        p, y = binary_data(n=n, seed=n)
        res = bootstrap_ci(jaxcal.brier_score, p, y, key=KEY, n_resamples=400)
        assert float(res.low) <= float(res.estimate) <= float(res.high)
        widths.append(float(res.high - res.low))
    ratios = np.array(widths[:-1]) / np.array(widths[1:])
    assert np.all((ratios > 1.6) & (ratios < 2.5)), ratios


def _scipy_bca(data, statistic, samples, confidence=0.95):
    fake = scipy.stats._resampling.BootstrapResult(
        confidence_interval=None, bootstrap_distribution=np.asarray(samples), standard_error=None
    )
    return scipy.stats.bootstrap(
        (data,),
        statistic,
        n_resamples=0,
        bootstrap_result=fake,
        method="BCa",
        confidence_level=confidence,
    ).confidence_interval


def test_bca_matches_scipy_on_the_mean():
    """Same bootstrap distribution given to scipy: same interval (the mean's influence
    values are its jackknife values up to scale, so the accelerations agree exactly)."""
    with x64():
        rng = np.random.default_rng(5)
        x = rng.gamma(1.5, 0.2, 300).clip(0, 1)  # skewed: a != 0, z0 != 0
        p, y = jnp.asarray(x), jnp.zeros(300, jnp.int32)
        for conf in (0.9,):
            ours = bootstrap_ci(
                mean_prob, p, y, key=KEY, n_resamples=1000, method="bca", confidence=conf
            )
            ref = _scipy_bca(x, np.mean, ours.samples, conf)
            # rtol: float64 quantile levels through ndtr/ndtri, scipy's and XLA's differ in
            # the last bits.
            assert_close([ours.low, ours.high], [ref.low, ref.high], rtol=1e-9)


def test_bca_close_to_scipy_on_a_nonlinear_statistic():
    """For a ratio the infinitesimal jackknife differs from scipy's delete-one jackknife
    by O(1/N) in the acceleration: intervals agree to a small fraction of their width."""
    with x64():
        rng = np.random.default_rng(6)
        x = rng.beta(0.7, 3, 400)
        p, y = jnp.asarray(x), jnp.asarray((rng.random(400) < x).astype(np.int32))

        def ratio(probs, labels, *, weights=None):
            w = jnp.ones_like(probs) if weights is None else weights
            return jnp.sum(w * labels.astype(w.dtype)) / jnp.sum(w * probs)

        ours = bootstrap_ci(ratio, p, y, key=KEY, n_resamples=2000, method="bca")
        data = np.stack([np.asarray(y, np.float64), x])
        ref = scipy.stats.bootstrap(
            (data[0], data[1]),
            lambda a, b, axis=-1: np.sum(a, axis=axis) / np.sum(b, axis=axis),
            paired=True,
            n_resamples=0,
            bootstrap_result=scipy.stats._resampling.BootstrapResult(
                confidence_interval=None,
                bootstrap_distribution=np.asarray(ours.samples),
                standard_error=None,
            ),
            method="BCa",
        ).confidence_interval
        width = ref.high - ref.low
        ours_bounds = np.array([float(ours.low), float(ours.high)])
        ref_bounds = np.array([ref.low, ref.high])
        assert np.all(np.abs(ours_bounds - ref_bounds) < 1e-3 * width)
        # BCa moved the bounds from the percentile ones far more than it differs from scipy.
        shift = np.abs(np.quantile(np.asarray(ours.samples), [0.025, 0.975]) - ref_bounds)
        assert np.max(np.abs(ours_bounds - ref_bounds)) < 0.1 * np.max(shift)


def test_degenerate_bootstrap_is_finite():
    y = jnp.ones(N, jnp.int32)
    for method in ("basic", "bca"):  # percentile: the plain quantiles, as basic's
        res = bootstrap_ci(mean_label, P, y, key=KEY, n_resamples=R, method=method)
        assert float(res.low) == float(res.high) == float(res.estimate) == 1.0


def test_bootstrap_with_weights_and_multiclass():
    w = jnp.asarray(np.random.default_rng(3).random(N).astype(np.float32))
    res = bootstrap_ci(jaxcal.ece, PM, YM, key=KEY, n_resamples=R, weights=w, method="bca")
    assert_close(res.estimate, jaxcal.ece(PM, YM, weights=w))
    assert float(res.low) <= float(res.high)
    assert np.all(np.isfinite(np.asarray(res.samples)))


# ---------------------------------------------------------------- paired bootstrap


def test_paired_bootstrap_uses_the_same_indices_for_both_models():
    other = jnp.clip(P * 1.2, 0, 1)
    paired = paired_bootstrap(jaxcal.brier_score, P, other, Y, key=KEY, n_resamples=R)
    a = bootstrap_ci(jaxcal.brier_score, P, Y, key=KEY, n_resamples=R)
    b = bootstrap_ci(jaxcal.brier_score, other, Y, key=KEY, n_resamples=R)
    assert_close(paired.samples, a.samples - b.samples, atol=1e-6)  # float32 differences
    assert_close(paired.difference, a.estimate - b.estimate)
    exceed = np.sum(
        np.abs(np.asarray(paired.samples - paired.difference)) >= abs(float(paired.difference))
    )
    assert_close(paired.p_value, (1 + exceed) / (R + 1))


def test_paired_bootstrap_detects_a_clear_difference_and_not_a_null_one():
    worse = jnp.clip(P + 0.25, 0, 1)
    res = paired_bootstrap(jaxcal.ece, P, worse, Y, key=KEY, n_resamples=R, method="bca")
    assert float(res.high) < 0 and float(res.p_value) == pytest.approx(1 / (R + 1))
    same = paired_bootstrap(jaxcal.ece, P, P, Y, key=KEY, n_resamples=R, method="bca")
    assert float(same.p_value) == 1.0 and float(same.low) == float(same.high) == 0.0


def test_batch_size_does_not_change_the_resamples():
    """The indices are the same for every batch size; the float metric may differ in the
    last bit (XLA can vectorise a reduction differently at another vmap width)."""
    boot = [
        bootstrap_ci(jaxcal.brier_score, P, Y, key=KEY, n_resamples=R, batch_size=b)
        for b in (3, None)
    ]
    assert_close(boot[0].samples, boot[1].samples, rtol=1e-6)  # last-bit float32 differences
    assert abs(float(boot[0].low - boot[1].low)) < 1e-6


def test_bad_inputs():
    with pytest.raises(ValueError, match="`confidence`"):
        bootstrap_ci(jaxcal.ece, P, Y, key=KEY, confidence=1.0)
    with pytest.raises(ValueError, match="`confidence`"):
        bootstrap_ci(jaxcal.ece, P, Y, key=KEY, confidence=True)
    with pytest.raises(ValueError, match="`method`"):
        bootstrap_ci(jaxcal.ece, P, Y, key=KEY, method="studentized")
    with pytest.raises(ValueError, match="weights="):
        bootstrap_ci(lambda p, y: jnp.mean(p), P, Y, key=KEY, method="bca")
    with pytest.raises(ValueError, match="`probs_b`"):
        paired_bootstrap(jaxcal.ece, P, P[:-1], Y, key=KEY)
    with pytest.raises(ValueError, match="`probs_b`"):
        paired_bootstrap(jaxcal.ece, P, PM, Y, key=KEY)


# ---------------------------------------------------------------- large N (slow)


@pytest.mark.slow
def test_5000_resamples_in_batches_compile_once():
    # Batches of 100 resamples in a loop (50 batches); the scale of 1e5 samples, and its
    # memory bound, is tests/stats/test_consistency.py's: here the size only costs CI time.
    n = 10_000
    p, y = binary_data(n=n, seed=12)
    boot = bootstrap_ci(jaxcal.ece, p, y, key=KEY, n_resamples=5000, batch_size=100)
    assert float(boot.low) < float(boot.estimate) < float(boot.high)
    # The kernel is compiled once per configuration: new data and key of the same shapes
    # reuse it.
    compiled = _bootstrap_kernel._cache_size()
    bootstrap_ci(
        jaxcal.ece, p[::-1], y[::-1], key=jax.random.key(1), n_resamples=5000, batch_size=100
    )
    assert _bootstrap_kernel._cache_size() == compiled


def test_docstring_warns_of_biased_statistics():
    # D28: the interval of the biased ECE can exclude its estimate; the API must say so.
    doc = jaxcal.bootstrap_ci.__doc__
    assert "biased statistic" in doc and "exclude" in doc and "bca" in doc


def test_one_resample_per_batch_runs_the_metric_unbatched():
    """Large inputs run one resample per batch; vmapped over that axis of 1, the
    classwise ECE's scatter indexed with (batch, segment) pairs, an extra N K int32
    buffer (207 MB of scratch at N = 1e6, K = 10, now 165 MB). Same resamples, same
    values; the extra scratch over the metric's own stays about the resampled copy."""
    n, k = 2**15, 10
    rng = np.random.default_rng(4)
    p = rng.dirichlet(np.ones(k), n).astype(np.float32)
    y = rng.integers(0, k, n).astype(np.int32)
    metric = jaxcal.classwise_ece

    def scratch(f):
        return jax.jit(f).lower(p, y).compile().memory_analysis().temp_size_in_bytes

    def boot(batch_size):
        return lambda p, y: (
            bootstrap_ci(metric, p, y, key=KEY, n_resamples=2, batch_size=batch_size).samples
        )

    extra = scratch(boot(1)) - scratch(metric)
    assert extra < 1.5 * p.nbytes, extra / p.nbytes  # was 2.2 input sizes
    assert_close(boot(1)(p, y), boot(2)(p, y), rtol=1e-6)  # last-bit float32 differences


def test_resampling_results_print_a_summary_not_every_resample():
    """N10 of the 2026-11-28 findings: print() of a bootstrap or consistency result dumped
    1000 values."""
    import jax
    import numpy as np

    import jaxcal

    rng = np.random.default_rng(0)
    p = rng.random(200).astype(np.float32)
    y = (rng.random(200) < p).astype(np.int32)
    for result in (
        jaxcal.stats.bootstrap_ci(jaxcal.ece, p, y, key=jax.random.key(0)),
        jaxcal.stats.consistency_test(jaxcal.ece, p, y, key=jax.random.key(0)),
    ):
        text = repr(result)
        assert "<1000 values: mean" in text and len(text) < 300, text
