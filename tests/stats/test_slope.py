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

# The estimates are the MLE to round-off (test_converges_to_the_mle_*: 1e-8); these
# comparisons, of the standard errors and intervals too, allow 1e-6.
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


def test_constant_scores_give_finite_wide_intervals_in_float32():
    """B1, A4: one distinct score gave NaN (175 of 594 cases) or a standard error of 0.

    The 594 cases of the finding (N = 2..199, p in {0.1, 0.3, 0.5}), as one compiled
    shape: the first n of 199 rows carry weight 1, the rest weight 0.
    """
    rng = np.random.default_rng(41)
    y = (rng.random(199) < 0.3).astype(np.int32)
    fit = jax.jit(calibration_slope_intercept)
    for value in (0.1, 0.3, 0.5):
        p = np.full(199, value, np.float32)
        for n in range(2, 200):
            w = (np.arange(199) < n).astype(np.float32)
            res = fit(p, y, weights=w)
            for est in (res.slope, res.intercept):
                se = float(est.std_error)
                assert np.isfinite(se) and se > 0, (value, n, se)
                assert float(est.low) < float(est.estimate) < float(est.high)
            assert float(res.slope.std_error) > 100  # not identified: wide
            # At p = 1/2 (log-odds 0) the intercept is a + b * 0 = a: identified (narrow,
            # unless one class only), elsewhere not.
            assert value == 0.5 or float(res.intercept.std_error) > 100
            assert_close(res.slope.estimate, 1.0, rtol=1e-5)  # the ridge's value, to round-off
            assert np.isfinite(float(res.citl.std_error)) and float(res.citl.std_error) > 0


def test_near_constant_scores_have_a_large_standard_error():
    """A4: scores 0.3 and 0.3 + 1e-6 gave slope 2.31 +- 0.0 (a zero-width interval)."""
    p = np.r_[np.full(30, 0.3), np.full(30, 0.3 + 1e-6)].astype(np.float32)
    y = (np.arange(60) % 3 == 0).astype(np.int32)
    res = calibration_slope_intercept(p, y)
    assert float(res.slope.std_error) > 100 and float(res.slope.high) - float(res.slope.low) > 400
    with x64():
        res = calibration_slope_intercept(np.full(50, 0.3), (np.arange(50) % 3 == 0).astype(int))
        assert float(res.slope.std_error) > 1e6 and float(res.slope.estimate) == 1


def test_zero_total_weight_has_the_documented_answer():
    """B2: every field was NaN. No information: the calibrated values, infinite errors."""
    res = calibration_slope_intercept(
        np.array([0.2, 0.5, 0.7]), np.array([0, 1, 1]), weights=np.zeros(3)
    )
    for est, value in ((res.slope, 1.0), (res.intercept, 0.0), (res.citl, 0.0)):
        assert float(est.estimate) == value and float(est.std_error) == np.inf
        assert float(est.low) == -np.inf and float(est.high) == np.inf
    assert bool(res.converged)


def test_an_event_at_score_zero_converges():
    """Every score 0 with one event: the Newton step of 4e6 diverged to -22043 (SE inf)."""
    res = calibration_slope_intercept(np.zeros(2, np.float32), np.array([0, 1]))
    assert bool(res.converged)
    eps = np.finfo(np.float32).eps
    assert_close(res.citl.estimate, -np.log(eps / (1 - eps)), rtol=1e-5)  # logit(1/2) - logit(eps)
    assert np.isfinite(float(res.intercept.std_error))


def _statsmodels_mle(t, lp, w=None):
    fit = sm.GLM(t, sm.add_constant(lp), family=sm.families.Binomial(), freq_weights=w)
    return fit.fit(tol=1e-14, maxiter=200)


def test_converges_to_the_mle_on_digits_per_class():
    """Issue 34.6: a multiclass logistic regression's held-out probabilities on digits, per
    class in float64: the slope was 1.2e-5..1.2e-4 relative from statsmodels' MLE (the
    ridge, of 1e-8 per unit weight, is large where the information per unit weight is
    small: confident, well-separated classes). Where the MLE exists it is the answer."""
    import warnings

    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=0)
    probs = LogisticRegression(max_iter=5000).fit(Xtr, ytr).predict_proba(Xte)
    with x64():
        res = calibration_slope_intercept(probs, yte)
    eps = np.finfo(np.float64).eps
    checked = 0
    for k in range(10):
        p = np.clip(probs[:, k], eps, 1 - eps)
        lp, t = np.log(p) - np.log1p(-p), (yte == k).astype(float)
        if lp[t == 1].min() > lp[t == 0].max():
            continue  # separable (class 0 here): no MLE, the ridge's finite answer
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # statsmodels warns of near-perfect prediction
            fit = _statsmodels_mle(t, lp)
        checked += 1
        assert_close(res.slope.estimate[k], fit.params[1], rtol=1e-8, err_msg=f"class {k}")
        assert_close(res.intercept.estimate[k], fit.params[0], rtol=1e-8, err_msg=f"class {k}")
        assert_close(res.slope.std_error[k], fit.bse[1], rtol=1e-6, err_msg=f"class {k}")
        assert bool(res.converged[k])
    assert checked == 9


@pytest.mark.parametrize("seed", range(6))
def test_converges_to_the_mle_on_random_cases(seed):
    """Confident scores (log-odds spread to +-15) with small and large slopes, weighted
    and not: the MLE to 1e-8 relative (float64), the citl too."""
    r = np.random.default_rng(100 + seed)
    n = int(r.integers(60, 600))
    lp = r.normal(size=n) * r.uniform(1, 15) + r.normal()
    a, b = r.normal(), r.uniform(0.2, 2.0)
    t = (r.random(n) < 1 / (1 + np.exp(-(a + b * lp)))).astype(float)
    w = r.random(n) * 3 if seed % 2 else None
    eps = np.finfo(np.float64).eps
    p = np.clip(1 / (1 + np.exp(-lp)), eps, 1 - eps)
    lp = np.log(p) - np.log1p(-p)  # the log-odds jaxcal fits on (p clipped to [eps, 1 - eps])
    fit = _statsmodels_mle(t, lp, w)
    citl = sm.GLM(t, np.ones((n, 1)), family=sm.families.Binomial(), offset=lp, freq_weights=w).fit(
        tol=1e-14, maxiter=200
    )
    with x64():
        res = calibration_slope_intercept(p, t.astype(int), weights=w)
    assert_close(res.slope.estimate, fit.params[1], rtol=1e-8)
    assert_close(res.intercept.estimate, fit.params[0], rtol=1e-8, atol=1e-12)
    assert_close(res.citl.estimate, citl.params[0], rtol=1e-8, atol=1e-12)
    assert bool(res.converged)
