"""Consistency test, bootstrap intervals and paired bootstrap (jaxcal._bootstrap).

Oracles: JAX's own Threefry primitive and ``jax.random.bits`` for the random stream,
NumPy for label frequencies and per-bin counts, scipy.stats.bootstrap for BCa, and the
metric itself called on the resampled labels for the fast path.
"""

from __future__ import annotations

import resource
from functools import partial

import jax
import jax.extend.random as jex_random
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from helpers import assert_close, x64

import jaxcal
from jaxcal._binning import bin_edges_and_index
from jaxcal._bootstrap import (
    _bootstrap_kernel,
    _consistency_kernel,
    _hit_counts,
    _hit_plan,
    _indices,
    _label_plan,
    _mulhi,
    _resample_seeds,
    _resampled_labels,
    _seed_words,
    _split_seeds,
    _threefry2x32,
    _threshold,
    _words,
    bootstrap_ci,
    consistency_test,
    paired_bootstrap,
)

N = 501  # odd: exercises the padding position of the last Threefry block
KEY = jax.random.key(20240607)


def _binary_data(n=N, seed=0, power=1.0):
    """Scores p and labels ~ Bernoulli(p ** power) (power 1: calibrated)."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n).astype(np.float32)
    y = (rng.random(n) < p**power).astype(np.int32)
    return jnp.asarray(p), jnp.asarray(y)


def _multiclass_data(n=N, k=4, seed=1):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k), n).astype(np.float32)
    labels = np.array([rng.choice(k, p=row / row.sum()) for row in probs.astype(np.float64)])
    return jnp.asarray(probs), jnp.asarray(labels.astype(np.int32))


P, Y = _binary_data()
PM, YM = _multiclass_data()
R = 64  # resamples of the mechanical tests: one compiled kernel serves several tests


def mean_label(probs, labels, *, weights=None):
    """A metric-like function: the (weighted) mean label."""
    y = labels.astype(jnp.float32)
    if weights is None:
        return jnp.mean(y)
    return jnp.sum(weights * y) / jnp.sum(weights)


def mean_prob(probs, labels, *, weights=None):
    """A metric-like function of the predictions only: the (weighted) mean of probs."""
    del labels
    w = jnp.ones_like(probs) if weights is None else weights.astype(probs.dtype)
    return jnp.sum(w * probs) / jnp.sum(w)


# ---------------------------------------------------------------- the random stream


def test_threefry_matches_jax_primitive():
    rng = np.random.default_rng(0)
    k = rng.integers(0, 2**32, (6, 2), dtype=np.uint32)
    x = rng.integers(0, 2**32, (2, 1000), dtype=np.uint32)
    for k0, k1 in k:
        ours = _threefry2x32(jnp.uint32(k0), jnp.uint32(k1), jnp.asarray(x[0]), jnp.asarray(x[1]))
        ref = jex_random.threefry2x32_p.bind(
            jnp.uint32(k0), jnp.uint32(k1), jnp.asarray(x[0]), jnp.asarray(x[1])
        )
        np.testing.assert_array_equal(np.asarray(ours[0]), np.asarray(ref[0]))
        np.testing.assert_array_equal(np.asarray(ours[1]), np.asarray(ref[1]))


def test_resample_seeds_are_jax_random_split():
    key = jax.random.key(11)
    seeds = _resample_seeds(key, 9)
    np.testing.assert_array_equal(seeds, jax.random.key_data(jax.random.split(key, 9)))
    children = _split_seeds(seeds)
    ref = jax.vmap(jax.random.split)(jax.random.split(key, 9))
    np.testing.assert_array_equal(children, jax.random.key_data(ref))


def test_stream_is_jax_random_bits_uint64():
    """Word 2j + w of a stream is word w (big-endian) of jax.random.bits(k, uint64)[j]."""
    keys = jax.random.split(jax.random.key(3), 3)
    words = np.asarray(_words(_seed_words(keys), 11))
    with x64():
        for r in range(3):
            ref = np.asarray(jax.random.bits(keys[r], (6,), jnp.uint64))
            pairs = np.stack([ref >> np.uint64(32), ref & np.uint64(0xFFFFFFFF)], axis=1)
            np.testing.assert_array_equal(words[r], pairs.reshape(-1)[:11].astype(np.uint32))


@pytest.mark.slow
def test_rbg_keys_are_hashed_to_threefry_keys():
    key = jax.random.key(5, impl="rbg")
    keys = jax.random.split(key, 4)
    seeds = _seed_words(keys)
    assert seeds.shape == (4, 2) and seeds.dtype == jnp.uint32
    data = np.asarray(jax.random.key_data(keys[1]))  # 4 words, folded by Threefry
    ref = jex_random.threefry2x32_p.bind(*(jnp.uint32(v) for v in data))
    np.testing.assert_array_equal(np.asarray(seeds[1]), np.array([ref[0], ref[1]]))
    res = consistency_test(jaxcal.ece, P, Y, key=key, n_resamples=R)
    again = consistency_test(jaxcal.ece, P, Y, key=key, n_resamples=R)
    np.testing.assert_array_equal(res.null, again.null)


def test_threshold_is_exact_for_float32():
    p = np.array([0.0, 2.0**-9, 0.1, 0.5, 0.7, 1 - 2.0**-24, 1.0], np.float32)
    t = np.asarray(_threshold(jnp.asarray(p))).astype(np.float64)
    np.testing.assert_array_equal(t[1:-1] / 2.0**32, p[1:-1].astype(np.float64))
    assert t[0] == 0 and t[-1] == 2**32 - 1
    # Tiny probabilities keep their value to within 2**-32 (jax.random.bernoulli: 2**-23).
    tiny = np.array([1e-9, 3e-7], np.float32)
    t_tiny = np.asarray(_threshold(jnp.asarray(tiny))).astype(np.float64) / 2.0**32
    assert np.all(np.abs(t_tiny - tiny) < 2.0**-32)


def test_mulhi_and_indices():
    rng = np.random.default_rng(1)
    w = rng.integers(0, 2**32, 5000, dtype=np.uint32)
    for n in (1, 2, 7, 1000, 99991, 2**31 - 2):
        ref = (w.astype(np.uint64) * np.uint64(n)) >> np.uint64(32)
        np.testing.assert_array_equal(np.asarray(_mulhi(jnp.asarray(w), n)), ref.astype(np.int64))
    seeds = _seed_words(jax.random.split(jax.random.key(0), 400))
    idx = np.asarray(_indices(seeds, 7)).reshape(-1)
    counts = np.bincount(idx, minlength=7)
    assert counts.sum() == 2800 and idx.min() >= 0 and idx.max() < 7
    assert scipy.stats.chisquare(counts).pvalue > 1e-4


# ---------------------------------------------------------------- resampled labels


def test_bernoulli_labels_have_the_predicted_frequencies():
    p = jnp.asarray(np.array([0.0, 1.0, 0.5, 0.1, 0.9, 0.03, 0.77], np.float32))
    seeds = _seed_words(jax.random.split(KEY, 4000))
    labels = np.asarray(_resampled_labels(seeds, _label_plan(p)))
    freq = labels.mean(axis=0)
    assert freq[0] == 0 and freq[1] == 1  # p = 0 and 1 never flip
    sd = np.sqrt(np.asarray(p) * (1 - np.asarray(p)) / 4000)
    assert np.all(np.abs(freq[2:] - np.asarray(p)[2:]) < 4.5 * sd[2:])
    # Different samples get independent labels.
    corr = np.corrcoef(labels[:, 2:].T)
    assert np.max(np.abs(corr - np.eye(5))) < 0.08


@pytest.mark.parametrize("k", [4, 40])  # compare-all and binary-search draws
def test_categorical_labels_have_the_rows_frequencies(k):
    rng = np.random.default_rng(k)
    rows = rng.dirichlet(np.ones(k) * 0.7, 3)
    rows[0, : k // 2] = 0  # zero-probability classes are never drawn
    rows[0] /= rows[0].sum()
    rows[2] = 0
    rows[2, k - 1] = 1  # a certain last class
    probs = jnp.asarray(rows.astype(np.float32))
    r = 6000
    labels = np.asarray(
        _resampled_labels(_seed_words(jax.random.split(KEY, r)), _label_plan(probs))
    )
    for i in range(3):
        freq = np.bincount(labels[:, i], minlength=k) / r
        expected = np.asarray(probs[i], np.float64)
        assert np.all(freq[expected == 0] == 0)
        sd = np.sqrt(expected * (1 - expected) / r)
        assert np.all(np.abs(freq - expected) <= 4.5 * sd + 1e-12)
    # The draw is categorical, not K independent Bernoullis: exactly one class per row.
    assert labels.min() >= 0 and labels.max() < k


def test_hit_counts_equal_the_binned_labels():
    """The fast path's per-bin counts are the counts of the very labels drawn otherwise
    (binary and multiclass, N odd: the last block's second word is padding)."""
    seeds = _seed_words(jax.random.split(KEY, 37))
    options = [(10, "uniform"), (7, "quantile")]
    scores = {"binary": P, "multiclass": jnp.max(PM, axis=1)}
    bins = {
        kind: [bin_edges_and_index(s, m, b, "right", None)[1] for m, b in options]
        for kind, s in scores.items()
    }

    @jax.jit
    def draw(seeds, p, pm, bins):
        out = {}
        for kind, probs in (("binary", p), ("multiclass", pm)):
            labels = _resampled_labels(seeds, _label_plan(probs))
            counts = [
                _hit_counts(seeds, _hit_plan(probs, b, m))
                for b, (m, _) in zip(bins[kind], options, strict=True)
            ]
            out[kind] = (labels, counts)
        return out

    for kind, (labels, counts) in draw(seeds, P, PM, bins).items():
        labels = np.asarray(labels)
        if kind == "multiclass":
            hits = labels == np.argmax(np.asarray(PM), axis=1)[None]
        else:
            hits = labels == 1
        for (m, _), b, ours in zip(options, bins[kind], counts, strict=True):
            ref = np.stack([np.bincount(np.asarray(b), weights=h, minlength=m) for h in hits])
            np.testing.assert_array_equal(np.asarray(ours), ref.astype(np.int64))


# ---------------------------------------------------------------- consistency test


ECE_VARIANTS = [
    jaxcal.ece,
    partial(jaxcal.ece, n_bins=6, binning="quantile", norm="l2", debias=True),
    partial(jaxcal.mce, n_bins=5, closed="left"),
]


@pytest.mark.parametrize(("variant", "multiclass"), [(0, False), (1, False), (2, True)])
def test_fast_path_equals_calling_the_metric(variant, multiclass):
    metric = ECE_VARIANTS[variant]
    probs, labels = (PM, YM) if multiclass else (P, Y)
    fast = consistency_test(metric, probs, labels, key=KEY, n_resamples=R)

    def generic(p, y):  # the same metric, hidden from the fast-path detection
        return metric(p, y)

    slow = consistency_test(generic, probs, labels, key=KEY, n_resamples=R)
    # Same labels; values may differ in the last bit (fused differently): documented.
    assert_close(fast.null, slow.null, rtol=1e-6, atol=1e-7)  # float32 round-off of gap_norm
    assert_close(fast.statistic, metric(probs, labels))
    assert fast.p_value == slow.p_value
    # And each null value is the metric evaluated on that resample's labels.
    seeds = _seed_words(jax.random.split(KEY, R))
    resampled = _resampled_labels(seeds[:3], _label_plan(probs))
    for r in range(3):
        assert_close(slow.null[r], metric(probs, resampled[r]))


def test_p_value_formula_and_dtype():
    res = consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=R)
    exceed = int(np.sum(np.asarray(res.null) >= float(res.statistic)))
    assert_close(res.p_value, (1 + exceed) / (R + 1))
    assert res.statistic.shape == () and res.p_value.shape == () and res.null.shape == (R,)
    assert res.p_value.dtype == jnp.float32


