"""Binning: edge conventions in every float dtype, quantile bins, exact large counts."""

import bisect

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxcal
from jaxcal._core.binning import (
    bin_anchors,
    bin_sums,
    edges_bin_index,
    first_reaching,
    inner_positions,
    quantile_edges,
    uniform_bin_index,
    uniform_edges,
)
from tests import reference
from tests.helpers import assert_close, x64

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]


def _expected_edge_bins(n_bins, closed):
    k = np.arange(n_bins + 1)
    return np.maximum(k - 1, 0) if closed == "right" else np.minimum(k, n_bins - 1)


@pytest.mark.parametrize("closed", ["right", "left"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_edge_lands_where_the_convention_says(dtype, closed):
    for n_bins in range(1, 21):
        edges = (np.arange(n_bins + 1) / n_bins).astype(dtype)
        got = uniform_bin_index(jnp.asarray(edges), n_bins, closed)
        np.testing.assert_array_equal(
            got, _expected_edge_bins(n_bins, closed), err_msg=f"M={n_bins}"
        )


@pytest.mark.parametrize("closed", ["right", "left"])
def test_every_edge_in_float64(closed):
    with x64():
        for n_bins in range(1, 21):
            edges = np.arange(n_bins + 1) / n_bins
            got = uniform_bin_index(jnp.asarray(edges), n_bins, closed)
            np.testing.assert_array_equal(got, _expected_edge_bins(n_bins, closed))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tutorial_traps_at_five_bins(dtype):
    # 0.6 * 5 == 3.0000001 in float32: a naive ceil/floor puts 0.6 in the wrong bin.
    with x64():
        x = jnp.asarray(np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], dtype=dtype))
        assert uniform_bin_index(x, 5, "right").tolist() == [0, 0, 1, 2, 3, 4]
        assert uniform_bin_index(x, 5, "left").tolist() == [0, 1, 2, 3, 4, 4]


@pytest.mark.parametrize("closed", ["right", "left"])
def test_uniform_bins_match_reference_on_random_and_edge_values(closed):
    rng = np.random.default_rng(0)
    n_bins = 7
    x = np.concatenate([rng.random(300), np.arange(n_bins + 1) / n_bins]).astype(np.float32)
    x = np.concatenate([x, np.nextafter(x, 0), np.nextafter(x, 1)]).clip(0, 1).astype(np.float32)
    got = uniform_bin_index(jnp.asarray(x), n_bins, closed)
    np.testing.assert_array_equal(got, reference.uniform_bin(x, n_bins, closed, np.float32))


def test_uniform_edges_are_dtype_rounded():
    assert uniform_edges(5, jnp.float32)[3] == np.float32(0.6)
    assert uniform_edges(5, jnp.bfloat16)[3] == np.float32(ml_dtypes.bfloat16(0.6))


@pytest.mark.parametrize("closed", ["right", "left"])
def test_quantile_bins_are_equal_mass(closed):
    scores = jnp.asarray(np.random.default_rng(1).permutation(1000) / 999)
    edges = quantile_edges(scores, 10, closed)
    counts = jnp.bincount(edges_bin_index(scores, edges, closed), length=10)
    assert counts.tolist() == [100] * 10


@pytest.mark.parametrize("closed", ["right", "left"])
def test_quantile_bins_keep_equal_scores_together(closed):
    rng = np.random.default_rng(2)
    scores = rng.choice(
        [0.0, 0.1, 0.5, 0.5001, 0.9, 1.0], size=500, p=[0.3, 0.1, 0.3, 0.1, 0.1, 0.1]
    )
    s = jnp.asarray(scores, jnp.float32)
    bins = np.asarray(edges_bin_index(s, quantile_edges(s, 8, closed), closed))
    for value in np.unique(scores):
        assert len(np.unique(bins[scores == value])) == 1
    np.testing.assert_array_equal(bins, reference.quantile_bin(np.asarray(s), 8, closed))


def test_weighted_quantiles_match_reference():
    rng = np.random.default_rng(3)
    s = rng.random(200).astype(np.float32)
    w = rng.random(200).astype(np.float32)
    for closed in ("right", "left"):
        edges = quantile_edges(jnp.asarray(s), 6, closed, jnp.asarray(w))
        got = edges_bin_index(jnp.asarray(s), edges, closed)
        np.testing.assert_array_equal(got, reference.quantile_bin(s, 6, closed, w))


def test_right_closed_bins_are_scikit_learns_on_edges():
    # calibration_curve bins by np.searchsorted(edges[1:-1], p) (side "left"): a score on
    # an edge goes to the lower bin, which is closed="right" (README's conventions).
    from sklearn.calibration import calibration_curve

    p = np.array([0.0, 0.125, 0.25, 0.3, 0.5, 0.625, 0.75, 0.9, 1.0])  # k/8 exact in binary
    y = np.array([0, 1, 1, 0, 1, 0, 1, 1, 0])
    prob_true, prob_pred = calibration_curve(y, p, n_bins=8)
    for closed, agrees in (("right", True), ("left", False)):
        curve = jaxcal.reliability_curve(p.astype(np.float32), y, n_bins=8, closed=closed)
        keep = np.asarray(curve.counts) > 0  # scikit-learn drops empty bins
        ours = np.asarray(curve.mean_confidence)[keep]
        same = ours.shape == prob_pred.shape and np.allclose(ours, prob_pred)
        assert same == agrees, closed
        if agrees:
            assert_close(np.asarray(curve.mean_accuracy)[keep], prob_true)


