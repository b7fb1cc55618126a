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


def test_events_at_predicted_zero_give_an_infinite_statistic():
    """A3: 30 events among 100 predictions of exactly 0 read as p = 0.77 (the group was
    skipped); R's ResourceSelection::hoslem.test gives C = inf there, p = 0."""
    rng = np.random.default_rng(40)
    p = np.concatenate([np.zeros(100), rng.uniform(0.2, 0.8, 900)])
    y = (rng.random(1000) < p).astype(np.int32)
    y[:30] = 1
    res = hosmer_lemeshow_test(p, y)
    assert float(res.statistic) == np.inf and float(res.p_value) == 0
    near = p.copy()
    near[:100] = 1e-6  # continuous on the way: a huge statistic, a tiny (floored) p-value
    res = hosmer_lemeshow_test(near, y)
    assert 1e6 < float(res.statistic) < np.inf and float(res.p_value) < 1e-30
    assert float(hosmer_lemeshow_test(np.zeros(20), np.ones(20, np.int32)).statistic) == np.inf
    assert float(hosmer_lemeshow_test(np.ones(20), np.zeros(20, np.int32)).p_value) == 0
    # Predictions of 0 (or 1) that come true add 0: R's (0 - 0)^2 / 0 is NaN, here 0.
    res = hosmer_lemeshow_test(np.zeros(20), np.zeros(20, np.int32))
    assert float(res.statistic) == 0 and float(res.p_value) == 1
    y[:30] = 0  # no event at 0: the zeros' group adds 0, the test is the usual one
    res = hosmer_lemeshow_test(p, y)
    assert np.isfinite(float(res.statistic)) and float(res.p_value) > 0


def test_frequency_weights_count_samples():
    """E8: the siblings take weights= ; a weight of 3 is the sample three times over."""
    w = rng.integers(0, 4, N).astype(np.float64)
    with x64():
        weighted = hosmer_lemeshow_test(P, Y, weights=w)
        repeated = hosmer_lemeshow_test(np.repeat(P, w.astype(int)), np.repeat(Y, w.astype(int)))
        weighted, repeated = jax.device_get((weighted, repeated))
    assert_close(weighted.statistic, repeated.statistic, rtol=1e-9)  # float64 sums
    assert_close(weighted.p_value, repeated.p_value, rtol=1e-9)
    w32 = w.astype(np.float32)
    base = float(hosmer_lemeshow_test(P.astype(np.float32), Y, weights=w32).statistic)
    huge = hosmer_lemeshow_test(P.astype(np.float32), Y, weights=w32 * 2.0**100)  # no overflow
    assert_close(float(huge.statistic), base * 2.0**100, rtol=1e-5)  # float32 sums


def test_log_chi2_sf_refuses_nan_and_bad_degrees_of_freedom():
    assert float(log_chi2_sf(np.inf, 3.0)) == -np.inf
    with pytest.raises(ValueError, match="`x` must not contain NaN"):
        log_chi2_sf(np.array([1.0, np.nan]), 3.0)
    for df in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="`df` must be finite and > 0"):
            log_chi2_sf(1.0, df)