def test_ties_count_against_the_null():
    """A constant metric ties every resample: p = 1, never a spurious rejection."""
    res = consistency_test(mean_prob, P, Y, key=KEY, n_resamples=R)
    assert float(res.p_value) == 1.0
    np.testing.assert_array_equal(res.null, np.full(R, float(res.statistic), np.float32))
    # Certain predictions: every resample reproduces the data (fast path and generic).
    certain = jnp.asarray(np.tile(np.array([0.0, 1.0], np.float32), 250))
    for metric in (jaxcal.ece, lambda p, yy: jaxcal.ece(p, yy)):
        res = consistency_test(metric, certain, certain.astype(jnp.int32), key=KEY, n_resamples=R)
        assert float(res.p_value) == 1.0
        wrong = consistency_test(
            metric, certain, 1 - certain.astype(jnp.int32), key=KEY, n_resamples=R
        )
        assert float(wrong.p_value) == pytest.approx(1 / (R + 1))


def test_p_values_small_under_clear_miscalibration():
    p, y = _binary_data(seed=4, power=3.0)  # true rate p**3: miscalibrated
    res = consistency_test(jaxcal.ece, p, y, key=KEY, n_resamples=R)
    assert float(res.p_value) == pytest.approx(1 / (R + 1))  # the smallest, never 0
    pm = PM**3 / jnp.sum(PM**3, axis=1, keepdims=True)  # sharpened: overconfident top label
    res = consistency_test(ECE_VARIANTS[2], pm, YM, key=KEY, n_resamples=R)
    assert float(res.p_value) <= 0.05


