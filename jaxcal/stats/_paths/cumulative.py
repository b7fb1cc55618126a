"""Binning-free tests of calibration: cumulative differences, KS, Kuiper, Spiegelhalter.

Arrieta-Ibarra, Gujral, Tannen, Tygert & Xu (2022) sort the scores ascending and walk the
cumulative differences between labels and scores,

.. math::
   C_0 = 0,\\qquad C_k = \\frac{1}{W} \\sum_{i \\le k} w_i (y_i - s_i),\\qquad
   \\sigma = \\frac{1}{W} \\sqrt{\\textstyle\\sum_i w_i^2 s_i (1 - s_i)},\\qquad W = \\sum_i w_i,

(w = 1 without weights: C_k = (1/N) sum (y_i - s_i), sigma = sqrt(sum s(1 - s)) / N; Tygert's
weighted variant otherwise). Under the null hypothesis ``P(y = 1 | s) = s`` the path C / sigma
tends to a standard Brownian motion on [0, 1], so the Kolmogorov-Smirnov statistic
``G = max_k |C_k| / sigma`` and the Kuiper statistic ``H = (max_k C_k - min_k C_k) / sigma``
(k = 0..N, the origin included) have the laws of max|B| and of the range of B
(``jaxcal/stats/_paths/brownian.py``).

**Ties.** Samples with equal scores have no order. They are aggregated into one step per
distinct score, as in Tygert's weighted variant: the path is observed only at the end of
each group of equal scores (and at the origin), so it does not depend on how the input
orders tied samples, and there is no random jitter (MAPIE jitters the scores by 1e-8
relative, so its statistic on tied scores depends on a random seed). ``sigma`` keeps the
per-sample variances ``sum_{i in group} w_i^2 s (1 - s)``: the null variance of the group's
step. The same multiset of (score, label) gives bit-for-bit the same statistic and p-value
in any input order; so does a weighted one when the weights are integers (0/1 masks,
counts), whose group sums are exact; other weights are summed per group in input order,
so there the results agree to float round-off.

**Weights** are Tygert's: sample i contributes one Bernoulli outcome scaled by w_i, so the
null variance of ``sum w_i (y_i - s_i)`` is ``sum w_i^2 s_i (1 - s_i)``. They are not
frequency counts (to count a sample twice, repeat it). Zero weights mask padding; a zero
total weight gives statistic 0 and p-value 1 (1/2 for one-sided Spiegelhalter tests).

**sigma = 0** (every weighted score is 0 or 1): if every label agrees with its score the
path is identically 0, and the statistic is 0 with p-value 1; otherwise the data are
impossible under the null, and the statistic is +inf with p-value 0. Spiegelhalter's Z
follows the same rule (0/0 -> 0; x/0 -> +-inf).

**Validity.** The p-values are asymptotic: the laws of a Brownian motion, the limit as
the variance ``sum w^2 s (1 - s)`` grows. Where the steps are skewed (few rows, or events
rare because the scores are near 0 or 1) the statistic's tail is heavier and the
p-values too small. The skewness of the sum of steps, ``gamma = sum w^3 s (1 - s)
(1 - 2 s) / V^(3/2)``, decides it: within ``|gamma| <= 0.15`` (about 45 expected events
and 45 expected non-events, unless the scores are near 1/2) the tail was within 1.3 of
its nominal level down to 1e-4 in simulations under the null, and within 1.0 for
``|gamma| < 0.1``; see :func:`jaxcal.stats.multicalibration_error`, which tests a segment
only under that condition (and at least 10 rows) and reports the others as excluded. With ``groups=``, these functions return the raw test of every segment,
however small: read them with that condition in mind.

**Speed and gradients**: ``jaxcal/stats/_paths/sorted_path.py`` (one sort; a custom JVP).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxcal._core.checks import check_option, check_probs_labels
from jaxcal._core.groups import check_groups, reject_lone_n_groups
from jaxcal._core.validity import run_validated
from jaxcal.stats._paths.pvalues import (
    ALTERNATIVES,
    CalibrationTests,
    spiegelhalter_result,
    spiegelhalter_terms,
)
from jaxcal.stats._paths.pvalues import ks_result as _ks
from jaxcal.stats._paths.pvalues import kuiper_result as _kuiper
from jaxcal.stats._paths.pvalues import scores_targets as _scores_targets
from jaxcal.stats._paths.segments import grouped_tests_kernel
from jaxcal.stats._paths.sorted_path import extremes as _extremes
from jaxcal.stats._paths.sorted_path import sorted_path as _sorted_path
from jaxcal.stats._result import TestResult


class CumulativeDifferences(NamedTuple):
    """The path of cumulative differences (:func:`~jaxcal.stats.cumulative_differences`).

    Attributes:
      scores: ``(N,)`` the scores sorted ascending (``scores[k - 1]`` belongs to step k).
      abscissa: ``(N + 1,)`` A_k, the share of the total weight of samples 1..k (k/N
        without weights); ``abscissa[0] = 0``, ``abscissa[N] = 1``.
      differences: ``(N + 1,)`` C_k with ``C_0 = 0``. At the last sample of each group of
        equal scores it is the exact value; inside a group it is interpolated linearly in
        the sample count, so that ``plot(abscissa, differences)`` draws the aggregated
        path (one step per distinct score) whatever the order of tied samples.
      sigma: 0-d, the null standard deviation of ``C_N``: sqrt(sum w^2 s(1 - s)) / W.
    """

    scores: jax.Array
    abscissa: jax.Array
    differences: jax.Array
    sigma: jax.Array


def _spiegelhalter(s, y, w, alternative) -> TestResult:
    e, v = spiegelhalter_terms(s, y, w)
    return spiegelhalter_result(jnp.sum(e), jnp.sum(v), alternative)


@jax.jit
def _ks_kernel(scores, labels, weights):
    data, summary = _scores_targets(scores, labels, weights)
    return _ks(*_extremes(*data)), summary


@jax.jit
def _kuiper_kernel(scores, labels, weights):
    data, summary = _scores_targets(scores, labels, weights)
    return _kuiper(*_extremes(*data)), summary


@partial(jax.jit, static_argnames=("alternative",))
def _spiegelhalter_kernel(scores, labels, weights, alternative):
    data, summary = _scores_targets(scores, labels, weights)
    return _spiegelhalter(*data, alternative), summary


@partial(jax.jit, static_argnames=("alternative",))
def _all_kernel(scores, labels, weights, alternative):
    (s, y, w), summary = _scores_targets(scores, labels, weights)
    extremes = _extremes(s, y, w)
    tests = CalibrationTests(
        _ks(*extremes), _kuiper(*extremes), _spiegelhalter(s, y, w, alternative)
    )
    return tests, summary


@jax.jit
def _path_kernel(scores, labels, weights):
    (s, y, w), summary = _scores_targets(scores, labels, weights)
    n = s.shape[0]
    path = _sorted_path(s, y, w)
    dtype = s.dtype
    zero = jnp.zeros(1, dtype)
    t0 = jnp.concatenate([zero, path.total])
    cum_w = jnp.arange(1, n + 1, dtype=dtype) if w is None else jnp.cumsum(path.weight)
    a0 = jnp.concatenate([zero, cum_w])
    end0 = jnp.concatenate([jnp.ones(1, bool), path.is_end])
    idx = jnp.arange(n + 1, dtype=jnp.int32)
    prev = lax.cummax(jnp.where(end0, idx, 0))
    nxt = lax.cummin(jnp.where(end0, idx, n), reverse=True)
    span = (nxt - prev).astype(dtype)
    frac = jnp.where(nxt > prev, (idx - prev).astype(dtype) / jnp.maximum(span, 1), 0)
    values = t0[prev] + frac * (t0[nxt] - t0[prev])
    absc = a0[prev] + frac * (a0[nxt] - a0[prev])
    total_w = a0[-1]
    has_w = total_w > 0
    inv_w = 1 / jnp.where(has_w, total_w, jnp.ones_like(total_w))
    absc = jnp.where(has_w, absc * inv_w, idx.astype(dtype) / n)
    values = jnp.where(has_w, values * inv_w, jnp.zeros_like(values))
    sigma = jnp.where(has_w, jnp.sqrt(path.variance) * inv_w, 0)
    return CumulativeDifferences(path.scores, absc, values, sigma), summary


# ------------------------------------------------------------------ public API


def _validate(scores, labels, weights):
    return check_probs_labels(scores, labels, weights, probs_name="scores", values=False)


def _run(kernel, scores, labels, weights, *static, pad=True):
    return run_validated(kernel, scores, labels, weights, *static, probs_name="scores", pad=pad)


def _grouped(scores, labels, weights, groups, n_groups, alternative) -> CalibrationTests:
    """The three tests within each segment of ``groups`` (leading G axis), one sort."""
    scores, labels, weights = _validate(scores, labels, weights)
    groups, n_groups = check_groups(groups, scores.shape[0], n_groups)
    return _run(grouped_tests_kernel, scores, labels, weights, groups, n_groups, alternative)


def cumulative_differences(
    scores: Any, labels: Any, *, weights: Any = None
) -> CumulativeDifferences:
    """The path of cumulative differences between labels and scores sorted by score.

    ``C_0 = 0``, ``C_k = (1/W) sum_{i<=k} w_i (y_i - s_i)`` over the scores sorted
    ascending (``(1/N) sum (y_i - s_i)`` without weights; note the sign, labels minus
    scores, as in MAPIE). Tied scores form one step (see the module docstring): the
    returned ``differences`` are exact at the last sample of each group of equal scores
    and linearly interpolated inside it, so the path and its extremes do not depend on the
    input order. The Kolmogorov-Smirnov statistic is ``max |differences| / sigma`` and the
    Kuiper statistic ``(max - min) / sigma``.

    Args:
      scores: ``(N,)`` probabilities of the positive class with 0/1 (or bool) ``labels``,
        or ``(N, K)`` rows on the simplex with labels in ``[0, K)``: then the test is of
        the top-label confidence ``max_k p_k`` against correctness
        (:func:`jaxcal.confidence_and_correctness`).
      labels: ``(N,)`` integer or bool labels.
      weights: optional ``(N,)`` non-negative sample weights (Tygert's weighted variant;
        0 masks padding).

    Returns:
      :class:`~jaxcal.stats.CumulativeDifferences` ``(scores (N,), abscissa (N + 1,), differences
      (N + 1,), sigma ())``. Zero total weight gives a zero path and sigma 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap`` it is skipped.

    Example:
      >>> import jax.numpy as jnp
      >>> c = cumulative_differences(jnp.array([0.7, 0.3, 0.6]), jnp.array([1, 0, 0]))
      >>> [round(v, 4) for v in c.differences.tolist()]
      [0.0, -0.1, -0.3, -0.2]

    References:
      Arrieta-Ibarra, Gujral, Tannen, Tygert & Xu (2022), "Metrics of calibration for
      probabilistic predictions", JMLR 23(351); Tygert (2023), "Cumulative deviation of a
      subpopulation from the full population" (weighted variant).
    """
    scores, labels, weights = _validate(scores, labels, weights)
    return _run(_path_kernel, scores, labels, weights, pad=False)  # a path of N points


def ks_test(
    scores: Any,
    labels: Any,
    *,
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> TestResult:
    """Kolmogorov-Smirnov test of calibration on the cumulative differences.

    ``G = max_{0<=k<=N} |C_k| / sigma`` (:func:`~jaxcal.stats.cumulative_differences`, ties aggregated,
    sigma = sqrt(sum w^2 s(1 - s)) / W), with p-value ``P(max_{0<=t<=1} |B(t)| >= G)``
    from :func:`jaxcal.stats.brownian_max_sf` (asymptotic in N). Without ties or weights
    the statistic equals MAPIE's ``kolmogorov_smirnov_statistic``. MAPIE's p-value is
    ``1 - CDF``, pure round-off past G = 8.5 (-2e-11 at G = 21.6); this one is the
    Gaussian tail itself, positive and accurate until it underflows.

    Args:
      scores: ``(N,)`` probabilities of the positive class with 0/1 (or bool) ``labels``,
        or ``(N, K)`` rows on the simplex with labels in ``[0, K)``: then the test is of
        the top-label confidence ``max_k p_k`` against correctness
        (:func:`jaxcal.confidence_and_correctness`).
      labels: ``(N,)`` integer or bool labels.
      weights: optional ``(N,)`` non-negative sample weights (Tygert's weighted variant;
        0 masks padding).
      groups: optional segments: integer ids ``(N,)`` in ``[0, n_groups)`` (disjoint; one
        sort ordered by id and score) or a boolean membership matrix ``(N, G)``
        (overlapping; one sort of the scores for all). Results then have a leading G axis.
      n_groups: the number of segments, static; required with integer ``groups``.

    Returns:
      :class:`~jaxcal.stats.TestResult` ``(statistic, p_value)``, 0-d arrays. sigma = 0: statistic 0
      and p-value 1 if every label equals its 0/1 score, else +inf and 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap`` it is skipped. For
    p-values below the smallest float use ``log_brownian_max_sf(result.statistic)``.

    Example:
      >>> import jax.numpy as jnp
      >>> r = ks_test(jnp.array([0.1, 0.9, 0.21, 0.9, 0.5]), jnp.array([0, 1, 0, 1, 0]))
      >>> round(float(r.statistic), 3), round(float(r.p_value), 3)
      (0.978, 0.649)

    References:
      Arrieta-Ibarra et al. (2022), JMLR 23(351); Tygert (2022), "Calibration of P-values
      for calibration and for deviation of a subpopulation from the full population",
      arXiv:2202.00100; Darling & Siegert (1953).
    """
    reject_lone_n_groups(groups, n_groups)
    if groups is not None:
        return _grouped(scores, labels, weights, groups, n_groups, "two-sided").ks
    scores, labels, weights = _validate(scores, labels, weights)
    return _run(_ks_kernel, scores, labels, weights)


def kuiper_test(
    scores: Any,
    labels: Any,
    *,
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> TestResult:
    """Kuiper test of calibration: the range of the cumulative differences.

    ``H = (max_{0<=k<=N} C_k - min_{0<=k<=N} C_k) / sigma``, the origin ``C_0 = 0``
    included, so ``H >= G`` (the KS statistic) always. MAPIE leaves the origin out, which
    makes its value smaller whenever the path keeps one sign; the absolute values in one
    seed text's formula are a typo. p-value ``P(range of B on [0, 1] >= H)`` from
    :func:`jaxcal.stats.brownian_range_sf`.

    Args:
      scores: ``(N,)`` probabilities of the positive class with 0/1 (or bool) ``labels``,
        or ``(N, K)`` rows on the simplex with labels in ``[0, K)``: then the test is of
        the top-label confidence ``max_k p_k`` against correctness
        (:func:`jaxcal.confidence_and_correctness`).
      labels: ``(N,)`` integer or bool labels.
      weights: optional ``(N,)`` non-negative sample weights (Tygert's weighted variant;
        0 masks padding).
      groups: optional segments: integer ids ``(N,)`` in ``[0, n_groups)`` (disjoint; one
        sort ordered by id and score) or a boolean membership matrix ``(N, G)``
        (overlapping; one sort of the scores for all). Results then have a leading G axis.
      n_groups: the number of segments, static; required with integer ``groups``.

    Returns:
      :class:`~jaxcal.stats.TestResult` ``(statistic, p_value)``, 0-d arrays; sigma = 0 as in
      :func:`~jaxcal.stats.ks_test`.

    Validation runs only on concrete inputs; under ``jit``/``vmap`` it is skipped.

    Example:
      >>> import jax.numpy as jnp
      >>> r = kuiper_test(jnp.array([0.1, 0.9, 0.21, 0.9, 0.5]), jnp.array([0, 1, 0, 1, 0]))
      >>> round(float(r.statistic), 3), round(float(r.p_value), 3)
      (0.978, 0.947)

    References:
      Arrieta-Ibarra et al. (2022), JMLR 23(351); Tygert (2022), arXiv:2202.00100; Feller
      (1951), Ann. Math. Statist. 22(3).
    """
    reject_lone_n_groups(groups, n_groups)
    if groups is not None:
        return _grouped(scores, labels, weights, groups, n_groups, "two-sided").kuiper
    scores, labels, weights = _validate(scores, labels, weights)
    return _run(_kuiper_kernel, scores, labels, weights)


def spiegelhalter_test(
    scores: Any,
    labels: Any,
    *,
    alternative: str = "two-sided",
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> TestResult:
    """Spiegelhalter's Z test of calibration.

    .. math::
       Z = \\frac{\\sum_i w_i (y_i - s_i)(1 - 2 s_i)}
                 {\\sqrt{\\sum_i w_i^2 (1 - 2 s_i)^2 s_i (1 - s_i)}}

    the standardised difference between the Brier score and its expectation under the
    null (Z > 0: Brier score worse than calibrated scores would give). p-value from the
    standard normal: ``"greater"`` ``P(N > Z)`` (MAPIE's ``spiegelhalter_p_value``),
    ``"less"`` ``P(N < Z)``, ``"two-sided"`` ``2 P(N > |Z|)``, each from a survival
    function, never ``1 - CDF``.

    Args:
      scores: ``(N,)`` probabilities of the positive class with 0/1 (or bool) ``labels``,
        or ``(N, K)`` rows on the simplex with labels in ``[0, K)``: then the test is of
        the top-label confidence ``max_k p_k`` against correctness
        (:func:`jaxcal.confidence_and_correctness`).
      labels: ``(N,)`` integer or bool labels.
      weights: optional ``(N,)`` non-negative sample weights (Tygert's weighted variant;
        0 masks padding).
      groups: optional segments: integer ids ``(N,)`` in ``[0, n_groups)`` (disjoint; one
        sort ordered by id and score) or a boolean membership matrix ``(N, G)``
        (overlapping; one sort of the scores for all). Results then have a leading G axis.
      n_groups: the number of segments, static; required with integer ``groups``.
      alternative: ``"two-sided"`` (default), ``"greater"`` or ``"less"``.

    Returns:
      :class:`~jaxcal.stats.TestResult` ``(statistic, p_value)``. A zero denominator (scores all in
      {0, 1/2, 1}) gives Z = 0 when the numerator is 0, else +-inf.

    Validation runs only on concrete inputs; under ``jit``/``vmap`` it is skipped.

    Example:
      >>> import jax.numpy as jnp
      >>> s, y = jnp.array([0.1, 0.9, 0.21, 0.9, 0.5]), jnp.array([0, 1, 0, 1, 0])
      >>> r = spiegelhalter_test(s, y, alternative="greater")
      >>> round(float(r.statistic), 3), round(float(r.p_value), 3)
      (-0.757, 0.775)

    References:
      Spiegelhalter (1986), "Probabilistic prediction in patient management and clinical
      trials", Statistics in Medicine 5(5); Rufibach (2010), J. Clin. Epidemiol. 63(8).
    """
    check_option("alternative", alternative, ALTERNATIVES)
    reject_lone_n_groups(groups, n_groups)
    if groups is not None:
        return _grouped(scores, labels, weights, groups, n_groups, alternative).spiegelhalter
    scores, labels, weights = _validate(scores, labels, weights)
    return _run(_spiegelhalter_kernel, scores, labels, weights, alternative)


def calibration_tests(
    scores: Any,
    labels: Any,
    *,
    alternative: str = "two-sided",
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> CalibrationTests:
    """The Kolmogorov-Smirnov, Kuiper and Spiegelhalter tests from one sort.

    Same results as :func:`~jaxcal.stats.ks_test`, :func:`~jaxcal.stats.kuiper_test` and :func:`~jaxcal.stats.spiegelhalter_test`
    (bit for bit), for the cost of one of them: the sort dominates and is shared.

    Args:
      scores: ``(N,)`` probabilities of the positive class with 0/1 (or bool) ``labels``,
        or ``(N, K)`` rows on the simplex with labels in ``[0, K)``: then the test is of
        the top-label confidence ``max_k p_k`` against correctness
        (:func:`jaxcal.confidence_and_correctness`).
      labels: ``(N,)`` integer or bool labels.
      weights: optional ``(N,)`` non-negative sample weights (Tygert's weighted variant;
        0 masks padding).
      groups: optional segments: integer ids ``(N,)`` in ``[0, n_groups)`` (disjoint; one
        sort ordered by id and score) or a boolean membership matrix ``(N, G)``
        (overlapping; one sort of the scores for all). Results then have a leading G axis.
      n_groups: the number of segments, static; required with integer ``groups``.
      alternative: of the Spiegelhalter test.

    Returns:
      :class:`~jaxcal.stats.CalibrationTests` ``(ks, kuiper, spiegelhalter)``, each a :class:`~jaxcal.stats.TestResult`.

    Example:
      >>> import jax.numpy as jnp
      >>> r = calibration_tests(jnp.array([0.2, 0.4, 0.6, 0.8]), jnp.array([0, 1, 0, 1]))
      >>> round(float(r.ks.statistic), 3), round(float(r.kuiper.statistic), 3)
      (0.447, 0.671)

    References:
      See :func:`~jaxcal.stats.ks_test`, :func:`~jaxcal.stats.kuiper_test`, :func:`~jaxcal.stats.spiegelhalter_test`.
    """
    check_option("alternative", alternative, ALTERNATIVES)
    reject_lone_n_groups(groups, n_groups)
    if groups is not None:
        return _grouped(scores, labels, weights, groups, n_groups, alternative)
    scores, labels, weights = _validate(scores, labels, weights)
    return _run(_all_kernel, scores, labels, weights, alternative)