# Issue 20: float32 quantile bins were not equal-mass under jit. The targets b W / M
# became b W * (1 / M), which rounds up (3000 / 15 -> 200.00002), so the search put an
# edge one sample late: 7 distinct scores in 7 bins gave counts [1 1 2 0 1 2 0].
_ISSUE_BIN_COUNTS = {"right": (7, 13, 14, 15, 26, 28, 30), "left": (41, 47, 55, 61)}


def _exact_first_reaching(cum, b, n_bins, strict):
    """Oracle in exact (integer) arithmetic: first k with M cum_k >= b W (> if strict)."""
    total = cum[-1]

    def reached(c):
        return c * n_bins > b * total if strict else c * n_bins >= b * total

    return min(bisect.bisect_left(cum, True, key=reached), len(cum) - 1)


def _centred_scores(n):
    return jnp.asarray(((np.arange(n) + 0.5) / n).astype(np.float32))


def _quantile_counts(scores, weights, n_bins, closed):
    edges = quantile_edges(scores, n_bins, closed, weights)
    return jnp.bincount(edges_bin_index(scores, edges, closed), length=n_bins)


_quantile_counts_jit = jax.jit(_quantile_counts, static_argnums=(2, 3))


def test_seven_scores_fill_seven_quantile_bins():
    s = ((np.arange(7) + 0.5) / 7).astype(np.float32)
    curve = jaxcal.reliability_curve(s, np.zeros(7, int), n_bins=7, binning="quantile")
    assert curve.counts.tolist() == [1] * 7


@pytest.mark.parametrize("closed", ["right", "left"])
def test_float32_quantile_bins_are_equal_mass_under_jit(closed):
    for n_bins in _ISSUE_BIN_COUNTS[closed]:
        counts = _quantile_counts_jit(_centred_scores(n_bins), None, n_bins, closed)
        assert counts.tolist() == [1] * n_bins, n_bins
    # The weighted path at the default M (every M: the first_reaching test below).
    ones = jnp.ones(15, jnp.float32)
    assert _quantile_counts_jit(_centred_scores(15), ones, 15, closed).tolist() == [1] * 15


@pytest.mark.parametrize("closed", ["right", "left"])
def test_unweighted_quantile_positions_are_exact_for_every_bin_count(closed):
    for n_bins in range(1, 101):
        for n in (1, n_bins, 3 * n_bins, 997, 3000):
            cum = list(range(1, n + 1))
            expected = [
                _exact_first_reaching(cum, b, n_bins, closed == "left") for b in range(1, n_bins)
            ]
            assert inner_positions(n, n_bins, closed).tolist() == expected, (n_bins, n)


@pytest.mark.parametrize("strict", [False, True])
def test_weighted_quantile_positions_are_exact_in_float32_for_every_bin_count(strict):
    # Integer weights have exact float32 sums; scaling them by a power of two keeps the
    # sums exact and exercises the rescaling that keeps the error-free products in range.
    # M is an argument here, so one compile (vmapped over M = 1..100) serves them all.
    rng = np.random.default_rng(9)
    numerators = jnp.arange(1, 100, dtype=jnp.float32)
    find = jax.jit(
        jax.vmap(lambda cum, m: first_reaching(cum, numerators, m, strict), in_axes=(None, 0))
    )
    bin_counts = list(range(1, 101))
    for weights in (np.ones(3000), rng.integers(0, 6, 3000), rng.integers(1, 1000, 3000)):
        cum = np.cumsum(weights).astype(np.int64)
        exact = cum.tolist()
        for scale in (1.0, 2.0**90, 2.0**-90):
            got = find(jnp.asarray((cum * scale).astype(np.float32)), jnp.asarray(bin_counts))
            for n_bins, row in zip(bin_counts, np.asarray(got), strict=True):
                expected = [
                    _exact_first_reaching(exact, b, n_bins, strict) for b in range(1, n_bins)
                ]
                assert row[: n_bins - 1].tolist() == expected, (n_bins, scale)


@pytest.mark.slow
@pytest.mark.parametrize("closed", ["right", "left"])
def test_float32_quantile_bins_are_equal_mass_end_to_end(closed):
    # End to end (sort, positions or error-free products, edges, bin index) for a spread of
    # M; each M compiles anew (it is static), so every M <= 100 is checked on the kernels
    # that decide the positions, with M traced: the two *_for_every_bin_count tests above.
    for n_bins in [*range(1, 13), 17, 31, 49, 64, 97, 99, 100]:
        n = 3 * n_bins
        s = _centred_scores(n)
        for weights in (None, jnp.ones(n, jnp.float32)):
            counts = _quantile_counts_jit(s, weights, n_bins, closed)
            assert counts.tolist() == [3] * n_bins, (n_bins, weights is None)


