"""Calibration slope, intercept and calibration-in-the-large against statsmodels."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal.stats import calibration_slope_intercept
from tests.helpers import assert_close, x64

sm = pytest.importorskip("statsmodels.api")

rng = np.random.default_rng(16)
N = 400
P = rng.beta(2, 5, N)
LP = np.log(P / (1 - P))
Y = (rng.random(N) < 1 / (1 + np.exp(-(0.3 + 1.4 * LP)))).astype(np.int32)
W = rng.random(N) * 2

# The ridge of 1e-8 per unit weight (the finite answer on separable data) moves the
# estimates by ~1e-8 relative: the statsmodels comparisons allow 1e-6.
RTOL = 1e-6


def _statsmodels(y, lp, w=None):
    # IRLS to tol 1e-12: statsmodels' default (1e-8 on the deviance) leaves its standard
    # errors 2e-6 from the optimum's.
    binomial = sm.families.Binomial()
    full = sm.GLM(y, sm.add_constant(lp), family=binomial, freq_weights=w).fit(tol=1e-12)
    ones = np.ones((len(y), 1))
    citl = sm.GLM(y, ones, family=binomial, offset=lp, freq_weights=w).fit(tol=1e-12)
    return full, citl


@pytest.mark.parametrize("weighted", [False, True])
def test_matches_statsmodels_float64(weighted):
    w = W if weighted else None
    full, citl = _statsmodels(Y, LP, w)
    with x64():
        res = calibration_slope_intercept(P, Y, weights=w, confidence=0.9)
    ci, ci1 = full.conf_int(alpha=0.1), citl.conf_int(alpha=0.1)
    for est, i in ((res.intercept, 0), (res.slope, 1)):
        assert_close(est.estimate, full.params[i], rtol=RTOL)
        assert_close(est.std_error, full.bse[i], rtol=RTOL)
        assert_close([est.low, est.high], ci[i], rtol=RTOL, atol=1e-6)  # bound near 0
    assert_close(res.citl.estimate, citl.params[0], rtol=RTOL, atol=1e-9)  # citl near 0
    assert_close([res.citl.low, res.citl.high], ci1[0], rtol=RTOL, atol=1e-6)  # near 0
    assert bool(res.converged)


def test_logit_is_statsmodels_logit_float32():
    fit = sm.Logit(Y, sm.add_constant(LP)).fit(disp=0)
    res = calibration_slope_intercept(jnp.asarray(P, jnp.float32), Y)
    assert_close(res.slope.estimate, fit.params[1], rtol=1e-4)  # float32 Newton
    assert_close(res.intercept.estimate, fit.params[0], rtol=1e-4, atol=1e-5)  # float32


def test_per_class_is_one_vs_rest():
    k = 3
    probs = rng.dirichlet(np.ones(k), N)
    labels = np.array([rng.choice(k, p=p) for p in probs])
    res = calibration_slope_intercept(probs, labels)
    assert res.slope.estimate.shape == (k,)
    one = calibration_slope_intercept(probs[:, 1], (labels == 1).astype(np.int32))
    assert_close(res.slope.estimate[1], one.slope.estimate)
    assert_close(res.citl.high[1], one.citl.high)


def test_degenerate_data_give_finite_documented_answers():
    p = np.linspace(0.01, 0.99, 50)
    cases = [
        (p, (p > 0.5).astype(np.int32)),  # separable
        (p, np.zeros(50, np.int32)),  # one class
        (np.full(50, 0.3), (p > 0.5).astype(np.int32)),  # one distinct score
        (np.concatenate([np.zeros(25), np.ones(25)]), (p > 0.5).astype(np.int32)),  # 0 and 1
    ]
    for probs, labels in cases:
        res = calibration_slope_intercept(probs, labels)
        for leaf in jax.tree.leaves(res):
            assert bool(jnp.all(jnp.isfinite(leaf)))
    # One distinct score: the slope is not identified and stays at the ridge's centre, 1.
    flat = calibration_slope_intercept(np.full(50, 0.3), (p > 0.5).astype(np.int32))
    assert_close(flat.citl.estimate, np.log(0.5 / 0.5) - np.log(0.3 / 0.7), rtol=1e-4)  # f32


def test_jit_vmap_and_bad_input():
    f = jax.jit(lambda p, y: calibration_slope_intercept(p, y).slope.estimate)
    boot = rng.integers(0, N, (3, N))
    out = jax.vmap(f)(jnp.asarray(P[boot], jnp.float32), jnp.asarray(Y[boot]))
    assert_close(out[0], f(jnp.asarray(P[boot[0]], jnp.float32), jnp.asarray(Y[boot[0]])))
    with pytest.raises(ValueError, match="`confidence`"):
        calibration_slope_intercept(P, Y, confidence=1.5)
    with pytest.raises(ValueError, match="`probs`"):
        calibration_slope_intercept(P + 1, Y)


def test_grad_is_the_implicit_derivative():
    # The estimates' derivative comes from one Newton step at the optimum (implicit
    # function theorem); central differences of the whole fit in float64 check it.
    n = 60
    with x64():
        p, y, w = jnp.asarray(P[:n]), jnp.asarray(Y[:n]), jnp.asarray(W[:n])

        def f(p, w):
            res = calibration_slope_intercept(p, y, weights=w)
            return res.slope.estimate + res.citl.estimate + res.intercept.std_error

        jax.test_util.check_grads(f, (p, w), order=1, modes=["rev"], eps=1e-6)
        g = jax.jit(jax.grad(lambda p: calibration_slope_intercept(p, y).slope.estimate))(p)
        assert bool(jnp.all(jnp.isfinite(g)))


@pytest.mark.parametrize("scale", [1e37, 1e30, 1e-30])
def test_frequency_weights_of_any_scale(scale):
    # 1e37 weights overflowed the Fisher information (NaN): the fit now runs on weights
    # scaled by a power of two, and the standard errors scale as 1 / sqrt(scale).
    p, w = P.astype(np.float32), W.astype(np.float32) + np.float32(0.1)
    base = calibration_slope_intercept(p, Y, weights=w)
    res = calibration_slope_intercept(p, Y, weights=w * np.float32(scale))
    assert bool(res.converged)
    for got, want in zip(res[:3], base[:3], strict=True):
        # a non-power-of-two scale rounds each weight once: a few float32 ulps
        assert_close(got.estimate, want.estimate, rtol=1e-4)
        assert_close(got.std_error * np.sqrt(scale), want.std_error, rtol=1e-4)
