"""CORP reliability curves: the isotonic (PAV) fit of the outcomes on the forecasts.

CORP (Dimitriadis, Gneiting & Jordan 2021): Consistent, Optimally binned, Reproducible,
PAV-based. The forecasts are sorted, samples with *exactly* equal forecasts are pooled
into one knot, and pool-adjacent-violators (``jaxcal/_core/isotonic.py``) fits the
non-decreasing step function of the knots that minimises the (weighted) squared error
of the outcomes, which is at once the minimiser of every proper score: the bins are
chosen by the data, there is no bin count to choose, and the same data give the same
curve.

One sort of integer keys does the work. A float in the compute dtype maps to an integer
of its width that orders like it (``order_keys()``); without weights the outcome is
packed into the key's lowest bit, so that the one sort of the packed keys gives, knot by
knot, the number of samples and of positive outcomes (a sort of integer values,
``sort()``, costs less than an argsort on every backend: NumPy's SIMD sort
on CPU). With weights, or where each sample's knot is needed (the fitted values, the
resampling bands), the knot of each sample is found by binary search among the sorted
knots.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_option, check_probs_labels
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.isotonic import (
    IsotonicParams,
    float_keys,
    isotonic_apply,
    key_values,
    pava_blocks,
    pool_runs,
    pooled_pava,
    tie_starts,
)
from jaxcal._core.numerics import compute_dtype, int_dtype_of, normalize_weights, safe_divide
from jaxcal._core.sort import sort

#: How a multiclass problem becomes binary ones (1-D probs are always the binary view).
REDUCTIONS = ("top_label", "classwise")


def order_keys(scores: jax.Array) -> jax.Array:
    """``float_keys()`` of the scores clipped to [-1, 1], so that twice a key plus one
    fits the integer type (validated scores lie in [0, 1] up to round-off)."""
    return float_keys(jnp.clip(scores, -1, 1))


class Knots(NamedTuple):
    """The distinct forecasts of one binary problem and their sufficient statistics.

    ``keys``, ``counts``, ``weight``, ``positives`` are ``(N,)`` buffers of which the first
    ``size`` are the knots in increasing order (keys past them are the largest integer,
    sums 0); ``index`` is the knot of each sample (``N`` for a zero-weight sample whose
    forecast is no knot), or None where the sums came from the packed sort.
    """

    keys: jax.Array | None
    counts: jax.Array
    weight: jax.Array
    positives: jax.Array
    size: jax.Array
    index: jax.Array | None


def _starts_and_ids(sorted_keys: jax.Array, valid: jax.Array):
    """Knot start flags, knot id of each sorted sample, and the number of knots."""
    start = tie_starts(sorted_keys, valid, "exact")
    gid = jnp.maximum(jax.lax.associative_scan(jnp.add, start.astype(jnp.int32)) - 1, 0)
    return start, jnp.where(valid, gid, sorted_keys.shape[0]), jnp.sum(start, dtype=jnp.int32)


def _knot_keys(sorted_keys, start, gid):
    n = sorted_keys.shape[0]
    top = jnp.iinfo(sorted_keys.dtype).max
    return (
        jnp.full((n,), top, sorted_keys.dtype)
        .at[jnp.where(start, gid, n)]
        .set(sorted_keys, mode="drop")
    )


def knots_of(scores: jax.Array, weights: jax.Array | None) -> Knots:
    """The knots of ``scores`` (samples of positive weight) and each sample's knot.

    The sums (``counts``, ``weight``, ``positives``) are left at zero: fill them with
    ``knot_sums()`` for any targets and weights (resamples reuse the one sort).
    """
    n = scores.shape[0]
    keys = order_keys(scores)
    top = jnp.iinfo(keys.dtype).max
    valid = jnp.ones((n,), bool) if weights is None else weights > 0
    sk = sort(jnp.where(valid, keys, top))
    start, gid, size = _starts_and_ids(sk, sk != top)
    knot_keys = _knot_keys(sk, start, gid)
    index = jnp.clip(jnp.searchsorted(knot_keys, keys), 0, n - 1).astype(jnp.int32)
    found = (knot_keys[index] == keys) & (index < size)
    zeros = jnp.zeros((n,), scores.dtype)
    index = jnp.where(found, index, n)
    return Knots(knot_keys, jnp.zeros((n,), jnp.int32), zeros, zeros, size, index)


def knot_sums(knots: Knots, targets: jax.Array, weights: jax.Array | None) -> Knots:
    """``knots`` with the sample counts, weights and weighted positives of each knot."""
    n = targets.shape[0]
    dtype = knots.weight.dtype
    w = jnp.ones((n,), dtype) if weights is None else weights.astype(dtype)
    idx = knots.index
    counts = jax.ops.segment_sum((w > 0).astype(jnp.int32), idx, n, mode="drop")
    weight = jax.ops.segment_sum(w, idx, n, mode="drop")
    positives = jax.ops.segment_sum(jnp.where(targets, w, 0), idx, n, mode="drop")
    return knots._replace(counts=counts, weight=weight, positives=positives)


def packed_knots(scores: jax.Array, targets: jax.Array, with_keys: bool = False) -> Knots:
    """Unweighted knots and sums from one sort of keys with the outcome in the lowest bit.

    Within a knot the sorted packed keys hold the negatives first, then the positives;
    the counts are exact integers (beyond 2**24 samples too). ``keys`` is None unless
    ``with_keys`` (the decomposition needs only the sums).
    """
    n = scores.shape[0]
    packed = sort(order_keys(scores) * 2 + targets.astype(int_dtype_of(scores.dtype)))
    sk, positive = packed >> 1, (packed & 1).astype(jnp.int32)
    start, gid, size = _starts_and_ids(sk, jnp.ones((n,), bool))
    counts = jax.ops.segment_sum(jnp.ones((n,), jnp.int32), gid, n, indices_are_sorted=True)
    hits = jax.ops.segment_sum(positive, gid, n, indices_are_sorted=True)
    dtype = scores.dtype
    keys = _knot_keys(sk, start, gid) if with_keys else None
    return Knots(keys, counts, counts.astype(dtype), hits.astype(dtype), size, None)


def calibrate(knots: Knots) -> jax.Array:
    """PAV-calibrated value of each knot ``(N,)``: the isotonic fit of the knot means."""
    return pooled_pava(knots.weight, knots.positives, knots.size)


def calibrated_blocks(knots: Knots) -> tuple[jax.Array, jax.Array]:
    """The PAV blocks of the knots: weight and calibrated value (mean outcome) of each,
    ``(N + 2,)`` with zero weight past the blocks (sums over blocks need no more)."""
    wb, sb, size_b, _ = pool_runs(knots.weight, knots.positives, knots.size)
    weight, total, _ = pava_blocks(wb, sb, size_b)
    return weight, safe_divide(total, weight)


class CorpCurve(NamedTuple):
    """The CORP reliability curve (:func:`~jaxcal.metrics.corp_curve`). Classwise: a leading class axis K.

    Attributes:
      forecasts: ``(N,)`` the distinct forecasts (knots) in increasing order; entries from
        ``size`` on repeat the last knot (0 when there is none), so that plotting the
        whole buffers draws the curve.
      calibrated: ``(N,)`` the PAV-calibrated value at each knot (the recalibrated
        probability, an estimate of P(Y = 1 | forecast)); padded like ``forecasts``.
      counts: ``(N,)`` int32 samples (of positive weight) at each knot; 0 past ``size``.
      weight: ``(N,)`` total sample weight at each knot (``counts`` without weights).
      fitted: ``(N,)`` the calibrated value of each sample, in the input order (a
        zero-weight sample whose forecast is no knot: the curve's linear interpolation
        there, clipped to the end knots).
      size: int32 number U of knots.
    """

    forecasts: jax.Array
    calibrated: jax.Array
    counts: jax.Array
    weight: jax.Array
    fitted: jax.Array
    size: jax.Array


def binary_problems(probs, labels, reduction):
    """Scores ``(G, N)`` and targets ``(G, N)`` of the binary problems of a view.

    1-D probs: the positive class (G = 1); 2-D: the top-label confidence against
    correctness (``"top_label"``, G = 1) or every column one-vs-rest (``"classwise"``,
    G = K).
    """
    if probs.ndim == 1 or reduction == "top_label":
        scores, targets, _ = scores_and_targets(probs, labels)
        return scores[None], targets[None]
    k = probs.shape[1]
    classes = jnp.arange(k, dtype=labels.dtype)
    return probs.T, labels[None, :] == classes[:, None]


def pad_last(x: jax.Array, size: jax.Array) -> jax.Array:
    last = jnp.maximum(size - 1, 0)
    return jnp.where(jnp.arange(x.shape[0], dtype=jnp.int32) < size, x, x[last])


def curve_of(scores, targets, weights) -> CorpCurve:
    """The CORP curve of one binary problem (scores ``(N,)`` in the compute dtype)."""
    knots = knot_sums(knots_of(scores, weights), targets, weights)
    fitted_knots = calibrate(knots)
    size = knots.size
    x = jnp.where(
        jnp.arange(scores.shape[0], dtype=jnp.int32) < size, key_values(knots.keys, scores.dtype), 0
    )
    forecasts, calibrated = pad_last(x, size), pad_last(fitted_knots, size)
    fitted = calibrated[jnp.minimum(knots.index, scores.shape[0] - 1)]
    if weights is not None:  # zero-weight samples off the knots: interpolate
        between = isotonic_apply(IsotonicParams(forecasts, calibrated, size), scores, scores)
        fitted = jnp.where(knots.index < scores.shape[0], fitted, between)
    return CorpCurve(forecasts, calibrated, knots.counts, knots.weight, fitted, size)


@partial(jax.jit, static_argnames=("reduction",))
def _curve_kernel(probs, labels, weights, reduction):
    scores, targets = binary_problems(probs, labels, reduction)
    dtype = compute_dtype(scores.dtype)
    scores = scores.astype(dtype)
    scale = 0
    if weights is not None:  # fit on scaled weights; report them in the caller's scale
        weights, scale = normalize_weights(weights.astype(dtype))
    if scores.shape[0] == 1:
        curve = curve_of(scores[0], targets[0], weights)
    else:
        curve = jax.vmap(curve_of, in_axes=(0, 0, None))(scores, targets, weights)
    return curve._replace(weight=jnp.ldexp(curve.weight, scale))


def corp_curve(
    probs: Any, labels: Any, *, reduction: str = "top_label", weights: Any = None
) -> CorpCurve:
    """CORP reliability curve: the isotonic regression of the outcomes on the forecasts.

    With the U distinct forecasts x_1 < ... < x_U (exact ties pooled first), n_j samples
    of total weight W_j and weighted positives S_j at x_j, the calibrated values are the
    pool-adjacent-violators solution

    .. math::
       \\hat c = \\arg\\min_{c_1 \\le \\dots \\le c_U} \\sum_j W_j (c_j - S_j / W_j)^2,
       \\qquad \\hat c_j = \\max_{a \\le j} \\min_{b \\ge j}
       \\frac{\\sum_{a \\le i \\le b} S_i}{\\sum_{a \\le i \\le b} W_i},

    which minimises every proper scoring rule among non-decreasing recalibrations, so it
    is the optimally binned reliability curve (the bins are the PAV blocks). The CORP
    reliability diagram plots (x_j, ĉ_j) joined by straight lines: a staircase, flat
    within a block. Unlike :func:`jaxcal.reliability_curve` there is no bin count to
    choose, and the curve is the same on the same data.

    Views: 1-D ``probs`` ``(N,)``: the positive class's probability against ``labels ==
    1``. 2-D ``(N, K)``: ``reduction="top_label"`` (default) the top-label confidence
    ``max_k p_k`` against correctness (first index among tied maxima, as
    :func:`jaxcal.ece`); ``reduction="classwise"``: one curve per class, column k against
    ``labels == k``, stacked on a leading axis K.

    Ties are exact equalities in the compute dtype (float32, or float64 under x64); a
    sample of zero weight takes no part in the fit.

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` integer labels (0/1, or in [0, K)).
      reduction: ``"top_label"`` or ``"classwise"`` (2-D ``probs`` only; ignored for 1-D).
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).

    Returns:
      :class:`~jaxcal.metrics.CorpCurve` ``(forecasts, calibrated, counts, weight, fitted, size)``, each
      ``(N,)`` (classwise: ``(K, N)``), ``size`` 0-d (classwise ``(K,)``).

    Validation runs on concrete inputs only; the function works under ``jit`` and
    ``vmap`` (many models at once).

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.array([0.1, 0.3, 0.3, 0.6, 0.8, 0.9])
      >>> y = jnp.array([0, 1, 0, 0, 1, 1])
      >>> c = corp_curve(p, y)
      >>> int(c.size), c.forecasts[:4].tolist()
      (5, [0.10000000149011612, 0.30000001192092896, 0.6000000238418579, 0.800000011920929])
      >>> [round(v, 4) for v in c.calibrated[:5].tolist()]
      [0.0, 0.3333, 0.3333, 1.0, 1.0]

    References:
      Dimitriadis, Gneiting & Jordan (2021), "Stable reliability diagrams for
      probabilistic classifiers", PNAS 118(8) e2016191118; Ayer, Brunk, Ewing, Reid &
      Silverman (1955) (pool-adjacent-violators); the R package ``reliabilitydiag``.
    """
    check_option("reduction", reduction, REDUCTIONS)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _curve_kernel(probs, labels, weights, reduction)


def fill_gaps(forecasts: jax.Array, values: jax.Array, present: jax.Array) -> jax.Array:
    """Knot values where ``present``; elsewhere the linear interpolation (in forecast)
    between the nearest present knots on each side, flat beyond the end ones."""
    n = values.shape[0]
    idx = jnp.arange(n, dtype=jnp.int32)
    lo = jax.lax.associative_scan(jnp.maximum, jnp.where(present, idx, -1))
    hi = jax.lax.associative_scan(jnp.minimum, jnp.where(present, idx, n), reverse=True)
    lo_c, hi_c = jnp.clip(lo, 0, n - 1), jnp.clip(hi, 0, n - 1)
    lo_ok, hi_ok = lo >= 0, hi < n
    t = safe_divide(forecasts - forecasts[lo_c], forecasts[hi_c] - forecasts[lo_c])
    between = values[lo_c] + t * (values[hi_c] - values[lo_c])
    out = jnp.where(lo_ok & hi_ok, between, jnp.where(lo_ok, values[lo_c], values[hi_c]))
    return jnp.where(present, values, out)
