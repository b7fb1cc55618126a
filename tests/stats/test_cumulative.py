"""Cumulative differences, KS, Kuiper and Spiegelhalter tests against MAPIE and NumPy.

The NumPy oracle below is written from the definitions (Arrieta-Ibarra et al. 2022; Tygert's
weighted variant): ties are aggregated with ``np.unique``, the path includes its origin.
MAPIE agrees where its definitions do (distinct scores; Kuiper when the path changes sign;
Spiegelhalter always); elsewhere the oracle is the reference.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.test_util import check_grads
from mapie.metrics import calibration as mapie
from scipy import stats as sps

import jaxcal
from jaxcal import stats
from jaxcal.stats._paths.sorted_path import sorted_path as _sorted_path
from tests.helpers import assert_close, count_compiles, x64

# ----------------------------------------------------------------------------- oracle


def oracle(scores, labels, weights=None):
    """Float64 (KS, Kuiper, Spiegelhalter Z, path at group ends incl. origin, sigma)."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(labels, np.float64)
    w = np.ones_like(s) if weights is None else np.asarray(weights, np.float64)
    distinct, group = np.unique(s, return_inverse=True)
    steps = np.bincount(group, weights=w * (y - s), minlength=len(distinct))
    path = np.concatenate([[0.0], np.cumsum(steps)]) / w.sum()
    sigma = np.sqrt(np.sum(w * w * s * (1 - s))) / w.sum()
    ks = np.max(np.abs(path)) / sigma
    kuiper = (path.max() - path.min()) / sigma
    a = 1 - 2 * s
    z = np.sum(w * (y - s) * a) / np.sqrt(np.sum(w * w * a * a * s * (1 - s)))
    return ks, kuiper, z, path, sigma


