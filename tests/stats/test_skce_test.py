"""jaxcal.stats.skce_test against CalibrationTests.jl's formulas and test suite
(``test/skce/asymptotic.jl``, ``asymptotic_block.jl``, ``distribution_free.jl``,
``test/binary_trend.jl``), with size and power."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import jaxcal
from jaxcal._core.random import resample_seeds
from jaxcal.stats._kernel.skce_test import _draw_counts, bootstrap_null
from tests import reference_kernel as ref
from tests.helpers import assert_close, x64

H_REF = 10.0  # ExponentialKernel() ∘ ScaleTransform(0.1), the reference suites' kernel


def _dirichlet_data(rng, nclasses, n, consistent=True):
    probs = rng.dirichlet(np.ones(nclasses), n)
    if consistent:
        u = rng.random((n, 1))
        labels = (u > probs.cumsum(1)).sum(1).clip(0, nclasses - 1)
    else:
        labels = np.zeros(n, int)  # "targets_onlyone"
    return probs, labels


@pytest.mark.parametrize("nclasses", [2, 10, 100])
def test_asymptotic_estimate_and_statistic(nclasses):
    """test/skce/asymptotic.jl "estimate, statistic, and kernel matrix"."""
    rng = np.random.default_rng(nclasses)
    for n in (10, 50):
        for consistent in (True, False):
            probs, labels = _dirichlet_data(rng, nclasses, n, consistent)
            u, statistic, _ = ref.asymptotic_statistic(probs, labels, "laplacian", H_REF)
            with x64():
                res = jaxcal.stats.skce_test(
                    probs, labels, bandwidth=H_REF, key=jax.random.key(0), n_resamples=20
                )
                assert_close(res.estimate, u, rtol=1e-9, atol=1e-14)
                assert_close(res.statistic, statistic, rtol=1e-9, atol=1e-14)
                assert_close(
                    res.estimate, jaxcal.skce(probs, labels, bandwidth=H_REF), rtol=1e-9, atol=1e-14
                )


def test_bootstrap_null_is_the_references_quadratic_form():
    """bootstrap_ccdf's T' of the resample counts, for the counts the test draws."""
    rng = np.random.default_rng(1)
    probs, labels = _dirichlet_data(rng, 3, 25)
    with x64():
        _, _, hm = ref.asymptotic_statistic(probs, labels, "gaussian", 0.4)
        n = 25
        pi = jnp.full((n,), 1 / n)
        seeds = resample_seeds(jax.random.key(3), 6)
        counts = _draw_counts(seeds, pi, jnp.float64(n), weighted=False)
        x = jnp.asarray(probs - probs.mean(0, keepdims=True))
        e = jnp.asarray(np.eye(3)[labels] - probs)
        null = bootstrap_null(
            x,
            e,
            1.0,
            jnp.float64(0.4),
            "gaussian",
            jnp.asarray(hm @ np.full(n, 1 / n)),
            jnp.asarray(np.diag(hm)),
            jnp.float64(n),
            counts,
        )
        counts = np.asarray(counts)
        assert np.all(counts.sum(1) == n)
        want = [ref.bootstrap_statistic(hm, c) for c in counts]
        assert_close(null, want, rtol=1e-9, atol=1e-14)


def test_weighted_draws_skip_zero_weights_and_draw_n_positive():
    pi = jnp.asarray([0.25, 0.0, 0.25, 0.5, 0.0])
    counts = np.asarray(
        _draw_counts(resample_seeds(jax.random.key(0), 2000), pi, jnp.float32(3), True)
    )
    assert np.all(counts.sum(1) == 3)
    assert np.all(counts[:, [1, 4]] == 0)
    assert_close(counts.mean(0) / 3, pi, atol=0.02)  # 6000 draws


def test_asymptotic_p_value_counts_the_null():
    rng = np.random.default_rng(2)
    probs, labels = _dirichlet_data(rng, 4, 40)
    res = jaxcal.stats.skce_test(probs, labels, key=jax.random.key(1), n_resamples=199)
    assert 0 < float(res.p_value) <= 1
    assert float(res.p_value) * 200 == pytest.approx(round(float(res.p_value) * 200))


@pytest.mark.parametrize("nclasses", [2, 10, 100])
def test_block_estimate_stderr_and_z(nclasses):
    """test/skce/asymptotic_block.jl "estimate, stderr, and z"."""
    rng = np.random.default_rng(10 + nclasses)
    for n in (10, 50, 100):
        for m in (2, 5, 10, 50):
            if m >= n:
                continue
            for consistent in (True, False):
                probs, labels = _dirichlet_data(rng, nclasses, n, consistent)
                est, _, z, p = ref.block_test(probs, labels, "laplacian", H_REF, m)
                with x64():
                    res = jaxcal.stats.skce_test(
                        probs, labels, method="block", bandwidth=H_REF, block_size=m
                    )
                    skce = jaxcal.skce(
                        probs, labels, estimator="block", bandwidth=H_REF, block_size=m
                    )
                assert_close(res.estimate, est, rtol=1e-9, atol=1e-14)
                assert_close(res.estimate, skce, rtol=1e-9, atol=1e-14)
                assert_close(res.statistic, z, rtol=1e-8)
                assert_close(res.p_value, p, rtol=1e-8, atol=1e-300)


@pytest.mark.parametrize("estimator", ["unbiased", "biased", "block"])
def test_distribution_free_bounds(estimator):
    """test/skce/distribution_free.jl "estimator and estimates" with its p-value formula."""
    rng = np.random.default_rng(20)
    for nclasses in (2, 10, 100):
        for n in (10, 50, 100):
            for consistent in (True, False):
                probs, labels = _dirichlet_data(rng, nclasses, n, consistent)
                est = ref.skce(probs, labels, "laplacian", H_REF, estimator, 2)
                with x64():
                    res = jaxcal.stats.skce_test(
                        probs,
                        labels,
                        method="distribution_free",
                        estimator=estimator,
                        bandwidth=H_REF,
                        block_size=2,
                    )
                assert_close(res.estimate, est, rtol=1e-9, atol=1e-14)
                assert_close(
                    res.p_value, ref.distribution_free_p(est, n, estimator), rtol=1e-9, atol=1e-300
                )


def test_binary_trend_only_two():
    """test/binary_trend.jl: Dirichlet(2, 1) predictions, 500 samples, kernel
    ExponentialKernel() ∘ ScaleTransform(3), every target the second class: each test's
    p-value < 1e-6 (the distribution-free unbiased bound only < 0.4)."""
    rng = np.random.default_rng(18732)
    probs = rng.dirichlet(np.ones(2), 500)
    labels = np.ones(500, int)  # targets_onlytwo
    kw = dict(bandwidth=1 / 3)
    with x64():
        assert (
            float(jaxcal.stats.skce_test(probs, labels, key=jax.random.key(0), **kw).p_value)
            < 1e-6 + 1 / 1001
        )
        for m in (2, 10, 50, 100):
            assert (
                float(
                    jaxcal.stats.skce_test(
                        probs, labels, method="block", block_size=m, **kw
                    ).p_value
                )
                < 1e-6
            )
        for est, bound in (("unbiased", 0.4), ("biased", 1e-6)):
            res = jaxcal.stats.skce_test(
                probs, labels, method="distribution_free", estimator=est, **kw
            )
            assert float(res.p_value) < bound
        for m in (2, 10, 50, 100):
            res = jaxcal.stats.skce_test(
                probs, labels, method="distribution_free", estimator="block", block_size=m, **kw
            )
            assert float(res.p_value) < 0.4


def test_block_degenerate_blocks_and_bad_options():
    p = np.ones(8)
    y = np.ones(8, int)
    res = jaxcal.stats.skce_test(p, y, method="block", bandwidth=0.5)
    assert float(res.statistic) == 0 and float(res.p_value) == 0.5
    x = np.random.default_rng(0).random(8)
    with pytest.raises(ValueError, match="`key` is required"):
        jaxcal.stats.skce_test(x, y)
    with pytest.raises(ValueError, match="`method`"):
        jaxcal.stats.skce_test(x, y, method="bootstrap")
    with pytest.raises(ValueError, match="at least 2 blocks"):
        jaxcal.stats.skce_test(x, y, method="block", block_size=5)
    with pytest.raises(ValueError, match="`n_resamples`"):
        jaxcal.stats.skce_test(x, y, key=jax.random.key(0), n_resamples=1)
    with pytest.raises(ValueError, match="`estimator`"):
        jaxcal.stats.skce_test(x, y, method="distribution_free", estimator="linear")


def test_zero_weights_drop_samples():
    rng = np.random.default_rng(3)
    probs, labels = _dirichlet_data(rng, 3, 30)
    w = np.r_[np.ones(24), np.zeros(6)]
    with x64():
        a = jaxcal.stats.skce_test(probs, labels, method="distribution_free", weights=w)
        b = jaxcal.stats.skce_test(probs[:24], labels[:24], method="distribution_free")
        assert_close(a.p_value, b.p_value, rtol=1e-9)
        assert_close(a.estimate, b.estimate, rtol=1e-9)
        a = jaxcal.stats.skce_test(probs, labels, key=jax.random.key(0), weights=w)
        b = jaxcal.stats.skce_test(probs[:24], labels[:24], key=jax.random.key(0))
        assert_close(a.statistic, b.statistic, rtol=1e-9)


# ---------------------------------------------------------------- size and power (slow)

REPS = 400
# 99.9 % band of the number of rejections at alpha = 0.05 among REPS null data sets
LOW, HIGH = stats.binom.ppf([0.0005, 0.9995], REPS, 0.05)


def _batch(rng, nclasses, n, reps, alternative=False):
    probs = rng.dirichlet(np.ones(nclasses), (reps, n))
    truth = probs
    if alternative:  # under-confident model: the truth is sharper than the prediction
        truth = probs**3 / (probs**3).sum(-1, keepdims=True)
    u = rng.random((reps, n, 1))
    labels = (u > truth.cumsum(-1)).sum(-1).clip(0, nclasses - 1)
    return probs.astype(np.float32), labels.astype(np.int32)


def _rejections(fn, probs, labels, keys=None):
    if keys is None:
        p = jax.vmap(fn)(probs, labels)
    else:
        p = jax.vmap(fn)(probs, labels, keys)
    return int(np.sum(np.asarray(p) <= 0.05))


@pytest.mark.slow
@pytest.mark.parametrize(("nclasses", "n_alt"), [(2, 100), (10, 300)])
def test_size_and_power_asymptotic(nclasses, n_alt):
    """Size within the binomial band at alpha = 0.05 (400 calibrated data sets of 100
    Dirichlet(1) predictions, labels drawn from them); power > 0.9 against labels drawn
    from the sharpened predictions p^3 / sum p^3 (n = 100 for K = 2, 300 for K = 10)."""
    rng = np.random.default_rng(30 + nclasses)
    keys = jax.random.split(jax.random.key(nclasses), REPS)

    def fn(p, y, k):
        return jaxcal.stats.skce_test(p, y, key=k, n_resamples=300).p_value

    probs, labels = _batch(rng, nclasses, 100, REPS)
    assert LOW <= _rejections(fn, probs, labels, keys) <= HIGH
    probs, labels = _batch(rng, nclasses, n_alt, REPS, alternative=True)
    assert _rejections(fn, probs, labels, keys) > 0.9 * REPS


@pytest.mark.slow
@pytest.mark.parametrize(("nclasses", "n_alt", "m_alt"), [(2, 1000, 10), (10, 2000, 50)])
def test_size_and_power_block(nclasses, n_alt, m_alt):
    """Block test: size in the band with 100 blocks of 2 (n = 200; with 20 blocks of 10 the
    z-test is conservative, 2 rejections in 400: the block estimates' skewed law is not
    yet normal in their mean); power > 0.9 against the sharpened truth (K = 2: n = 1000,
    blocks of 10; K = 10: n = 2000, blocks of 50: the block test needs far more data
    than the asymptotic one)."""
    rng = np.random.default_rng(40 + nclasses)

    def fn(p, y, m=2):
        return jaxcal.stats.skce_test(p, y, method="block", block_size=m).p_value

    probs, labels = _batch(rng, nclasses, 200, REPS)
    assert LOW <= _rejections(fn, probs, labels) <= HIGH
    probs, labels = _batch(rng, nclasses, n_alt, 100, alternative=True)
    assert _rejections(lambda p, y: fn(p, y, m_alt), probs, labels) > 0.9 * 100


@pytest.mark.slow
@pytest.mark.parametrize(("estimator", "n_alt"), [("unbiased", 1000), ("biased", 200)])
def test_size_and_power_distribution_free(estimator, n_alt):
    """The bounds hold at any n: at most the band's upper end rejects under the null
    (they are conservative: fewer is expected); power > 0.9 when every label is the
    first class (the reference's "targets_onlyone"; the unbiased bound, Hoeffding's,
    needs n = 1000 there, the biased one n = 200)."""
    rng = np.random.default_rng(50)

    def fn(p, y):
        return jaxcal.stats.skce_test(p, y, method="distribution_free", estimator=estimator).p_value

    probs, labels = _batch(rng, 2, 200, REPS)
    assert _rejections(fn, probs, labels) <= HIGH
    probs, labels = _batch(rng, 2, n_alt, 100)
    assert _rejections(fn, probs, np.zeros_like(labels)) > 0.9 * 100
