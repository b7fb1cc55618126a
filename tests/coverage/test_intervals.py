"""Tests of jaxcal.coverage's interval metrics (coverage, mean width, CWC, Winkler) against
MAPIE 1.6, the seed's formulas and float64 NumPy oracles."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from mapie.metrics import regression as mapie_reg

from jaxcal import coverage as cv
from tests.coverage_data import (
    LEVELS,
    L,
    N,
    as_f64,
    assert_jit_matches_eager,
    conformal_regression,
    intervals,
    mapie_pis,
    repeat_rows,
    repetition_weights,
    seed_formula_case,
)
from tests.helpers import assert_close, x64

# --------------------------------------------------------------------------- vs MAPIE


@pytest.mark.parametrize("use_x64", [False, True])
def test_regression_coverage_and_width_match_mapie(use_x64):
    y, lo, up = intervals(0)
    pis = mapie_pis(lo, up)
    y64 = y.astype(np.float64)
    if use_x64:
        y, lo, up = as_f64(y, lo, up)
    with x64() if use_x64 else contextlib.nullcontext():
        assert_close(
            cv.regression_coverage_score(y, lo, up), mapie_reg.regression_coverage_score(y64, pis)
        )
        assert_close(
            cv.regression_mean_width_score(lo, up), mapie_reg.regression_mean_width_score(pis)
        )
        # one level (N,) gives 0-d results
        assert cv.regression_coverage_score(y, lo[:, 0], up[:, 0]).shape == ()


def test_cwc_and_winkler_match_mapie():
    y32, lo32, up32 = intervals(2, crossed=True)
    y, lo, up = as_f64(y32, lo32, up32)
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
                y, mapie_pis(lo[:, j], up[:, j])[:, :, None], float(level)
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
    expected = mapie_reg.regression_mwi_score(y, mapie_pis(lo[:, 0], up[:, 0])[:, :, None], 0.8)
    assert_close(cv.regression_mwi_score(y32, lo32, up32, confidence_level=0.8)[0], expected)


def test_real_split_conformal_regressor():
    y, pis = conformal_regression()
    lo, up = pis[:, 0, :], pis[:, 1, :]
    with x64():
        assert_close(
            cv.regression_coverage_score(y, lo, up), mapie_reg.regression_coverage_score(y, pis)
        )
        assert_close(
            cv.regression_mean_width_score(lo, up), mapie_reg.regression_mean_width_score(pis)
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


# ------------------------------------------------------ the seed's formulas, where MAPIE differs


def test_seed_formulas_cwc_and_winkler():
    y, lo, up, covered, width = seed_formula_case()
    n = y.shape[0]
    with x64():
        # CWC: the seed's (1 - MWS) exp(-eta (RCS - (1 - alpha))^2), no range normalisation.
        seed = (1 - width.mean()) * np.exp(-2.0 * (covered.mean() - 0.9) ** 2)
        got = cv.coverage_width_based(y, lo, up, eta=2.0, confidence_level=0.9, normalize=False)
        assert_close(got, seed)
        mapie_value = cv.coverage_width_based(y, lo, up, eta=2.0, confidence_level=0.9)
        assert not np.isclose(float(mapie_value), seed)  # the normalisation matters here
        # Winkler: the seed's penalty sum has no 1/n; MAPIE and jaxcal average it.
        alpha = 0.1
        penalty = np.maximum(y - up, 0) + np.maximum(lo - y, 0)
        assert penalty.sum() > 0
        got = cv.regression_mwi_score(y, lo, up, confidence_level=1 - alpha)
        assert_close(got, width.mean() + 2 / alpha * penalty.sum() / n)
        assert not np.isclose(float(got), width.mean() + 2 / alpha * penalty.sum())


# -------------------------------------------------------------------------------- weights


def test_integer_weights_equal_repetition():
    y, lo, up = intervals(8)
    # counts summing to N: the repeated data have the shapes of the weighted (no compile)
    counts = repetition_weights()
    w = counts.astype(np.float32)
    ry, rlo, rup = repeat_rows(counts, y, lo, up)
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
    ]
    for got, expected in pairs:
        jax.tree.map(assert_close, got, expected)


def test_weight_scale_invariance_and_zero_weight():
    y, lo, up = intervals(13)
    w = np.random.default_rng(14).uniform(0.1, 2, N).astype(np.float32)
    assert_close(
        cv.regression_coverage_score(y, lo, up, weights=w),
        cv.regression_coverage_score(y, lo, up, weights=7 * w),
    )
    zero = np.zeros(N, np.float32)
    for value in (
        cv.regression_coverage_score(y, lo, up, weights=zero),
        cv.regression_mean_width_score(lo, up, weights=zero),
        cv.regression_mwi_score(y, lo, up, weights=zero, confidence_level=0.9),
    ):
        np.testing.assert_array_equal(value, 0)


# ------------------------------------------------------------------ jit, vmap, grad, compiles


def test_jit_matches_eager_and_does_not_recompile():
    y, lo, up = intervals(16)
    assert_jit_matches_eager(
        {
            "rcs": (lambda a, b, c: cv.regression_coverage_score(a, b, c), (y, lo, up)),
            "rmws": (lambda a, b, c: cv.regression_mean_width_score(b, c), (y, lo, up)),
            "cwc": (
                lambda a, b, c: cv.coverage_width_based(a, b, c, eta=1.0, confidence_level=0.9),
                (y, lo, up),
            ),
            "mwi": (
                lambda a, b, c: cv.regression_mwi_score(a, b, c, confidence_level=LEVELS),
                (y, lo, up),
            ),
        }
    )


def test_vmap_over_interval_sets():
    """vmap over a batch of interval sets equals the level-axis form (already compiled)."""
    y, lo, up = intervals(8)
    w = repetition_weights().astype(np.float32)
    batched = {  # name: (function vmapped over the level columns, level-axis result)
        "rcs": (
            lambda b, c: cv.regression_coverage_score(y, b, c, weights=w),
            cv.regression_coverage_score(y, lo, up, weights=w),
        ),
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


def test_gradients():
    y, lo, up = intervals(24, n=40, levels=1)
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


def test_traced_crossed_intervals_follow_mapie():
    """Under jit the crossed check is skipped: a crossed interval never covers, |u - l| width."""
    y, lo, up = intervals(25, crossed=True)
    pis = mapie_pis(lo, up)
    y64 = y.astype(np.float64)
    assert_close(
        jax.jit(cv.regression_coverage_score)(y, lo, up),
        mapie_reg.regression_coverage_score(y64, pis),
    )
    assert_close(
        jax.jit(cv.regression_mean_width_score)(lo, up), mapie_reg.regression_mean_width_score(pis)
    )


def test_float32_sums_stay_accurate_at_large_n():
    rng = np.random.default_rng(29)
    n = 1_000_003
    w = rng.uniform(0, 1, n).astype(np.float32)
    lo = rng.normal(0, 1, n).astype(np.float32)
    up = lo + rng.gamma(2.0, 1.0, n).astype(np.float32)
    width = up.astype(np.float64) - lo.astype(np.float64)
    got = cv.regression_mean_width_score(lo, up, weights=w)
    assert_close(got, (w * width).sum() / w.astype(np.float64).sum())
