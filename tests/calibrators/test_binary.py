"""Platt scaling and beta calibration against scikit-learn and SciPy float64 fits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import expit, logit
from sklearn.linear_model import LogisticRegression

from jaxcal import calibrators as cal
from tests import reference_calibrators as ref
from tests.helpers import assert_close, x64

N = 500
PLATT = cal.platt_scaling()  # built once: each factory call is a new compile
BETA = cal.beta_calibration()


def _scores(seed, n=N, power=3.0):
    """Miscalibrated scores: y ~ Bernoulli(s**(1/power)) for scores s ~ U(0, 1)."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.001, 0.999, n).astype(np.float32)
    y = (rng.uniform(size=n) < s ** (1 / power)).astype(np.int64)
    return s, y


def _sklearn_lr(x, y, w=None):
    x = np.asarray(x, np.float64)
    x = x[:, None] if x.ndim == 1 else x
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=100_000).fit(x, y, sample_weight=w)
    return lr.coef_[0], lr.intercept_[0]


def _log_odds32(s):
    eps = np.finfo(np.float32).eps
    p = np.clip(s, eps, 1 - eps).astype(np.float64)
    return np.log(p) - np.log1p(-p)


def test_platt_matches_sklearn_logistic_regression():
    s, y = _scores(0)
    w = np.random.default_rng(0).uniform(0.2, 2.0, N)
    (a,), b = _sklearn_lr(_log_odds32(s), y, w)
    # float32: the loss stalls at working precision with parameters good to ~1e-4.
    params = PLATT.fit(s, y, weights=w)
    assert_close(params.a, a, rtol=2e-4)
    assert_close(params.b, b, atol=2e-4)
    assert bool(params.info.converged)
    assert_close(PLATT.apply(params, s), expit(a * _log_odds32(s) + b), atol=5e-5)


@pytest.mark.slow
def test_platt_matches_sklearn_logistic_regression_float64():
    s, y = _scores(0)
    w = np.random.default_rng(0).uniform(0.2, 2.0, N)
    s64 = np.clip(s.astype(np.float64), 1e-12, 1)
    (a,), b = _sklearn_lr(logit(s64), y, w)
    with x64():
        params = PLATT.fit(s64, y, weights=w)
        probs = PLATT.apply(params, s64)
    assert_close(params.a, a, rtol=1e-5)  # our gradient tolerance is 1e-6
    assert_close(params.b, b, rtol=1e-5)
    assert_close(probs, expit(a * logit(s64) + b), atol=1e-6)

    def nll(a, b):
        z = a * logit(s64) + b
        return np.average(np.logaddexp(0, z) - y * z, weights=w)

    assert nll(float(params.a), float(params.b)) <= nll(a, b) + 1e-11


@pytest.mark.slow
def test_platt_on_large_margins_with_logits_inputs():
    rng = np.random.default_rng(1)
    margin = rng.normal(0, 40, N).astype(np.float32)  # SVM-like scores, far from log-odds
    y = (rng.uniform(size=N) < expit(margin / 20 + 0.5)).astype(np.int64)
    c = cal.platt_scaling(inputs="logits")
    params = c.fit(margin, y, weights=np.ones(N))
    (a,), b = _sklearn_lr(margin, y)
    assert_close(params.a, a, rtol=1e-4)
    assert_close(params.b, b, atol=1e-4)


def test_platt_target_smoothing_matches_scipy_soft_target_fit():
    s, y = _scores(2)
    w = np.random.default_rng(2).uniform(0.5, 1.5, N)
    n_pos, n_neg = w[y == 1].sum(), w[y == 0].sum()
    targets = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    (a,), b = ref.logistic_scipy(_log_odds32(s), targets, w)
    params = cal.platt_scaling(target_smoothing=True).fit(s, y, weights=w)
    assert_close(params.a, a, rtol=1e-4)
    assert_close(params.b, b, atol=1e-4)


def test_platt_vmap_over_bootstrap_equals_separate_fits():
    s, y = _scores(3)
    counts = np.random.default_rng(3).multinomial(N, np.full(N, 1 / N), size=6)
    counts = counts.astype(np.float32)
    batched = jax.jit(jax.vmap(lambda w: PLATT.fit(s, y, weights=w)))(counts)
    for i, w in enumerate(counts):
        single = PLATT.fit(s, y, weights=w)
        assert_close(batched.a[i], single.a, rtol=1e-5)
        assert_close(batched.b[i], single.b, atol=1e-5)