def test_p_values_roughly_uniform_under_the_null_under_vmap():
    """Size: 300 calibrated data sets (vmapped), their p-values are ~ U(0, 1)."""
    n, sets, r = 300, 300, 99
    rng = np.random.default_rng(11)
    p = jnp.asarray(rng.beta(2, 3, n).astype(np.float32))
    ys = jnp.asarray((rng.random((sets, n)) < np.asarray(p)[None]).astype(np.int32))
    keys = jax.random.split(jax.random.key(1), sets)
    metric = partial(jaxcal.ece, n_bins=10)
    pv = jax.vmap(lambda y, k: consistency_test(metric, p, y, key=k, n_resamples=r).p_value)(
        ys, keys
    )
    pv = np.asarray(pv)
    assert pv.min() >= 1 / (r + 1)
    # Rejection rates within binomial bands (4 sd) at three levels, and a KS check.
    for level in (0.05, 0.2, 0.5):
        rate = np.mean(pv <= level)
        assert abs(rate - level) < 4 * np.sqrt(level * (1 - level) / sets) + 1 / (r + 1)
    assert scipy.stats.kstest(pv, "uniform").statistic < 0.1


def test_batch_size_does_not_change_the_result():
    """The draws are the same for every batch size: ece/mce (integer per-bin counts) and
    metrics of integer sums are bitwise identical; other float metrics may differ in the
    last bit (XLA can vectorise a reduction differently at another vmap width)."""
    ref = consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=R)
    res = consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=R, batch_size=7)
    np.testing.assert_array_equal(res.null, ref.null)
    assert res.p_value == ref.p_value
    generic = [
        consistency_test(mean_label, PM, YM, key=KEY, n_resamples=R, batch_size=b)
        for b in (5, None)
    ]
    np.testing.assert_array_equal(generic[0].null, generic[1].null)
    boot = [
        bootstrap_ci(jaxcal.brier_score, P, Y, key=KEY, n_resamples=R, batch_size=b)
        for b in (3, None)
    ]
    assert_close(boot[0].samples, boot[1].samples, rtol=1e-6)  # last-bit float32 differences
    assert abs(float(boot[0].low - boot[1].low)) < 1e-6


