"""Tests of jaxcal.coverage against MAPIE 1.6, the seed's formulas and float64 NumPy oracles.

Data are drawn in float32 and handed to MAPIE as the same values in float64, so that the
interval comparisons (``l <= y <= u``) are identical on both sides and the coverages agree
exactly; float64 runs use ``x64()``.
"""

from __future__ import annotations

import contextlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from mapie.metrics import classification as mapie_cls
from mapie.metrics import regression as mapie_reg

from jaxcal import coverage as cv
from tests.helpers import assert_close, count_compiles, x64

N, L, K = 300, 3, 5
LEVELS = np.array([0.8, 0.9, 0.95])


# --------------------------------------------------------------------------------- data


def _intervals(seed: int, n: int = N, levels: int = L, crossed: bool = False):
    """Heteroscedastic intervals with continuous (untied) widths, float32 values."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 3, n)
    y = (np.sin(x) + rng.normal(0, 0.2 + 0.3 * x)).astype(np.float32)
    half = np.stack([(0.1 + 0.4 * x) * s for s in np.linspace(0.6, 1.6, levels)], axis=1)
    half = half * rng.uniform(0.5, 1.5, (n, levels))
    centre = np.sin(x)[:, None] + rng.normal(0, 0.1, (n, levels))
    lo, up = (centre - half).astype(np.float32), (centre + half).astype(np.float32)
    if crossed:
        flip = rng.uniform(size=(n, levels)) < 0.2
        lo, up = np.where(flip, up, lo), np.where(flip, lo, up)
    return y, lo, up


def _sets(seed: int, n: int = N, k: int = K, levels: int = L):
    """Nested prediction sets of varied sizes (some empty, some full) and labels."""
    rng = np.random.default_rng(seed)
    scores = rng.dirichlet(np.ones(k) * 0.7, n)
    labels = np.array([rng.choice(k, p=p) for p in scores])
    thresholds = np.quantile(scores, [0.7, 0.55, 0.4])[:levels]
    sets = scores[:, :, None] >= thresholds[None, None, :]
    sets[:7, :, :] = False  # empty sets
    sets[7:12, :, :] = True  # full sets
    return labels.astype(np.int32), sets


def _f64(*arrays):
    return tuple(np.asarray(a, np.float64) for a in arrays)


def _mapie_pis(lo, up):
    return np.stack([np.asarray(lo, np.float64), np.asarray(up, np.float64)], axis=1)


# --------------------------------------------------------------------------- vs MAPIE


@pytest.mark.parametrize("use_x64", [False, True])
def test_regression_metrics_match_mapie(use_x64):
    y, lo, up = _intervals(0)
    pis = _mapie_pis(lo, up)
    y64 = y.astype(np.float64)
    if use_x64:
        y, lo, up = _f64(y, lo, up)
    with x64() if use_x64 else contextlib.nullcontext():
        assert_close(
            cv.regression_coverage_score(y, lo, up), mapie_reg.regression_coverage_score(y64, pis)
        )
        assert_close(
            cv.regression_mean_width_score(lo, up), mapie_reg.regression_mean_width_score(pis)
        )
        for b in (1, 3, 20):  # 20 groups: the sort path (more than 16 boundaries)
            ssc = cv.regression_ssc(y, lo, up, num_bins=b)
            assert ssc.coverage.shape == (L, b)
            assert_close(ssc.coverage, mapie_reg.regression_ssc(y64, pis, num_bins=b))
            assert_close(
                cv.regression_ssc_score(y, lo, up, num_bins=b),
                mapie_reg.regression_ssc_score(y64, pis, num_bins=b),
            )
        # one level (N,) gives 0-d / (B,) results
        assert cv.regression_coverage_score(y, lo[:, 0], up[:, 0]).shape == ()
        assert_close(
            cv.regression_ssc(y, lo[:, 1], up[:, 1]).coverage,
            mapie_reg.regression_ssc(y64, pis[:, :, 1])[0],
        )


@pytest.mark.parametrize("kernel_sizes", [(1, 1), (0.3, 2.5)])
def test_hsic_matches_mapie(kernel_sizes):
    y, lo, up = _intervals(1)
    expected = mapie_reg.hsic(y.astype(np.float64), _mapie_pis(lo, up), kernel_sizes=kernel_sizes)
    with x64():
        assert_close(cv.hsic(*_f64(y, lo, up), kernel_sizes=kernel_sizes), expected)
    # float32: the centred quadratic form cancels; absolute error ~ sqrt(eps) * scale.
    assert_close(cv.hsic(y, lo, up, kernel_sizes=kernel_sizes), expected, rtol=1e-4, atol=1e-5)
    one = cv.hsic(y, lo[:, 2], up[:, 2], kernel_sizes=kernel_sizes)
    assert one.shape == ()
    assert_close(one, expected[2], rtol=1e-4, atol=1e-5)


def test_cwc_and_winkler_match_mapie():
    y32, lo32, up32 = _intervals(2, crossed=True)
    y, lo, up = _f64(y32, lo32, up32)
    ordered_lo, ordered_up = np.minimum(lo, up), np.maximum(lo, up)
    with x64():
        for j, level in enumerate(LEVELS):
            for eta in (-3.0, 0.0, 0.01, 10.0):
                expected = mapie_reg.coverage_width_based(
                    y, ordered_lo[:, j], ordered_up[:, j], eta, float(level)
                )
                got = cv.coverage_width_based(
                    y, ordered_lo[:, j], ordered_up[:, j], eta=eta, confidence_level=level
                )
                assert got.shape == ()
                assert_close(got, expected)
            # MAPIE's Winkler score reorders crossed intervals; so does ours.
            expected = mapie_reg.regression_mwi_score(
                y, _mapie_pis(lo[:, j], up[:, j])[:, :, None], float(level)
            )
            assert_close(
                cv.regression_mwi_score(y, lo[:, j], up[:, j], confidence_level=level), expected
            )
        # vectorised over levels: one value per column, each with its own level
        many = cv.regression_mwi_score(y, lo, up, confidence_level=LEVELS)
        single = [
            cv.regression_mwi_score(y, lo[:, j], up[:, j], confidence_level=c)
            for j, c in enumerate(LEVELS)
        ]
        assert many.shape == (L,)
        assert_close(many, np.array(single))
        cwc = cv.coverage_width_based(y, ordered_lo, ordered_up, eta=1.0, confidence_level=LEVELS)
        assert cwc.shape == (L,)
    # float32
    expected = mapie_reg.regression_mwi_score(y, _mapie_pis(lo[:, 0], up[:, 0])[:, :, None], 0.8)
    assert_close(cv.regression_mwi_score(y32, lo32, up32, confidence_level=0.8)[0], expected)


def _mapie_ssc(labels, sets, num_bins):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # MAPIE: mean of an empty group
        return mapie_cls.classification_ssc(labels, sets, num_bins=num_bins)


def _assert_ssc_matches(ssc, expected):
    """MAPIE gives NaN for an empty group; jaxcal gives coverage 0 and count 0 there."""
    empty = np.isnan(expected)
    np.testing.assert_array_equal(np.asarray(ssc.count) == 0, empty)
    assert_close(np.where(empty, 0, ssc.coverage), np.where(empty, 0, expected))
    assert np.all(np.asarray(ssc.coverage)[empty] == 0)


@pytest.mark.parametrize("use_x64", [False, True])
def test_classification_metrics_match_mapie(use_x64):
    labels, sets = _sets(3)
    with x64() if use_x64 else contextlib.nullcontext():
        assert_close(
            cv.classification_coverage_score(labels, sets),
            mapie_cls.classification_coverage_score(labels, sets),
        )
        assert_close(
            cv.classification_mean_width_score(sets),
            mapie_cls.classification_mean_width_score(sets),
        )
        for b in (None, 2, 4):
            ssc = cv.classification_ssc(labels, sets, num_bins=b)
            groups = K + 1 if b is None else b
            assert ssc.coverage.shape == (L, groups)
            _assert_ssc_matches(ssc, _mapie_ssc(labels, sets, b))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                expected = mapie_cls.classification_ssc_score(labels, sets, num_bins=b)
            assert_close(cv.classification_ssc_score(labels, sets, num_bins=b), expected)
        # one level (N, K) and 0/1 integers
        one = cv.classification_coverage_score(labels, sets[:, :, 1].astype(np.int32))
        assert one.shape == ()
        assert_close(one, mapie_cls.classification_coverage_score(labels, sets[:, :, 1])[0])
        _assert_ssc_matches(
            cv.classification_ssc(labels, sets[:, :, 0]), _mapie_ssc(labels, sets[:, :, 0], None)[0]
        )


def test_classification_ssc_mean_size_and_groups():
    labels, sets = _sets(4)
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


# ------------------------------------------------------------- real conformal intervals


@pytest.fixture(scope="module")
def conformal_regression():
    from mapie.regression import SplitConformalRegressor
    from mapie.utils import train_conformalize_test_split
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge

    x, y = load_diabetes(return_X_y=True)
    x_tr, x_cal, x_te, y_tr, y_cal, y_te = train_conformalize_test_split(
        x, y, train_size=0.5, conformalize_size=0.25, test_size=0.25, random_state=0
    )
    # "gamma" scores give widths proportional to the prediction: all different.
    reg = SplitConformalRegressor(
        Ridge(alpha=0.1), confidence_level=list(LEVELS), conformity_score="gamma", prefit=False
    )
    reg.fit(x_tr, y_tr).conformalize(x_cal, y_cal)
    _, pis = reg.predict_interval(x_te)
    return y_te.astype(np.float64), pis


def test_real_split_conformal_regressor(conformal_regression):
    y, pis = conformal_regression
    lo, up = pis[:, 0, :], pis[:, 1, :]
    with x64():
        assert_close(
            cv.regression_coverage_score(y, lo, up), mapie_reg.regression_coverage_score(y, pis)
        )
        assert_close(
            cv.regression_mean_width_score(lo, up), mapie_reg.regression_mean_width_score(pis)
        )
        assert_close(
            cv.regression_ssc(y, lo, up, num_bins=4).coverage,
            mapie_reg.regression_ssc(y, pis, num_bins=4),
        )
        assert_close(cv.regression_ssc_score(y, lo, up), mapie_reg.regression_ssc_score(y, pis))
        # kernel size on the scale of the widths (about 100 to 300 here)
        assert_close(
            cv.hsic(y, lo, up, kernel_sizes=(1e3, 1)),
            mapie_reg.hsic(y, pis, kernel_sizes=(1e3, 1)),
        )
        for j, level in enumerate(LEVELS):
            assert_close(
                cv.coverage_width_based(y, lo[:, j], up[:, j], eta=5.0, confidence_level=level),
                mapie_reg.coverage_width_based(y, lo[:, j], up[:, j], 5.0, float(level)),
            )
            assert_close(
                cv.regression_mwi_score(y, lo[:, j], up[:, j], confidence_level=level),
                mapie_reg.regression_mwi_score(y, pis[:, :, j : j + 1], float(level)),
            )


@pytest.fixture(scope="module")
def conformal_classification():
    from mapie.classification import SplitConformalClassifier
    from mapie.utils import train_conformalize_test_split
    from sklearn.datasets import load_digits
    from sklearn.naive_bayes import GaussianNB

    x, y = load_digits(return_X_y=True)
    x_tr, x_cal, x_te, y_tr, y_cal, y_te = train_conformalize_test_split(
        x, y, train_size=0.5, conformalize_size=0.25, test_size=0.25, random_state=0
    )
    clf = SplitConformalClassifier(
        GaussianNB(), confidence_level=list(LEVELS), conformity_score="aps", prefit=False
    )
    clf.fit(x_tr, y_tr).conformalize(x_cal, y_cal)
    _, sets = clf.predict_set(x_te)
    return y_te, sets


def test_real_split_conformal_classifier(conformal_classification):
    labels, sets = conformal_classification
    assert sets.shape[1:] == (10, L)
    assert_close(
        cv.classification_coverage_score(labels, sets),
        mapie_cls.classification_coverage_score(labels, sets),
    )
    assert_close(
        cv.classification_mean_width_score(sets), mapie_cls.classification_mean_width_score(sets)
    )
    for b in (None, 2):
        _assert_ssc_matches(
            cv.classification_ssc(labels, sets, num_bins=b), _mapie_ssc(labels, sets, b)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = mapie_cls.classification_ssc_score(labels, sets, num_bins=b)
        assert_close(cv.classification_ssc_score(labels, sets, num_bins=b), expected)


# ------------------------------------------------------ the seed's formulas, where MAPIE differs


def test_seed_formulas():
    y, lo, up = _f64(*_intervals(5, levels=1))
    y64, lo64, up64 = y, lo[:, 0], up[:, 0]
    n = y.shape[0]
    covered = (lo64 <= y64) & (y64 <= up64)
    width = up64 - lo64
    with x64():
        # CWC: the seed's (1 - MWS) exp(-eta (RCS - (1 - alpha))^2), no range normalisation.
        seed = (1 - width.mean()) * np.exp(-2.0 * (covered.mean() - 0.9) ** 2)
        got = cv.coverage_width_based(
            y, lo[:, 0], up[:, 0], eta=2.0, confidence_level=0.9, normalize=False
        )
        assert_close(got, seed)
        mapie_value = cv.coverage_width_based(y, lo[:, 0], up[:, 0], eta=2.0, confidence_level=0.9)
        assert not np.isclose(float(mapie_value), seed)  # the normalisation matters here
        # Winkler: the seed's penalty sum has no 1/n; MAPIE and jaxcal average it.
        alpha = 0.1
        penalty = np.maximum(y64 - up64, 0) + np.maximum(lo64 - y64, 0)
        assert penalty.sum() > 0
        got = cv.regression_mwi_score(y, lo[:, 0], up[:, 0], confidence_level=1 - alpha)
        assert_close(got, width.mean() + 2 / alpha * penalty.sum() / n)
        assert not np.isclose(float(got), width.mean() + 2 / alpha * penalty.sum())
        # HSIC: the seed's trace(H K H L) equals (n - 1)^2 hsic^2 (MAPIE normalises, roots).
        kmat = np.exp(-((width[:, None] - width[None, :]) ** 2))
        lmat = np.exp(-((covered[:, None] * 1.0 - covered[None, :]) ** 2))
        h = np.eye(n) - np.ones((n, n)) / n
        trace = np.trace(h @ kmat @ h @ lmat)
        assert_close(cv.hsic(y, lo[:, 0], up[:, 0]) ** 2 * (n - 1) ** 2, trace, rtol=1e-9)
        # SSC: the seed sums the group coverages; MAPIE and jaxcal report each group.
        order = np.argsort(width, kind="stable")
        groups = np.array_split(order, 3)
        seed_ssc = sum(covered[g].mean() for g in groups)
        assert_close(np.sum(cv.regression_ssc(y, lo[:, 0], up[:, 0]).coverage), seed_ssc)


# ------------------------------------------------------------------------------- HSIC FGT


def _dense_hsic(y, lo, up, s0=1.0, s1=1.0, w=None):
    """sqrt(2 (1 - e^{-1/s1}) c~' K c~ / (W - 1)^2), the kernel evaluated directly."""
    width = np.abs(up - lo)
    c = ((lo <= y) & (y <= up)).astype(np.float64)
    w = np.ones_like(width) if w is None else w
    total = w.sum()
    b = w * (c - (w * c).sum() / total)
    form = b @ np.exp(-((width[:, None] - width[None, :]) ** 2) / s0) @ b
    return np.sqrt(max(2 * (1 - np.exp(-1 / s1)) * form / (total - 1) ** 2, 0))


@pytest.mark.parametrize("spread", [1e-3, 0.7, 4.0, 60.0, 1e5])
def test_hsic_fast_gauss_transform_accuracy(spread):
    """The transform against the dense kernel, widths from 1e-3 to 1e5 kernel widths."""
    rng = np.random.default_rng(6)
    width = rng.gamma(2.0, spread, N)
    width[:40] = width[40]  # ties
    width[40:60] = width[60] + 1e-9 * spread * rng.uniform(size=20)  # near ties
    y = rng.normal(0, 1, N)
    lo = -width * rng.uniform(0.1, 0.9, N) + 0.3 * spread * rng.normal(size=N)
    up = lo + width
    w = rng.uniform(0, 3, N) * (rng.uniform(size=N) < 0.8)  # real-valued weights, some 0
    with x64():
        assert_close(
            cv.hsic(y, lo, up, weights=w), _dense_hsic(y, lo, up, w=w), rtol=1e-9, atol=1e-12
        )


def test_hsic_degenerate():
    y, lo, up = _intervals(7, levels=1)
    lo, up = lo[:, 0], up[:, 0]
    # all covered: coverage carries no information, hsic 0 (MAPIE: ~1e-9 of round-off)
    assert float(cv.hsic(y, y - 1, y + 1)) == 0.0
    # a total weight <= 1 (one sample): 0 (MAPIE divides by (n - 1)^2 = 0)
    weights = np.zeros(N, np.float32)
    weights[3] = 1
    assert float(cv.hsic(y, lo, up, weights=weights)) == 0.0
    assert np.isfinite(float(cv.hsic(y, lo, up, weights=np.zeros(N, np.float32))))


# -------------------------------------------------------------------------------- weights


def _repeat(counts, *arrays):
    return [np.repeat(a, counts, axis=0) for a in arrays]


def test_integer_weights_equal_repetition():
    y, lo, up = _intervals(8)
    labels, sets = _sets(9)
    # counts summing to N: the repeated data have the shapes of the weighted (no compile)
    counts = np.random.default_rng(10).multinomial(N, np.ones(N) / N)
    w = counts.astype(np.float32)
    ry, rlo, rup = _repeat(counts, y, lo, up)
    rlabels, rsets = _repeat(counts, labels, sets)
    pairs = [
        (
            cv.regression_coverage_score(y, lo, up, weights=w),
            cv.regression_coverage_score(ry, rlo, rup),
        ),
        (
            cv.regression_mean_width_score(lo, up, weights=w),
            cv.regression_mean_width_score(rlo, rup),
        ),
        (
            cv.coverage_width_based(y, lo, up, weights=w, eta=3.0, confidence_level=LEVELS),
            cv.coverage_width_based(ry, rlo, rup, eta=3.0, confidence_level=LEVELS),
        ),
        (
            cv.regression_mwi_score(y, up, lo, weights=w, confidence_level=0.9),
            cv.regression_mwi_score(ry, rup, rlo, confidence_level=0.9),
        ),
        (
            cv.classification_coverage_score(labels, sets, weights=w),
            cv.classification_coverage_score(rlabels, rsets),
        ),
        (
            cv.classification_mean_width_score(sets, weights=w),
            cv.classification_mean_width_score(rsets),
        ),
        (  # coverage and mean size (count is the number of samples with positive weight)
            cv.classification_ssc(labels, sets, weights=w)[::2],
            cv.classification_ssc(rlabels, rsets)[::2],
        ),
    ]
    for got, expected in pairs:
        jax.tree.map(assert_close, got, expected)
    # HSIC: frequency weights; float32 cancellation as in test_hsic_matches_mapie
    assert_close(cv.hsic(y, lo, up, weights=w), cv.hsic(ry, rlo, rup), rtol=1e-4, atol=1e-5)


def test_mask_weights_equal_subset_for_rank_groups():
    """Regression SSC groups by rank among positive-weight samples: a mask is a subset."""
    y, lo, up = _intervals(11)
    keep = np.random.default_rng(12).uniform(size=N) < 0.6
    got = cv.regression_ssc(y, lo, up, num_bins=4, weights=keep.astype(np.float32))
    expected = cv.regression_ssc(y[keep], lo[keep], up[keep], num_bins=4)
    jax.tree.map(assert_close, got, expected)
    assert_close(
        got.coverage,
        mapie_reg.regression_ssc(
            y[keep].astype(np.float64), _mapie_pis(lo[keep], up[keep]), num_bins=4
        ),
    )


def test_weight_scale_invariance_and_zero_weight():
    y, lo, up = _intervals(13)
    w = np.random.default_rng(14).uniform(0.1, 2, N).astype(np.float32)
    for fn in (cv.regression_coverage_score, cv.regression_ssc_score):
        assert_close(fn(y, lo, up, weights=w), fn(y, lo, up, weights=7 * w))
    zero = np.zeros(N, np.float32)
    for value in (
        cv.regression_coverage_score(y, lo, up, weights=zero),
        cv.regression_mean_width_score(lo, up, weights=zero),
        cv.regression_ssc_score(y, lo, up, weights=zero),
        cv.regression_mwi_score(y, lo, up, weights=zero, confidence_level=0.9),
        cv.regression_ssc(y, lo, up, weights=zero).coverage,
    ):
        np.testing.assert_array_equal(value, 0)


def test_empty_ssc_groups_are_finite():
    y, lo, up = _intervals(15, n=2, levels=1)
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
    y, lo, up = _intervals(31)
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


# ------------------------------------------------------------------ jit, vmap, grad, compiles


def test_jit_matches_eager_and_does_not_recompile():
    y, lo, up = _intervals(16)
    labels, sets = _sets(17)
    calls = {
        "rcs": (lambda a, b, c: cv.regression_coverage_score(a, b, c), (y, lo, up)),
        "rmws": (lambda a, b, c: cv.regression_mean_width_score(b, c), (y, lo, up)),
        "ssc": (lambda a, b, c: cv.regression_ssc(a, b, c, num_bins=4), (y, lo, up)),
        "ssc_score": (lambda a, b, c: cv.regression_ssc_score(a, b, c), (y, lo, up)),
        "hsic": (lambda a, b, c: cv.hsic(a, b, c), (y, lo, up)),
        "cwc": (
            lambda a, b, c: cv.coverage_width_based(a, b, c, eta=1.0, confidence_level=0.9),
            (y, lo, up),
        ),
        "mwi": (
            lambda a, b, c: cv.regression_mwi_score(a, b, c, confidence_level=LEVELS),
            (y, lo, up),
        ),
        "ccs": (lambda a, s: cv.classification_coverage_score(a, s), (labels, sets)),
        "cmws": (lambda a, s: cv.classification_mean_width_score(s), (labels, sets)),
        "cssc": (lambda a, s: cv.classification_ssc(a, s, num_bins=3), (labels, sets)),
        "cssc_score": (lambda a, s: cv.classification_ssc_score(a, s), (labels, sets)),
    }
    for name, (fn, args) in calls.items():
        jitted = count_compiles(fn)
        first = jitted(*args)
        jax.tree.map(lambda a, b: assert_close(a, b, rtol=1e-5, atol=1e-6), first, fn(*args))
        # second call with new values of the same shapes: no retrace
        shifted = tuple(a if a.dtype != np.float32 else a + np.float32(0.5) for a in args)
        jitted(*shifted)
        assert jitted.compiles() == 1, name


def test_vmap_over_interval_sets():
    """vmap over a batch of interval sets equals the level-axis form (already compiled)."""
    y, lo, up = _intervals(8)
    w = np.random.default_rng(10).multinomial(N, np.ones(N) / N).astype(np.float32)
    batched = {  # name: (function vmapped over the level columns, level-axis result)
        "rcs": (
            lambda b, c: cv.regression_coverage_score(y, b, c, weights=w),
            cv.regression_coverage_score(y, lo, up, weights=w),
        ),
        "ssc": (
            lambda b, c: cv.regression_ssc(y, b, c, num_bins=4, weights=w),
            cv.regression_ssc(y, lo, up, num_bins=4, weights=w),
        ),
        "hsic": (lambda b, c: cv.hsic(y, b, c, weights=w), cv.hsic(y, lo, up, weights=w)),
        "mwi": (
            lambda b, c: cv.regression_mwi_score(y, b, c, weights=w, confidence_level=0.9),
            cv.regression_mwi_score(y, lo, up, weights=w, confidence_level=0.9),
        ),
    }
    for fn, expected in batched.values():
        out = jax.vmap(fn)(lo.T, up.T)
        jax.tree.map(assert_close, out, expected)
    # vmap over the confidence level (traced: no recompile per level value)
    mwi = jax.vmap(lambda c: cv.regression_mwi_score(y, lo[:, 0], up[:, 0], confidence_level=c))
    assert_close(
        mwi(jnp.asarray(LEVELS, jnp.float32)),
        [cv.regression_mwi_score(y, lo[:, 0], up[:, 0], confidence_level=c) for c in LEVELS],
    )
    labels, sets = _sets(9)
    out = jax.vmap(lambda s: cv.classification_ssc(labels, s), in_axes=2)(sets)
    jax.tree.map(assert_close, out, cv.classification_ssc(labels, sets))


def test_gradients():
    y, lo, up = _intervals(24, n=40, levels=1)
    y, lo, up = (np.asarray(a, np.float64).reshape(40) for a in (y, lo, up))
    with x64():
        # Winkler: d/du = 1/n - (2/alpha)/n [y > u], d/dl = -1/n + (2/alpha)/n [y < l]
        alpha = 0.2
        grad_lo, grad_up = jax.grad(
            lambda a, b: cv.regression_mwi_score(y, a, b, confidence_level=1 - alpha),
            argnums=(0, 1),
        )(jnp.asarray(lo), jnp.asarray(up))
        assert_close(grad_up, (1 - 2 / alpha * (y > up)) / 40)
        assert_close(grad_lo, (-1 + 2 / alpha * (y < lo)) / 40)
        check_grads(
            lambda a, b: cv.regression_mwi_score(y, a, b, confidence_level=0.8),
            (jnp.asarray(lo), jnp.asarray(up)), order=1, modes=["rev"], eps=1e-6,
        )  # fmt: skip
        check_grads(lambda b: cv.regression_mean_width_score(lo, b), (jnp.asarray(up),), order=1)
        # CWC in eta and the bounds (coverage is piecewise constant: only the width moves)
        check_grads(
            lambda e, b: cv.coverage_width_based(y, lo, b, eta=e, confidence_level=0.9),
            (jnp.asarray(2.0), jnp.asarray(up)), order=1, modes=["rev"], eps=1e-6,
        )  # fmt: skip


@pytest.mark.slow
def test_hsic_gradient():
    """HSIC is smooth in the widths (a training penalty in Feldman et al. 2021)."""
    y, lo, up = _intervals(24, n=40, levels=1)
    y, lo, up = (np.asarray(a, np.float64).reshape(40) for a in (y, lo, up))
    with x64():
        check_grads(
            lambda b: cv.hsic(y, lo, b, kernel_sizes=(2.0, 1.0)), (jnp.asarray(up),),
            order=1, modes=["rev"], eps=1e-6,
        )  # fmt: skip


def test_traced_crossed_intervals_follow_mapie():
    """Under jit the crossed check is skipped: a crossed interval never covers, |u - l| width."""
    y, lo, up = _intervals(25, crossed=True)
    pis = _mapie_pis(lo, up)
    y64 = y.astype(np.float64)
    assert_close(
        jax.jit(cv.regression_coverage_score)(y, lo, up),
        mapie_reg.regression_coverage_score(y64, pis),
    )
    assert_close(
        jax.jit(cv.regression_mean_width_score)(lo, up), mapie_reg.regression_mean_width_score(pis)
    )


# ---------------------------------------------------------------------------- bad inputs


def test_bad_inputs():
    y, lo, up = _intervals(26)
    labels, sets = _sets(27)
    with pytest.raises(ValueError, match="`upper` must have the shape of `lower`"):
        cv.regression_coverage_score(y, lo, up[:, :2])
    with pytest.raises(ValueError, match=r"`y` must have shape \(300,\)"):
        cv.regression_coverage_score(y[:-1], lo, up)
    with pytest.raises(ValueError, match="`lower` must be"):
        cv.regression_mean_width_score(lo[:, :, None], up[:, :, None])
    with pytest.raises(ValueError, match="must not be empty"):
        cv.regression_coverage_score(y[:0], lo[:0], up[:0])
    bad = y.copy()
    bad[4] = np.nan
    with pytest.raises(ValueError, match="`y` must be finite"):
        cv.hsic(bad, lo, up)
    bad = up.copy()
    bad[2, 1] = np.inf
    with pytest.raises(ValueError, match="`upper` must be finite"):
        cv.regression_mwi_score(y, lo, bad, confidence_level=0.9)
    crossed = up.copy()
    crossed[5, 0] = lo[5, 0] - 1
    for fn in (
        lambda: cv.regression_coverage_score(y, lo, crossed),
        lambda: cv.regression_mean_width_score(lo, crossed),
        lambda: cv.regression_ssc(y, lo, crossed),
        lambda: cv.hsic(y, lo, crossed),
        lambda: cv.coverage_width_based(y, lo, crossed, eta=1.0, confidence_level=0.9),
    ):
        with pytest.raises(
            ValueError,
            match=r"`lower` must not exceed `upper` \(crossed interval at index \(5, 0\)",
        ):
            fn()
    assert np.isfinite(
        float(cv.regression_mwi_score(y, lo[:, 0], crossed[:, 0], confidence_level=0.9))
    )
    with pytest.raises(ValueError, match="`weights` must be non-negative"):
        cv.regression_coverage_score(y, lo, up, weights=-np.ones(N))
    with pytest.raises(ValueError, match="`num_bins` must be an integer >= 1"):
        cv.regression_ssc(y, lo, up, num_bins=0)
    with pytest.raises(ValueError, match="`kernel_sizes` must be two positive numbers"):
        cv.hsic(y, lo, up, kernel_sizes=(1, 1, 1))
    with pytest.raises(ValueError, match=r"`kernel_sizes\[1\]` must be a positive finite number"):
        cv.hsic(y, lo, up, kernel_sizes=(1, 0))
    with pytest.raises(ValueError, match=r"`confidence_level` must lie in \(0, 1\)"):
        cv.regression_mwi_score(y, lo, up, confidence_level=1.0)
    with pytest.raises(ValueError, match=r"`confidence_level` must lie in \[0, 1\]"):
        cv.coverage_width_based(y, lo, up, eta=1.0, confidence_level=1.5)
    with pytest.raises(ValueError, match=r"`confidence_level` must be a number or shape \(3,\)"):
        cv.regression_mwi_score(y, lo, up, confidence_level=[0.9, 0.8])
    with pytest.raises(ValueError, match="`eta` must be finite"):
        cv.coverage_width_based(y, lo, up, eta=np.nan, confidence_level=0.9)
    with pytest.raises(ValueError, match="`y` must not be constant"):
        cv.coverage_width_based(np.ones(N, np.float32), lo, up, eta=1.0, confidence_level=0.9)
    with pytest.raises(ValueError, match="`normalize` must be True or False"):
        cv.coverage_width_based(y, lo, up, eta=1.0, confidence_level=0.9, normalize="yes")
    with pytest.raises(ValueError, match=r"`labels` must lie in \[0, 5\)"):
        cv.classification_coverage_score(np.full(N, 5), sets)
    with pytest.raises(ValueError, match=r"`sets` must be a boolean mask \(or 0/1\); got 2"):
        cv.classification_mean_width_score(sets.astype(np.int32) * 2)
    with pytest.raises(ValueError, match="`sets` must be a boolean mask"):
        cv.classification_mean_width_score(sets[:, 0, 0])
    with pytest.raises(ValueError, match=r"`num_bins` must be at most K \+ 1 = 6"):
        cv.classification_ssc(labels, sets, num_bins=7)
    with pytest.raises(ValueError, match=r"`labels` must have shape \(300,\)"):
        cv.classification_ssc_score(labels[:-1], sets)


def test_validation_is_skipped_under_tracing():
    """Value checks need concrete arrays; under jit a NaN target is simply not covered."""
    y, lo, up = _intervals(28, levels=1)
    bad = y.copy()
    bad[0] = np.nan
    eager = cv.regression_coverage_score(y[1:], lo[1:, 0], up[1:, 0])
    traced = jax.jit(cv.regression_coverage_score)(bad, lo[:, 0], up[:, 0])
    assert_close(traced, float(eager) * (N - 1) / N)


def test_float32_sums_stay_accurate_at_large_n():
    rng = np.random.default_rng(29)
    n = 1_000_003
    w = rng.uniform(0, 1, n).astype(np.float32)
    lo = rng.normal(0, 1, n).astype(np.float32)
    up = lo + rng.gamma(2.0, 1.0, n).astype(np.float32)
    width = up.astype(np.float64) - lo.astype(np.float64)
    got = cv.regression_mean_width_score(lo, up, weights=w)
    assert_close(got, (w * width).sum() / w.astype(np.float64).sum())
