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


def _blocked(monkeypatch):
    """lowess with the blocked window sums whatever N (the direct ones end at DENSE_MAX)."""
    from jaxcal.stats._clinical import loess

    monkeypatch.setattr(loess, "DENSE_MAX", 0)
    # a new function object: traced anew (a jit of `lowess` itself reuses its traces)
    return jax.jit(lambda *args: lowess(*args), static_argnums=(3, 4))


def _scores(kind, n, seed=0):
    r = np.random.default_rng(seed)
    if kind == "beta":
        return r.beta(1, 4, n)
    if kind == "clustered":  # radii differ by ~1000x between neighbouring blocks
        return np.concatenate([r.random(n - n // 5) * 1e-3, r.random(n // 5)])
    if kind == "bimodal":  # a confident classifier: the windows' ends race through the middle
        return np.concatenate([r.beta(0.3, 8, n // 2), 1 - r.beta(0.3, 8, n - n // 2)])
    return np.round(r.random(n), 2)  # ties


@pytest.mark.parametrize("kind", ["beta", "clustered", "bimodal", "ties"])
@pytest.mark.parametrize("frac", [0.05, 0.75])
def test_blocked_sums_equal_the_direct_ones(monkeypatch, kind, frac):
    """The O(N log N) blocked sums (N > DENSE_MAX) against the O(N^2) direct ones, with
    blocks of every kind: windows that end inside the block, cores, fringes; zero weights."""
    x = _scores(kind, 333)
    y = (rng.random(333) < x).astype(np.float64)
    w = (rng.random(333) > 0.2).astype(np.float64)
    with x64():
        direct = FIT(jnp.asarray(x), jnp.asarray(y), jnp.asarray(w), frac, 0)
        blocked = _blocked(monkeypatch)(jnp.asarray(x), jnp.asarray(y), jnp.asarray(w), frac, 0)
    assert_close(blocked, direct, atol=1e-12)  # sums of O(N) terms


@pytest.mark.parametrize("kind", ["beta", "bimodal"])
def test_blocked_sums_match_statsmodels_above_the_direct_size(kind):
    n = 1500  # > DENSE_MAX: the blocked sums
    x = _scores(kind, n, seed=1)
    y = (rng.random(n) < x).astype(np.float64)
    with x64():
        got = FIT(jnp.asarray(x), jnp.asarray(y), None, 0.3, 0)
    assert_close(got, _reference(x, y, 0.3, 0), atol=1e-10)  # statsmodels' own round-off
    got32 = FIT(jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32), None, 0.3, 0)
    assert_close(got32, _reference(x, y, 0.3, 0), atol=1e-4)  # float32 moments


def test_blocked_sums_have_the_direct_gradient(monkeypatch):
    """d fit / d x through the blocks (tree walks, cumulative sums, the logarithmic branch of
    wide frames) equals the derivative of the direct sums."""
    x = _scores("clustered", 200)  # frames up to ~1e3 x a radius: the logarithmic branch
    y = (rng.random(200) < x).astype(np.float64)
    blocked = _blocked(monkeypatch)

    def total(fit):
        return lambda s: jnp.sum(fit(s, jnp.asarray(y), None, 0.3, 0) * jnp.linspace(0, 1, 200))

    with x64():
        expect = jax.grad(total(FIT))(jnp.asarray(x))
        got = jax.grad(total(blocked))(jnp.asarray(x))
    assert np.all(np.isfinite(np.asarray(got)))
    assert_close(got, expect, rtol=1e-7, atol=1e-6)  # derivatives of sums of O(N) terms
