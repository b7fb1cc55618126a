"""The shared arithmetic of jaxcal._core.numerics against float64 NumPy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal._core.numerics import (
    bisect_nonnegative,
    blocked_segment_sum,
    compute_dtype,
    order_statistics,
    safe_divide,
    safe_log,
    safe_sqrt,
    tree_sum,
    two_sum,
    weighted_mean,
)
from tests.helpers import assert_close, x64

M = 10


def test_segment_sums_blocked_scalar_scatters():
    """(N,) and (N, K) ids, several blocks, vs float64."""
    rng = np.random.default_rng(15)
    n, k = 1000, 3  # four blocks of 256 rows, the last one partial
    bins = rng.integers(0, M, (n, k))
    ids = np.arange(k)[None, :] * M + bins
    values = rng.random((n, k)).astype(np.float32)
    got = blocked_segment_sum(
        [jnp.asarray(values), jnp.asarray(values**2)], jnp.asarray(ids), k * M
    )
    assert got.shape == (2, k * M)
    for row, v in zip(got, (values, values**2), strict=True):
        expected = np.zeros(k * M)
        np.add.at(expected, ids.reshape(-1), v.astype(np.float64).reshape(-1))
        assert_close(row, expected)
    flat = blocked_segment_sum([jnp.asarray(values[:, 0])], jnp.asarray(bins[:, 0]), M)[0]
    assert_close(flat, np.bincount(bins[:, 0], weights=values[:, 0], minlength=M))


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 100_003])
def test_tree_sum_matches_float64(n):
    rng = np.random.default_rng(n)
    x = rng.random((n, 3)).astype(np.float32)
    assert_close(tree_sum(jnp.asarray(x)), x.astype(np.float64).sum(axis=0))


def test_xla_dense_sums_stay_accurate_where_a_running_sum_drifts():
    """Dense sums are left to XLA (module notes): pin that its reductions are tree-shaped."""
    n = 2**25
    exact = n * float(np.float32(0.1))
    naive = float(np.cumsum(np.full(n, 0.1, np.float32))[-1])  # a sequential float32 sum
    assert abs(naive - exact) / exact > 1e-2
    x = jnp.full(n, 0.1, jnp.float32)
    assert abs(float(jax.jit(jnp.sum)(x)) - exact) / exact < 1e-6
    columns = jnp.full((n // 8, 8), 0.1, jnp.float32)  # axis-0 sums, as the kernels do
    # a few float32 ulps of the result, where the running sum is off by percents
    assert_close(jax.jit(lambda c: jnp.sum(c, axis=0))(columns), np.full(8, exact / 8), rtol=1e-6)


def test_weighted_mean_and_zero_total_weight():
    x = jnp.array([1.0, 2.0, 4.0])
    assert float(weighted_mean(x, None)) == pytest.approx(7 / 3)
    assert float(weighted_mean(x, jnp.array([0.0, 1.0, 3.0]))) == pytest.approx(3.5)
    assert float(weighted_mean(x, jnp.zeros(3))) == 0.0


def test_guarded_operations_have_finite_values_and_gradients():
    x = jnp.array([0.0, 0.25, 4.0])
    assert safe_divide(x, jnp.array([0.0, 0.5, 2.0])).tolist() == [0.0, 0.5, 2.0]
    assert safe_sqrt(jnp.array([-1.0, 0.0, 4.0])).tolist() == [0.0, 0.0, 2.0]
    assert safe_log(jnp.array([0.0, 1.0]))[0] == 0.0
    for f in (
        lambda v: safe_divide(v, v).sum(),
        lambda v: safe_sqrt(v).sum(),
        lambda v: (v * safe_log(v)).sum(),
    ):
        grad = jax.grad(f)(x)
        assert bool(jnp.all(jnp.isfinite(grad)))


def test_two_sum_is_error_free():
    a, b = jnp.float32(1.0), jnp.float32(1e-8)
    s, err = two_sum(a, b)
    assert float(s) == 1.0
    assert float(np.float64(s) + np.float64(err)) == float(np.float64(a) + np.float64(b))


def test_compute_dtype_policy():
    assert compute_dtype(jnp.bfloat16) == jnp.float32
    assert compute_dtype(jnp.float16) == jnp.float32
    assert compute_dtype(jnp.int8) == jnp.float32
    with x64():
        assert compute_dtype(jnp.float64) == jnp.float64
        assert compute_dtype(jnp.int32) == jnp.float64


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_order_statistics_equal_a_sort(dtype):
    rng = np.random.default_rng(7)
    key = rng.exponential(size=1001).astype(dtype) * 1e-3
    key[::7] = key[3]  # ties
    positions = np.array([0, 1, 500, 999, 1000, 1001])
    with x64():
        got = np.asarray(order_statistics(jnp.asarray(key), jnp.asarray(positions)))
    expected = np.append(np.sort(key), np.inf)[np.minimum(positions, 1001)]
    np.testing.assert_array_equal(got, expected)


def test_bisection_finds_the_smallest_float_with_the_property():
    x = bisect_nonnegative(lambda v: v * v >= 2.0, (), jnp.float32, upper=2.0)
    assert float(x) ** 2 >= 2.0 - 1e-6
    assert float(jnp.nextafter(x, jnp.float32(0)) ** 2) < 2.0
    # true at 0: the answer is 0; under jit and vmap
    zeros = jax.jit(
        jax.vmap(lambda q: bisect_nonnegative(lambda v: v >= q, (), jnp.float32, upper=1.0))
    )(jnp.array([0.0, 0.5, 1.0]))
    assert zeros.tolist() == [0.0, 0.5, 1.0]
