"""Integrated calibration index (Austin & Steyerberg 2019)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

import jaxcal
from tests.helpers import assert_close, x64

smoothers = pytest.importorskip("statsmodels.nonparametric.smoothers_lowess")

rng = np.random.default_rng(12)
N = 500
P = rng.beta(2, 5, N)
Y = (rng.random(N) < np.clip(P * 1.2, 0, 1)).astype(np.int32)


def _summaries(curve, p):
    gap = np.abs(curve - p)
    return [gap.mean(), np.quantile(gap, 0.5), np.quantile(gap, 0.9), gap.max()]


def test_loess_ici_matches_statsmodels_and_type7_quantiles():
    curve = smoothers.lowess(Y, P, frac=0.75, it=0, delta=0, return_sorted=False)
    with x64():
        res = jaxcal.ici(P, Y)
    assert_close(list(res), _summaries(curve, P), atol=1e-12)  # sums of O(N) terms


def test_corp_ici_is_the_isotonic_curve():
    curve = IsotonicRegression(out_of_bounds="clip").fit(P, Y).predict(P)
    with x64():
        res = jaxcal.ici(P, Y, smoother="corp")
    assert_close(list(res), _summaries(curve, P))


@pytest.mark.slow
def test_float32_weights_and_multiclass():
    res = jaxcal.ici(P.astype(np.float32), Y, frac=0.5)
    with x64():
        want = jaxcal.ici(P, Y, frac=0.5)
    assert_close(list(res), [float(v) for v in want], atol=1e-5)  # float32 moments
    w = np.ones(N)
    w[::3] = 0
    masked = jaxcal.ici(P, Y, weights=w, smoother="corp")
    keep = w > 0
    assert_close(list(masked), list(jaxcal.ici(P[keep], Y[keep], smoother="corp")))
    probs = np.stack([1 - P, P], axis=1)
    assert np.isfinite(float(jaxcal.ici(probs, Y).ici))


def test_jit_vmap_and_bad_options():
    f = jax.jit(lambda p, y: jaxcal.ici(p, y, smoother="corp").ici)
    boot = rng.integers(0, N, (3, N))
    out = jax.vmap(f)(jnp.asarray(P[boot], jnp.float32), jnp.asarray(Y[boot]))
    assert_close(out[0], f(jnp.asarray(P[boot[0]], jnp.float32), jnp.asarray(Y[boot[0]])))
    with pytest.raises(ValueError, match="`smoother`"):
        jaxcal.ici(P, Y, smoother="spline")
    with pytest.raises(ValueError, match="`frac`"):
        jaxcal.ici(P, Y, frac=1.5)
    with pytest.raises(ValueError, match="`iterations`"):
        jaxcal.ici(P, Y, iterations=-1)


def test_grad_of_the_loess_ici():
    # Local linear fits with tricube weights are smooth in the probabilities while no
    # neighbour enters or leaves a window (distinct probabilities, small steps).
    n = 80
    with x64():
        jax.test_util.check_grads(
            lambda p: jaxcal.ici(p, Y[:n]).ici, (P[:n],), order=1, modes=["rev"], eps=1e-7
        )
        e = jax.grad(lambda p: jaxcal.ici(p, Y[:n], smoother="corp").ici)(P[:n])
        assert bool(jnp.all(jnp.isfinite(e)))


@pytest.mark.parametrize("scale", [1e37, 1e-30])
def test_weights_of_any_scale(scale):
    # loess's weighted sums overflowed at 1e37 (ICI 0.54 against 0.03)
    p, w = P.astype(np.float32), (rng.random(N) + 0.5).astype(np.float32)
    base = jaxcal.ici(p, Y, weights=w)
    # a non-power-of-two scale rounds each weight once: a few float32 ulps
    assert_close(jaxcal.ici(p, Y, weights=w * np.float32(scale)), base, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("smoother", ["loess", "corp"])
def test_zero_total_weight_gives_zeros(smoother):
    """B2: E50 and E90 were NaN (ICI and Emax 0): every field is 0, the metrics' rule."""
    res = jaxcal.ici(
        np.array([0.2, 0.5, 0.7]), np.array([0, 1, 1]), weights=np.zeros(3), smoother=smoother
    )
    assert [float(v) for v in res] == [0.0, 0.0, 0.0, 0.0]
