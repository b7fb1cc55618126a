"""Tests of jaxcal.coverage's input validation: every error names its argument, and value
checks are skipped under tracing."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxcal import coverage as cv
from tests.coverage_data import N, intervals, prediction_sets
from tests.helpers import assert_close


def test_bad_inputs():
    y, lo, up = intervals(26)
    labels, sets = prediction_sets(27)
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
    y, lo, up = intervals(28, levels=1)
    bad = y.copy()
    bad[0] = np.nan
    eager = cv.regression_coverage_score(y[1:], lo[1:, 0], up[1:, 0])
    traced = jax.jit(cv.regression_coverage_score)(bad, lo[:, 0], up[:, 0])
    assert_close(traced, float(eager) * (N - 1) / N)
