"""Degenerate valid input has its documented finite answer: never a NaN (issue 26, item 4).

Constant scores (0, 1/2, 1 and in between), one class only, zero total weight, N = 1 and
N = 2, over the clinical functions, CORP and the segment functions (the selective ones do
not exist yet). Infinities are allowed only where the docstrings promise them, each for
its reason:

* data impossible under the model (an event at a score of exactly 0, a non-event at 1,
  with positive weight): a test statistic of +inf with p-value 0 (Hosmer-Lemeshow's C,
  the cumulative tests within a segment, the multicalibration error on every scale), and
  its log p-value -inf;
* zero total weight: the calibration slope's, intercept's and CITL's standard errors are
  +inf (no information), their intervals (-inf, inf);
* one class only: ``mce_relative`` is +inf when the MCE is positive (a prevalence of 0).

The fast property test draws the cases at one shape, 7 rows, with zero weights masking
rows to reach N = 1 and N = 2 (one compilation per function); the slow one runs true
shapes (1,) and (2,) without weights.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxcal
from jaxcal import stats

KEY = jax.random.key(0)
ROWS = 7


def _ids(n):
    return jnp.asarray(np.arange(n) % 2, jnp.int32)


#: name -> (call, fields that may be +-inf, and when: "impossible", "empty", "one class").
FUNCTIONS = {
    "calibration_slope_intercept": (
        lambda p, y, w: stats.calibration_slope_intercept(p, y, weights=w),
        {"empty": ("std_error", "low", "high")},
    ),
    "ici.loess": (lambda p, y, w: stats.ici(p, y, weights=w), {}),
    "ici.corp": (lambda p, y, w: stats.ici(p, y, weights=w, smoother="corp"), {}),
    "hosmer_lemeshow_test": (
        lambda p, y, w: stats.hosmer_lemeshow_test(p, y, n_groups=3, weights=w),
        # an impossible outcome: C = +inf, p = 0 and its log -inf (TestResult's convention)
        {"impossible": ("statistic", "log_p_value")},
    ),
    "observed_expected_ratio": (lambda p, y, w: stats.observed_expected_ratio(p, y, weights=w), {}),
    "corp_curve": (lambda p, y, w: jaxcal.corp_curve(p, y, weights=w), {}),
    "score_decomposition.brier": (lambda p, y, w: jaxcal.score_decomposition(p, y, weights=w), {}),
    "score_decomposition.log": (
        lambda p, y, w: jaxcal.score_decomposition(p, y, weights=w, score="log"),
        {},
    ),
    "score_decomposition.binned": (
        lambda p, y, w: jaxcal.score_decomposition(p, y, weights=w, method="binned", n_bins=3),
        {},
    ),
    "murphy_diagram": (lambda p, y, w: jaxcal.murphy_diagram(p, y, weights=w, n_thresholds=5), {}),
    "corp_bands": (
        lambda p, y, w: jaxcal.corp_bands(p, y, key=KEY, n_resamples=4, weights=w),
        {},
    ),
    "corp_bands.confidence": (
        lambda p, y, w: jaxcal.corp_bands(
            p, y, key=KEY, n_resamples=4, weights=w, kind="confidence"
        ),
        {},
    ),
    "score_decomposition_ci": (
        lambda p, y, w: jaxcal.score_decomposition_ci(p, y, key=KEY, n_resamples=4, weights=w),
        {},
    ),
    "multicalibration_error": (
        lambda p, y, w: stats.multicalibration_error(
            p, y, _ids(p.shape[0]), n_groups=2, weights=w, min_segment_size=1, max_skewness=None
        ),
        {
            "impossible": (
                "statistic",
                "log_p_value",
                "mce_sigma",
                "mce",
                "mce_relative",
                "log_family_p_value",
            ),
            "one class": ("mce_relative",),
        },
    ),
    "multicalibration_error.default": (
        lambda p, y, w: stats.multicalibration_error(p, y, _ids(p.shape[0]), n_groups=2, weights=w),
        {"impossible": ("statistic", "log_p_value"), "one class": ("mce_relative",)},
    ),
    "subpopulation_test": (
        lambda p, y, w: stats.subpopulation_test(p, y, _ids(p.shape[0]) == 0, weights=w),
        {},
    ),
    "calibration_tests.groups": (
        lambda p, y, w: stats.calibration_tests(
            p, y, groups=_ids(p.shape[0]), n_groups=2, weights=w
        ),
        {"impossible": ("statistic", "log_p_value")},
    ),
    "ece.groups": (
        lambda p, y, w: jaxcal.ece(p, y, groups=_ids(p.shape[0]), n_groups=2, weights=w),
        {},
    ),
    "brier_score.groups": (
        lambda p, y, w: jaxcal.brier_score(p, y, groups=_ids(p.shape[0]), n_groups=2, weights=w),
        {},
    ),
    "log_loss.groups": (
        lambda p, y, w: jaxcal.log_loss(p, y, groups=_ids(p.shape[0]), n_groups=2, weights=w),
        {},
    ),
    "reliability_curve.groups": (
        lambda p, y, w: jaxcal.reliability_curve(
            p, y, groups=_ids(p.shape[0]), n_groups=2, weights=w
        ),
        {},
    ),
}


def _conditions(p, y, w) -> set[str]:
    live = np.ones(p.shape, bool) if w is None else np.asarray(w) > 0
    p, y = np.asarray(p), np.asarray(y)
    out = set()
    if not live.any():
        out.add("empty")
    if np.any(live & (((p == 0) & (y == 1)) | ((p == 1) & (y == 0)))):
        out.add("impossible")
    if live.any() and len(set(y[live].tolist())) == 1:
        out.add("one class")
    return out


def check_documented(name, p, y, w):
    """No NaN in any float output; an infinity only in a field documented for the case."""
    call, allowed = FUNCTIONS[name]
    out = call(jnp.asarray(p), jnp.asarray(y), None if w is None else jnp.asarray(w))
    cases = _conditions(p, y, w)
    fields = {f for case in cases for f in allowed.get(case, ())}
    for path, leaf in jax.tree_util.tree_leaves_with_path(out):
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            continue
        values = np.asarray(leaf)
        where = jax.tree_util.keystr(path)
        assert not np.isnan(values).any(), f"{name}: NaN in {where} for {cases or 'plain'} data"
        if np.isinf(values).any():
            field = where.rsplit(".", 1)[-1]
            assert field in fields, f"{name}: inf in {where} for {cases or 'plain'} data"


_SCORES = {
    "zeros": lambda n: np.zeros(n),
    "ones": lambda n: np.ones(n),
    "half": lambda n: np.full(n, 0.5),
    "constant": lambda n: np.full(n, 0.3),
    "spread": lambda n: np.linspace(0.1, 0.9, n),
}
_LABELS = {
    "zeros": lambda n: np.zeros(n, np.int32),
    "ones": lambda n: np.ones(n, np.int32),
    "mixed": lambda n: (np.arange(n) % 2).astype(np.int32),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=12, deadline=None)
@given(
    scores=st.sampled_from(sorted(_SCORES)),
    labels=st.sampled_from(sorted(_LABELS)),
    live=st.sampled_from([0, 1, 2, ROWS]),  # rows of positive weight: N = 0 (zero weight), 1, 2
)
def test_degenerate_input_has_a_documented_answer(name, scores, labels, live):
    p = _SCORES[scores](ROWS).astype(np.float32)
    y = _LABELS[labels](ROWS)
    w = (np.arange(ROWS) < live).astype(np.float32)
    check_documented(name, p, y, w)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("n", [1, 2])
def test_one_and_two_rows_without_weights(name, n):
    for scores in _SCORES:
        for labels in _LABELS:
            p = _SCORES[scores](n).astype(np.float32)
            check_documented(name, p, _LABELS[labels](n), None)
