"""jaxcal's incomplete beta function: against scipy and mpmath, edge cases, inside shard_map."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import scipy.special

from jaxcal.stats._resampling.betainc import betainc
from tests.helpers import x64

SHAPES = [1e-3, 0.1, 0.5, 1.0, 2.5, 10.0, 37.0, 100.0, 1e3, 1e4, 1e5, 1e6]


def _grid(dtype):
    """(a, b, x): x near 0 and 1, and at and around the mean in standard deviations."""
    rows = []
    for a in SHAPES:
        for b in SHAPES:
            mu = a / (a + b)
            sd = np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
            fixed = [0.0, 1e-30, 1e-10, 1e-4, 0.01, 0.3, 0.5, 0.9, 0.999, 1 - 1e-7, 1.0]
            near = [mu + z * sd for z in (-5, -2, -0.5, 0, 1e-3, 2, 5)]
            rows += [(a, b, x) for x in fixed + near if 0 <= x <= 1]
    return tuple(np.asarray(c, dtype) for c in zip(*rows, strict=True))


def _relative_errors(dtype, smallest):
    a, b, x = _grid(dtype)
    args = tuple(jnp.asarray(v) for v in (a, b, x))
    ours = np.asarray(jax.jit(betainc)(*args), np.float64)
    theirs = np.asarray(jax.jit(jax.scipy.special.betainc)(*args), np.float64)
    ref = scipy.special.betainc(*(v.astype(np.float64) for v in (a, b, x)))
    assert not np.any(np.isnan(ours))
    kept = ref > smallest  # values below the dtype's range underflow to 0 (JAX's too)
    rel = [np.abs(v - ref)[kept] / ref[kept] for v in (ours, theirs)]
    return (a[kept], b[kept], x[kept]), *rel


def test_matches_scipy_in_float64():
    with x64():
        (a, b, x), ours, theirs = _relative_errors(np.float64, 1e-300)
    # The fraction's terms lose eps / (1 - x) near x = 1 with a huge a (a = 1e6, b <= 37,
    # 1 - x < 1e-4): 1.3e-10 there (jax.scipy.special.betainc: 6e-10).
    corner = (a >= 1e6) & (b < 100) & (x > 1 - 1e-4)
    assert ours[~corner].max() < 1e-11 and ours[corner].max() < 2e-10
    assert np.median(ours) < 1e-15 and np.quantile(ours, 0.99) < 5e-12
    assert ours.max() < theirs.max() / 10  # JAX's: 2e-6 (its prefactor cancels)


def test_matches_scipy_in_float32():
    (a, b, _), ours, theirs = _relative_errors(np.float32, 1e-30)
    # Measured: median 2e-7 (JAX: 4e-6), 90 % 1e-5 (JAX: 3e-2), max 2e-3 for a, b <= 1e4
    # (JAX: 4.5), at I ~ 1e-3 computed as 1 - I_{1-x}(b, a) (eps / I, as JAX's).
    moderate = np.maximum(a, b) <= 1e4
    assert np.median(ours) < 1e-6 and np.quantile(ours, 0.9) < 1e-4
    assert ours[moderate].max() < 5e-3 and theirs[moderate].max() > 1
    # Worst: a non-integer b < 1 with a = 1e6 right below x = 1 (or the mirror), where the
    # fraction loses eps / (1 - x), as JAX's: 0.48 at (1e6, 0.1, 1 - 1.7e-6) (JAX: 0.1,
    # and 10 elsewhere). Integer a and b (Clopper-Pearson) make the fraction finite there.
    assert ours.max() < 0.6 and theirs.max() > 10


def test_matches_mpmath():
    points = [
        (1e-3, 1e-3, 1e-10),
        (1e-3, 1e4, 1e-4),
        (0.5, 0.5, 0.999),
        (2.5, 1e5, 2e-5),
        (37.0, 37.0, 0.3),
        (37.0, 1e6, 3.7e-5),  # scipy: 3e-12 off
        (1e3, 1e3, 0.49),
        (1e4, 10.0, 0.999),
    ]
    a, b, x = (np.asarray(c) for c in zip(*points, strict=True))
    with x64():
        ours = np.asarray(betainc(jnp.asarray(a), jnp.asarray(b), jnp.asarray(x)))
    mpmath.mp.dps = 30
    ref = [float(mpmath.betainc(*p[:2], 0, p[2], regularized=True)) for p in points]
    np.testing.assert_allclose(ours, ref, rtol=1e-12)  # the brief's float64 target


def test_edge_cases():
    a = jnp.asarray([2.0, 2.0, 0.0, 0.0, 3.0, 3.0, jnp.inf, 1.0, -1.0, 0.0, 1.0, 1.0, 1.0])
    b = jnp.asarray([3.0, 3.0, 2.0, 2.0, 0.0, 0.0, 1.0, jnp.inf, 1.0, 0.0, 1.0, 1.0, jnp.nan])
    x = jnp.asarray([0.0, 1.0, 0.5, 0.0, 0.5, 1.0, 0.5, 0.5, 0.5, 0.5, -0.1, jnp.nan, 0.5])
    expected = [0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0] + [np.nan] * 5
    np.testing.assert_array_equal(np.asarray(betainc(a, b, x)), expected)
    np.testing.assert_array_equal(
        np.asarray(betainc(a, b, x)), np.asarray(jax.scipy.special.betainc(a, b, x))
    )


def test_an_element_does_not_depend_on_its_batch():
    a = jnp.asarray([0.5, 3.0, 5e4, 2.0])
    b = jnp.asarray([0.5, 40.0, 5e4, 1e5])
    x = jnp.asarray([0.3, 0.05, 0.5, 1e-5])
    f = jax.jit(betainc)
    alone = np.asarray([f(a[i : i + 1], b[i : i + 1], x[i : i + 1])[0] for i in range(4)])
    np.testing.assert_array_equal(np.asarray(f(a, b, x)), alone)
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(betainc))(a, b, x)), alone)


def test_inside_shard_map_with_varying_inputs():
    from jax.sharding import AxisType, PartitionSpec

    mesh = jax.make_mesh((1,), ("d",), axis_types=(AxisType.Auto,))
    a = jnp.asarray([1.0, 7.0, 50.0, 3.0])
    spec = PartitionSpec("d")
    sharded = jax.jit(
        jax.shard_map(
            lambda a: betainc(a, a + 3, a / (a + 5)), mesh=mesh, in_specs=spec, out_specs=spec
        )
    )
    direct = jax.jit(lambda a: betainc(a, a + 3, a / (a + 5)))(a)
    np.testing.assert_array_equal(np.asarray(sharded(a)), np.asarray(direct))
