"""CORP reliability of a quantile forecast and its pinball-loss decomposition against
model-diagnostics' IsotonicRegression(functional="quantile") and decompose."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import regression as R
from tests.helpers import assert_close, x64

md_iso = pytest.importorskip("model_diagnostics._utils.isotonic")
md = pytest.importorskip("model_diagnostics.scoring")

N = 64  # one shape for every random case: one compilation per level


def _random(seed, n=N):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 12, n).astype(float)  # many tied forecasts
    y = 0.3 * q + rng.integers(0, 6, n) + (rng.normal(size=n) if seed % 2 else 0.0)
    return q, y  # even seeds: tied targets too


def _diabetes(level):
    """A linear quantile fit on half of scikit-learn's diabetes data, scored on the rest."""
    sklearn = pytest.importorskip("sklearn")
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import QuantileRegressor

    assert sklearn
    x, y = load_diabetes(return_X_y=True)
    model = QuantileRegressor(quantile=level, alpha=0.0, solver="highs").fit(x[::2, :3], y[::2])
    return np.round(model.predict(x[1::2, :3]), 1), y[1::2]


def _reference(q, y, level):
    iso = md_iso.IsotonicRegression(functional="quantile", level=level).fit(q, y)
    d = md.decompose(y, q, scoring_function=md.PinballLoss(level=level), functional="quantile")
    names = ("score", "miscalibration", "discrimination", "uncertainty")
    return iso, tuple(float(d[k][0]) for k in names)


def _check(q, y, level):
    iso, ref = _reference(q, y, level)
    with x64():
        r = R.quantile_reliability(jnp.asarray(q), jnp.asarray(y), level=level)
        d = R.quantile_score_decomposition(jnp.asarray(q), jnp.asarray(y), level=level)
    size = int(r.size)
    xs = np.unique(q)
    assert size == len(xs)
    np.testing.assert_array_equal(np.asarray(r.forecast[:size]), xs)
    np.testing.assert_array_equal(np.asarray(r.recalibrated[:size]), iso.predict(xs))
    assert_close(d, ref, atol=1e-12)


@pytest.mark.parametrize("level", [0.1, 0.5, 0.9])
def test_equals_model_diagnostics_random(level):
    for seed in range(4):
        _check(*_random(seed), level)


@pytest.mark.parametrize(
    "level",
    [0.9, pytest.param(0.1, marks=pytest.mark.slow), pytest.param(0.5, marks=pytest.mark.slow)],
)
def test_equals_model_diagnostics_diabetes(level):
    _check(*_diabetes(level), level)


def test_weights_equal_repeated_rows():
    q, y = _random(5, 40)
    counts = np.random.default_rng(3).integers(0, 4, 40)  # zeros drop rows
    rq, ry = np.repeat(q, counts), np.repeat(y, counts)
    pad = len(rq) - 40  # the weighted rows padded to the repeated length: one program
    wq, wy = np.r_[q, np.zeros(pad)], np.r_[y, np.zeros(pad)]
    wc = np.r_[counts, np.zeros(pad)].astype(float)
    ones = np.ones(len(rq))
    with x64():
        for fn in (R.quantile_score_decomposition, R.quantile_reliability):
            a, b = (
                fn(jnp.asarray(u), jnp.asarray(v), level=0.7, weights=jnp.asarray(c))
                for u, v, c in ((wq, wy, wc), (rq, ry, ones))
            )
            jax.tree.map(lambda s, t: assert_close(s, t, atol=1e-12), a, b)  # sums reordered


def test_jit_vmap_and_padding():
    q, y = _random(1, 24)
    f = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    want = R.quantile_score_decomposition(f(q), f(y), level=0.5)
    assert_close(want.score, want.miscalibration - want.discrimination + want.uncertainty)
    nan = jnp.full((4,), jnp.nan)
    w = jnp.concatenate([jnp.ones(24), jnp.zeros(4)])
    call = jax.jit(lambda a, b, c: R.quantile_score_decomposition(a, b, level=0.5, weights=c))
    padded = call(jnp.concatenate([f(q), nan]), jnp.concatenate([f(y), nan]), w)
    jax.tree.map(lambda a, b: assert_close(a, b, atol=1e-6), padded, want)
    qs, ys = np.stack([q, q[::-1]]), np.stack([y, y[::-1] + 1])
    batched = jax.vmap(lambda a, b: R.quantile_reliability(a, b, level=0.5))(f(qs), f(ys))
    for i in range(2):
        one = R.quantile_reliability(f(qs[i]), f(ys[i]), level=0.5)
        jax.tree.map(lambda a, b, i=i: assert_close(a[i], b), batched, one)


def test_degenerate_inputs():
    with x64():
        one = R.quantile_score_decomposition(jnp.array([2.0]), jnp.array([3.0]), level=0.2)
        assert_close(one, (0.2, 0.2, 0.0, 0.0))
        r = R.quantile_reliability(jnp.array([2.0]), jnp.array([3.0]), level=0.2)
        assert (int(r.size), float(r.recalibrated[0])) == (1, 3.0)
        flat = R.quantile_score_decomposition(  # weights: the zero-weight case's program
            jnp.array([1.0, 2.0, 3.0]), jnp.full((3,), 2.0), level=0.7, weights=jnp.ones(3)
        )
        assert_close(flat, (0.7 / 3 + 0.3 / 3, 0.7 / 3 + 0.3 / 3, 0.0, 0.0))
        zero = R.quantile_score_decomposition(
            jnp.array([1.0, 2.0, 3.0]), jnp.array([0.0, 5.0, 1.0]), level=0.7, weights=jnp.zeros(3)
        )
        assert_close(zero, (0.0, 0.0, 0.0, 0.0))
        r0 = R.quantile_reliability(
            jnp.array([1.0, 2.0]), jnp.array([0.0, 5.0]), level=0.5, weights=jnp.zeros(2)
        )
        assert int(r0.size) == 0
        for v in (*zero, *r0):
            assert bool(jnp.all(jnp.isfinite(v)))


@pytest.mark.parametrize(
    "level, match",
    [
        (0.0, "open interval"),
        (1.5, "open interval"),
        (float("nan"), "open interval"),
        (np.array([0.1, 0.9]), "scalar"),
        ("0.5", "scalar"),
    ],
)
def test_bad_level(level, match):
    q = jnp.array([1.0, 2.0])
    for fn in (R.quantile_reliability, R.quantile_score_decomposition):
        with pytest.raises(ValueError, match=f"`level`.*{match}"):
            fn(q, q, level=level)
    with pytest.raises(ValueError, match="`level` must be a concrete"):
        jax.jit(lambda lv: R.quantile_reliability(q, q, level=lv))(0.5)
