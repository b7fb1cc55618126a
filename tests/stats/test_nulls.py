"""The kernel tests' validity flag and consistency null (``jaxcal/stats/_kernel/nulls.py``):
``skce_test`` / ``cme_test`` with ``null="consistency"``, ``expected_errors`` and
``reliable``; the size at the extremes (slow)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from jaxcal import stats
from tests.helpers import assert_close


def _extreme(rng, n, eps=1e-3):
    """Q2: calibrated predictions in {eps, 1 - eps}, labels drawn from them."""
    p = np.where(rng.random(n) < 0.5, eps, 1 - eps).astype(np.float32)
    return p, (rng.random(n) < p).astype(np.int32)


TEST_PROBS = np.array([0.2, 0.8], np.float32)
TEST_LABELS = np.array([0, 1])


def test_consistency_null_is_consistency_test_of_the_skce():
    """Same key, same labels: the p-value is consistency_test's on jaxcal.skce."""
    rng = np.random.default_rng(3)
    p = rng.random(60).astype(np.float32)
    y = (rng.random(60) < p**1.5).astype(np.int32)
    key = jax.random.key(4)
    res = stats.skce_test(p, y, key=key, n_resamples=99, null="consistency")
    ref = jaxcal.consistency_test(partial(jaxcal.skce), p, y, key=key, n_resamples=99)
    assert_close(res.statistic, ref.statistic, rtol=1e-5)
    assert_close(res.estimate, jaxcal.skce(p, y), rtol=1e-5)
    assert_close(res.p_value, ref.p_value)
    assert_close(res.log_p_value, np.log(float(ref.p_value)), rtol=1e-5)
    blk = stats.skce_test(p, y, method="block", key=key, n_resamples=99, null="consistency")
    ref = jaxcal.consistency_test(
        partial(jaxcal.skce, estimator="block"), p, y, key=key, n_resamples=99
    )
    assert_close(blk.p_value, ref.p_value)


def test_deterministic_predictions_are_not_rejected_by_the_consistency_null():
    """Q2's deterministic example: every resample equals the data, so p = 1; the
    asymptotic nulls reject it and say they are not reliable there."""
    p = np.r_[np.zeros(10), np.ones(10), np.full(10, 1e-12), np.full(10, 1 - 1e-7)]
    p = p.astype(np.float32)
    y = np.r_[np.zeros(10), np.ones(10), np.zeros(10), np.ones(10)].astype(np.int32)
    key = jax.random.key(0)
    for kw in ({"key": key, "n_resamples": 50}, {"method": "block"}):
        asym = stats.skce_test(p, y, **kw)
        assert not bool(asym.reliable) and float(asym.expected_errors) < 1e-5
        cons = stats.skce_test(p, y, **{"key": key, **kw}, null="consistency")
        assert float(cons.p_value) == 1 and bool(cons.reliable)
    cme = stats.cme_test(p, y, test_probs=TEST_PROBS, test_labels=TEST_LABELS)
    assert float(cme.p_value) < 1e-3 and not bool(cme.reliable)
    cme = stats.cme_test(
        p, y, test_probs=TEST_PROBS, test_labels=TEST_LABELS, null="consistency", key=key
    )
    assert float(cme.p_value) == 1 and bool(cme.reliable)


def test_expected_errors_and_the_condition():
    rng = np.random.default_rng(5)
    p = rng.random(300).astype(np.float32)
    y = (rng.random(300) < p).astype(np.int32)
    res = stats.skce_test(p, y, method="block")
    assert_close(res.expected_errors, np.minimum(p, 1 - p).sum(), rtol=1e-5)
    assert bool(res.reliable)  # E = 75 >= 10
    probs = rng.dirichlet(np.ones(4), 300).astype(np.float32)
    labels = rng.integers(0, 4, 300)
    res = stats.skce_test(probs, labels, method="block")
    assert_close(res.expected_errors, (1 - probs.max(1)).sum(), rtol=1e-5)
    # the CME's chi-square also needs n >= 1000
    cme = stats.cme_test(probs, labels, test_probs=probs[:3], test_labels=labels[:3])
    assert not bool(cme.reliable) and float(cme.expected_errors) > 10
    # weights: Kish's n times the weighted mean
    w = rng.random(300).astype(np.float32)
    res = stats.skce_test(p, y, method="block", weights=w)
    want = w.sum() ** 2 / (w * w).sum() * (w * np.minimum(p, 1 - p)).sum() / w.sum()
    assert_close(res.expected_errors, want, rtol=1e-4)
    # the distribution-free bounds hold at any n
    p, y = _extreme(rng, 100)
    assert bool(stats.skce_test(p, y, method="distribution_free").reliable)