def test_resample_prefix_is_stable():
    """Resample r depends on split(key, R)[r] only: fewer resamples give a prefix."""
    a = consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=R)
    b = consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=R // 2)
    np.testing.assert_array_equal(a.null[: R // 2], b.null)


@pytest.mark.slow
def test_null_of_mean_label_has_binomial_spread():
    res = consistency_test(mean_label, P, Y, key=KEY, n_resamples=2000)
    p = np.asarray(P, np.float64)
    null = np.asarray(res.null, np.float64)
    assert abs(null.mean() - p.mean()) < 4.5 * np.sqrt(np.sum(p * (1 - p))) / N / np.sqrt(2000)
    assert null.std() == pytest.approx(np.sqrt(np.sum(p * (1 - p))) / N, rel=0.08)


def test_resample_predictions_bootstraps_the_predictions():
    fixed = consistency_test(mean_prob, P, Y, key=KEY, n_resamples=R)
    assert np.ptp(np.asarray(fixed.null)) == 0
    moving = consistency_test(mean_prob, P, Y, key=KEY, n_resamples=800, resample_predictions=True)
    sd = np.std(np.asarray(P, np.float64)) / np.sqrt(N)
    assert np.std(np.asarray(moving.null)) == pytest.approx(sd, rel=0.1)


@pytest.mark.slow
def test_resample_predictions_draws_labels_from_the_resampled_predictions():
    res = consistency_test(mean_label, PM, YM, key=KEY, n_resamples=400, resample_predictions=True)
    assert np.all(np.isfinite(np.asarray(res.null)))
    w = jnp.asarray(np.random.default_rng(2).random(N).astype(np.float32))
    res = consistency_test(
        mean_label, P, Y, key=KEY, n_resamples=400, weights=w, resample_predictions=True
    )
    expected = float(jnp.sum(w * P) / jnp.sum(w))  # E[weighted mean label] = weighted mean p
    assert abs(float(jnp.mean(res.null)) - expected) < 0.01


def test_float64_under_x64():
    with x64():
        p, y = jnp.asarray(P, jnp.float64), Y
        res = consistency_test(jaxcal.ece, p, y, key=KEY, n_resamples=R)
        assert res.null.dtype == jnp.float64 and res.p_value.dtype == jnp.float64
        assert_close(res.statistic, jaxcal.ece(p, y))


def test_jit_and_no_recompilation():
    metric_a = partial(jaxcal.ece, n_bins=9)
    consistency_test(metric_a, P, Y, key=KEY, n_resamples=R)
    before = _consistency_kernel._cache_size()
    # An equal partial (a new object) and new data reuse the compiled kernel.
    consistency_test(partial(jaxcal.ece, n_bins=9), P + 0, Y, key=jax.random.key(9), n_resamples=R)
    assert _consistency_kernel._cache_size() == before
    jitted = jax.jit(lambda p, y, k: consistency_test(metric_a, p, y, key=k, n_resamples=R))
    res = jitted(P, Y, KEY)
    np.testing.assert_array_equal(
        res.null, consistency_test(metric_a, P, Y, key=KEY, n_resamples=R).null
    )


def test_bad_inputs():
    with pytest.raises(ValueError, match="`metric` must be a callable"):
        consistency_test("ece", P, Y, key=KEY)
    with pytest.raises(ValueError, match="`n_resamples` must be an integer >= 1"):
        consistency_test(jaxcal.ece, P, Y, key=KEY, n_resamples=0)
    with pytest.raises(ValueError, match="`batch_size`"):
        consistency_test(jaxcal.ece, P, Y, key=KEY, batch_size=0)
    with pytest.raises(ValueError, match="`resample_predictions`"):
        consistency_test(jaxcal.ece, P, Y, key=KEY, resample_predictions="yes")
    with pytest.raises(ValueError, match="`key`"):
        consistency_test(jaxcal.ece, P, Y, key=0)
    with pytest.raises(ValueError, match="`key`"):
        consistency_test(jaxcal.ece, P, Y, key=jax.random.split(KEY, 2))
    with pytest.raises(ValueError, match="`probs`"):
        consistency_test(jaxcal.ece, P + 1, Y, key=KEY)
    with pytest.raises(ValueError, match="`labels`"):
        consistency_test(jaxcal.ece, P, Y[:-1], key=KEY)
    with pytest.raises(ValueError, match="`n_bins`"):
        consistency_test(partial(jaxcal.ece, n_bins=0), P, Y, key=KEY)
    with pytest.raises(ValueError, match="0-d float"):
        consistency_test(lambda p, y: p, P, Y, key=KEY)
    with pytest.raises(ValueError, match="`confidence`"):
        bootstrap_ci(jaxcal.ece, P, Y, key=KEY, confidence=1.0)
    with pytest.raises(ValueError, match="`confidence`"):
        bootstrap_ci(jaxcal.ece, P, Y, key=KEY, confidence=True)
    with pytest.raises(ValueError, match="`method`"):
        bootstrap_ci(jaxcal.ece, P, Y, key=KEY, method="studentized")
    with pytest.raises(ValueError, match="weights="):
        bootstrap_ci(lambda p, y: jnp.mean(p), P, Y, key=KEY, method="bca")
    with pytest.raises(ValueError, match="`metric` must accept a `weights=`"):
        consistency_test(lambda p, y: jnp.mean(p), P, Y, key=KEY, weights=jnp.ones(N))
    with pytest.raises(ValueError, match="`probs_b`"):
        paired_bootstrap(jaxcal.ece, P, P[:-1], Y, key=KEY)
    with pytest.raises(ValueError, match="`probs_b`"):
        paired_bootstrap(jaxcal.ece, P, PM, Y, key=KEY)


# ---------------------------------------------------------------- bootstrap intervals


def test_bootstrap_resamples_pairs_with_replacement():
    res = bootstrap_ci(mean_prob, P, Y, key=KEY, n_resamples=800)
    sd = np.std(np.asarray(P, np.float64)) / np.sqrt(N)
    assert np.std(np.asarray(res.samples)) == pytest.approx(sd, rel=0.1)
    assert abs(np.mean(np.asarray(res.samples)) - float(res.estimate)) < 4.5 * sd / np.sqrt(800)
    # Pairs stay together: resampling (p, y) with y == (p > 0.5) keeps that relation.
    y = (P > 0.5).astype(jnp.int32)
    agree = bootstrap_ci(
        lambda p, yy: jnp.mean((yy == (p > 0.5).astype(jnp.int32)).astype(jnp.float32)),
        P,
        y,
        key=KEY,
        n_resamples=50,
    )
    np.testing.assert_array_equal(agree.samples, np.ones(50, np.float32))


def test_interval_methods_from_the_same_samples():
    pct = bootstrap_ci(jaxcal.brier_score, P, Y, key=KEY, n_resamples=R)
    basic = bootstrap_ci(jaxcal.brier_score, P, Y, key=KEY, n_resamples=R, method="basic")
    np.testing.assert_array_equal(pct.samples, basic.samples)
    q = np.quantile(np.asarray(pct.samples, np.float64), [0.025, 0.975])
    assert_close([pct.low, pct.high], q, rtol=1e-6)  # float32 quantile interpolation
    est = float(pct.estimate)
    assert_close([basic.low, basic.high], [2 * est - q[1], 2 * est - q[0]], rtol=1e-6)
    for res in (pct, basic):
        assert float(res.low) < est < float(res.high)


@pytest.mark.slow
def test_intervals_shrink_like_one_over_sqrt_n():
    widths = []
    for n in (400, 1600, 6400):
        p, y = _binary_data(n=n, seed=n)
        res = bootstrap_ci(jaxcal.brier_score, p, y, key=KEY, n_resamples=400)
        assert float(res.low) <= float(res.estimate) <= float(res.high)
        widths.append(float(res.high - res.low))
    ratios = np.array(widths[:-1]) / np.array(widths[1:])
    assert np.all((ratios > 1.6) & (ratios < 2.5)), ratios


def _scipy_bca(data, statistic, samples, confidence=0.95):
    fake = scipy.stats._resampling.BootstrapResult(
        confidence_interval=None, bootstrap_distribution=np.asarray(samples), standard_error=None
    )
    return scipy.stats.bootstrap(
        (data,),
        statistic,
        n_resamples=0,
        bootstrap_result=fake,
        method="BCa",
        confidence_level=confidence,
    ).confidence_interval


def test_bca_matches_scipy_on_the_mean():
    """Same bootstrap distribution given to scipy: same interval (the mean's influence
    values are its jackknife values up to scale, so the accelerations agree exactly)."""
    with x64():
        rng = np.random.default_rng(5)
        x = rng.gamma(1.5, 0.2, 300).clip(0, 1)  # skewed: a != 0, z0 != 0
        p, y = jnp.asarray(x), jnp.zeros(300, jnp.int32)
        for conf in (0.9,):
            ours = bootstrap_ci(
                mean_prob, p, y, key=KEY, n_resamples=1000, method="bca", confidence=conf
            )
            ref = _scipy_bca(x, np.mean, ours.samples, conf)
            assert_close([ours.low, ours.high], [ref.low, ref.high], rtol=1e-9)


def test_bca_close_to_scipy_on_a_nonlinear_statistic():
    """For a ratio the infinitesimal jackknife differs from scipy's delete-one jackknife
    by O(1/N) in the acceleration: intervals agree to a small fraction of their width."""
    with x64():
        rng = np.random.default_rng(6)
        x = rng.beta(0.7, 3, 400)
        p, y = jnp.asarray(x), jnp.asarray((rng.random(400) < x).astype(np.int32))

        def ratio(probs, labels, *, weights=None):
            w = jnp.ones_like(probs) if weights is None else weights
            return jnp.sum(w * labels.astype(w.dtype)) / jnp.sum(w * probs)

        ours = bootstrap_ci(ratio, p, y, key=KEY, n_resamples=2000, method="bca")
        data = np.stack([np.asarray(y, np.float64), x])
        ref = scipy.stats.bootstrap(
            (data[0], data[1]),
            lambda a, b, axis=-1: np.sum(a, axis=axis) / np.sum(b, axis=axis),
            paired=True,
            n_resamples=0,
            bootstrap_result=scipy.stats._resampling.BootstrapResult(
                confidence_interval=None,
                bootstrap_distribution=np.asarray(ours.samples),
                standard_error=None,
            ),
            method="BCa",
        ).confidence_interval
        width = ref.high - ref.low
        ours_bounds = np.array([float(ours.low), float(ours.high)])
        ref_bounds = np.array([ref.low, ref.high])
        assert np.all(np.abs(ours_bounds - ref_bounds) < 1e-3 * width)
        # BCa moved the bounds from the percentile ones far more than it differs from scipy.
        shift = np.abs(np.quantile(np.asarray(ours.samples), [0.025, 0.975]) - ref_bounds)
        assert np.max(np.abs(ours_bounds - ref_bounds)) < 0.1 * np.max(shift)


def test_degenerate_bootstrap_is_finite():
    y = jnp.ones(N, jnp.int32)
    for method in ("basic", "bca"):  # percentile: the plain quantiles, as basic's
        res = bootstrap_ci(mean_label, P, y, key=KEY, n_resamples=R, method=method)
        assert float(res.low) == float(res.high) == float(res.estimate) == 1.0


def test_bootstrap_with_weights_and_multiclass():
    w = jnp.asarray(np.random.default_rng(3).random(N).astype(np.float32))
    res = bootstrap_ci(jaxcal.ece, PM, YM, key=KEY, n_resamples=R, weights=w, method="bca")
    assert_close(res.estimate, jaxcal.ece(PM, YM, weights=w))
    assert float(res.low) <= float(res.high)
    assert np.all(np.isfinite(np.asarray(res.samples)))


# ---------------------------------------------------------------- paired bootstrap


def test_paired_bootstrap_uses_the_same_indices_for_both_models():
    other = jnp.clip(P * 1.2, 0, 1)
    paired = paired_bootstrap(jaxcal.brier_score, P, other, Y, key=KEY, n_resamples=R)
    a = bootstrap_ci(jaxcal.brier_score, P, Y, key=KEY, n_resamples=R)
    b = bootstrap_ci(jaxcal.brier_score, other, Y, key=KEY, n_resamples=R)
    assert_close(paired.samples, a.samples - b.samples, atol=1e-6)  # float32 differences
    assert_close(paired.difference, a.estimate - b.estimate)
    exceed = np.sum(
        np.abs(np.asarray(paired.samples - paired.difference)) >= abs(float(paired.difference))
    )
    assert_close(paired.p_value, (1 + exceed) / (R + 1))


def test_paired_bootstrap_detects_a_clear_difference_and_not_a_null_one():
    worse = jnp.clip(P + 0.25, 0, 1)
    res = paired_bootstrap(jaxcal.ece, P, worse, Y, key=KEY, n_resamples=R, method="bca")
    assert float(res.high) < 0 and float(res.p_value) == pytest.approx(1 / (R + 1))
    same = paired_bootstrap(jaxcal.ece, P, P, Y, key=KEY, n_resamples=R, method="bca")
    assert float(same.p_value) == 1.0 and float(same.low) == float(same.high) == 0.0


# ---------------------------------------------------------------- memory bound (slow)


@pytest.mark.slow
def test_5000_resamples_at_n_1e5_with_bounded_memory():
    n = 100_000
    p, y = _binary_data(n=n, seed=12)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    metric = partial(jaxcal.ece, n_bins=15)
    res = consistency_test(
        lambda a, b: metric(a, b), p, y, key=KEY, n_resamples=5000, batch_size=100
    )
    fast = consistency_test(metric, p, y, key=KEY, n_resamples=5000)
    grown_gib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 2**20
    assert res.null.shape == (5000,) and grown_gib < 4, grown_gib
    assert_close(fast.null, res.null, rtol=1e-6, atol=1e-7)  # float32 round-off, as above
    assert fast.p_value == res.p_value
    boot = bootstrap_ci(jaxcal.ece, p, y, key=KEY, n_resamples=5000, batch_size=100)
    assert float(boot.low) < float(boot.estimate) < float(boot.high)
    # Checks that the kernel was compiled once per configuration, not per batch.
    assert _bootstrap_kernel._cache_size() >= 1
