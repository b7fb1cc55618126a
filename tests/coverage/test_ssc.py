"""Tests of jaxcal.coverage's size-stratified coverage (regression and classification SSC)
against MAPIE 1.6, the seed's formula and stable-sort NumPy oracles."""

from __future__ import annotations

import contextlib
import warnings

import jax
import numpy as np
import pytest
from mapie.metrics import classification as mapie_cls
from mapie.metrics import regression as mapie_reg

from jaxcal import coverage as cv
from tests.coverage_data import (
    K,
    L,
    N,
    as_f64,
    assert_jit_matches_eager,
    conformal_classification,
    conformal_regression,
    intervals,
    mapie_pis,
    prediction_sets,
    repeat_rows,
    repetition_weights,
    seed_formula_case,
)
from tests.helpers import assert_close, x64


def _mapie_ssc(labels, sets, num_bins):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # MAPIE: mean of an empty group
        return mapie_cls.classification_ssc(labels, sets, num_bins=num_bins)


def _mapie_ssc_score(labels, sets, num_bins):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # MAPIE: mean of an empty group
        return mapie_cls.classification_ssc_score(labels, sets, num_bins=num_bins)


def _assert_ssc_matches(ssc, expected):
    """MAPIE gives NaN for an empty group; jaxcal gives coverage 0 and count 0 there."""
    empty = np.isnan(expected)
    np.testing.assert_array_equal(np.asarray(ssc.count) == 0, empty)
    assert_close(np.where(empty, 0, ssc.coverage), np.where(empty, 0, expected))
    assert np.all(np.asarray(ssc.coverage)[empty] == 0)


# --------------------------------------------------------------------------- vs MAPIE


@pytest.mark.parametrize("use_x64", [False, True])
def test_regression_ssc_matches_mapie(use_x64):
    y, lo, up = intervals(0)
    pis = mapie_pis(lo, up)
    y64 = y.astype(np.float64)
    if use_x64:
        y, lo, up = as_f64(y, lo, up)
    with x64() if use_x64 else contextlib.nullcontext():
        for b in (1, 3, 20):  # 20 groups: the sort path (more than 3 boundaries)
            ssc = cv.regression_ssc(y, lo, up, num_bins=b)
            assert ssc.coverage.shape == (L, b)
            assert_close(ssc.coverage, mapie_reg.regression_ssc(y64, pis, num_bins=b))
            assert_close(
                cv.regression_ssc_score(y, lo, up, num_bins=b),
                mapie_reg.regression_ssc_score(y64, pis, num_bins=b),
            )
        # one level (N,) gives (B,) results
        assert_close(
            cv.regression_ssc(y, lo[:, 1], up[:, 1]).coverage,
            mapie_reg.regression_ssc(y64, pis[:, :, 1])[0],
        )


@pytest.mark.parametrize("use_x64", [False, True])
def test_classification_ssc_matches_mapie(use_x64):
    labels, sets = prediction_sets(3)
    with x64() if use_x64 else contextlib.nullcontext():
        for b in (None, 2, 4):
            ssc = cv.classification_ssc(labels, sets, num_bins=b)
            groups = K + 1 if b is None else b
            assert ssc.coverage.shape == (L, groups)
            _assert_ssc_matches(ssc, _mapie_ssc(labels, sets, b))
            expected = _mapie_ssc_score(labels, sets, b)
            assert_close(cv.classification_ssc_score(labels, sets, num_bins=b), expected)
        # one level (N, K)
        _assert_ssc_matches(
            cv.classification_ssc(labels, sets[:, :, 0]), _mapie_ssc(labels, sets[:, :, 0], None)[0]
        )


def test_classification_ssc_mean_size_and_groups():
    labels, sets = prediction_sets(4)
    sizes = sets.sum(axis=1)  # (N, L)
    ssc = cv.classification_ssc(labels, sets, num_bins=None)
    for level in range(L):
        counts = np.bincount(sizes[:, level], minlength=K + 1)
        np.testing.assert_array_equal(ssc.count[level], counts)
        live = counts > 0
        assert_close(np.asarray(ssc.mean_size[level])[live], np.arange(K + 1)[live])
    # num_bins=2 with K=5: sizes {0, 1, 2} and {3, 4, 5} (np.array_split of range(6))
    two = cv.classification_ssc(labels, sets, num_bins=2)
    np.testing.assert_array_equal(two.count[:, 0], (sizes <= 2).sum(axis=0))


def test_real_split_conformal_regressor():
    y, pis = conformal_regression()
    lo, up = pis[:, 0, :], pis[:, 1, :]
    with x64():
        assert_close(
            cv.regression_ssc(y, lo, up, num_bins=4).coverage,
            mapie_reg.regression_ssc(y, pis, num_bins=4),
        )
        assert_close(cv.regression_ssc_score(y, lo, up), mapie_reg.regression_ssc_score(y, pis))


def test_real_split_conformal_classifier():
    labels, sets = conformal_classification()
    for b in (None, 2):
        _assert_ssc_matches(
            cv.classification_ssc(labels, sets, num_bins=b), _mapie_ssc(labels, sets, b)
        )
        expected = _mapie_ssc_score(labels, sets, b)
        assert_close(cv.classification_ssc_score(labels, sets, num_bins=b), expected)


def test_seed_formula():
    """The seed sums the group coverages; MAPIE and jaxcal report each group."""
    y, lo, up, covered, width = seed_formula_case()
    with x64():
        order = np.argsort(width, kind="stable")
        groups = np.array_split(order, 3)
        seed_ssc = sum(covered[g].mean() for g in groups)
        assert_close(np.sum(cv.regression_ssc(y, lo, up).coverage), seed_ssc)


# -------------------------------------------------------------------------------- weights


