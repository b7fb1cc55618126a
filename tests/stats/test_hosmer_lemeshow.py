"""Hosmer-Lemeshow test and the log-space chi-square tail."""

import jax
import mpmath
import numpy as np
import pytest
from scipy import stats

from jaxcal.metrics import quantile_edges
from jaxcal.stats import hosmer_lemeshow_test, log_chi2_sf
from tests.helpers import assert_close, x64
from tests.reference_clinical import hosmer_lemeshow

rng = np.random.default_rng(14)
N = 500
P = rng.beta(2, 3, N)
Y = (rng.random(N) < P**1.3).astype(np.int32)


def test_statistic_and_p_value_against_the_definition():
    with x64():
        res = hosmer_lemeshow_test(P, Y)
        edges = np.asarray(quantile_edges(P, 10))
    stat, groups = hosmer_lemeshow(P, Y, edges)
    assert groups == 10
    assert_close(res.statistic, stat)
    assert_close(res.p_value, stats.chi2.sf(stat, groups - 2), rtol=1e-9)  # series vs scipy


def test_log_chi2_sf_against_scipy_and_mpmath():
    xs = np.array([0.0, 1e-3, 0.5, 3.84, 9.9, 12.0, 20.0, 42.0, 100.0, 700.0, 2000.0, 5000.0])
    for df in (1.0, 3.0, 8.0, 40.0):
        want = [
            float(mpmath.log(mpmath.gammainc(df / 2, x / 2, mpmath.inf, regularized=True)))
            for x in xs
        ]
        with x64():
            got = np.asarray(log_chi2_sf(xs, df))
        assert_close(got, want, rtol=1e-10, atol=1e-14)  # float64 series
        finite = xs < 600
        assert_close(got[finite], stats.chi2.logsf(xs[finite], df), rtol=1e-10, atol=1e-14)
        got32 = np.asarray(log_chi2_sf(xs.astype(np.float32), df))
        assert_close(got32, want, rtol=2e-5, atol=1e-6)  # float32 series


def test_tiny_p_values_are_not_zero_and_groups_with_ties():
    y = (P > 0.5).astype(np.int32)  # strongly miscalibrated: p underflows float32
    res = hosmer_lemeshow_test(P, y)
    assert float(res.p_value) == np.finfo(np.float32).tiny
    assert float(log_chi2_sf(res.statistic, 8.0)) < np.log(np.finfo(np.float32).tiny)
    with x64():
        exact = hosmer_lemeshow_test(P, y)
    assert_close(np.log(float(exact.p_value)), float(log_chi2_sf(res.statistic, 8.0)), rtol=1e-4)
    coarse = np.round(P, 1)  # ties: fewer than 10 non-empty groups
    tied = hosmer_lemeshow_test(coarse, Y)
    assert np.isfinite(float(tied.statistic)) and 0 < float(tied.p_value) <= 1


def test_jit_vmap_and_bad_input():
    f = jax.jit(lambda p, y: hosmer_lemeshow_test(p, y).statistic)
    boot = rng.integers(0, N, (3, N))
    out = jax.vmap(f)(P[boot].astype(np.float32), Y[boot])
    assert_close(out[1], f(P[boot[1]].astype(np.float32), Y[boot[1]]))
    with pytest.raises(ValueError, match="`n_groups`"):
        hosmer_lemeshow_test(P, Y, n_groups=2)


def test_grad_of_the_statistic_and_the_log_tail():
    with x64():
        # The groups are fixed under a move smaller than the gaps between the
        # probabilities (eps 1e-7 against gaps of ~1e-6 at the least): the statistic is
        # smooth there.
        jax.test_util.check_grads(
            lambda p: hosmer_lemeshow_test(p, Y).statistic, (P,), order=1, modes=["rev"], eps=1e-7
        )
        x, df = np.array([0.5, 7.0, 40.0]), np.array([3.0, 8.0, 8.0])
        g = jax.vmap(jax.grad(log_chi2_sf))(x, df)
        # d/dx log sf = -pdf / sf
        assert_close(g, -stats.chi2.pdf(x, df) / stats.chi2.sf(x, df))
