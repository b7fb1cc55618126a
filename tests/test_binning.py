"""Binning: edge conventions in every float dtype, quantile bins, exact large counts."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import reference
from helpers import assert_close, x64

import jaxcal
from jaxcal._binning import (
    bin_anchors,
    bin_sums,
    edges_bin_index,
    quantile_edges,
    uniform_bin_index,
    uniform_edges,
)

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
