"""Calibration curve and its summaries against uncertainty-toolbox (its source, vendored as a
float64 oracle when the package is absent) and netcal's M-QCE formula."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxcal import regression as R
from tests.helpers import assert_close, x64


def _data(n=300, seed=0, scale=1.3):
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=n)
    std = rng.uniform(0.5, 2.0, n)
    y = mean + scale * std * rng.standard_t(5, size=n)
    return mean, std, y


def _oracle_curve(mean, std, y, levels, prop_type):
    """uncertainty-toolbox's get_proportion_lists_vectorized, in float64 NumPy."""
    r = (mean - y) / std
    if prop_type == "interval":
        lo, hi = stats.norm.ppf(0.5 - levels / 2), stats.norm.ppf(0.5 + levels / 2)
        return ((r[:, None] >= lo) & (r[:, None] <= hi)).mean(0)
    return (-r[:, None] <= stats.norm.ppf(levels)).mean(0)  # y <= q(p)


def _oracle_area(x, obs):
    d = obs - x
    h = np.diff(x)
    dl, dr = d[:-1], d[1:]
    cross = dl * dr < 0
    straight = h * np.abs(dl + dr) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        hour = h * (dl**2 + dr**2) / (np.abs(dl) + np.abs(dr)) / 2
    return np.where(cross, hour, straight).sum()


def test_gaussian_equals_uncertainty_toolbox():
    mean, std, y = _data()
    levels = np.linspace(0, 1, 100)
    obs = _oracle_curve(mean, std, y, levels, "interval")
    with x64():
        g = R.Gaussian(jnp.asarray(mean), jnp.asarray(std))
        c = R.calibration_curve(g, jnp.asarray(y))
        assert_close(c.observed, obs)
        mace = R.mean_absolute_calibration_error(g, jnp.asarray(y))
        rmsce = R.root_mean_squared_calibration_error(g, jnp.asarray(y))
        area = R.miscalibration_area(g, jnp.asarray(y))
        cq = R.calibration_curve(g, jnp.asarray(y), prop_type="quantile", n_levels=21)
    assert_close(mace, np.abs(obs - levels).mean())
    assert_close(rmsce, np.sqrt(((obs - levels) ** 2).mean()))
    assert_close(area, _oracle_area(levels, obs))
    assert_close(cq.observed, _oracle_curve(mean, std, y, np.linspace(0, 1, 21), "quantile"))
    uct = pytest.importorskip("uncertainty_toolbox")
    assert_close(mace, uct.mean_absolute_calibration_error(mean, std, y))
    assert_close(rmsce, uct.root_mean_squared_calibration_error(mean, std, y))
    assert_close(area, uct.miscalibration_area(mean, std, y))


def test_qce_is_netcal_marginal_formula():
    mean, std, y = _data(seed=1)
    tau = np.linspace(0.05, 0.95, 19)
    # netcal: NEES eps = z^2 <= chi2_1.ppf(tau), coverage averaged, |freq - tau| meaned
    freq = (((y - mean) / std)[:, None] ** 2 <= stats.chi2(1).ppf(tau)).mean(0)
    with x64():
        got = R.qce(R.Gaussian(jnp.asarray(mean), jnp.asarray(std)), jnp.asarray(y))
    assert_close(got, np.abs(freq - tau).mean())


def test_forms_agree_and_weights_mask():
    mean, std, y = _data(n=200, seed=2, scale=1.0)
    levels = np.linspace(0.01, 0.99, 99)
    qv = mean[:, None] + std[:, None] * stats.norm.ppf(levels)[None, :]
    g = R.Gaussian(jnp.asarray(mean, jnp.float32), jnp.asarray(std, jnp.float32))
    q = R.Quantiles(jnp.asarray(qv, jnp.float32), jnp.asarray(levels, jnp.float32))
    yj = jnp.asarray(y, jnp.float32)
    # the interpolated PIT of dense Gaussian quantiles is the Gaussian PIT
    inside = (np.asarray(R.pit(g, yj)) > 0.01) & (np.asarray(R.pit(g, yj)) < 0.99)
    assert_close(np.asarray(R.pit(q, yj))[inside], np.asarray(R.pit(g, yj))[inside], atol=2e-3)
    a_g = R.miscalibration_area(g, yj, n_levels=11)
    a_q = R.miscalibration_area(q, yj, n_levels=11)
    assert abs(float(a_g) - float(a_q)) < 0.02
    # padding rows of weight 0 (holding NaN) change nothing
    w = jnp.concatenate([jnp.ones(200), jnp.zeros(5)])
    pad = jnp.full((5,), jnp.nan)
    gp = R.Gaussian(jnp.concatenate([g.mean, pad]), jnp.concatenate([g.std, pad]))
    f = jax.jit(lambda g, y, w: R.miscalibration_area(g, y, n_levels=11, weights=w))
    assert_close(f(gp, jnp.concatenate([yj, pad]), w), a_g)


def test_sample_pit_and_ranks():
    x = jnp.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]])
    u = R.pit(R.Samples(x), jnp.array([-1.0, 1.0]))
    assert_close(u, [0.125, 0.5])


def test_bad_input():
    g = R.Gaussian(jnp.zeros(3), jnp.array([1.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match="`std` must be > 0"):
        R.miscalibration_area(g, jnp.zeros(3))
    g = R.Gaussian(jnp.zeros(3), jnp.ones(3))
    with pytest.raises(ValueError, match="`prop_type`"):
        R.calibration_curve(g, jnp.zeros(3), prop_type="q")
    with pytest.raises(ValueError, match="`mean` must have shape"):
        R.pit(R.Gaussian(jnp.zeros(2), jnp.ones(3)), jnp.zeros(3))
    with pytest.raises(ValueError, match="`levels` must be strictly increasing"):
        R.pit(R.Quantiles(jnp.zeros((3, 2)), jnp.array([0.5, 0.4])), jnp.zeros(3))
    with pytest.raises(ValueError, match="`pred` must be"):
        R.pit((jnp.zeros(3), jnp.ones(3)), jnp.zeros(3))


def test_soft_area_tends_to_the_hard_one_and_has_gradients():
    mean, std, y = _data(n=200, seed=4)
    with x64():
        g, yj = R.Gaussian(jnp.asarray(mean), jnp.asarray(std)), jnp.asarray(y)
        hard = R.miscalibration_area(g, yj, n_levels=21)
        soft = R.soft_miscalibration_area(g, yj, n_levels=21, temperature=1e-4)
        assert abs(float(soft) - float(hard)) < 2e-3
        m, s = jnp.asarray(mean[:20]), jnp.asarray(std[:20])

        def f(m, s):
            g = R.Gaussian(m, s)
            return R.soft_miscalibration_area(g, yj[:20], n_levels=11, temperature=0.05)

        jax.test_util.check_grads(f, (m, s), 1, modes="rev", atol=1e-4, rtol=1e-3)
