"""pit_test: statistics equal scipy's kstest, laws equal scipy's kolmogorov / a float64
Kuiper series, size under the null (slow), power under a wrong spread."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from jaxcal import regression
from jaxcal.stats import pit_test
from jaxcal.stats._paths.pit import kolmogorov_sf, kuiper_sf, log_bridge_sfs
from tests.helpers import assert_close, x64


def _kuiper_oracle(x):
    k = np.arange(1, 200)
    return min(1.0, 2 * np.sum((4 * k**2 * x**2 - 1) * np.exp(-2 * k**2 * x**2)))


def test_laws():
    xs = np.array([0.2, 0.5, 0.8, 1.0, 1.36, 2.0, 4.0, 8.0, 15.0])
    with x64():
        got = jax.vmap(kolmogorov_sf)(jnp.asarray(xs))
        ku = jax.vmap(kuiper_sf)(jnp.asarray(xs[xs >= 0.5]))
    assert_close(got, special.kolmogorov(xs), rtol=1e-10, atol=1e-300)
    assert_close(ku, [_kuiper_oracle(x) for x in xs[xs >= 0.5]], rtol=1e-10, atol=1e-300)
    assert float(got[-1]) > 0  # 15.0: p ~ 1e-195, never 0


def test_log_p_values_are_the_logs_of_the_same_laws_and_finite_beyond_underflow():
    """The log p-values of pit_test are those of the bridge laws (not the Brownian
    motion's of the calibration tests), where the float does not underflow and beyond."""
    xs = np.array([0.5, 1.0, 2.0, 2.99, 3.0, 4.0, 8.0, 15.0])
    with x64():
        log_ks, log_ku = jax.vmap(log_bridge_sfs)(jnp.asarray(xs), jnp.asarray(xs))
        far = jnp.asarray([30.0, 40.0])
        far_ks, far_ku = jax.vmap(log_bridge_sfs)(far, far)
    assert_close(log_ks, np.log(special.kolmogorov(xs)), rtol=1e-10)
    assert_close(log_ku, np.log([_kuiper_oracle(x) for x in xs]), rtol=1e-10)
    # beyond float64's range: the leading term 2 exp(-2 x^2) (and (4x^2 - 1) for Kuiper)
    assert_close(far_ks, np.log(2) - 2 * np.array([900.0, 1600.0]), rtol=1e-12)
    assert_close(
        far_ku,
        np.log(2 * (4 * np.array([900.0, 1600.0]) - 1)) - 2 * np.array([900.0, 1600.0]),
        rtol=1e-12,
    )
    r = pit_test(jnp.asarray(np.linspace(0.0, 0.01, 500)))  # far from uniform
    assert float(r.ks.p_value) > 0 and np.isfinite(float(r.ks.log_p_value))


def test_statistics_equal_scipy():
    u = np.random.default_rng(0).uniform(size=300) ** 1.2
    with x64():
        r = pit_test(jnp.asarray(u), correction=False)
    ref = stats.kstest(u, "uniform", method="asymp")
    assert_close(r.ks.statistic, ref.statistic)
    assert_close(r.ks.p_value, ref.pvalue, rtol=1e-9)
    ecdf = np.arange(1, 301) / 300
    us = np.sort(u)
    v = np.max(ecdf - us) + np.max(us - (ecdf - 1 / 300))
    assert_close(r.kuiper.statistic, v)
    assert_close(r.n_effective, 300.0)


def test_weights_padding_and_power():
    rng = np.random.default_rng(1)
    n = 500
    mean, y = np.zeros(n), rng.normal(size=n)
    wide = regression.pit(regression.Gaussian(jnp.asarray(mean), jnp.full((n,), 2.0)), y)
    r = pit_test(wide)
    assert float(r.kuiper.p_value) < 1e-6 and float(r.ks.p_value) < 1e-3
    good = regression.pit(regression.Gaussian(jnp.asarray(mean), jnp.ones(n)), y)
    pad = jnp.concatenate([good, jnp.full((4,), jnp.nan)])
    w = jnp.concatenate([jnp.ones(n), jnp.zeros(4)])
    padded = jax.jit(lambda u, w: pit_test(u, weights=w))(pad, w)
    jax.tree.map(assert_close, padded, pit_test(good))
    twice = pit_test(jnp.concatenate([good, good]))
    doubled = pit_test(good, weights=2 * jnp.ones(n))
    assert_close(doubled.ks.statistic, twice.ks.statistic)


def test_bad_input():
    with pytest.raises(ValueError, match=r"`pit_values` must lie in \[0, 1\]"):
        pit_test(jnp.array([0.2, 1.5]))
    with pytest.raises(ValueError, match="`pit_values` must be finite"):
        pit_test(jnp.array([0.2, jnp.nan]))
    with pytest.raises(ValueError, match="`correction`"):
        pit_test(jnp.array([0.2, 0.5]), correction=1)


@pytest.mark.slow
def test_size_under_the_null():
    """Rejection rate at 5% within a 99.9% binomial band, N = 50 and 400 (one vmap each)."""
    reps = 4000
    for n in (50, 400):
        u = jax.random.uniform(jax.random.key(n), (reps, n))
        r = jax.vmap(lambda x: pit_test(x))(u)
        for p in (r.ks.p_value, r.kuiper.p_value):
            rate = float(jnp.mean(p < 0.05))
            lo, hi = stats.binom.ppf([0.0005, 0.9995], reps, 0.05) / reps
            assert lo <= rate <= hi, (n, rate, lo, hi)
