"""The weighted wavelet matrix's range quantiles against NumPy's inverted-CDF quantiles,
and the decimal complement of the level (the PAV itself: tests/regression/test_corp_quantile.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.isotonic_quantile import range_quantile, upper_level, wavelet
from tests.helpers import x64


def test_range_quantiles_equal_numpy_inverted_cdf():
    rng = np.random.default_rng(0)
    n = 37
    y = rng.integers(0, 9, n).astype(float)  # ties
    w = rng.integers(1, 4, n).astype(float)
    order = np.argsort(y, kind="stable")
    rank = np.empty(n, np.int32)
    rank[order] = np.arange(n)
    lo = rng.integers(0, n, 200)
    hi = np.minimum(lo + rng.integers(1, n, 200), n)
    level = 0.3
    with x64():
        wm = wavelet(jnp.asarray(rank), jnp.asarray(w))
        ranges = (jnp.asarray(lo, jnp.int32), jnp.asarray(hi, jnp.int32))
        total = jnp.asarray([w[a:b].sum() for a, b in zip(lo, hi, strict=True)])
        query = jax.jit(range_quantile, static_argnums=4)
        low = np.asarray(query(wm, *ranges, total * level, False))
        up = np.asarray(query(wm, *ranges, total * upper_level(level), True))
    ys = y[order]
    for k, (a, b) in enumerate(zip(lo, hi, strict=True)):
        rows = np.repeat(y[a:b], w[a:b].astype(int))  # integer weights as repeated rows
        assert ys[low[k]] == np.quantile(rows, level, method="inverted_cdf")
        assert ys[up[k]] == -np.quantile(-rows, 0.7, method="inverted_cdf")


def test_upper_level_is_decimal():
    assert upper_level(0.9) == 0.1
    assert upper_level(0.1) == 0.9
