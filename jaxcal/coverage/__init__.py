"""Conformal coverage metrics: MAPIE's metric set (``mapie.metrics.regression`` and
``mapie.metrics.classification``, MAPIE 1.6) in JAX.

Arguments are JAX-style rather than MAPIE's packed arrays:

* a prediction **interval** is two arrays ``lower`` and ``upper`` of shape ``(N,)`` (one
  confidence level) or ``(N, L)`` (L confidence levels, MAPIE's ``(N, 2, L)`` intervals:
  ``lower = y_pis[:, 0, :]``, ``upper = y_pis[:, 1, :]``); the target ``y`` is ``(N,)``;
* a prediction **set** is a boolean mask ``sets`` of shape ``(N, K)`` (one level) or
  ``(N, K, L)`` (MAPIE's ``predict_set`` output), ``sets[i, k]`` true when class k is in the
  set of sample i; ``labels`` are ``(N,)`` integers in ``[0, K)``.

Output shapes: a scalar metric is a 0-d array for one level and an ``(L,)`` array with a
level axis; the size-stratified coverages are ``(B,)`` / ``(L, B)`` for B size groups
(MAPIE's ``(n_confidence_level, num_bins)`` layout).

Every function takes ``weights=None | (N,)``: non-negative sample weights, 0 masking
padding in fixed-shape batches. Coverage, widths and the Winkler score become weighted
means; the size-stratified coverage groups and HSIC's normalisation have their own rules
(see each function). A zero total weight gives 0.

Validation (eager, concrete inputs only; skipped under ``jit``/``vmap``/``grad``, where the
kernels trust their input): shapes and lengths, empty input, NaN or inf anywhere (MAPIE only
rejects inf and all-NaN arrays), labels in range, set masks holding 0/1, option ranges, and
**crossed intervals** (``lower > upper``), which are rejected by every function except
:func:`~jaxcal.coverage.regression_mwi_score`; the Winkler score reorders them as MAPIE does. Traced crossed
intervals get MAPIE's meaning: they never cover, and their width is ``|upper - lower|``.

Sums over samples are XLA's tree-shaped reductions (see ``jaxcal/_core/numerics.py``; float32
means keep ~1e-6 relative accuracy at large N, tested at N = 1e6) and coverage counts are
int32, exact.

Modules: ``_checks`` (validation of intervals, sets, levels and options), ``_levels`` (the
level axis and the per-level means every kernel shares), ``_intervals`` (coverage, width,
CWC and the Winkler score of intervals), ``_sets`` (coverage and width of prediction sets),
``_ssc`` (size-stratified coverage) and ``_hsic`` (HSIC by a fast Gauss transform).
"""

from jaxcal.coverage._hsic import hsic
from jaxcal.coverage._intervals import (
    coverage_width_based,
    regression_coverage_score,
    regression_mean_width_score,
    regression_mwi_score,
)
from jaxcal.coverage._sets import classification_coverage_score, classification_mean_width_score
from jaxcal.coverage._ssc import (
    SizeStratifiedCoverage,
    classification_ssc,
    classification_ssc_score,
    regression_ssc,
    regression_ssc_score,
)

__all__ = [
    "SizeStratifiedCoverage",
    "classification_coverage_score",
    "classification_mean_width_score",
    "classification_ssc",
    "classification_ssc_score",
    "coverage_width_based",
    "hsic",
    "regression_coverage_score",
    "regression_mean_width_score",
    "regression_mwi_score",
    "regression_ssc",
    "regression_ssc_score",
]