def test_integer_weights_equal_repetition():
    labels, sets = prediction_sets(9)
    # counts summing to N: the repeated data have the shapes of the weighted (no compile)
    counts = repetition_weights()
    rlabels, rsets = repeat_rows(counts, labels, sets)
    # coverage and mean size (count is the number of samples with positive weight)
    got = cv.classification_ssc(labels, sets, weights=counts.astype(np.float32))[::2]
    jax.tree.map(assert_close, got, cv.classification_ssc(rlabels, rsets)[::2])


def test_mask_weights_equal_subset_for_rank_groups():
    """Regression SSC groups by rank among positive-weight samples: a mask is a subset."""
    y, lo, up = intervals(11)
    keep = np.random.default_rng(12).uniform(size=N) < 0.6
    got = cv.regression_ssc(y, lo, up, num_bins=4, weights=keep.astype(np.float32))
    expected = cv.regression_ssc(y[keep], lo[keep], up[keep], num_bins=4)
    jax.tree.map(assert_close, got, expected)
    assert_close(
        got.coverage,
        mapie_reg.regression_ssc(
            y[keep].astype(np.float64), mapie_pis(lo[keep], up[keep]), num_bins=4
        ),
    )


def test_weight_scale_invariance_and_zero_weight():
    y, lo, up = intervals(13)
    w = np.random.default_rng(14).uniform(0.1, 2, N).astype(np.float32)
    assert_close(
        cv.regression_ssc_score(y, lo, up, weights=w),
        cv.regression_ssc_score(y, lo, up, weights=7 * w),
    )
    zero = np.zeros(N, np.float32)
    for value in (
        cv.regression_ssc_score(y, lo, up, weights=zero),
        cv.regression_ssc(y, lo, up, weights=zero).coverage,
    ):
        np.testing.assert_array_equal(value, 0)


# ------------------------------------------------------------------------ groups and ties


def test_empty_ssc_groups_are_finite():
    y, lo, up = intervals(15, n=2, levels=1)
    ssc = cv.regression_ssc(y, lo[:, 0], up[:, 0], num_bins=5)
    np.testing.assert_array_equal(ssc.count, [1, 1, 0, 0, 0])
    assert np.all(np.isfinite(ssc.coverage)) and np.all(np.asarray(ssc.coverage)[2:] == 0)
    covered = (lo[:, 0] <= y) & (y <= up[:, 0])
    order = np.argsort(np.abs(up[:, 0] - lo[:, 0]))
    assert float(cv.regression_ssc_score(y, lo[:, 0], up[:, 0], num_bins=5)) == covered[order].min()


def test_regression_ssc_ties_broken_by_index():
    y = np.zeros(6, np.float32)
    lo = np.array([-1, -1, 0.5, 0.5, -2, -2], np.float32)  # samples 2, 3 miss y = 0
    up = np.array([1, 1, 1, 1, 2, 2], np.float32)
    # widths [2, 2, 0.5, 0.5, 4, 4]; stable rank: 2, 3 | 0, 1 | 4, 5
    ssc = cv.regression_ssc(y, lo, up, num_bins=3)
    np.testing.assert_array_equal(ssc.coverage, [0, 1, 1])
    assert_close(ssc.mean_size, [0.5, 2, 4])


@pytest.mark.parametrize("num_bins", [4, 20])  # selection and sort paths
def test_regression_ssc_ties_match_stable_oracle(num_bins):
    """Many tied widths across group boundaries, and a mask: a stable-sort NumPy oracle."""
    y, lo, up = intervals(31)
    # dyadic bounds: widths are exact in float32, about 40 distinct values, many ties
    lo = (np.round(lo * 64) / 64).astype(np.float32)
    width = np.round((up - lo) * 16) / 16
    up = (lo + width).astype(np.float32)
    assert np.array_equal(up - lo, width)
    keep = np.random.default_rng(32).uniform(size=N) < 0.8
    covered = (lo <= y[:, None]) & (y[:, None] <= up)
    expected = np.zeros((L, num_bins))
    for level in range(L):
        idx = np.flatnonzero(keep)
        order = idx[np.argsort(width[idx, level], kind="stable")]
        for g, members in enumerate(np.array_split(order, num_bins)):
            expected[level, g] = covered[members, level].mean()
    got = cv.regression_ssc(y, lo, up, num_bins=num_bins, weights=keep.astype(np.float32))
    assert_close(got.coverage, expected)


# ------------------------------------------------------------------------- jit and vmap


def test_jit_matches_eager_and_does_not_recompile():
    y, lo, up = intervals(16)
    labels, sets = prediction_sets(17)
    assert_jit_matches_eager(
        {
            "ssc": (lambda a, b, c: cv.regression_ssc(a, b, c, num_bins=4), (y, lo, up)),
            "ssc_score": (lambda a, b, c: cv.regression_ssc_score(a, b, c), (y, lo, up)),
            "cssc": (lambda a, s: cv.classification_ssc(a, s, num_bins=3), (labels, sets)),
            "cssc_score": (lambda a, s: cv.classification_ssc_score(a, s), (labels, sets)),
        }
    )


def test_vmap_over_levels():
    """vmap over a batch of intervals / sets equals the level-axis form (already compiled)."""
    y, lo, up = intervals(8)
    w = repetition_weights().astype(np.float32)
    out = jax.vmap(lambda b, c: cv.regression_ssc(y, b, c, num_bins=4, weights=w))(lo.T, up.T)
    jax.tree.map(assert_close, out, cv.regression_ssc(y, lo, up, num_bins=4, weights=w))
    labels, sets = prediction_sets(9)
    out = jax.vmap(lambda s: cv.classification_ssc(labels, s), in_axes=2)(sets)
    jax.tree.map(assert_close, out, cv.classification_ssc(labels, sets))
