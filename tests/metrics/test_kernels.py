"""The kernel machinery of the kernel calibration errors (jaxcal/metrics/_kernels.py):
tiled double sums, the sorted Laplacian recurrence and the median heuristic, against dense
float64 NumPy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal.metrics._kernels import (
    kernel_matvec,
    laplace_pair_sum,
    median_bandwidth,
    pair_sum,
)
from tests import reference_kernel as ref
from tests.helpers import assert_close, x64


def _dense_k(x, h, kind):
    x = np.asarray(x, float).reshape(len(x), -1)
    d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    return np.exp(-d / h) if kind == "laplacian" else np.exp(-(d**2) / (2 * h * h))


@pytest.mark.parametrize("n", [1, 7, 300])
def test_laplace_recurrence_equals_the_quadratic_form(n):
    """The identity of the sorted path: 2 sum_i a_i exp(-(x_i - x_{i-1})/h) L_{i-1}
    equals the off-diagonal quadratic form, ties included."""
    rng = np.random.default_rng(n)
    x = rng.random(n)
    x[: n // 3] = 0.5  # ties
    a = rng.normal(size=n)
    for h in (1e-4, 0.05, 0.7, 30.0):
        k = _dense_k(x, h, "laplacian")
        np.fill_diagonal(k, 0)
        with x64():
            got = laplace_pair_sum(jnp.asarray(x), jnp.asarray(a), jnp.asarray(h))
        assert_close(got, a @ k @ a, atol=1e-12 * (1 + np.abs(a).sum() ** 2))


def test_laplace_recurrence_float32_small_bandwidth_is_finite():
    """Factors in [0, 1]: no overflow at any bandwidth (segment rescaling overflows)."""
    x = jnp.linspace(0, 1, 2000, dtype=jnp.float32)
    a = jnp.sin(jnp.arange(2000, dtype=jnp.float32))
    for h in (1e-6, 1e-3, 1.0):
        assert jnp.isfinite(laplace_pair_sum(x, a, jnp.float32(h)))


@pytest.mark.parametrize("kind", ["laplacian", "gaussian"])
@pytest.mark.parametrize("diagonal", [False, True])
def test_pair_sum_over_several_tiles(kind, diagonal):
    rng = np.random.default_rng(1)
    n, k = 230, 4
    x = rng.dirichlet(np.ones(k), n)
    a = rng.normal(size=(n, 3))
    dense = _dense_k(x, 0.4, kind) * (a @ a.T)
    if not diagonal:
        np.fill_diagonal(dense, 0)
    with x64():
        for tile in (64, 100, 1024):  # 4 tiles, a ragged last tile, one tile
            got = pair_sum(
                jnp.asarray(x), jnp.asarray(a), jnp.float64(0.4), kind, diagonal=diagonal, tile=tile
            )
            assert_close(got, dense.sum(), rtol=1e-10)


def test_kernel_matvec_over_several_tiles():
    rng = np.random.default_rng(2)
    n = 150
    x = rng.dirichlet(np.ones(3), n)
    e = rng.normal(size=(n, 3))
    v = rng.normal(size=(n, 5))
    hm = _dense_k(x, 0.3, "gaussian") * (e @ e.T)
    with x64():
        got = kernel_matvec(
            jnp.asarray(x), jnp.asarray(e), jnp.float64(0.3), "gaussian", jnp.asarray(v), tile=64
        )
    assert_close(got, hm @ v, rtol=1e-10, atol=1e-10)


def test_median_heuristic_against_numpy():
    rng = np.random.default_rng(3)
    x = rng.dirichlet(np.ones(3), 41)
    w = rng.uniform(0.5, 2, 41)
    with x64():
        assert_close(median_bandwidth(jnp.asarray(x), jnp.ones(41)), ref.median_distance(x))
        assert_close(median_bandwidth(jnp.asarray(x), jnp.asarray(w)), ref.median_distance(x, w))
        s = rng.random(30)
        assert_close(
            median_bandwidth(jnp.asarray(s)[:, None], jnp.ones(30)), ref.median_distance(s)
        )
        # zero weights drop out exactly (padding)
        xp = np.concatenate([x, rng.dirichlet(np.ones(3), 5)])
        wp = np.concatenate([w, np.zeros(5)])
        assert_close(median_bandwidth(jnp.asarray(xp), jnp.asarray(wp)), ref.median_distance(x, w))


def test_median_heuristic_degenerate_cases():
    # most pairs tied at 0: the median of the positive distances
    x = jnp.asarray(np.r_[np.zeros(20), [0.3, 0.5]])[:, None]
    assert float(median_bandwidth(x, jnp.ones(22))) == pytest.approx(
        ref.median_distance(np.asarray(x)[:, 0])
    )
    assert float(median_bandwidth(x, jnp.ones(22))) > 0
    # all equal: 1
    assert float(median_bandwidth(jnp.full((5, 3), 1 / 3), jnp.ones(5))) == 1.0
    # no weight: 1
    assert (
        float(median_bandwidth(jnp.asarray(np.random.default_rng(0).random((4, 1))), jnp.zeros(4)))
        == 1.0
    )


def test_median_heuristic_subsample_is_strided_and_deterministic():
    x = jnp.asarray(np.random.default_rng(4).random((5000, 1)), jnp.float32)
    a = median_bandwidth(x, jnp.ones(5000))
    idx = (np.arange(1024) * 5000) // 1024
    b = median_bandwidth(x[idx], jnp.ones(1024))
    assert float(a) == float(b)
    assert float(a) == float(jax.jit(median_bandwidth)(x, jnp.ones(5000)))
