"""LOWESS in O(N log N) against statsmodels' lowess (delta=0)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal.stats._clinical.loess import lowess
from tests.helpers import assert_close, x64

smoothers = pytest.importorskip("statsmodels.nonparametric.smoothers_lowess")

rng = np.random.default_rng(13)
N = 400
X = rng.beta(1, 4, N)
Y = (rng.random(N) < X).astype(np.float64)
FIT = jax.jit(lowess, static_argnums=(3, 4))


def _reference(x, y, frac, it):
    return smoothers.lowess(y, x, frac=frac, it=it, delta=0, return_sorted=False)


@pytest.mark.parametrize(("frac", "it"), [(0.75, 0), (0.2, 0), (0.5, 2)])
def test_matches_statsmodels_float64(frac, it):
    y = Y + (rng.normal(size=N) * 0.1 if it else 0)
    with x64():
        got = FIT(jnp.asarray(X), jnp.asarray(y), None, frac, it)
    assert_close(got, _reference(X, y, frac, it), atol=1e-12)  # sums of O(N) terms


def test_matches_statsmodels_float32_and_clustered_scores():
    # Most scores packed near 0, a few spread out: spans differ by 1000x between points.
    x = np.concatenate([rng.random(320) * 1e-3, rng.random(80)])
    y = (rng.random(N) < x).astype(np.float64)
    with x64():
        assert_close(FIT(jnp.asarray(x), jnp.asarray(y), None, 0.75, 0), _reference(x, y, 0.75, 0), atol=1e-12)  # fmt: skip
    got = FIT(jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32), None, 0.75, 0)
    assert_close(got, _reference(x, y, 0.75, 0), atol=1e-4)  # float32 moments


def test_ties_and_zero_weights():
    x = np.round(X, 2)
    with x64():
        got = FIT(jnp.asarray(x), jnp.asarray(Y), None, 0.6, 0)
        assert_close(got, _reference(x, Y, 0.6, 0), atol=1e-12)  # sums of O(N) terms
        # Zero weights leave samples out: the same fit as without them.
        w = (rng.random(N) > 0.3).astype(np.float64)
        masked = FIT(jnp.asarray(X), jnp.asarray(Y), jnp.asarray(w), 0.6, 0)
        keep = w > 0
        assert_close(np.asarray(masked)[keep], _reference(X[keep], Y[keep], 0.6, 0), atol=1e-12)  # fmt: skip


@pytest.mark.slow
def test_robust_iterations_stop_when_the_median_residual_is_0():
    # Over half the outcomes equal a locally linear fit exactly: statsmodels zeroes every
    # other weight; R's rule (and ours) keeps the non-robust fit.
    x = np.linspace(0, 1, 200)
    y = np.where(x < 0.7, 0.0, 1.0)
    with x64():
        plain = FIT(jnp.asarray(x), jnp.asarray(y), None, 0.3, 0)
        robust = FIT(jnp.asarray(x), jnp.asarray(y), None, 0.3, 2)
    assert_close(robust, plain)


def test_all_tied_scores_give_the_mean():
    got = FIT(jnp.full(10, 0.3), jnp.asarray([0, 1, 1, 0, 1, 1, 1, 0, 1, 1.0]), None, 0.75, 0)
    assert_close(got, np.full(10, 0.7, np.float32))