def test_bad_options_are_refused():
    rng = np.random.default_rng(6)
    p, y = _extreme(rng, 40)
    with pytest.raises(ValueError, match="`null`"):
        stats.skce_test(p, y, method="block", null="permutation")
    with pytest.raises(ValueError, match="distribution-free"):
        stats.skce_test(p, y, method="distribution_free", null="consistency")
    with pytest.raises(ValueError, match="`key` is required"):
        stats.skce_test(p, y, method="block", null="consistency")
    with pytest.raises(ValueError, match="`key` is required"):
        stats.cme_test(p, y, test_probs=TEST_PROBS, test_labels=TEST_LABELS, null="consistency")
    with pytest.raises(ValueError, match="`null`"):
        stats.cme_test(p, y, test_probs=TEST_PROBS, test_labels=TEST_LABELS, null="x")
    with pytest.raises(ValueError, match="n_resamples"):
        stats.skce_test(p, y, key=jax.random.key(0), n_resamples=1, null="consistency")


def test_consistency_null_under_jit_and_vmap():
    rng = np.random.default_rng(7)
    probs = rng.dirichlet(np.ones(3), (2, 40)).astype(np.float32)
    labels = rng.integers(0, 3, (2, 40)).astype(np.int32)
    keys = jax.random.split(jax.random.key(1), 2)

    def both(p, y, k):
        s = stats.skce_test(p, y, key=k, n_resamples=20, null="consistency")
        c = stats.cme_test(
            p, y, test_probs=p[:3], test_labels=y[:3], key=k, n_resamples=20, null="consistency"
        )
        return s.p_value, c.p_value, s.reliable

    ps, pc, ok = jax.jit(jax.vmap(both))(jnp.asarray(probs), jnp.asarray(labels), keys)
    for i in range(2):
        want = stats.skce_test(probs[i], labels[i], key=keys[i], n_resamples=20, null="consistency")
        assert_close(ps[i], want.p_value)
    assert bool(np.all((pc > 0) & (pc <= 1))) and bool(np.all(ok))


ALPHA = 0.05


def _band(reps):
    return ALPHA + 2.6 * np.sqrt(ALPHA * (1 - ALPHA) / reps)


@pytest.mark.slow
def test_size_at_the_extremes():
    """Q2 at n = 100, p in {1e-3, 1 - 1e-3}: the asymptotic nulls reject calibrated data
    far beyond alpha and flag it (reliable False); the consistency null stays within
    the binomial band of alpha (``scripts/kernel_test_size.py`` has the full table)."""
    reps, n = 60, 100
    rng = np.random.default_rng(11)
    p = np.where(rng.random((reps, n)) < 0.5, 1e-3, 1 - 1e-3).astype(np.float32)
    y = (rng.random((reps, n)) < p).astype(np.int32)
    keys = jax.random.split(jax.random.key(2), reps)

    def one(args):
        p_, y_, k = args
        a = stats.skce_test(p_, y_, key=k, n_resamples=50)
        c = stats.skce_test(p_, y_, key=k, n_resamples=50, null="consistency")
        b = stats.skce_test(p_, y_, method="block", key=k, n_resamples=50, null="consistency")
        m = stats.cme_test(
            p_,
            y_,
            test_probs=TEST_PROBS,
            test_labels=TEST_LABELS,
            key=k,
            n_resamples=50,
            null="consistency",
        )
        return a.p_value, a.reliable, c.p_value, b.p_value, m.p_value

    a, ok, c, b, m = jax.jit(lambda *xs: jax.lax.map(one, xs))(p, y, keys)
    assert np.mean(np.asarray(a) <= ALPHA) > 0.5 and not np.any(ok)
    for pv in (c, b, m):
        assert np.mean(np.asarray(pv) <= ALPHA) <= _band(reps)