def test_platt_degenerate_data_is_finite_and_documented():
    s, _ = _scores(4)
    ones = PLATT.fit(s, np.ones(N, np.int64), weights=np.ones(N))
    probs = PLATT.apply(ones, s)
    assert bool(jnp.all(jnp.isfinite(probs))) and float(probs.min()) > 0.99
    # Zero total weight: the identity map (a = 1, b = 0).
    none = PLATT.fit(s, np.ones(N, np.int64), weights=np.zeros(N))
    assert float(none.a) == 1.0 and float(none.b) == 0.0
    assert_close(PLATT.apply(none, s), s, atol=1e-6)


def _betacal_reference(s, y, w=None):
    """Kull et al.'s ``betacal`` fitting logic, with scikit-learn's logistic regression."""
    eps = np.finfo(np.float32).eps
    p = np.clip(s, eps, 1 - eps).astype(np.float64)
    x = np.stack([np.log(p), -np.log1p(-p)], axis=1)
    (a, b), c = _sklearn_lr(x, y, w)
    if a < 0:
        (b,), c = _sklearn_lr(x[:, 1], y, w)
        a = 0.0
    elif b < 0:
        (a,), c = _sklearn_lr(x[:, 0], y, w)
        b = 0.0
    return a, b, c


def _beta_cases():
    rng = np.random.default_rng(5)
    s = rng.uniform(0.001, 0.999, N).astype(np.float32)
    sigmoid_shaped = (rng.uniform(size=N) < expit(2 * logit(s.astype(np.float64)))).astype(int)
    # Positives concentrated at low scores: the full fit has a < 0.
    low = (rng.uniform(size=N) < np.where(s < 0.05, 0.9, 0.3 + 0.3 * s)).astype(int)
    # Positives at high scores only near 1: the full fit has b < 0.
    high = (rng.uniform(size=N) < np.where(s > 0.95, 0.1, 0.2 + 0.5 * s)).astype(int)
    return [("full", s, sigmoid_shaped), ("a=0", s, low), ("b=0", s, high)]


@pytest.mark.parametrize("case", [0, 1, 2])
def test_beta_calibration_matches_betacal_logic(case):
    name, s, y = _beta_cases()[case]
    a, b, c = _betacal_reference(s, y)
    assert {"full": a > 0 and b > 0, "a=0": a == 0, "b=0": b == 0}[name]  # branch covered
    params = BETA.fit(s, y, weights=np.ones(N))
    # float32 fit: the loss stalls at working precision, parameters good to a few 1e-4.
    assert_close(params.a, a, rtol=5e-4, atol=1e-5)
    assert_close(params.b, b, rtol=5e-4, atol=1e-5)
    assert_close(params.c, c, rtol=5e-4, atol=1e-4)
    eps = np.finfo(np.float32).eps
    p = np.clip(s, eps, 1 - eps).astype(np.float64)
    expected = expit(a * np.log(p) - b * np.log1p(-p) + c)
    assert_close(BETA.apply(params, s), expected, atol=1e-4)


def test_beta_identity_on_zero_weight():
    s, y = _scores(6)
    params = BETA.fit(s, y, weights=np.zeros(N))
    assert_close(BETA.apply(params, s), s, atol=1e-6)


@pytest.mark.slow
def test_beta_logits_inputs_match_probs_inputs():
    s, y = _scores(6)
    by_logits = cal.beta_calibration(inputs="logits")
    z = logit(s.astype(np.float64)).astype(np.float32)
    p1 = BETA.fit(s, y, weights=np.ones(N))
    p2 = by_logits.fit(z, y, weights=np.ones(N))
    assert_close(by_logits.apply(p2, z), BETA.apply(p1, s), atol=1e-4)  # clip vs log_sigmoid


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((np.zeros((3, 2)), [0, 1, 0]), {}, "scores.*1-D"),
        ((np.array([0.5, 1.5]), [0, 1]), {}, r"scores.*\[0, 1\]"),
        ((np.array([0.5, np.nan]), [0, 1]), {}, "scores.*finite"),
        ((np.array([0.5, 0.2]), [0, 2]), {}, r"labels.*\[0, 2\)"),
        ((np.array([0.5, 0.2]), [0.5, 1]), {}, "labels.*integers"),
        ((np.array([0.5, 0.2]), [0, 1]), {"weights": [1.0]}, "weights.*shape"),
    ],
)
def test_binary_bad_inputs(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        PLATT.fit(*args, **kwargs)


def test_binary_bad_options():
    with pytest.raises(ValueError, match="target_smoothing"):
        cal.platt_scaling(target_smoothing="yes")
    with pytest.raises(ValueError, match="inputs"):
        cal.beta_calibration(inputs="log_probs")
    with pytest.raises(ValueError, match=r"scores.*finite"):
        cal.platt_scaling(inputs="logits").fit(np.array([np.inf, 0.0]), [0, 1])
