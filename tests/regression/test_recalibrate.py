"""Recalibrators: their effect on held-out calibration, CQR's coverage (checked by
jaxcal.coverage), std scaling's closed form against a numerical minimum of the Gaussian NLL."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize

from jaxcal import coverage
from jaxcal import regression as R
from tests.helpers import assert_close

LEVELS = jnp.linspace(0.01, 0.99, 99)


def _split(seed, n=2000, skew=True):
    """A forecaster that is too sharp (std 0.5 of the truth's) and, with skew, wrong in
    shape (targets exponential around the mean): cal and test halves."""
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=2 * n)
    std = rng.uniform(0.5, 1.5, 2 * n)
    noise = rng.exponential(size=2 * n) - 1 if skew else rng.normal(size=2 * n)
    y = mean + 2 * std * noise
    f = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    cal = R.Gaussian(f(mean[:n]), f(std[:n])), f(y[:n])
    test = R.Gaussian(f(mean[n:]), f(std[n:])), f(y[n:])
    return cal, test


def test_isotonic_recalibration_calibrates_held_out():
    (gc, yc), (gt, yt) = _split(0)
    cal = R.isotonic_recalibration()
    params = cal.fit(gc, yc)
    before = float(R.miscalibration_area(gt, yt, prop_type="quantile"))
    q = cal.apply(params, gt, LEVELS)
    after = float(R.miscalibration_area(q, yt, prop_type="quantile"))
    assert before > 0.1 and after < 0.02, (before, after)
    # equal options: the same object; padding rows of weight 0 change nothing
    assert R.isotonic_recalibration() is cal
    nan = jnp.full((5,), jnp.nan)
    gp = R.Gaussian(jnp.concatenate([gc.mean, nan]), jnp.concatenate([gc.std, nan]))
    w = jnp.concatenate([jnp.ones(yc.shape[0]), jnp.zeros(5)])
    padded = jax.jit(lambda g, y, w: cal.fit(g, y, weights=w))(gp, jnp.concatenate([yc, nan]), w)
    assert_close(cal.apply(padded, gt, LEVELS).values, q.values, atol=1e-5)


def test_isotonic_recalibration_of_samples_and_quantiles():
    (gc, yc), (gt, yt) = _split(1, n=600)
    rng = np.random.default_rng(1)
    z = jnp.asarray(rng.normal(size=(1, 64)), jnp.float32)
    to_samples = lambda g: R.Samples(g.mean[:, None] + g.std[:, None] * z)  # noqa: E731
    cal = R.isotonic_recalibration()
    q = cal.apply(cal.fit(to_samples(gc), yc), to_samples(gt), LEVELS)
    before = float(R.miscalibration_area(to_samples(gt), yt, prop_type="quantile"))
    assert float(R.miscalibration_area(q, yt, prop_type="quantile")) < before / 3


def test_std_scaling_is_the_nll_optimum_and_helps():
    (gc, yc), (gt, yt) = _split(2, skew=False)
    cal = R.std_scaling()
    params = cal.fit(gc, yc)

    z = np.asarray((yc - gc.mean) / gc.std, np.float64)
    lsd = np.log(np.asarray(gc.std, np.float64))

    def nll(log_s):  # the weighted Gaussian NLL of std * exp(log_s), float64
        return np.mean(lsd + log_s + 0.5 * z**2 * np.exp(-2 * log_s))

    best = optimize.minimize_scalar(nll, bounds=(-3, 3), method="bounded", options={"xatol": 1e-9})
    assert_close(params.scale, np.exp(best.x), rtol=1e-5)  # the optimiser's own tolerance
    assert abs(float(params.scale) - 2.0) < 0.1
    scaled = cal.apply(params, gt)
    assert float(R.ence(scaled, yt)) < float(R.ence(gt, yt)) / 3
    g = jax.grad(lambda s: cal.fit(R.Gaussian(gc.mean, s), yc).scale.sum())(gc.std)
    assert np.isfinite(np.asarray(g)).all()


def test_cqr_covers_held_out():
    (gc, yc), (gt, yt) = _split(3)
    lo_c, up_c = gc.mean - gc.std, gc.mean + gc.std  # ~ 50% intervals of the truth
    lo_t, up_t = gt.mean - gt.std, gt.mean + gt.std
    cal = R.conformal_quantile_regression(alpha=0.1)
    params = cal.fit(lo_c, up_c, yc)
    lo, up = cal.apply(params, lo_t, up_t)
    before = float(coverage.regression_coverage_score(yt, lo_t, up_t))
    after = float(coverage.regression_coverage_score(yt, lo, up))
    assert before < 0.7 and 0.88 < after < 0.93, (before, after)
    # unit weights equal no weights; the k-th smallest score, k = ceil((n + 1)(1 - alpha))
    e = np.sort(np.maximum(np.asarray(lo_c - yc), np.asarray(yc - up_c)))
    k = int(np.ceil((yc.shape[0] + 1) * 0.9))
    assert_close(params.margin, e[k - 1])
    assert_close(cal.fit(lo_c, up_c, yc, weights=jnp.ones(yc.shape[0])).margin, e[k - 1])
    tiny = R.conformal_quantile_regression(alpha=0.1).fit(lo_c[:5], up_c[:5], yc[:5])
    assert float(tiny.margin) == np.inf  # k = 6 > n = 5


def test_bad_input():
    with pytest.raises(ValueError, match="`alpha`"):
        R.conformal_quantile_regression(alpha=1.5)
    cal = R.conformal_quantile_regression()
    with pytest.raises(ValueError, match="`lower` must be <= `upper`"):
        cal.fit(jnp.ones(3), jnp.zeros(3), jnp.zeros(3))
    with pytest.raises(ValueError, match="`pred` must be a Gaussian"):
        R.std_scaling().fit(R.Samples(jnp.zeros((3, 2))), jnp.zeros(3))
    g = R.Gaussian(jnp.zeros(3), jnp.ones(3))
    params = R.isotonic_recalibration().fit(g, jnp.zeros(3))
    with pytest.raises(ValueError, match="`levels` must lie in the open interval"):
        R.isotonic_recalibration().apply(params, g, jnp.array([0.0, 0.5]))
