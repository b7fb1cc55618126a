"""Multicalibration: calibration tests within many segments, with multiplicity control.

A model calibrated on average can be miscalibrated within a segment (a country, an age
band, a device). :func:`~jaxcal.stats.multicalibration_error` runs the Kuiper test of
``jaxcal/stats/_paths/cumulative.py`` within each segment and reports MCGrad's multicalibration error
(Meta's ``mcgrad.metrics.MulticalibrationError``) with its parts, so the values compare
one to one:

.. math::
   \\mathrm{ECCE}_g = \\max_s C_g(s) - \\min_s C_g(s),\\quad
   C_g(s) = \\frac{1}{W_g}\\sum_{i \\in g,\\, s_i \\le s} w_i (y_i - s_i),\\quad
   \\sigma_g = \\frac{\\sqrt{\\sum_{i \\in g} w_i^2 s_i (1 - s_i)}}{W_g},

the origin ``C_g = 0`` included, ``W_g = sum_{i in g} w_i``; the per-segment statistic
``H_g = ECCE_g / sigma_g`` (MCGrad's ``segments_ecce_sigma``), the multicalibration error
``MCE_sigma = max_g H_g`` (``mce_sigma``), ``MCE = MCE_sigma * sigma`` with the sigma of
the whole sample (``mce``), and ``MCE_relative = 100 MCE / min(p, 1 - p)`` with p the
weighted prevalence (``mce_relative``).

Where the two differ: ties are aggregated (one step per distinct score, as everywhere in
jaxcal; MCGrad walks tied samples in the order of an unstable sort); the p-values are the
exact tail of the range of a Brownian motion (:func:`jaxcal.stats.brownian_range_sf`,
log p too), where MCGrad takes ``1 - CDF`` and clamps it at machine epsilon beyond
H = 8.27; and the family is controlled: MCGrad's "p-value of the MCE" is the smallest
per-segment p-value, uncorrected for the G tests. Here the Holm and Bonferroni adjusted
p-values come per segment, and the family-wise p-value ``min(1, G min_g p_g)`` is the
smallest level at which Holm's (and Bonferroni's) procedure rejects any segment: under the
null that every segment is calibrated, it is below alpha with probability at most alpha,
whatever the overlap of the segments, *as far as the per-segment p-values are valid*.

**Where the Brownian tail is valid.** ``p_g`` is the law of the range of a Brownian
motion: the limit of ``H_g`` as the segment's variance ``V_g = sum w^2 s (1 - s)`` grows.
A small segment, or one of rare events (scores near 0 or 1), has a path of a few large
jumps, and its statistic has a heavier tail than the limit: p-values far too small (a
one-row segment with s = 0.0017 and y = 1 got p = 1.5e-129 where the exact probability
of that event is 0.0017; 1,000 two-row segments of a calibrated model were rejected in
99 % of runs). What decides the accuracy is the skewness of the segment's sum of steps,

.. math::
   \\gamma_g = \\frac{\\sum_{i \\in g} w_i^3 s_i (1 - s_i)(1 - 2 s_i)}{V_g^{3/2}},

the quantity of Box, Hunter & Hunter's rule for the normal approximation of a binomial.
Simulated under the null (``scripts/brownian_tail_validity.py``: scores of Beta(0.5, 5),
Beta(2, 2), U(0.001, 0.05), U(0.001, 0.2), U(0.9, 0.999); 10 to 1000 rows), the largest
ratio P(p_g <= t) / t was 0.95 at t = 1e-3 and 1.0 at t = 1e-4 for ``|gamma_g| < 0.1``;
0.93 and 1.3 for 0.1 to 0.15; 1.55 and 2.9 for 0.15 to 0.2; 2.2 and 3.7 for 0.3 to 0.4;
11 and 29 beyond 1. The family-wise test uses level alpha / G. With every segment's
``|gamma_g|`` between 0.15 and 0.2 (100 rows of scores in U(0.17, 0.23), or 400 in
U(0.04, 0.07)), 500 segments were rejected in 9 to 12 % of 400 null runs at alpha = 0.05;
with ``|gamma_g| <= 0.15`` the size stayed at or below alpha (within the binomial band)
for every configuration tried, 10 to 400 rows and 20 to 1000 segments
(``tests/stats/test_segments.py`` pins it, slow). For constant scores s the condition
``|gamma| <= 0.15`` reads ``n s (1 - s) >= 44 (1 - 2 s)^2``: about 45 expected events and
45 expected non-events, unless the scores are near 1/2.

So a segment is **tested** only when it has at least ``min_segment_size`` rows of
positive weight (default 10, MCGrad's ``min_samples_per_segment``) and
``|gamma_g| <= max_skewness`` (default 0.15; None for MCGrad's behaviour, no skewness
condition). The other segments are *excluded* and reported so (``tested`` False, their
``size`` and ``skewness`` given): their statistic, ECCE and sigma are computed as for
every segment, but their p-values are 1 and they count neither in the G of the
adjustments (``n_tested``) nor in ``mce_sigma``. An excluded segment is not evidence of
calibration: it is too small to be tested by this approximation (merge segments, or use
a resampling test such as :func:`jaxcal.stats.consistency_test` on its rows).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxcal._core.checks import check_positive_float, check_positive_int, check_probs_labels
from jaxcal._core.groups import check_groups
from jaxcal._core.validity import run_validated
from jaxcal.stats._paths.brownian import log_range_sf, range_sf
from jaxcal.stats._paths.pvalues import ratio as _ratio
from jaxcal.stats._paths.pvalues import scores_targets as _scores_targets
from jaxcal.stats._paths.segments import SegmentExtremes, segment_extremes


class MulticalibrationResult(NamedTuple):
    """Per-segment Kuiper tests and MCGrad's multicalibration error.

    Attributes:
      statistic: ``(G,)`` H_g = ECCE_g / sigma_g (MCGrad's ``segments_ecce_sigma``); 0
        for an empty segment, +inf when sigma_g = 0 and the path is not flat.
      ecce: ``(G,)`` the range of the cumulative differences ECCE_g (``segments_ecce``).
      sigma: ``(G,)`` sigma_g; 0 for an empty segment.
      weight: ``(G,)`` W_g, the segment's total weight (its size without weights).
      p_value: ``(G,)`` P(range of B >= H_g), unadjusted.
      log_p_value: ``(G,)`` its logarithm, finite beyond the smallest float.
      p_holm: ``(G,)`` Holm's step-down adjusted p-values.
      p_bonferroni: ``(G,)`` ``min(1, G p_g)``.
      mce_sigma: 0-d, ``max_g H_g`` (MCGrad's ``mce_sigma``).
      mce: 0-d, ``mce_sigma`` times the whole sample's sigma (``mce``); +inf when
        ``mce_sigma`` is (an impossible segment), even if that sigma is 0.
      mce_relative: 0-d, ``100 mce / min(p, 1 - p)``, p the prevalence (``mce_relative``);
        with one class only (p = 0 or 1), 0 when ``mce`` is 0, else +inf.
      family_p_value: 0-d, ``min(1, G min_g p_g)``: the smallest level at which Holm's
        procedure rejects some segment.
      log_family_p_value: 0-d, its logarithm.
      size: ``(G,)`` int32, the rows of positive weight in each segment.
      skewness: ``(G,)`` gamma_g, the skewness of the segment's sum of steps under the
        null (module docstring); 0 where V_g = 0.
      tested: ``(G,)`` bool, the segment is tested: ``size >= min_segment_size`` and
        ``|skewness| <= max_skewness``. An excluded segment has p-values 1 and counts in
        no adjustment nor in ``mce_sigma``.
      n_tested: 0-d int32, the number of tested segments: the G of the adjustments.

    Every p-value field and ``mce_sigma`` are over the *tested* segments: G is
    ``n_tested``; with no segment tested, ``mce_sigma`` is 0 and the family p-value 1.
    """

    statistic: jax.Array
    ecce: jax.Array
    sigma: jax.Array
    weight: jax.Array
    p_value: jax.Array
    log_p_value: jax.Array
    p_holm: jax.Array
    p_bonferroni: jax.Array
    mce_sigma: jax.Array
    mce: jax.Array
    mce_relative: jax.Array
    family_p_value: jax.Array
    log_family_p_value: jax.Array
    size: jax.Array
    skewness: jax.Array
    tested: jax.Array
    n_tested: jax.Array


#: Default ``min_segment_size``: MCGrad's ``min_samples_per_segment``.
MIN_SEGMENT_SIZE = 10

#: Default ``max_skewness``: where the Brownian tail held the family-wise size (module
#: docstring).
MAX_SKEWNESS = 0.15


def holm_log(log_p: jax.Array, n_tested: jax.Array | None = None) -> jax.Array:
    """Holm's step-down adjusted p-values, in logs: ``(G,)`` -> ``(G,)``.

    Sorted ascending, ``adj_(j) = max_{i <= j} min(1, (G - i + 1) p_(i))``; in logs so
    that p-values below the smallest float keep their order. ``n_tested``: G, when only
    that many entries are tests and the others have log p = 0 (they sort last, and stay
    at 1).
    """
    num = log_p.shape[-1]
    g = num if n_tested is None else n_tested
    lp_sorted, order = lax.sort((log_p, jnp.arange(num, dtype=jnp.int32)), num_keys=1)
    left = jnp.maximum(g - jnp.arange(num, dtype=jnp.int32), 1).astype(log_p.dtype)
    adjusted = jnp.minimum(lax.cummax(lp_sorted + jnp.log(left), axis=0), 0)
    return jnp.zeros_like(log_p).at[order].set(adjusted)


def _result(
    ext: SegmentExtremes, sums, s, y, w, min_segment_size, max_skewness
) -> MulticalibrationResult:
    ecce_t = ext.top - ext.bottom
    stat = _ratio(ecce_t, ext.variance)
    has = ext.weight > 0
    inv = jnp.where(has, 1 / jnp.where(has, ext.weight, 1), 0)
    ecce = ecce_t * inv
    sigma = jnp.sqrt(ext.variance) * inv
    size = jnp.round(sums[0]).astype(jnp.int32)
    positive = ext.variance > 0
    safe_v = jnp.where(positive, ext.variance, 1)
    skewness = jnp.where(positive, sums[1] / (safe_v * jnp.sqrt(safe_v)), 0)
    tested = size >= min_segment_size
    if max_skewness is not None:
        tested = tested & (jnp.abs(skewness) <= max_skewness)
    n_tested = jnp.sum(tested).astype(jnp.int32)
    log_p = jnp.where(tested, log_range_sf(stat), 0)
    log_g = jnp.log(jnp.maximum(n_tested, 1).astype(stat.dtype))
    log_holm = holm_log(log_p, n_tested)
    log_family = jnp.minimum(log_g + jnp.min(log_p), 0)
    ones = jnp.ones_like(s) if w is None else w
    total = jnp.sum(ones)
    safe_total = jnp.where(total > 0, total, 1)
    var_all = jnp.sum(ones * ones * s * (1 - s))
    sigma_all = jnp.sqrt(var_all) / safe_total
    prevalence = jnp.sum(ones * y) / safe_total
    mce_sigma = jnp.max(jnp.where(tested, stat, 0))
    # An impossible segment (H = inf: sigma_g = 0, a label against its 0/1 score) makes
    # the MCE inf on every scale, even where sigma of the whole sample is 0 too (inf * 0).
    inf = jnp.asarray(jnp.inf, stat.dtype)
    mce = jnp.where(jnp.isinf(mce_sigma), inf, mce_sigma * sigma_all)
    base = jnp.minimum(prevalence, 1 - prevalence)
    # One class only (base 0): 0 when the MCE is 0, else inf (MCGrad divides by 0).
    mce_relative = jnp.where(
        base > 0, 100 * mce / jnp.where(base > 0, base, 1), jnp.where(mce > 0, inf, 0)
    )
    return MulticalibrationResult(
        statistic=stat,
        ecce=ecce,
        sigma=sigma,
        weight=ext.weight,
        p_value=jnp.where(tested, range_sf(stat), 1),
        log_p_value=log_p,
        p_holm=jnp.exp(log_holm),
        p_bonferroni=jnp.exp(jnp.minimum(log_p + log_g, 0)),
        mce_sigma=mce_sigma,
        mce=mce,
        mce_relative=mce_relative,
        family_p_value=jnp.exp(log_family),
        log_family_p_value=log_family,
        size=size,
        skewness=skewness,
        tested=tested,
        n_tested=n_tested,
    )


@partial(jax.jit, static_argnames=("n_groups", "min_segment_size", "max_skewness"))
def _kernel(scores, labels, weights, groups, n_groups, min_segment_size, max_skewness):
    (s, y, w), summary = _scores_targets(scores, labels, weights)
    ones = jnp.ones_like(s) if w is None else w
    # Per segment: the rows of positive weight, and the third cumulant of the steps
    # w (y - s) under the null, w^3 s (1 - s)(1 - 2 s) (the second is V_g).
    live = (ones > 0).astype(s.dtype)
    third = jax.lax.stop_gradient(ones**3 * s * (1 - s) * (1 - 2 * s))
    ext, sums = segment_extremes(s, y, w, groups, n_groups, extra=jnp.stack([live, third]))
    return _result(ext, sums, s, y, w, min_segment_size, max_skewness), summary


def multicalibration_error(
    probs: Any,
    labels: Any,
    groups: Any,
    *,
    n_groups: int | None = None,
    weights: Any = None,
    min_segment_size: int = MIN_SEGMENT_SIZE,
    max_skewness: float | None = MAX_SKEWNESS,
) -> MulticalibrationResult:
    """MCGrad's multicalibration error, with exact per-segment p-values and Holm control.

    Within each segment g the Kuiper statistic of the cumulative differences (ties
    aggregated) ``H_g = (max C_g - min C_g) / sigma_g``; the maximum over segments is
    MCGrad's ``mce_sigma`` (see the module docstring for every formula and where the two
    differ). Per-segment p-values from the exact tail of the range of a Brownian motion,
    Holm- and Bonferroni-adjusted, and the family-wise p-value.

    Args:
      probs: ``(N,)`` probabilities of the positive class with 0/1 labels, or ``(N, K)``
        rows on the simplex (then the top-label confidence against correctness).
      labels: ``(N,)`` integer or bool labels.
      groups: the segments: a boolean membership matrix ``(N, G)`` (overlapping segments;
        one sort for all of them), or integer ids ``(N,)`` in ``[0, n_groups)`` (disjoint
        segments; one sort ordered by id and score).
      n_groups: the number of segments G, static; required with integer ids.
      weights: optional ``(N,)`` non-negative sample weights (Tygert's weighted variant;
        MCGrad's ``weight_column``).
      min_segment_size: segments with fewer rows of positive weight are excluded (not
        tested; default 10, MCGrad's ``min_samples_per_segment``). 1 tests every
        non-empty segment.
      max_skewness: segments whose skewness ``|gamma_g|`` exceeds it are excluded
        (default 0.15: where the Brownian tail keeps the family-wise size; the module
        docstring gives the measurements). None: no such condition (MCGrad's behaviour,
        whose p-values are too small for skewed segments).

    Returns:
      :class:`~jaxcal.stats.MulticalibrationResult`: ``(G,)`` per-segment fields and 0-d family fields.
      An excluded segment (``tested`` False; an empty one too) has p-values 1 and
      counts neither in the G of the adjustments nor in ``mce_sigma``; its statistic,
      ECCE and sigma are still given (an empty one: 0).

    Validation runs only on concrete inputs; under ``jit``/``vmap`` it is skipped.
    Differentiable in ``probs`` and ``weights`` for a fixed order of the scores.

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.array([0.2, 0.3, 0.5, 0.6, 0.8, 0.9])
      >>> y = jnp.array([0, 0, 1, 1, 1, 1])
      >>> ids = jnp.array([0, 1, 0, 1, 0, 1])
      >>> r = multicalibration_error(p, y, ids, n_groups=2)
      >>> r.size.tolist(), r.tested.tolist()  # 3 rows each: too small to be tested
      ([3, 3], [False, False])
      >>> r = multicalibration_error(p, y, ids, n_groups=2, min_segment_size=3, max_skewness=1)
      >>> [round(v, 3) for v in r.statistic.tolist()], int(r.n_tested)
      ([0.927, 0.68], 2)
      >>> round(float(r.family_p_value), 3)
      1.0

    References:
      Arrieta-Ibarra, Gujral, Tannen, Tygert & Xu (2022), JMLR 23(351); Tax, Perini et
      al. (2025), "MCGrad: multicalibration at web scale" (``mcgrad.metrics``); Holm
      (1979), "A simple sequentially rejective multiple test procedure", Scand. J. Stat.
    """
    min_segment_size = check_positive_int("min_segment_size", min_segment_size)
    if max_skewness is not None:
        max_skewness = check_positive_float("max_skewness", max_skewness)
    probs, labels, weights = check_probs_labels(probs, labels, weights, values=False)
    groups, n_groups = check_groups(groups, probs.shape[0], n_groups)
    static = (n_groups, min_segment_size, max_skewness)
    return run_validated(_kernel, probs, labels, weights, groups, *static)
