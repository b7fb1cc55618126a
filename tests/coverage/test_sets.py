"""Tests of jaxcal.coverage's prediction-set metrics (coverage, mean size) against MAPIE 1.6."""

from __future__ import annotations

import contextlib

import jax
import numpy as np
import pytest
from mapie.metrics import classification as mapie_cls

from jaxcal import coverage as cv
from tests.coverage_data import (
    L,
    assert_jit_matches_eager,
    conformal_classification,
    prediction_sets,
    repeat_rows,
    repetition_weights,
)
from tests.helpers import assert_close, x64


@pytest.mark.parametrize("use_x64", [False, True])
def test_classification_coverage_and_width_match_mapie(use_x64):
    labels, sets = prediction_sets(3)
    with x64() if use_x64 else contextlib.nullcontext():
        assert_close(
            cv.classification_coverage_score(labels, sets),
            mapie_cls.classification_coverage_score(labels, sets),
        )
        assert_close(
            cv.classification_mean_width_score(sets),
            mapie_cls.classification_mean_width_score(sets),
        )
        # one level (N, K) and 0/1 integers
        one = cv.classification_coverage_score(labels, sets[:, :, 1].astype(np.int32))
        assert one.shape == ()
        assert_close(one, mapie_cls.classification_coverage_score(labels, sets[:, :, 1])[0])


def test_real_split_conformal_classifier():
    labels, sets = conformal_classification()
    assert sets.shape[1:] == (10, L)
    assert_close(
        cv.classification_coverage_score(labels, sets),
        mapie_cls.classification_coverage_score(labels, sets),
    )
    assert_close(
        cv.classification_mean_width_score(sets), mapie_cls.classification_mean_width_score(sets)
    )


def test_integer_weights_equal_repetition():
    labels, sets = prediction_sets(9)
    # counts summing to N: the repeated data have the shapes of the weighted (no compile)
    counts = repetition_weights()
    w = counts.astype(np.float32)
    rlabels, rsets = repeat_rows(counts, labels, sets)
    pairs = [
        (
            cv.classification_coverage_score(labels, sets, weights=w),
            cv.classification_coverage_score(rlabels, rsets),
        ),
        (
            cv.classification_mean_width_score(sets, weights=w),
            cv.classification_mean_width_score(rsets),
        ),
    ]
    for got, expected in pairs:
        jax.tree.map(assert_close, got, expected)


def test_jit_matches_eager_and_does_not_recompile():
    labels, sets = prediction_sets(17)
    assert_jit_matches_eager(
        {
            "ccs": (lambda a, s: cv.classification_coverage_score(a, s), (labels, sets)),
            "cmws": (lambda a, s: cv.classification_mean_width_score(s), (labels, sets)),
        }
    )