def test_bin_sums_sums():
    rng = np.random.default_rng(4)
    seg = rng.integers(0, 5, 1000)
    s = rng.random(1000).astype(np.float32)
    t = rng.random(1000) < 0.5
    w = rng.random(1000).astype(np.float32) * (rng.random(1000) < 0.8)
    for weights in (None, w):
        ww = np.ones(1000) if weights is None else weights.astype(np.float64)
        stats = bin_sums(
            jnp.asarray(seg, jnp.int32),
            jnp.asarray(s),
            jnp.asarray(t),
            5,
            None if weights is None else jnp.asarray(weights),
        )
        for k in range(5):
            m = seg == k
            assert stats.count[k] == np.sum(m & (ww > 0))
            expected = [ww[m].sum(), (ww * s)[m].sum(), (ww * t)[m].sum()]
            got = [stats.weight[k], stats.sum_score[k], stats.sum_target[k]]
            # float32 sums of ~200 terms: rtol 1e-5, tighter than the default 2e-5
            assert_close(np.array(got), np.array(expected), rtol=1e-5, atol=0)


@pytest.mark.slow
def test_counts_stay_exact_beyond_2_to_the_24():
    # 20 million samples of confidence 0.7 in one bin, 60% correct: float32 would count
    # 2**24 + ... inexactly and a sequential float32 sum of 0.7 drifts by percents.
    n = 20_000_000
    scores = jnp.full(n, 0.7, jnp.float32)
    correct = (jnp.arange(n) % 5) < 3
    offsets = bin_anchors(uniform_edges(15))
    stats = bin_sums(uniform_bin_index(scores, 15), scores, correct, 15, None, offsets)
    assert int(stats.count.sum()) == n
    assert int(stats.count[10]) == n
    assert int(stats.sum_target[10]) == 12_000_000
    # the mean to float32 resolution (ulp 6e-8 at 0.7): no accumulated drift
    assert_close(float(stats.sum_score[10]) / n, np.float32(0.7), rtol=1e-6, atol=0)
    value = jaxcal.ece(scores, correct.astype(jnp.int32))
    # |0.6 - float32(0.7)|: float32 resolution of the mean, not an accumulated drift.
    assert_close(float(value), abs(0.6 - float(np.float32(0.7))), rtol=1e-7, atol=2e-6)


def test_bin_index_jits_and_vmaps():
    x = jnp.asarray(np.random.default_rng(5).random((4, 50)), jnp.float32)
    got = jax.vmap(jax.jit(lambda v: uniform_bin_index(v, 10, "left")))(x)
    np.testing.assert_array_equal(got, reference.uniform_bin(np.asarray(x), 10, "left", np.float32))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: jaxcal.uniform_edges(0), r"`n_bins` must be an integer >= 1; got 0"),
        (lambda: jaxcal.uniform_edges(2.5), r"`n_bins` must be an integer >= 1; got 2.5"),
        (lambda: jaxcal.uniform_edges(5, dtype=jnp.int32), r"`dtype` must be a floating.*int32"),
        (lambda: jaxcal.uniform_edges(5, dtype="nope"), r"`dtype` must be a floating"),
        (
            lambda: jaxcal.quantile_edges(jnp.linspace(0, 5, 20), 3),
            r"`scores` must lie in \[0, 1\]",
        ),
        (lambda: jaxcal.quantile_edges([0.1, 0.2], 2, closed="both"), "`closed` must be one of"),
        (
            lambda: jaxcal.quantile_edges([0.1, 0.2], 2, weights=[-1, 1]),
            "`weights` must be non-neg",
        ),
        (lambda: jaxcal.quantile_edges([0.1, 0.2], 2, weights=[1.0]), r"`weights` must have shape"),
        (lambda: jaxcal.quantile_edges([], 2), r"`scores` must be 1-D .* got shape \(0,\)"),
        (lambda: jaxcal.quantile_edges(np.zeros((2, 2)), 2), r"`scores` must be 1-D"),
        (
            lambda: jaxcal.quantile_edges(["a"], 2),
            r"`scores` must (be an array of numbers|hold real numbers)",
        ),
        (lambda: jaxcal.quantile_edges([0.1], 0), r"`n_bins` must be an integer >= 1"),
    ],
)
def test_public_edge_helpers_check_their_arguments(call, match):
    # D15: uniform_edges(0) gave [nan], int dtypes [0 0 0 0 0 1], a list an AttributeError.
    with pytest.raises(ValueError, match=match):
        call()


def test_public_quantile_edges_of_a_list():
    assert jaxcal.quantile_edges([0.1, 0.2], 2).tolist() == pytest.approx([0.0, 0.1, 1.0])
    assert jaxcal.uniform_edges(4, dtype=jnp.bfloat16).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
