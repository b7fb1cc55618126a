"""The leave-one-out Dirichlet KDE (jaxcal/metrics/_kde.py): tiles, log space, the
bandwidth criterion, against dense float64 NumPy (tests/reference_kde.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from jaxcal.metrics._kde import (
    ECE_KDE_GRID,
    PROPER_CE_GRID,
    loo_log_likelihood,
    loo_ratio,
    select_bandwidth,
)
from tests import reference_kde as ref
from tests.helpers import assert_close, x64


def test_grids_are_the_references():
    assert_close(ECE_KDE_GRID, np.r_[np.logspace(-5, -1, 15), np.linspace(0.2, 1, 5)])
    assert_close(PROPER_CE_GRID, np.r_[np.logspace(-5, -1, 50), np.linspace(0.2, 1, 5)])


def test_loo_ratio_over_tiles_equals_the_dense_ratio():
    rng = np.random.default_rng(0)
    f = rng.dirichlet(np.ones(4), 150)
    y = rng.integers(0, 4, 150)
    dense = ref.get_ratio(f, y, 0.07)
    with x64():
        for tile in (32, 64, 150, 1024):
            got = loo_ratio(jnp.asarray(f), jnp.eye(4)[y], jnp.ones(150), jnp.float64(0.07), tile)
            assert_close(got, dense, rtol=1e-9, atol=1e-14)


def test_loo_ratio_float32_without_overflow_at_100_classes():
    """The reference's linear path (K <= 60) exponentiates densities: e^(1e4) and more at
    K = 100; here only differences from the row maximum are."""
    rng = np.random.default_rng(1)
    f = rng.dirichlet(np.ones(100) * 0.2, 300)
    y = rng.integers(0, 100, 300)
    for b in (1e-3, 0.05):
        got = loo_ratio(jnp.asarray(f, jnp.float32), jnp.eye(100)[y], jnp.ones(300), jnp.float32(b))
        assert bool(jnp.all(jnp.isfinite(got)))
        assert_close(jnp.sum(got, axis=1), np.ones(300), rtol=1e-5)
        with x64():
            want = loo_ratio(jnp.asarray(f), jnp.eye(100)[y], jnp.ones(300), jnp.float64(b))
        # float32 exponents ~1e5 at b = 1e-3; at b = 0.05 arguments up to ~40 give each
        # exponential ~40 ulp of error, and one entry of 30000 was 1.7e-5 off on one
        # machine (CI, 2026-11-28; the bound depends on the CPU's exp): 5e-5
        assert_close(got, want, atol=2e-3 if b < 0.01 else 5e-5)


def test_exact_zeros_and_isolated_rows_are_finite():
    f = jnp.asarray([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    y = jnp.eye(3)[jnp.asarray([0, 1, 0, 2])]
    r = loo_ratio(f, y, jnp.ones(4), jnp.float32(0.01))
    assert bool(jnp.all(jnp.isfinite(r)))
    g = jax.grad(lambda f: jnp.sum(loo_ratio(f, y, jnp.ones(4), jnp.float32(0.01)) ** 2))(f)
    assert bool(jnp.all(jnp.isfinite(g)))
    # one row with weight: nothing else to average, ratio 0 (the empty numerator)
    r = loo_ratio(f, y, jnp.asarray([1.0, 0, 0, 0]), jnp.float32(0.1))
    assert_close(r[0], np.zeros(3))


def test_loo_likelihood_is_the_references_criterion():
    rng = np.random.default_rng(2)
    f = rng.dirichlet(np.ones(3), 60)
    with x64():
        for b in (1e-3, 0.05, 0.6):
            lk = ref.get_kernel(f, b)
            want = np.sum(logsumexp(lk, axis=1) - np.log((60 - 1) * b))
            assert_close(
                loo_log_likelihood(jnp.asarray(f), jnp.ones(60), jnp.float64(b), True),
                want,
                rtol=1e-10,
            )
            want = np.sum(logsumexp(lk, axis=1) - np.log(60 - 1))
            assert_close(
                loo_log_likelihood(jnp.asarray(f), jnp.ones(60), jnp.float64(b), False),
                want,
                rtol=1e-10,
            )


def test_selection_is_the_references_choice():
    rng = np.random.default_rng(3)
    for k, n in ((2, 80), (3, 50), (10, 40)):
        f = rng.dirichlet(np.ones(k), n)
        with x64():
            got = select_bandwidth(jnp.asarray(f), jnp.ones(n), ECE_KDE_GRID, True)
            assert float(got) == ref.get_bandwidth(f)
            got = select_bandwidth(jnp.asarray(f), jnp.ones(n), PROPER_CE_GRID, False)
            assert float(got) == ref.get_bandwidth_proper(f)
