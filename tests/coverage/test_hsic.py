"""Tests of jaxcal.coverage.hsic against MAPIE 1.6, the seed's formula and the dense kernel
(the fast Gauss transform's accuracy over six decades of width spreads)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from mapie.metrics import regression as mapie_reg

from jaxcal import coverage as cv
from tests.coverage_data import (
    N,
    as_f64,
    assert_jit_matches_eager,
    conformal_regression,
    intervals,
    mapie_pis,
    repeat_rows,
    repetition_weights,
    seed_formula_case,
)
from tests.helpers import assert_close, x64


def _dense_hsic(y, lo, up, s0=1.0, s1=1.0, w=None):
    """sqrt(2 (1 - e^{-1/s1}) c~' K c~ / (W - 1)^2), the kernel evaluated directly."""
    width = np.abs(up - lo)
    c = ((lo <= y) & (y <= up)).astype(np.float64)
    w = np.ones_like(width) if w is None else w
    total = w.sum()
    b = w * (c - (w * c).sum() / total)
    form = b @ np.exp(-((width[:, None] - width[None, :]) ** 2) / s0) @ b
    return np.sqrt(max(2 * (1 - np.exp(-1 / s1)) * form / (total - 1) ** 2, 0))


@pytest.mark.parametrize("kernel_sizes", [(1, 1), (0.3, 2.5)])
def test_hsic_matches_mapie(kernel_sizes):
    y, lo, up = intervals(1)
    expected = mapie_reg.hsic(y.astype(np.float64), mapie_pis(lo, up), kernel_sizes=kernel_sizes)
    with x64():
        assert_close(cv.hsic(*as_f64(y, lo, up), kernel_sizes=kernel_sizes), expected)
    # float32: the centred quadratic form cancels; absolute error ~ sqrt(eps) * scale.
    assert_close(cv.hsic(y, lo, up, kernel_sizes=kernel_sizes), expected, rtol=1e-4, atol=1e-5)
    one = cv.hsic(y, lo[:, 2], up[:, 2], kernel_sizes=kernel_sizes)
    assert one.shape == ()
    assert_close(one, expected[2], rtol=1e-4, atol=1e-5)  # float32 cancellation, as above


def test_real_split_conformal_regressor():
    y, pis = conformal_regression()
    lo, up = pis[:, 0, :], pis[:, 1, :]
    with x64():
        # kernel size on the scale of the widths (about 100 to 300 here)
        assert_close(
            cv.hsic(y, lo, up, kernel_sizes=(1e3, 1)),
            mapie_reg.hsic(y, pis, kernel_sizes=(1e3, 1)),
        )


def test_seed_formula():
    """The seed's trace(H K H L) equals (n - 1)^2 hsic^2 (MAPIE normalises, roots)."""
    y, lo, up, covered, width = seed_formula_case()
    n = y.shape[0]
    with x64():
        kmat = np.exp(-((width[:, None] - width[None, :]) ** 2))
        lmat = np.exp(-((covered[:, None] * 1.0 - covered[None, :]) ** 2))
        h = np.eye(n) - np.ones((n, n)) / n
        trace = np.trace(h @ kmat @ h @ lmat)
        # the centring cancels in both: float64 round-off of the terms' scale, not the result's
        assert_close(cv.hsic(y, lo, up) ** 2 * (n - 1) ** 2, trace, rtol=1e-9)


@pytest.mark.parametrize("spread", [1e-3, 0.7, 4.0, 60.0, 1e5])
def test_hsic_fast_gauss_transform_accuracy(spread):
    """The transform against the dense kernel, widths from 1e-3 to 1e5 kernel widths."""
    rng = np.random.default_rng(6)
    width = rng.gamma(2.0, spread, N)
    width[:40] = width[40]  # ties
    width[40:60] = width[60] + 1e-9 * spread * rng.uniform(size=20)  # near ties
    y = rng.normal(0, 1, N)
    lo = -width * rng.uniform(0.1, 0.9, N) + 0.3 * spread * rng.normal(size=N)
    up = lo + width
    w = rng.uniform(0, 3, N) * (rng.uniform(size=N) < 0.8)  # real-valued weights, some 0
    with x64():
        # the centred quadratic form cancels: float64 round-off of the terms' scale
        assert_close(
            cv.hsic(y, lo, up, weights=w), _dense_hsic(y, lo, up, w=w), rtol=1e-9, atol=1e-12
        )


def test_hsic_degenerate():
    y, lo, up = intervals(7, levels=1)
    lo, up = lo[:, 0], up[:, 0]
    # all covered: coverage carries no information, hsic 0 (MAPIE: ~1e-9 of round-off)
    assert float(cv.hsic(y, y - 1, y + 1)) == 0.0
    # a total weight <= 1 (one sample): 0 (MAPIE divides by (n - 1)^2 = 0)
    weights = np.zeros(N, np.float32)
    weights[3] = 1
    assert float(cv.hsic(y, lo, up, weights=weights)) == 0.0
    assert np.isfinite(float(cv.hsic(y, lo, up, weights=np.zeros(N, np.float32))))


def test_integer_weights_equal_repetition():
    y, lo, up = intervals(8)
    # counts summing to N: the repeated data have the shapes of the weighted (no compile)
    counts = repetition_weights()
    ry, rlo, rup = repeat_rows(counts, y, lo, up)
    w = counts.astype(np.float32)
    # frequency weights; float32 cancellation as in test_hsic_matches_mapie
    assert_close(cv.hsic(y, lo, up, weights=w), cv.hsic(ry, rlo, rup), rtol=1e-4, atol=1e-5)


def test_jit_matches_eager_and_does_not_recompile():
    y, lo, up = intervals(16)
    assert_jit_matches_eager({"hsic": (lambda a, b, c: cv.hsic(a, b, c), (y, lo, up))})


def test_vmap_over_interval_sets():
    """vmap over a batch of interval sets equals the level-axis form (already compiled)."""
    y, lo, up = intervals(8)
    w = repetition_weights().astype(np.float32)
    out = jax.vmap(lambda b, c: cv.hsic(y, b, c, weights=w))(lo.T, up.T)
    assert_close(out, cv.hsic(y, lo, up, weights=w))


@pytest.mark.slow
def test_hsic_gradient():
    """HSIC is smooth in the widths (a training penalty in Feldman et al. 2021)."""
    y, lo, up = intervals(24, n=40, levels=1)
    y, lo, up = (np.asarray(a, np.float64).reshape(40) for a in (y, lo, up))
    with x64():
        check_grads(
            lambda b: cv.hsic(y, lo, b, kernel_sizes=(2.0, 1.0)), (jnp.asarray(up),),
            order=1, modes=["rev"], eps=1e-6,
        )  # fmt: skip
