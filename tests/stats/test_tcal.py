"""jaxcal.stats.tcal_test against dh7401/T-Cal (tests/reference_binned.py) and, scale by
scale, against jaxcal.stats.consistency_test; size and power."""

from __future__ import annotations

from functools import partial

import jax
import numpy as np
import pytest
from scipy import stats

import jaxcal
from jaxcal.stats._binned.tcal import default_resamples, n_scales, tcal_dpe
from tests import reference_binned as ref
from tests.helpers import assert_close, x64


def test_dpe_is_the_references_plugin_ece():
    rng = np.random.default_rng(0)
    z = np.r_[rng.random(300), 1.0, 0.0, 0.5]  # a score of 1 alone in bin m, as there
    y = (rng.random(303) < z).astype(int)
    with x64():
        for b in (1, 3, 6, 12):
            assert_close(
                tcal_dpe(z, y, n_bins=2**b), ref.plugin_ece(z, y, 2**b), rtol=1e-9, atol=1e-16
            )
        with pytest.warns(UserWarning, match="cannot reject at alpha = 0.05"):
            res = jaxcal.stats.tcal_test(z, y, key=jax.random.key(0), n_resamples=20)
        assert not bool(res.reaches_alpha)
        assert_close(res.p_floor, len(res.scales) / 21)
        want = [ref.plugin_ece(z, y, 2**b) for b in range(1, ref.tcal_scales(303) + 1)]
        assert_close(res.statistic, want, rtol=1e-9, atol=1e-16)


def test_scales_are_the_references():
    for n in (2, 3, 10, 500, 10**4, 10**6):
        assert n_scales(n) == ref.tcal_scales(n)
    res = jaxcal.stats.tcal_test(
        np.linspace(0.1, 0.9, 50),
        np.arange(50) % 2,
        key=jax.random.key(0),
        n_resamples=10,
        alpha=0.99,
    )
    assert res.scales.tolist() == list(range(1, ref.tcal_scales(50) + 1))


@pytest.mark.parametrize("multiclass", [False, True])
def test_each_scale_is_consistency_test_with_resampled_predictions(multiclass):
    rng = np.random.default_rng(1)
    if multiclass:
        probs = rng.dirichlet(np.ones(3), 120).astype(np.float32)
        labels = rng.integers(0, 3, 120)
    else:
        probs = rng.random(120).astype(np.float32)
        labels = (rng.random(120) < probs**2).astype(int)
    key = jax.random.key(5)
    res = jaxcal.stats.tcal_test(probs, labels, key=key, n_resamples=300)
    for b in (1, 4, 9):
        c = jaxcal.consistency_test(
            partial(tcal_dpe, n_bins=2**b),
            probs,
            labels,
            key=key,
            n_resamples=300,
            resample_predictions=True,
        )
        assert_close(res.statistic[b - 1], c.statistic, rtol=1e-5, atol=1e-7)
        assert_close(res.p_values[b - 1], c.p_value)
    assert_close(res.p_value, min(1.0, len(res.scales) * float(np.min(res.p_values))))


def test_batch_size_does_not_change_the_result_and_bad_options():
    rng = np.random.default_rng(2)
    z = rng.random(64).astype(np.float32)
    y = (rng.random(64) < z).astype(int)
    a = jaxcal.stats.tcal_test(z, y, key=jax.random.key(0), n_resamples=50, alpha=0.5)
    b = jaxcal.stats.tcal_test(z, y, key=jax.random.key(0), n_resamples=50, batch_size=7, alpha=0.5)
    assert_close(a.p_values, b.p_values)
    with pytest.raises(ValueError, match="`key`"):
        jaxcal.stats.tcal_test(z, y, key=0)
    with pytest.raises(ValueError, match="at least 2 samples"):
        jaxcal.stats.tcal_test(z[:1], y[:1], key=jax.random.key(0))
    for bad in (0, 1, 1.5, True, "0.05"):
        with pytest.raises(ValueError, match="`alpha`"):
            jaxcal.stats.tcal_test(z, y, key=jax.random.key(0), alpha=bad)


def test_default_resamples_let_p_reach_alpha():
    """Q4: with R = 200 and n = 200 (B = 12) p >= 12/201 = 0.0597 whatever the data; the
    default R comes from B and alpha, and rejects the strong miscalibration Y ~ Bern(Z^2)."""
    rng = np.random.default_rng(32)
    p = rng.random(200).astype(np.float32)
    y = (rng.random(200) < p**2).astype(np.int32)
    with pytest.warns(UserWarning, match="n_resamples >= 240"):
        low = jaxcal.stats.tcal_test(p, y, key=jax.random.key(0), n_resamples=200)
    assert float(low.p_value) >= 12 / 201 - 1e-7 and not bool(low.reaches_alpha)
    res = jaxcal.stats.tcal_test(p, y, key=jax.random.key(0))
    assert bool(res.reaches_alpha) and float(res.p_floor) <= 0.005
    assert float(res.p_value) < 0.05
    assert default_resamples(12, 0.05) == 3000 and default_resamples(12, 0.01) == 11999
    assert default_resamples(29, 0.05) == 5799


REPS = 200


def _pvalues(beta, n, reps, seed, resamples=600):
    rng = np.random.default_rng(seed)
    z = rng.random((reps, n))
    q = 1 / (1 + np.exp(-beta * np.log(z / (1 - z))))
    y = (rng.random((reps, n)) < q).astype(np.int32)
    keys = jax.random.split(jax.random.key(seed), reps)

    def one(args):
        return jaxcal.stats.tcal_test(args[0], args[1], key=args[2], n_resamples=resamples).p_value

    return np.asarray(
        jax.jit(lambda a, b, k: jax.lax.map(one, (a, b, k)))(z.astype(np.float32), y, keys)
    )


@pytest.mark.slow
def test_size_and_power():
    """Z ~ U(0, 1), n = 300, 600 resamples: under calibration (Y ~ Bernoulli(Z)) the
    rejection rate at alpha = 0.05 lies in the 99.9 % binomial band of 200 data sets
    (Bonferroni over 13 scales makes it conservative: 0.025 measured at n = 500);
    against P(Y = 1 | Z) = sigmoid(0.4 logit Z) (the reference's simulation family) it
    rejects more than 90 % of 100 data sets (measured 0.97; 0.78 at 0.5)."""
    low, high = stats.binom.ppf([0.0005, 0.9995], REPS, 0.05)
    assert low <= np.sum(_pvalues(1.0, 300, REPS, 0) <= 0.05) <= high
    assert np.mean(_pvalues(0.4, 300, 100, 1) <= 0.05) > 0.9