def _data(seed, n, *, grid=None, bias=0.0):
    """Scores in (0.02, 0.98) (on ``grid`` equispaced values if given), labels ~ B(s + bias)."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.02, 0.98, n)
    if grid is not None:
        s = np.round(s * (grid - 1)) / (grid - 1) * 0.96 + 0.02
    y = (rng.uniform(size=n) < np.clip(s + bias, 0, 1)).astype(np.int32)
    return s, y


def _values(result):
    return np.array([float(result.statistic), float(result.p_value)])


# ------------------------------------------------------------------ against MAPIE


def test_statistics_and_p_values_match_mapie_on_distinct_scores():
    kuiper_sign_change = kuiper_one_sign = 0
    with x64():
        for seed in range(6):
            s, y = _data(seed, 200, bias=0.04 * (seed % 3))
            if seed == 5:
                y = np.ones_like(y)  # a path that never goes below 0
            r = jaxcal.calibration_tests(s, y, alternative="greater")
            # MAPIE jitters the scores by 1e-8 relative: 1e-6 relative on the statistics.
            assert_close(r.ks.statistic, mapie.kolmogorov_smirnov_statistic(y, s), rtol=1e-6)
            mapie_ks_p = mapie.kolmogorov_smirnov_p_value(y, s)
            if mapie_ks_p > 1e-6:  # MAPIE's 1 - CDF has ~1e-16 / p relative accuracy
                assert_close(r.ks.p_value, mapie_ks_p, rtol=1e-6)
            else:
                assert 0 < float(r.ks.p_value) < 1e-6
            # Spiegelhalter: no jitter; MAPIE's p-value is the "greater" one.
            assert_close(r.spiegelhalter.statistic, mapie.spiegelhalter_statistic(y, s))
            assert_close(r.spiegelhalter.p_value, mapie.spiegelhalter_p_value(y, s), atol=1e-15)
            # Kuiper: MAPIE leaves out the origin C_0 = 0, which matters when the path
            # keeps one sign; there the NumPy oracle is the reference.
            cum = mapie.cumulative_differences(y, s)
            _, kuiper_o, *_ = oracle(s, y)
            assert_close(r.kuiper.statistic, kuiper_o)
            assert float(r.kuiper.statistic) >= float(r.ks.statistic)
            if cum.min() < 0 < cum.max():
                kuiper_sign_change += 1
                # MAPIE computes in float32 from unsorted cumulative sums
                assert_close(r.kuiper.statistic, mapie.kuiper_statistic(y, s), rtol=1e-6)
                assert_close(r.kuiper.p_value, mapie.kuiper_p_value(y, s), rtol=1e-6)
            else:
                kuiper_one_sign += 1
                assert mapie.kuiper_statistic(y, s) < mapie.kolmogorov_smirnov_statistic(y, s)
    assert kuiper_sign_change >= 3 and kuiper_one_sign >= 1  # both cases were exercised


def test_cumulative_differences_match_mapie_and_the_oracle():
    with x64():
        s, y = _data(1, 200)
        c = jaxcal.cumulative_differences(s, y)
        _, _, _, path, sigma = oracle(s, y)
        # Distinct scores: one step per sample; MAPIE has no origin and jitters (1e-8).
        assert_close(c.differences, path)
        assert_close(c.differences[1:], mapie.cumulative_differences(y, s), rtol=0, atol=1e-8)
        assert_close(c.sigma, sigma)
        assert_close(c.sigma, mapie.length_scale(s))
        np.testing.assert_array_equal(c.scores, np.sort(s))
        assert_close(c.abscissa, np.arange(201) / 200)


# ------------------------------------------------------------------ ties, weights


@pytest.mark.parametrize("weighted", [False, True])
def test_heavy_ties_and_weights_match_the_oracle(weighted):
    with x64():
        s, y = _data(2, 200, grid=7, bias=0.03)
        w = np.random.default_rng(3).uniform(0.2, 3.0, 200) if weighted else None
        r = jaxcal.calibration_tests(s, y, weights=w)
        ks, kuiper, z, path, sigma = oracle(s, y, w)
        assert_close(r.ks.statistic, ks)
        assert_close(r.kuiper.statistic, kuiper)
        assert_close(r.spiegelhalter.statistic, z)
        assert_close(r.ks.p_value, stats.brownian_max_sf(r.ks.statistic))
        assert_close(r.kuiper.p_value, stats.brownian_range_sf(r.kuiper.statistic))
        assert_close(r.spiegelhalter.p_value, 2 * sps.norm.sf(abs(z)))
        c = jaxcal.cumulative_differences(s, y, weights=w)
        # Position k of the path ends a group when the k-th sorted score differs from the
        # next; position 0 is the origin.
        ends = np.concatenate([[True], np.diff(np.asarray(c.scores)) != 0, [True]])
        assert_close(c.differences[ends], path)
        assert_close(c.sigma, sigma)
        assert_close(np.max(np.abs(c.differences)) / c.sigma, ks)
        # Inside a group the path is the straight line between its ends, in sample count.
        idx = np.flatnonzero(ends)
        for a, b in itertools.pairwise(idx):
            line = np.linspace(c.differences[a], c.differences[b], b - a + 1)
            # float64 linear interpolation of O(1) values: a few ulps absolute
            assert_close(c.differences[a : b + 1], line, rtol=0, atol=1e-15)
        assert c.abscissa[0] == 0 and c.abscissa[-1] == pytest.approx(1, abs=1e-15)
        assert np.all(np.diff(c.abscissa) >= 0)


def test_same_multiset_same_answer_whatever_the_order():
    s, y = _data(4, 300, grid=5, bias=-0.05)
    # Integer weights (masks, counts): the group sums are exact, so bit for bit too.
    w = np.random.default_rng(5).integers(0, 4, 300).astype(np.float32)
    w_real = np.random.default_rng(5).uniform(0.5, 2.0, 300).astype(np.float32)
    s = s.astype(np.float32)
    base = jaxcal.calibration_tests(s, y)
    base_w = jaxcal.calibration_tests(s, y, weights=w)
    base_real = jaxcal.calibration_tests(s, y, weights=w_real)
    base_path = jaxcal.cumulative_differences(s, y)
    mapie_ks = set()
    rng = np.random.default_rng(6)
    for _ in range(5):
        p = rng.permutation(300)
        r = jaxcal.calibration_tests(s[p], y[p])
        r_w = jaxcal.calibration_tests(s[p], y[p], weights=w[p])
        for got, want in [(r, base), (r_w, base_w)]:
            # Bit for bit: the sorted arrays are the same whatever the input order.
            for name in ("ks", "kuiper"):
                np.testing.assert_array_equal(
                    _values(getattr(got, name)), _values(getattr(want, name))
                )
            # Spiegelhalter is a plain sum in input order: equal up to float32 rounding of
            # 300 cancelling terms (Z is ~0.01 here, so 1e-5 absolute).
            sp_got, sp_want = _values(got.spiegelhalter), _values(want.spiegelhalter)
            assert_close(sp_got, sp_want, rtol=1e-5, atol=1e-5)
        for got, want in zip(jaxcal.cumulative_differences(s[p], y[p]), base_path, strict=True):
            np.testing.assert_array_equal(got, want)
        # Other weights: group sums in input order, equal to float32 round-off.
        r_real = jaxcal.calibration_tests(s[p], y[p], weights=w_real[p])
        for a, b in zip(jax.tree.leaves(r_real), jax.tree.leaves(base_real), strict=True):
            assert_close(a, b, rtol=1e-5, atol=1e-6)  # 300 float32 terms, Z near 0
        mapie_ks.add(mapie.kolmogorov_smirnov_statistic(y[p], s[p].astype(np.float64)))
    # The ties matter: MAPIE's jitter makes its statistic depend on the input order.
    assert len(mapie_ks) > 1


def test_weights_ones_scale_and_padding():
    with x64():
        s, y = _data(7, 200, grid=9, bias=0.02)
        w = np.random.default_rng(8).uniform(0.1, 2.0, 200)
        plain = jaxcal.calibration_tests(s, y)
        ones = jaxcal.calibration_tests(s, y, weights=np.ones(200))
        for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(ones), strict=True):
            assert_close(a, b, rtol=1e-14, atol=0)  # ones are not special-cased: round-off
        weighted = jaxcal.calibration_tests(s, y, weights=w)
        scaled = jaxcal.calibration_tests(s, y, weights=3.7 * w)
        for a, b in zip(jax.tree.leaves(weighted), jax.tree.leaves(scaled), strict=True):
            assert_close(a, b)
        # Zero weights mask padding: same as dropping those samples (same shape, so the
        # padded batch compiles once).
        keep = np.arange(200) < 150
        padded = jaxcal.calibration_tests(s, y, weights=np.where(keep, w, 0.0))
        ks, kuiper, z, *_ = oracle(s[keep], y[keep], w[keep])
        assert_close(padded.ks.statistic, ks)
        assert_close(padded.kuiper.statistic, kuiper)
        assert_close(padded.spiegelhalter.statistic, z)
        empty = jaxcal.calibration_tests(s, y, weights=np.zeros(200))
        for t in empty:
            assert float(t.statistic) == 0 and float(t.p_value) == 1


def test_degenerate_sigma_zero_is_documented_and_finite():
    s = np.array([0.0, 1.0, 1.0, 0.0, 0.0])
    agree = jaxcal.calibration_tests(s, np.array([0, 1, 1, 0, 0]))
    for t in agree:
        assert float(t.statistic) == 0 and float(t.p_value) == 1
    clash = jaxcal.calibration_tests(s, np.array([0, 1, 1, 1, 0]))  # y = 1 at s = 0
    for t in (clash.ks, clash.kuiper):
        assert float(t.statistic) == np.inf and float(t.p_value) == 0
    # Spiegelhalter: s = 1/2 adds nothing to either sum; y = 1 at s = 0 gives Z = +inf.
    z = jaxcal.spiegelhalter_test(np.array([0.0, 0.5, 1.0]), np.array([1, 1, 1]))
    assert float(z.statistic) == np.inf and float(z.p_value) == 0
    c = jaxcal.cumulative_differences(s, np.array([0, 1, 1, 1, 0]))
    assert float(c.sigma) == 0 and np.all(np.isfinite(np.asarray(c.differences)))


def test_p_values_stay_positive_where_mapie_goes_negative():
    with x64():
        s, y = _data(9, 100_000, bias=0.028)
        r = jaxcal.calibration_tests(s, y)
        g = float(r.ks.statistic)
        assert 15 < g < 30  # far in the tail (~21)
        assert_close(g, mapie.kolmogorov_smirnov_statistic(y, s), rtol=1e-6)
        p = float(r.ks.p_value)
        assert 0 < p < 1e-50
        assert p == pytest.approx(float(stats.brownian_max_sf(g)), rel=1e-12)
        # MAPIE's 1 - CDF is round-off here (on this machine -1.6e-11); ours is the tail.
        assert abs(mapie.kolmogorov_smirnov_p_value(y, s) - p) > 1e30 * p
        assert float(r.kuiper.p_value) > 0


# ------------------------------------------------------------------ multiclass, API


def test_two_dimensional_probs_test_the_top_label():
    rng = np.random.default_rng(10)
    probs = rng.dirichlet(np.ones(4) * 0.7, 200).astype(np.float32)
    labels = rng.integers(0, 4, 200)
    conf, correct = jaxcal.confidence_and_correctness(probs, labels)
    two_d = jaxcal.calibration_tests(probs, labels)
    one_d = jaxcal.calibration_tests(conf, correct)
    for a, b in zip(jax.tree.leaves(two_d), jax.tree.leaves(one_d), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        jaxcal.cumulative_differences(probs, labels).differences,
        jaxcal.cumulative_differences(conf, correct).differences,
    )


def test_single_tests_equal_the_combined_one_and_do_not_recompile():
    s, y = _data(11, 200, grid=20)
    s = s.astype(np.float32)
    both = jaxcal.calibration_tests(s, y, alternative="less")
    np.testing.assert_array_equal(_values(jaxcal.ks_test(s, y)), _values(both.ks))
    np.testing.assert_array_equal(_values(jaxcal.kuiper_test(s, y)), _values(both.kuiper))
    sp = jaxcal.spiegelhalter_test(s, y, alternative="less")
    np.testing.assert_array_equal(_values(sp), _values(both.spiegelhalter))
    z = float(sp.statistic)
    for alternative, p in [("greater", sps.norm.sf(z)), ("two-sided", 2 * sps.norm.sf(abs(z)))]:
        got = jaxcal.spiegelhalter_test(s, y, alternative=alternative).p_value
        assert_close(got, np.float32(p))
    assert both.ks.statistic.shape == () and both.ks.statistic.dtype == jnp.float32
    jitted = count_compiles(lambda a, b: jaxcal.calibration_tests(a, b, alternative="less"))
    first = jitted(s, y)
    second = jitted(s[::-1].copy(), 1 - y)
    assert jitted.compiles() == 1
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(both), strict=True):
        assert_close(a, b)
    assert float(second.ks.statistic) != float(first.ks.statistic)


def test_vmap_over_a_batch_of_300_datasets():
    keys = jax.random.split(jax.random.key(12), 300)
    s = jax.vmap(lambda k: jax.random.uniform(k, (200,), minval=0.02, maxval=0.98))(keys)
    y = jax.vmap(lambda k, p: jax.random.bernoulli(jax.random.fold_in(k, 1), p))(keys, s)
    batch = jax.jit(jax.vmap(jaxcal.calibration_tests))(s, y.astype(jnp.int32))
    assert batch.ks.p_value.shape == (300,)
    for i in (0, 137, 299):
        single = jaxcal.calibration_tests(s[i], y[i].astype(jnp.int32))
        for a, b in zip(jax.tree.leaves(batch), jax.tree.leaves(single), strict=True):
            assert_close(a[i], b)
    paths = jax.vmap(jaxcal.cumulative_differences)(s, y.astype(jnp.int32))
    assert paths.differences.shape == (300, 201)
    # Fixed-shape batches of datasets of different sizes: 0/1 weights mask the padding.
    lengths = jnp.arange(300) % 150 + 50
    mask = (jnp.arange(200)[None, :] < lengths[:, None]).astype(jnp.float32)
    masked = jax.jit(jax.vmap(lambda a, b, m: jaxcal.calibration_tests(a, b, weights=m)))(
        s, y.astype(jnp.int32), mask
    )
    for i in (0, 151, 299):
        n = int(lengths[i])
        ks, kuiper, z, *_ = oracle(np.asarray(s[i, :n]), np.asarray(y[i, :n]))
        stats_i = [masked.ks.statistic[i], masked.kuiper.statistic[i]]
        # float32 statistics against the float64 oracle; Z divides by a float32 variance
        assert_close(np.array(stats_i), np.array([ks, kuiper]), rtol=2e-5, atol=0)
        assert_close(masked.spiegelhalter.statistic[i], z, rtol=1e-4, atol=1e-5)


def test_gradients_with_respect_to_scores_and_weights():
    with x64():
        rng = np.random.default_rng(13)
        s = jnp.asarray(np.sort(rng.uniform(0.05, 0.95, 30)))
        y = jnp.asarray((rng.uniform(size=30) < np.asarray(s) + 0.1).astype(np.int32))
        w = jnp.asarray(rng.uniform(0.5, 2.0, 30))

        def all_outputs(s, w):
            return jax.tree.leaves(jaxcal.calibration_tests(s, y, weights=w))

        # Finite differences of 1e-7 keep the order of the scores (gaps > 1e-4). Reverse
        # mode is what jax.grad uses; it transposes the custom JVP, so both are checked.
        check_grads(all_outputs, (s, w), order=1, modes=["rev"], eps=1e-7)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scores": [0.2, 1.5], "labels": [0, 1]}, "`scores` must lie in"),
        ({"scores": [0.2, np.nan], "labels": [0, 1]}, "`scores` must be finite"),
        ({"scores": [0.2, 0.3], "labels": [0, 2]}, "`labels` must lie in"),
        ({"scores": [0.2, 0.3], "labels": [0, 1, 1]}, "`labels` must have shape"),
        ({"scores": [0.2, 0.3], "labels": [0.5, 1]}, "`labels` must hold integers"),
        ({"scores": [], "labels": []}, "`scores` must not be empty"),
        ({"scores": [[[0.2]]], "labels": [0]}, "`scores` must be 1-D"),
        ({"scores": [[0.2, 0.3]], "labels": [0]}, "`scores` rows must sum to 1"),
        ({"scores": [0.2, 0.3], "labels": [0, 1], "weights": [1, -1]}, "`weights` must be"),
        ({"scores": [0.2, 0.3], "labels": [0, 1], "weights": [1]}, "`weights` must have"),
        ({"scores": [0.2, 0.3], "labels": [0, 1], "alternative": "both"}, "`alternative`"),
    ],
)
def test_bad_inputs_raise(kwargs, match):
    kwargs = dict(kwargs)
    scores, labels = np.asarray(kwargs.pop("scores")), np.asarray(kwargs.pop("labels"))
    fns = [jaxcal.calibration_tests, jaxcal.spiegelhalter_test]
    if "alternative" not in kwargs:
        fns += [jaxcal.ks_test, jaxcal.kuiper_test, jaxcal.cumulative_differences]
    for fn in fns:
        with pytest.raises(ValueError, match=match):
            fn(scores, labels, **kwargs)


# ------------------------------------------------------------------ size and power


def _null_batch(key, n_sets, n, grid=None, truth=None):
    """Scores ~ U(0.02, 0.98) (rounded to ``grid`` values), labels ~ B(truth(s))."""
    k1, k2 = jax.random.split(key)
    s = jax.random.uniform(k1, (n_sets, n), minval=0.02, maxval=0.98)
    if grid is not None:
        s = jnp.round((s - 0.02) / 0.96 * (grid - 1)) / (grid - 1) * 0.96 + 0.02
    p = s if truth is None else truth(s)
    return s, jax.random.bernoulli(k2, p).astype(jnp.int32)


_batch_tests = jax.jit(jax.vmap(jaxcal.calibration_tests))


def _binomial_band(n_sets, alpha):
    return sps.binom.ppf(0.0005, n_sets, alpha), sps.binom.ppf(0.9995, n_sets, alpha)


def test_size_under_the_null():
    # H0: y ~ Bernoulli(s). 1000 datasets of N = 500; the rejection counts at alpha = 0.05
    # and 0.2 must fall in the central 99.9% of Binomial(1000, alpha). The KS and Kuiper
    # laws are asymptotic (a walk of 500 steps peaks a little below a Brownian motion),
    # which the band absorbs at this N.
    s, y = _null_batch(jax.random.key(14), 1000, 500)
    r = _batch_tests(s, y)
    for name in ("ks", "kuiper", "spiegelhalter"):
        p = np.asarray(getattr(r, name).p_value)
        for alpha in (0.05, 0.2):
            lo, hi = _binomial_band(1000, alpha)
            assert lo <= np.sum(p <= alpha) <= hi, (name, alpha, np.sum(p <= alpha))


def test_size_with_heavy_ties_is_at_most_nominal():
    # Seven distinct scores: the aggregated path is seen at 8 points only, so the tests
    # are conservative; they must never reject more than the band allows.
    s, y = _null_batch(jax.random.key(15), 1000, 500, grid=7)
    r = _batch_tests(s, y)
    for name in ("ks", "kuiper", "spiegelhalter"):
        p = np.asarray(getattr(r, name).p_value)
        for alpha in (0.05, 0.2):
            assert np.sum(p <= alpha) <= _binomial_band(1000, alpha)[1], (name, alpha)


def test_power_against_overconfidence():
    # Stated miscalibration: scores s ~ U(0.02, 0.98) but P(y = 1 | s) = 0.5 + 0.8 (s - 0.5)
    # (the model is overconfident by a factor 1.25 about 1/2). N = 5000, 300 datasets:
    # each test rejects at alpha = 0.05 in more than 90% of them.
    s, y = _null_batch(jax.random.key(16), 300, 5000, truth=lambda s: 0.5 + 0.8 * (s - 0.5))
    r = _batch_tests(s, y)
    for name in ("ks", "kuiper", "spiegelhalter"):
        power = np.mean(np.asarray(getattr(r, name).p_value) <= 0.05)
        assert power > 0.9, (name, power)


@pytest.mark.slow
def test_float32_at_a_million_samples_matches_float64():
    s, y = _data(17, 1_000_000, bias=0.002)
    r = jaxcal.calibration_tests(s.astype(np.float32), y)
    ks, kuiper, z, *_ = oracle(s.astype(np.float32), y)
    # float32 scan and sums over 1e6 terms: relative 1e-5 on the statistics.
    assert_close(r.ks.statistic, ks, rtol=1e-5, atol=0)
    assert_close(r.kuiper.statistic, kuiper, rtol=1e-5, atol=0)
    assert_close(r.spiegelhalter.statistic, z, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [300, 40_000])  # XLA's argsort / the host's bucketed one
def test_weighted_path_is_the_former_search_and_scatter_float_for_float(n):
    # The weighted path orders by a stable argsort and scatter-adds in that order; the
    # former program found each sample's group by binary search and scatter-added in
    # input order. Ties keep the input order in a stable sort, so the group sums add the
    # same floats in the same order: the path is bit for bit the former one.
    rng = np.random.default_rng(11)
    s = jnp.asarray(np.round(rng.random(n), 3), jnp.float32)  # heavy ties
    y = jnp.asarray(rng.random(n) < 0.5, jnp.float32)
    w = jnp.asarray(rng.uniform(0.1, 3.0, n), jnp.float32)

    def former(s, y, w):
        bits = lax.bitcast_convert_type(s, jnp.int32)
        score_bits = jnp.sort(bits)
        ss = lax.bitcast_convert_type(score_bits, jnp.float32)
        end = jnp.searchsorted(score_bits, bits, side="right").astype(jnp.int32) - 1
        parts = jnp.stack([w * (1 - y), w * y, w * w], axis=1)
        sums = jnp.zeros((n, 3), jnp.float32).at[end].add(parts)
        total = jnp.cumsum((1 - ss) * sums[:, 1] - ss * sums[:, 0])
        return total, jnp.sum(sums[:, 2] * ss * (1 - ss))

    path = jax.jit(_sorted_path)(s, y, w)
    total, variance = jax.jit(former)(s, y, w)
    ends = np.asarray(path.is_end)
    np.testing.assert_array_equal(np.asarray(path.total)[ends], np.asarray(total)[ends])
    np.testing.assert_array_equal(path.variance, variance)


def test_log_p_value_where_the_p_value_underflows():
    """N3: a p-value below the smallest float is never 0: ``p_value`` holds the smallest
    normal float, ``log_p_value`` the exact value, and the repr prints it."""
    rng = np.random.default_rng(0)
    s = rng.random(5000).astype(np.float32)
    y = (rng.random(5000) < s**4).astype(np.int32)
    tests = jaxcal.calibration_tests(s, y)
    tiny = np.finfo(np.float32).tiny
    with x64():
        ks = float(stats.log_brownian_max_sf(np.float64(tests.ks.statistic)))
        kuiper = float(stats.log_brownian_range_sf(np.float64(tests.kuiper.statistic)))
    assert_close(tests.ks.log_p_value, ks, rtol=1e-5)
    assert_close(tests.kuiper.log_p_value, kuiper, rtol=1e-5)
    for t in (tests.ks, tests.kuiper):
        assert float(t.p_value) == tiny and float(t.log_p_value) < -1000
    r = repr(tests.ks)
    mantissa, exponent = r.split("p_value=")[1].split(",")[0].split("e")
    assert int(exponent) == int(np.floor(ks / np.log(10))), r
    assert abs(float(mantissa) - 10 ** (ks / np.log(10) - int(exponent))) < 0.01, r
    z = tests.spiegelhalter
    assert_close(z.log_p_value, np.log(2) + sps.norm.logsf(abs(float(z.statistic))), rtol=1e-5)
    # a p-value that does not underflow: log_p_value = log(p_value); repr prints p itself
    small = jaxcal.ks_test(s[:100], y[:100])
    assert_close(small.log_p_value, np.log(float(small.p_value)), rtol=1e-5)
    assert f"p_value={float(small.p_value):.4g}" in repr(small)
    # infinite statistic: p = 0 exactly and log p = -inf (impossible under the model)
    clash = jaxcal.calibration_tests(np.array([0.0, 1.0, 0.0]), np.array([1, 1, 0]))
    assert float(clash.ks.p_value) == 0 and float(clash.ks.log_p_value) == -np.inf
    # batched (vmap) and traced results keep a working repr
    both = jax.vmap(jaxcal.ks_test)(jnp.stack([s[:50], s[50:100]]), jnp.stack([y[:50], y[50:100]]))
    assert both.log_p_value.shape == (2,) and repr(both).startswith("TestResult(statistic=[")
    jax.jit(lambda a, b: print(jaxcal.ks_test(a, b)) or 0)(s[:10], y[:10])
