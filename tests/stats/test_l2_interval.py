"""jaxcal.stats.l2_ece_interval against sylydya/CI-ECE (tests/reference_binned.py), with
coverage and power."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxcal
from tests import reference_binned as ref
from tests.helpers import assert_close, x64


@pytest.mark.parametrize("n_bins", [5, 15, 50])
def test_estimate_and_variance_against_the_reference(n_bins):
    rng = np.random.default_rng(n_bins)
    for beta in (1.0, 0.6):
        z = rng.uniform(0.001, 0.999, 1000)
        q = 1 / (1 + np.exp(-beta * np.log(z / (1 - z))))
        y = (rng.random(1000) < q).astype(int)
        stat, var = ref.t_mn_estimator(y, z, n_bins)
        lower, upper = ref.adjusted_interval(stat, var, 1000, 0.1)
        with x64():
            res = jaxcal.stats.l2_ece_interval(z, y, n_bins=n_bins)
            assert_close(res.estimate, stat, rtol=1e-9, atol=1e-15)
            assert_close(res.std_error, np.sqrt(var / 1000), rtol=1e-9)
            assert_close(res.lower, lower, rtol=1e-9, atol=1e-15)
            assert_close(res.upper, upper, rtol=1e-9)


def test_top_label_and_scores_of_one():
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(4), 500)
    labels = rng.integers(0, 4, 500)
    conf, correct = probs.max(1), (probs.argmax(1) == labels).astype(int)
    with x64():
        a = jaxcal.stats.l2_ece_interval(probs, labels, n_bins=10)
        b = jaxcal.stats.l2_ece_interval(conf, correct, n_bins=10)
        for x, y in zip(a, b, strict=True):
            assert_close(x, y, rtol=1e-12)
        # a score of exactly 1 is in the last bin here (the reference drops it)
        z = np.r_[rng.random(99), 1.0]
        y = (rng.random(100) < z).astype(int)
        stat, _ = ref.t_mn_estimator(y, np.r_[z[:99], 0.999999], 10)
        assert_close(
            jaxcal.stats.l2_ece_interval(z, y, n_bins=10).estimate, stat, rtol=1e-4, atol=1e-6
        )


def test_weights_are_frequency_weights_and_bad_options():
    rng = np.random.default_rng(2)
    z = rng.random(200)
    y = (rng.random(200) < z).astype(int)
    w = rng.integers(0, 3, 200).astype(float)
    with x64():
        a = jaxcal.stats.l2_ece_interval(z, y, weights=w)
        rep = np.repeat(np.arange(200), w.astype(int))
        b = jaxcal.stats.l2_ece_interval(z[rep], y[rep])
        for x, v in zip(a, b, strict=True):
            assert_close(x, v, rtol=1e-10, atol=1e-15)
    with pytest.raises(ValueError, match="`confidence`"):
        jaxcal.stats.l2_ece_interval(z, y, confidence=1.5)
    with pytest.raises(ValueError, match="`n_bins`"):
        jaxcal.stats.l2_ece_interval(z, y, n_bins=0)


def _binned_truth(beta, m):
    g = np.linspace(0, 1, 400001)[1:-1]
    q = 1 / (1 + np.exp(-beta * np.log(g / (1 - g))))
    b = np.minimum((g * m).astype(int), m - 1)
    return sum((b == j).mean() * (q[b == j] - g[b == j]).mean() ** 2 for j in range(m))


@pytest.mark.slow
def test_coverage_and_power():
    """The reference's simulation 1 (Z ~ U(0, 1), P(Y = 1 | Z) = sigmoid(beta logit Z)),
    n = 1000, 15 bins, 400 data sets: at beta = 0.7 (binned ECE^2 = 0.0032) the 90 %
    interval covers the truth within the 99.9 % binomial band of 0.9 (measured 0.92); at
    beta = 0.5 more than 90 % of the intervals exclude 0."""
    rng = np.random.default_rng(3)
    n, reps, m = 1000, 400, 15

    def intervals(beta):
        z = rng.random((reps, n))
        q = 1 / (1 + np.exp(-beta * np.log(z / (1 - z))))
        y = (rng.random((reps, n)) < q).astype(np.int32)
        res = jax.vmap(lambda a, b: jaxcal.stats.l2_ece_interval(a, b, n_bins=m))(
            z.astype(np.float32), y
        )
        return np.asarray(res.lower), np.asarray(res.upper)

    truth = _binned_truth(0.7, m)
    lo, hi = intervals(0.7)
    covered = np.sum((lo <= truth) & (truth <= hi))
    assert 340 <= covered <= 380  # 99.9 % band of Binomial(400, 0.9): [340, 380]
    lo, _ = intervals(0.5)
    assert np.mean(lo > 0) > 0.9
