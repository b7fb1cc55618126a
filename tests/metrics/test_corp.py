"""CORP reliability curves (jaxcal.metrics._corp) against scikit-learn and a float64 oracle."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from jaxcal import corp_curve
from tests import reference
from tests.helpers import assert_close, x64

RNG = np.random.default_rng(0)
N = 2000
# Forecasts rounded to 3 decimals: many exact ties, as CORP must pool them.
P = RNG.uniform(size=N).round(3)
Y = (RNG.uniform(size=N) < P**1.3).astype(np.int32)
W = RNG.uniform(0.2, 2.0, size=N)


def _valid(curve):
    n = int(curve.size)
    return n, np.asarray(curve.forecasts)[:n], np.asarray(curve.calibrated)[:n]


def test_fitted_values_equal_sklearn_isotonic_regression():
    with x64():
        curve = corp_curve(jnp.asarray(P), jnp.asarray(Y))
    expected = IsotonicRegression().fit(P, Y).predict(P)
    assert_close(np.asarray(curve.fitted), expected)


@pytest.mark.parametrize("weighted", [False, True])
def test_knots_and_calibrated_values_equal_the_float64_oracle(weighted):
    w = W if weighted else None
    with x64():
        curve = corp_curve(
            jnp.asarray(P), jnp.asarray(Y), weights=None if w is None else jnp.asarray(w)
        )
    knots, fitted, wk = reference.corp(P, Y, w)
    n, x, c = _valid(curve)
    assert n == knots.size
    np.testing.assert_array_equal(x, knots)
    assert_close(c, fitted)
    assert_close(np.asarray(curve.weight)[:n], wk)
    np.testing.assert_array_equal(np.asarray(curve.counts)[:n], np.unique(P, return_counts=True)[1])
    # padding repeats the last knot, with zero counts
    assert np.all(np.asarray(curve.forecasts)[n:] == x[-1])
    assert np.all(np.asarray(curve.counts)[n:] == 0)


def test_exact_ties_only_unlike_sklearn_resolution():
    with x64():
        a = 0.5
        b = float(np.nextafter(0.5, 1.0))  # within np.finfo(float64).resolution of a
        p = jnp.array([0.1, a, b, 0.9])
        y = jnp.array([0, 1, 0, 1])
        curve = corp_curve(p, y)
    assert int(curve.size) == 4  # scikit-learn would make a and b one point
    # -0.0 and 0.0 are one knot
    curve = corp_curve(jnp.array([-0.0, 0.0, 0.5]), jnp.array([0, 1, 1]))
    assert int(curve.size) == 2 and int(curve.counts[0]) == 2


def test_integer_weights_equal_repeated_samples_and_zero_weights_drop():
    reps = RNG.integers(0, 3, size=N)
    with x64():
        weighted = corp_curve(jnp.asarray(P), jnp.asarray(Y), weights=jnp.asarray(reps))
        repeated = corp_curve(jnp.asarray(np.repeat(P, reps)), jnp.asarray(np.repeat(Y, reps)))
    n, x, c = _valid(weighted)
    m, x2, c2 = _valid(repeated)
    assert n == m
    np.testing.assert_array_equal(x, x2)
    assert_close(c, c2)
    # a zero-weight sample takes the curve's value at its forecast (interpolated off knots)
    fitted = np.asarray(weighted.fitted)
    expected = np.interp(P, x, c)
    assert_close(fitted[reps == 0], expected[reps == 0])


def test_top_label_and_classwise_views():
    probs = RNG.dirichlet(np.ones(4), size=500).astype(np.float32)
    labels = RNG.integers(0, 4, size=500)
    conf, pred = probs.max(1), probs.argmax(1)
    top = corp_curve(probs, labels)
    binary = corp_curve(conf, (pred == labels).astype(np.int32))
    for a, b in zip(top, binary, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    per_class = corp_curve(probs, labels, reduction="classwise")
    assert per_class.fitted.shape == (4, 500) and per_class.size.shape == (4,)
    for k in range(4):
        one = corp_curve(probs[:, k], (labels == k).astype(np.int32))
        np.testing.assert_array_equal(
            np.asarray(per_class.calibrated[k]), np.asarray(one.calibrated)
        )


def test_jit_and_vmap_over_models():
    p = jnp.asarray(np.stack([P, P**2, np.sqrt(P)]).astype(np.float32))
    y = jnp.asarray(Y)
    batched = jax.jit(jax.vmap(lambda q: corp_curve(q, y)))(p)
    for i in range(3):
        single = corp_curve(p[i], y)
        np.testing.assert_array_equal(
            np.asarray(batched.calibrated[i]), np.asarray(single.calibrated)
        )
        np.testing.assert_array_equal(np.asarray(batched.fitted[i]), np.asarray(single.fitted))


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="`reduction`"):
        corp_curve(P, Y, reduction="max")
    with pytest.raises(ValueError, match="`labels`"):
        corp_curve(P, Y[:-1])
