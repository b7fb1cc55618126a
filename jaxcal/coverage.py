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
:func:`regression_mwi_score`; the Winkler score reorders them as MAPIE does. Traced crossed
intervals get MAPIE's meaning: they never cover, and their width is ``|upper - lower|``.

Sums over samples are blocked and pairwise (float32 means keep ~1e-6 relative accuracy at
large N; tested at N = 1e6) and coverage counts are int32, exact.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._binning import bin_sums
from jaxcal._checks import (
    as_float,
    check_finite,
    check_labels,
    check_positive_float,
    check_positive_int,
    check_weights,
    is_concrete,
)
from jaxcal._numerics import blocked_sum, compute_dtype, order_statistics, safe_divide, safe_sqrt

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


class SizeStratifiedCoverage(NamedTuple):
    """Coverage of the samples grouped by interval width or set size.

    Each field has shape ``(B,)`` for one confidence level, ``(L, B)`` with a level axis.

    Attributes:
      coverage: (weighted) coverage of each group; 0 for an empty group (MAPIE gives NaN
        there), which ``count`` tells apart.
      count: int32 number of samples (with positive weight) in each group.
      mean_size: (weighted) mean interval width or set size in each group; 0 when empty.
    """

    coverage: jax.Array
    count: jax.Array
    mean_size: jax.Array


# ----------------------------------------------------------------------------- validation


def _widest(*dtypes: Any) -> jnp.dtype:
    """The widest compute dtype of several inputs (float32, or float64 under x64)."""
    return max((compute_dtype(d) for d in dtypes), key=lambda d: d.itemsize)


def _first_index(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


@jax.jit
def _interval_summary(y, lower, upper):
    """(all finite, for y / lower / upper), any ``lower > upper``: one device pass."""
    finite = [
        jnp.all(jnp.isfinite(x)) if x is not None else jnp.bool_(True) for x in (y, lower, upper)
    ]
    return finite, jnp.any(lower > upper)


@jax.jit
def _live_range(y, weights):
    """max - min of ``y`` over the samples with positive weight (0 when there are none)."""
    live = jnp.ones_like(y, bool) if weights is None else weights > 0
    spread = jnp.max(jnp.where(live, y, -jnp.inf)) - jnp.min(jnp.where(live, y, jnp.inf))
    return jnp.where(jnp.isfinite(spread), spread, 0)


def _check_intervals(
    y: Any, lower: Any, upper: Any, weights: Any, *, need_y: bool = True, crossed: str = "reject"
) -> tuple[jax.Array | None, jax.Array, jax.Array, jax.Array | None, jnp.dtype]:
    """Validate ``(y, lower, upper, weights)``; returns them in one compute dtype."""
    lower = as_float(lower, "lower")
    upper = as_float(upper, "upper")
    if lower.ndim not in (1, 2):
        raise ValueError(
            f"`lower` must be (N,) or (N, L) for L confidence levels; got shape {lower.shape}."
        )
    if upper.shape != lower.shape:
        raise ValueError(
            f"`upper` must have the shape of `lower` {lower.shape}; got {upper.shape}."
        )
    n = lower.shape[0]
    if n == 0:
        raise ValueError(f"`lower` must not be empty; got shape {lower.shape}.")
    if lower.ndim == 2 and lower.shape[1] == 0:
        raise ValueError(f"`lower` must have at least one level column; got {lower.shape}.")
    dtypes = [lower.dtype, upper.dtype]
    if need_y:
        y = as_float(y, "y")
        if y.shape != (n,):
            raise ValueError(
                f"`y` must have shape ({n},) to match `lower` {lower.shape}; got {y.shape}."
            )
        dtypes.append(y.dtype)
    common = _widest(*dtypes)
    lower, upper = lower.astype(common), upper.astype(common)
    if need_y:
        y = y.astype(common)
    if is_concrete(y, lower, upper):
        # One fused pass on the device; the offending element is located only on failure.
        finite, any_crossed = jax.device_get(_interval_summary(y if need_y else None, lower, upper))
        for name, x, ok in zip(("y", "lower", "upper"), (y, lower, upper), finite, strict=True):
            if not ok:
                check_finite(name, x)
        if any_crossed and crossed == "reject":
            lo, up = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
            idx = _first_index(lo > up)
            raise ValueError(
                f"`lower` must not exceed `upper` (crossed interval at index {idx}: "
                f"lower={lo[idx]:.6g} > upper={up[idx]:.6g}). Reorder with "
                "jnp.minimum/jnp.maximum if crossing quantiles are expected."
            )
    weights = check_weights(weights, n)
    if weights is not None:
        dtypes.append(weights.dtype)
    dtype = _widest(*dtypes)
    cast = lambda a: None if a is None else a.astype(dtype)  # noqa: E731
    return cast(y), cast(lower), cast(upper), cast(weights), dtype


def _check_sets(labels: Any, sets: Any, weights: Any, *, need_labels: bool = True):
    """Validate a boolean set mask ``(N, K)`` / ``(N, K, L)``, labels and weights."""
    try:
        arr = jnp.asarray(sets)
    except TypeError as err:
        raise ValueError(f"`sets` must be a boolean array; got {type(sets).__name__}.") from err
    if arr.ndim not in (2, 3):
        raise ValueError(
            "`sets` must be a boolean mask (N, K) or (N, K, L) for L confidence levels; "
            f"got shape {arr.shape}."
        )
    n, k = arr.shape[:2]
    if n == 0 or k == 0 or (arr.ndim == 3 and arr.shape[2] == 0):
        raise ValueError(f"`sets` must not be empty; got shape {arr.shape}.")
    if arr.dtype != jnp.bool_:
        if not (jnp.issubdtype(arr.dtype, jnp.integer) or jnp.issubdtype(arr.dtype, jnp.floating)):
            raise ValueError(f"`sets` must be a boolean mask; got dtype {arr.dtype}.")
        if is_concrete(arr) and bool(jnp.any((arr != 0) & (arr != 1))):
            values = np.asarray(arr)
            bad = (values != 0) & (values != 1)
            if bad.any():
                idx = _first_index(bad)
                raise ValueError(
                    f"`sets` must be a boolean mask (or 0/1); got {values[idx]} at index {idx}."
                )
        arr = arr != 0
    if need_labels:
        labels = check_labels(labels, n, k)
    weights = check_weights(weights, n)
    dtype = compute_dtype(jnp.int32 if weights is None else weights.dtype)
    if weights is not None:
        weights = weights.astype(dtype)
    return labels, arr, weights, dtype


def _check_levels(value: Any, name: str, n_levels: int | None, *, open_interval: bool):
    """A confidence level: a number, or one per level column; values in [0, 1] or (0, 1).

    Returned as given when it is a JAX array (maybe traced), else as a NumPy array (no
    device round trip for a Python number).
    """
    arr = value if isinstance(value, jax.Array) else np.asarray(value)
    if not (jnp.issubdtype(arr.dtype, jnp.floating) or jnp.issubdtype(arr.dtype, jnp.integer)):
        raise ValueError(f"`{name}` must be a number; got {value!r}.")
    expected = "a number" if n_levels is None else f"a number or shape ({n_levels},)"
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape != (n_levels,)):
        raise ValueError(f"`{name}` must be {expected}; got shape {arr.shape}.")
    if is_concrete(arr):
        values = np.asarray(arr, np.float64).reshape(-1)
        if open_interval:
            allowed, bad = "(0, 1)", (values <= 0) | (values >= 1)
        else:
            allowed, bad = "[0, 1]", (values < 0) | (values > 1)
        if (~np.isfinite(values)).any() or bad.any():
            raise ValueError(f"`{name}` must lie in {allowed}; got {value!r}.")
    return arr


def _check_eta(eta: Any) -> Any:
    arr = eta if isinstance(eta, jax.Array) else np.asarray(eta)
    if arr.ndim != 0 or not (
        jnp.issubdtype(arr.dtype, jnp.floating) or jnp.issubdtype(arr.dtype, jnp.integer)
    ):
        raise ValueError(f"`eta` must be a real number; got {eta!r}.")
    if is_concrete(arr) and not np.isfinite(float(arr)):
        raise ValueError(f"`eta` must be finite; got {float(arr)}.")
    return arr


# ------------------------------------------------------------------------- kernel helpers


def _mean(values: jax.Array, weights: jax.Array | None, dtype) -> jax.Array:
    """(Weighted) mean over axis 0 of ``values`` ``(N, L)``; bool values count exactly."""
    n = values.shape[0]
    if weights is None:
        if values.dtype == jnp.bool_:
            hits = jnp.sum(values, axis=0, dtype=jnp.int32)
            return hits.astype(dtype) / jnp.asarray(n, dtype)
        return blocked_sum(values.astype(dtype)) / jnp.asarray(n, dtype)
    w = weights.astype(dtype)
    return safe_divide(blocked_sum(w[:, None] * values.astype(dtype)), blocked_sum(w))


def _covered(y: jax.Array, lower: jax.Array, upper: jax.Array) -> jax.Array:
    """``lower <= y <= upper`` per level, shape ``(N, L)`` (MAPIE's closed interval)."""
    return (lower <= y[:, None]) & (y[:, None] <= upper)


def _as_levels(x: jax.Array) -> jax.Array:
    return x if x.ndim == 2 else x[:, None]


def _finish(out: Any, has_levels: bool) -> Any:
    """Drop the level axis (the leading axis of each output) when the input had none."""
    return out if has_levels else jax.tree.map(lambda a: a[0], out)


# -------------------------------------------------------------------- coverage and width


@jax.jit
def _regression_coverage_kernel(y, lower, upper, weights):
    out = _mean(_covered(y, _as_levels(lower), _as_levels(upper)), weights, lower.dtype)
    return _finish(out, lower.ndim == 2)


def regression_coverage_score(y: Any, lower: Any, upper: Any, *, weights: Any = None) -> jax.Array:
    """Fraction of targets inside their prediction interval (closed on both sides).

    .. math:: \\mathrm{RCS} = \\frac{\\sum_i w_i\\,\\mathbf 1(l_i \\le y_i \\le u_i)}{\\sum_i w_i}

    Same meaning as MAPIE's ``regression_coverage_score(y_true, y_intervals)``.

    Args:
      y: ``(N,)`` targets.
      lower: ``(N,)`` lower bounds, or ``(N, L)`` for L confidence levels.
      upper: upper bounds, shape of ``lower``; ``lower <= upper`` (crossed intervals are
        rejected eagerly; traced, they never cover).
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> y = jnp.array([5.0, 7.5, 9.5, 10.5, 12.5])
      >>> lo, up = jnp.array([4.0, 6, 9, 8.5, 10.5]), jnp.array([6.0, 9, 10, 12.5, 12])
      >>> round(float(regression_coverage_score(y, lo, up)), 4)
      0.8

    References:
      MAPIE 1.6, ``mapie.metrics.regression.regression_coverage_score``; Angelopoulos &
      Bates (2021), "A gentle introduction to conformal prediction".
    """
    y, lower, upper, weights, _ = _check_intervals(y, lower, upper, weights)
    return _regression_coverage_kernel(y, lower, upper, weights)


@jax.jit
def _regression_width_kernel(lower, upper, weights):
    out = _mean(_as_levels(jnp.abs(upper - lower)), weights, lower.dtype)
    return _finish(out, lower.ndim == 2)


def regression_mean_width_score(lower: Any, upper: Any, *, weights: Any = None) -> jax.Array:
    """Mean width of the prediction intervals, ``sum_i w_i |u_i - l_i| / sum_i w_i``.

    Same meaning as MAPIE's ``regression_mean_width_score(y_intervals)`` (which takes the
    absolute difference, so a crossed interval counts by its absolute width; here crossed
    intervals are rejected eagerly and traced ones count as MAPIE does).

    Args:
      lower: ``(N,)`` lower bounds, or ``(N, L)`` for L confidence levels.
      upper: upper bounds, shape of ``lower``.
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> lo = jnp.array([[4.0, 6, 8], [9, 10, 11], [8.5, 9.5, 10], [7, 8, 9], [5, 6, 7]])
      >>> up = jnp.array([[6.0, 9, 11], [10, 12, 14], [12.5, 12, 13], [8.5, 9.5, 10], [6.5, 8, 9]])
      >>> [round(v, 4) for v in regression_mean_width_score(lo, up).tolist()]
      [2.0, 2.2, 2.4]

    References:
      MAPIE 1.6, ``mapie.metrics.regression.regression_mean_width_score``.
    """
    _, lower, upper, weights, _ = _check_intervals(None, lower, upper, weights, need_y=False)
    return _regression_width_kernel(lower, upper, weights)


def _set_levels(sets: jax.Array) -> jax.Array:
    return sets if sets.ndim == 3 else sets[:, :, None]


def _set_covered(labels: jax.Array, sets: jax.Array) -> jax.Array:
    """``sets[i, labels[i], l]``, shape ``(N, L)``."""
    return jnp.take_along_axis(sets, labels[:, None, None], axis=1)[:, 0, :]


@partial(jax.jit, static_argnames=("dtype",))
def _classification_coverage_kernel(labels, sets, weights, dtype):
    out = _mean(_set_covered(labels, _set_levels(sets)), weights, dtype)
    return _finish(out, sets.ndim == 3)


def classification_coverage_score(labels: Any, sets: Any, *, weights: Any = None) -> jax.Array:
    """Fraction of samples whose true label is in their prediction set.

    .. math:: \\mathrm{CCS} = \\frac{\\sum_i w_i\\,\\mathbf 1(y_i \\in \\hat C(x_i))}{\\sum_i w_i}

    Same meaning as MAPIE's ``classification_coverage_score(y_true, y_pred_set)``.

    Args:
      labels: ``(N,)`` integer labels in ``[0, K)``.
      sets: boolean mask ``(N, K)``, or ``(N, K, L)`` for L confidence levels (0/1 numbers
        are accepted).
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> sets = jnp.array([[True, True, False], [False, True, True], [True, False, False]])
      >>> round(float(classification_coverage_score(jnp.array([1, 0, 0]), sets)), 4)
      0.6667

    References:
      MAPIE 1.6, ``mapie.metrics.classification.classification_coverage_score``.
    """
    labels, sets, weights, dtype = _check_sets(labels, sets, weights)
    return _classification_coverage_kernel(labels, sets, weights, dtype)


@partial(jax.jit, static_argnames=("dtype",))
def _classification_width_kernel(sets, weights, dtype):
    sizes = jnp.sum(_set_levels(sets), axis=1, dtype=jnp.int32).astype(dtype)
    return _finish(_mean(sizes, weights, dtype), sets.ndim == 3)


def classification_mean_width_score(sets: Any, *, weights: Any = None) -> jax.Array:
    """Mean size of the prediction sets, ``sum_i w_i |C(x_i)| / sum_i w_i``.

    Same meaning as MAPIE's ``classification_mean_width_score(y_pred_set)``.

    Args:
      sets: boolean mask ``(N, K)``, or ``(N, K, L)`` for L confidence levels.
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> sets = jnp.array([[True, True, False], [False, True, True], [True, False, False]])
      >>> round(float(classification_mean_width_score(sets)), 4)
      1.6667

    References:
      MAPIE 1.6, ``mapie.metrics.classification.classification_mean_width_score``.
    """
    _, sets, weights, dtype = _check_sets(None, sets, weights, need_labels=False)
    return _classification_width_kernel(sets, weights, dtype)


# ------------------------------------------------------------ size-stratified coverage


def _ssc_from_stats(stats) -> SizeStratifiedCoverage:
    return SizeStratifiedCoverage(
        coverage=safe_divide(stats.sum_target, stats.weight),
        count=stats.count,
        mean_size=safe_divide(stats.sum_score, stats.weight),
    )


def _ssc_min(ssc: SizeStratifiedCoverage) -> jax.Array:
    """Smallest coverage over non-empty groups (MAPIE's nanmin); 0 when all are empty."""
    live = ssc.count > 0
    worst = jnp.min(jnp.where(live, ssc.coverage, jnp.inf), axis=-1)
    return jnp.where(live.any(axis=-1), worst, 0).astype(ssc.coverage.dtype)


# Up to this many group boundaries, ranks are found by bisection on the widths' bit
# patterns (B - 1 order statistics in 31 / 63 counting passes); beyond, by a full sort.
# XLA:CPU sorts 1e6 floats in ~1 s (NumPy: ~70 ms), the selection takes ~50 ms.
_SELECT_MAX_BOUNDARIES = 16


def _group_starts(n_eff: jax.Array, num_bins: int) -> jax.Array:
    """Sorted positions where groups 1..B-1 start, as ``np.array_split`` cuts n_eff items."""
    b = jnp.arange(1, num_bins, dtype=jnp.int32)
    q, rem = n_eff // num_bins, n_eff % num_bins
    return b * q + jnp.minimum(b, rem)


def _rank_groups_by_selection(key: jax.Array, n_eff: jax.Array, num_bins: int) -> jax.Array:
    """Group of each sample (original order) by its stable rank of ``key``, without sorting.

    Sample i sits at or after the start p_b of group b iff ``key_i > v_b``, or
    ``key_i == v_b`` and fewer than ``p_b - #{key < v_b}`` equal keys precede it (stable
    order), with ``v_b`` the key at sorted position p_b.
    """
    starts = _group_starts(n_eff, num_bins)
    values = order_statistics(key, starts)
    below = jnp.sum(key[:, None] < values[None, :], axis=0, dtype=jnp.int32)
    equal = key[:, None] == values[None, :]
    earlier_equal = jnp.cumsum(equal, axis=0, dtype=jnp.int32) - equal.astype(jnp.int32)
    quota = (starts - below)[None, :]
    after = (key[:, None] > values[None, :]) | (equal & (earlier_equal >= quota))
    return jnp.sum(after, axis=1, dtype=jnp.int32)


def _rank_groups_by_sort(key: jax.Array, n_eff: jax.Array, num_bins: int):
    """(order, group of each sorted position) by a stable argsort of ``key``."""
    n = key.shape[0]
    order = jnp.argsort(key, stable=True)
    r = jnp.arange(n, dtype=jnp.int32)
    groups = jnp.sum(r[:, None] >= _group_starts(n_eff, num_bins)[None, :], axis=1)
    return order, groups.astype(jnp.int32)


def _regression_ssc_level(y, lower, upper, weights, num_bins):
    n = y.shape[0]
    width = jnp.abs(upper - lower)
    covered = (lower <= y) & (y <= upper)
    if weights is None:
        key, n_eff = width, jnp.asarray(n, jnp.int32)
    else:
        # zero-weight samples rank last (+inf); groups are cut among the others
        positive = weights > 0
        key = jnp.where(positive, width, jnp.inf)
        n_eff = jnp.sum(positive, dtype=jnp.int32)
    if num_bins - 1 <= _SELECT_MAX_BOUNDARIES:
        groups = _rank_groups_by_selection(key, n_eff, num_bins)
        return bin_sums(groups, width, covered, num_bins, weights)
    order, groups = _rank_groups_by_sort(key, n_eff, num_bins)
    w = None if weights is None else weights[order]
    return bin_sums(groups, width[order], covered[order], num_bins, w)


@partial(jax.jit, static_argnames=("num_bins",))
def _regression_ssc_kernel(y, lower, upper, weights, num_bins):
    level = partial(_regression_ssc_level, num_bins=num_bins)
    stats = jax.vmap(level, in_axes=(None, 1, 1, None))(
        y, _as_levels(lower), _as_levels(upper), weights
    )
    return _finish(_ssc_from_stats(stats), lower.ndim == 2)


def regression_ssc(
    y: Any, lower: Any, upper: Any, *, num_bins: int = 3, weights: Any = None
) -> SizeStratifiedCoverage:
    """Size-stratified coverage of prediction intervals: coverage by width group.

    The intervals are ranked by width ``|u_i - l_i|`` (ascending) and split into
    ``num_bins`` groups of consecutive ranks with the sizes of ``np.array_split``: with
    n samples and B groups, the first ``n % B`` groups hold ``n // B + 1`` samples and the
    others ``n // B``. The coverage of each group is reported (Angelopoulos & Bates 2021,
    section 3; MAPIE's ``regression_ssc``). The seed's formula writes the sum over groups of
    these coverages; MAPIE (and this function) return the per-group values, and
    :func:`regression_ssc_score` their minimum.

    Differences from MAPIE, on purpose:

    * ties in width at a group boundary are broken by sample index (a stable sort); MAPIE
      uses NumPy's unstable default sort, so with tied widths across a boundary its groups
      depend on NumPy's sort implementation. Without ties the results agree exactly.
    * MAPIE raises when the data have at most ``num_bins`` distinct widths (rounded to 5
      decimals); this function does not check values that way (it would not work under
      ``jit``). With fewer samples than groups the trailing groups are empty (coverage 0,
      count 0) and ignored by the score.

    Weights: groups are formed by rank among the samples with positive weight (so a 0/1
    mask gives exactly the unweighted result on the kept samples); within a group the
    coverage is the weighted mean.

    Computation: with B <= 17 the group boundaries are the B - 1 order statistics of the
    widths, found by bisection on their bit patterns (no sort: XLA's CPU sort is ~20x
    slower than NumPy's); with more groups, a stable sort. Both give the same groups.

    Args:
      y: ``(N,)`` targets.
      lower: ``(N,)`` lower bounds, or ``(N, L)`` for L confidence levels.
      upper: upper bounds, shape of ``lower``.
      num_bins: number of groups B >= 1.
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      ``SizeStratifiedCoverage(coverage, count, mean_size)``, each ``(B,)`` or ``(L, B)``.

    Example:
      >>> import jax.numpy as jnp
      >>> y = jnp.array([5.0, 7.5, 9.5])
      >>> lo, up = jnp.array([4.0, 6.0, 9.0]), jnp.array([6.0, 9.0, 10.0])
      >>> regression_ssc(y, lo, up, num_bins=2).coverage.tolist()
      [1.0, 1.0]

    References:
      Angelopoulos & Bates (2021), arXiv:2107.07511, section 3 (size-stratified coverage);
      MAPIE 1.6, ``mapie.metrics.regression.regression_ssc``.
    """
    num_bins = check_positive_int("num_bins", num_bins)
    y, lower, upper, weights, _ = _check_intervals(y, lower, upper, weights)
    return _regression_ssc_kernel(y, lower, upper, weights, num_bins)


def regression_ssc_score(
    y: Any, lower: Any, upper: Any, *, num_bins: int = 3, weights: Any = None
) -> jax.Array:
    """The smallest size-stratified coverage over the non-empty width groups.

    ``min_b coverage_b`` over the groups of :func:`regression_ssc` (MAPIE's
    ``regression_ssc_score``: the worst conditional coverage). Same arguments.

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> y = jnp.array([5.0, 7.5, 9.5])
      >>> lo, up = jnp.array([[4.0, 4], [6, 8], [9, 9]]), jnp.array([[6.0, 7.5], [9, 10], [10, 10]])
      >>> regression_ssc_score(y, lo, up, num_bins=2).tolist()
      [1.0, 0.5]

    References:
      Angelopoulos & Bates (2021); MAPIE 1.6, ``regression_ssc_score``.
    """
    return _ssc_min(regression_ssc(y, lower, upper, num_bins=num_bins, weights=weights))


def _size_group_table(num_classes: int, num_bins: int | None) -> tuple[np.ndarray, int]:
    """Group of each set size 0..K, as MAPIE builds it with ``np.digitize``."""
    sizes = np.arange(num_classes + 1)
    if num_bins is None:
        return sizes.astype(np.int32), num_classes + 1
    lower_edges = [part[0] for part in np.array_split(sizes, num_bins)]
    return (np.digitize(sizes, lower_edges) - 1).astype(np.int32), num_bins


def _classification_ssc_level(labels, sets, weights, table, n_groups, dtype):
    sizes = jnp.sum(sets, axis=1, dtype=jnp.int32)
    covered = sets[jnp.arange(sets.shape[0]), labels]
    groups = jnp.asarray(table)[sizes]
    return bin_sums(groups, sizes.astype(dtype), covered, n_groups, weights)


@partial(jax.jit, static_argnames=("num_bins", "dtype"))
def _classification_ssc_kernel(labels, sets, weights, num_bins, dtype):
    table, n_groups = _size_group_table(sets.shape[1], num_bins)  # K = sets.shape[1]
    level = partial(_classification_ssc_level, table=table, n_groups=n_groups, dtype=dtype)
    stats = jax.vmap(level, in_axes=(None, 2, None))(labels, _set_levels(sets), weights)
    return _finish(_ssc_from_stats(stats), sets.ndim == 3)


def _check_set_bins(num_bins: int | None, num_classes: int) -> int | None:
    if num_bins is None:
        return None
    num_bins = check_positive_int("num_bins", num_bins)
    if num_bins > num_classes + 1:
        raise ValueError(
            f"`num_bins` must be at most K + 1 = {num_classes + 1} (one group per possible "
            f"set size 0..{num_classes}); got {num_bins}."
        )
    return num_bins


def classification_ssc(
    labels: Any, sets: Any, *, num_bins: int | None = None, weights: Any = None
) -> SizeStratifiedCoverage:
    """Size-stratified coverage of prediction sets: coverage by set-size group.

    Groups are fixed ranges of the set size ``|C(x_i)|`` in ``0..K``, as MAPIE's
    ``classification_ssc`` builds them: with ``num_bins=None`` one group per size
    (K + 1 groups, group s holds the sets of size s); with ``num_bins=B`` the sizes
    ``0..K`` are cut by ``np.array_split(range(K + 1), B)`` into B consecutive ranges
    (K = 4, B = 2: sizes {0, 1, 2} and {3, 4}). The seed's formula sums these coverages;
    MAPIE (and this function) return them per group.

    Differences from MAPIE: an empty group has coverage 0 and count 0 (MAPIE: NaN and a
    RuntimeWarning); MAPIE raises when the data have at most ``num_bins`` distinct set
    sizes, this function does not look at values that way (it would not work under
    ``jit``). ``num_bins > K + 1`` is rejected (MAPIE fails with an IndexError).

    Args:
      labels: ``(N,)`` integer labels in ``[0, K)``.
      sets: boolean mask ``(N, K)``, or ``(N, K, L)`` for L confidence levels.
      num_bins: None (one group per size) or B in ``[1, K + 1]``.
      weights: optional ``(N,)`` non-negative sample weights (weighted group coverage).

    Returns:
      ``SizeStratifiedCoverage(coverage, count, mean_size)``, each ``(G,)`` or ``(L, G)``
      with G = K + 1 or B groups.

    Example:
      >>> import jax.numpy as jnp
      >>> sets = jnp.array([[1, 1, 1, 1], [0, 1, 0, 1], [1, 1, 1, 0], [0, 0, 1, 1],
      ...                   [1, 1, 0, 1]], dtype=bool)
      >>> ssc = classification_ssc(jnp.array([3, 3, 1, 2, 2]), sets, num_bins=2)
      >>> [round(c, 4) for c in ssc.coverage.tolist()], ssc.count.tolist()
      ([1.0, 0.6667], [2, 3])

    References:
      Angelopoulos & Bates (2021), arXiv:2107.07511, section 3;
      MAPIE 1.6, ``mapie.metrics.classification.classification_ssc``.
    """
    labels, sets, weights, dtype = _check_sets(labels, sets, weights)
    num_bins = _check_set_bins(num_bins, sets.shape[1])
    return _classification_ssc_kernel(labels, sets, weights, num_bins, dtype)


def classification_ssc_score(
    labels: Any, sets: Any, *, num_bins: int | None = None, weights: Any = None
) -> jax.Array:
    """The smallest size-stratified coverage over the non-empty set-size groups.

    ``min_g coverage_g`` over the groups of :func:`classification_ssc` that hold samples
    (MAPIE's ``classification_ssc_score``, a ``nanmin``). Same arguments.

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> sets = jnp.array([[1, 1, 1, 1], [0, 1, 0, 1], [1, 1, 1, 0], [0, 0, 1, 1],
      ...                   [1, 1, 0, 1]], dtype=bool)
      >>> round(float(classification_ssc_score(jnp.array([3, 3, 1, 2, 2]), sets, num_bins=2)), 4)
      0.6667

    References:
      Angelopoulos & Bates (2021); MAPIE 1.6, ``classification_ssc_score``.
    """
    return _ssc_min(classification_ssc(labels, sets, num_bins=num_bins, weights=weights))


# ----------------------------------------------------------------------------------- HSIC

# Fast Gauss transform of the quadratic form b^T K b, K_ij = exp(-(z_i - z_j)^2), in 1-D.
# Cells of unit width in z; the sources of a cell are expanded in Hermite functions about its
# centre (|z - c| <= 1/2), and each sample sums the expansions of the cells up to
# _HSIC_REACH cells above its own, twice (pairs in cells further apart are more than
# _HSIC_REACH apart: the kernel is below exp(-reach^2)). A term of order k is bounded by
# sum|b| (sqrt(2)/2)^k / sqrt(k!), so _HSIC_TERMS terms leave a relative error below
# ~1e-17 (float64) / 3e-8 (float32).
_HSIC_TERMS = {4: 14, 8: 26}
_HSIC_REACH = {4: 5, 8: 6}


def _hermite_form(z: jax.Array, b: jax.Array, cell: jax.Array, centre: jax.Array) -> jax.Array:
    """``sum_ij b_i b_j exp(-(z_i - z_j)^2)`` from unit cells.

    Args:
      z, b: ``(N,)`` points and weights.
      cell: ``(N,)`` int32 cell ids in ``[0, M)``, increasing with z, such that every cell
        within ``_HSIC_REACH`` above a point's own has an id at most ``_HSIC_REACH`` higher.
      centre: ``(M,)`` cell centres (each point within 1/2 of its cell's centre).
    """
    dtype, n_cells = z.dtype, centre.shape[0]
    terms, reach = _HSIC_TERMS[dtype.itemsize], _HSIC_REACH[dtype.itemsize]
    # Hermite coefficients a[cell, k] = sum_{j in cell} b_j (sqrt(2) d_j)^k / sqrt(k!).
    d = jnp.sqrt(jnp.asarray(2, dtype)) * (z - centre[cell])
    inv_sqrt_k = jnp.asarray([1 / math.sqrt(k) for k in range(1, terms)], dtype)
    ratios = jnp.concatenate(
        [jnp.ones((z.shape[0], 1), dtype), d[:, None] * inv_sqrt_k[None, :]], axis=1
    )
    coeffs = jax.ops.segment_sum(b[:, None] * jnp.cumprod(ratios, axis=1), cell, n_cells).T
    alpha = [math.sqrt(2.0 / (k + 1)) for k in range(terms)]
    beta = [math.sqrt(k / (k + 1)) for k in range(terms)]

    def add_cells_at(offset, total):  # by symmetry: cells j = i once, j > i twice
        source = cell + offset
        valid = source < n_cells
        source = jnp.minimum(source, n_cells - 1)
        x = z - centre[source]
        a = coeffs[:, source]
        # chi_k(x) = pi^(1/4) exp(-x^2/2) psi_k(x) (psi: normalised Hermite functions), so
        # sum_k a_k chi_k(x) = sum_{j in cell} b_j exp(-(z - z_j)^2).
        chi_prev, chi = jnp.zeros_like(x), jnp.exp(-(x * x))
        field = a[0] * chi
        for k in range(1, terms):
            chi_prev, chi = chi, alpha[k - 1] * x * chi - beta[k - 1] * chi_prev
            field = field + a[k] * chi
        contribution = blocked_sum(jnp.where(valid, b * field, 0)[:, None])[0]
        return total + jnp.where(offset == 0, 1, 2).astype(dtype) * contribution

    return jax.lax.fori_loop(0, reach + 1, add_cells_at, jnp.zeros((), dtype))


def _grid_cells(z: jax.Array, b: jax.Array):
    """Cells ``floor(z - min z)``, indexed directly: needs ``max z - min z < N - 1``."""
    n = z.shape[0]
    low = jnp.min(z)
    cell = jnp.clip(jnp.floor(z - low), 0, n - 1).astype(jnp.int32)
    return z, b, cell, low + jnp.arange(n, dtype=z.dtype) + 0.5


def _sorted_cells(z: jax.Array, b: jax.Array):
    """Cells for any spread of z: sort, then number the occupied cells 0, 1, ..."""
    n = z.shape[0]
    order = jnp.argsort(z)
    zs, bs = z[order], b[order]
    grid = jnp.floor(zs - zs[0])
    new_cell = jnp.concatenate([jnp.ones(1, bool), grid[1:] != grid[:-1]])
    cell = jnp.cumsum(new_cell, dtype=jnp.int32) - 1
    return zs, bs, cell, jnp.zeros(n, z.dtype).at[cell].set(zs[0] + grid + 0.5)


@jax.jit
def _hsic_kernel(y, lower, upper, weights, inv_sqrt_k0, decay):
    dtype = lower.dtype
    has_levels = lower.ndim == 2
    lower, upper = _as_levels(lower), _as_levels(upper)
    n = lower.shape[0]
    z = jnp.abs(upper - lower) * inv_sqrt_k0
    covered = _covered(y, lower, upper).astype(dtype)
    w = jnp.ones((n, 1), dtype) if weights is None else weights[:, None]
    total = blocked_sum(w)[0]
    rate = safe_divide(blocked_sum(w * covered), total)
    b = w * (covered - rate[None, :])
    # Unit cells indexed directly when the spread of z is below N (no sort); else sorted.
    spread = jnp.max(z, axis=0) - jnp.min(z, axis=0)
    cells = jax.lax.cond(
        jnp.all(spread < n - 1),
        jax.vmap(_grid_cells, in_axes=1),
        jax.vmap(_sorted_cells, in_axes=1),
        z,
        b,
    )
    form = jax.vmap(_hermite_form)(*cells)
    scale = 2 * (1 - decay) / jnp.where(total > 1, (total - 1) ** 2, 1)
    return _finish(jnp.where(total > 1, safe_sqrt(scale * form), 0), has_levels)


def hsic(
    y: Any,
    lower: Any,
    upper: Any,
    *,
    kernel_sizes: tuple[float, float] = (1, 1),
    weights: Any = None,
) -> jax.Array:
    """Square root of the HSIC between interval width and coverage indicator.

    MAPIE's ``hsic``: with widths ``w_i = |u_i - l_i|``, coverage indicators
    ``c_i = 1(l_i <= y_i <= u_i)``, Gaussian kernels ``K_ij = exp(-(w_i - w_j)^2 / s_0)`` and
    ``L_ij = exp(-(c_i - c_j)^2 / s_1)`` (``kernel_sizes = (s_0, s_1)`` divide the squared
    distance directly: no factor 2, no square), and ``H = I - 11^T / n``:

    .. math:: \\mathrm{hsic} = \\sqrt{\\operatorname{tr}(L H K H) / (n - 1)^2}

    0 when width and coverage are independent (Feldman, Bates & Romano 2021 use it to
    measure conditional coverage). The seed writes ``tr(HKHL)`` without normalisation or
    root; MAPIE divides by (n - 1)^2 and takes the square root, as this function does.

    Computation: since c is binary, ``HLH = 2 (1 - e^{-1/s_1}) c~ c~^T`` with
    ``c~ = c - mean(c)``, so the statistic is ``2 (1 - e^{-1/s_1}) c~^T K c~ / (n - 1)^2``;
    the Gaussian quadratic form is evaluated by a one-dimensional fast Gauss transform
    (unit cells of the scaled widths, Hermite expansions truncated at float round-off):
    O(N) time and memory when the widths span fewer than N kernel widths ``sqrt(s_0)``,
    else a sort first, O(N log N) (under a user's ``vmap`` the choice becomes a select and
    both run); MAPIE builds three N x N matrices (O(N^2) memory, O(N^3) time), so N = 1e6
    runs here and not in MAPIE. The result matches the dense
    formula to round-off of the terms' scale; near independence the quadratic form cancels, so float32 results carry
    an absolute error up to ~1e-4 (float64: ~1e-8).

    Weights are frequency weights, not normalised: integer weights give MAPIE's value on
    the data with sample i repeated w_i times (n becomes ``W = sum w``, the centring uses
    the weighted coverage), so a 0/1 mask gives MAPIE's value on the kept samples. Unlike
    the coverage scores, scaling all weights changes the result. ``W <= 1`` gives 0.

    Args:
      y: ``(N,)`` targets.
      lower: ``(N,)`` lower bounds, or ``(N, L)`` for L confidence levels.
      upper: upper bounds, shape of ``lower``.
      kernel_sizes: ``(s_0, s_1)`` > 0, for the width and the coverage kernel.
      weights: optional ``(N,)`` non-negative frequency weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis.

    Example:
      >>> import jax.numpy as jnp
      >>> y = jnp.array([9.5, 10.5, 12.5])
      >>> lo, up = jnp.array([[9.0, 9], [8.5, 9], [10.5, 10.5]]), jnp.array([[10.0, 10], [12.5, 12], [12, 12]])
      >>> [round(v, 4) for v in hsic(y, lo, up).tolist()]
      [0.3179, 0.2963]

    References:
      Feldman, Bates & Romano (2021), "Improving conditional coverage via orthogonal
      quantile regression", NeurIPS; Gretton et al. (2005), "Measuring statistical
      dependence with Hilbert-Schmidt norms"; Greengard & Strain (1991), "The fast Gauss
      transform"; MAPIE 1.6, ``mapie.metrics.regression.hsic``.
    """
    try:
        sizes = tuple(np.asarray(kernel_sizes, dtype=np.float64).reshape(-1).tolist())
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"`kernel_sizes` must be two positive numbers; got {kernel_sizes!r}."
        ) from err
    if len(sizes) != 2:
        raise ValueError(f"`kernel_sizes` must be two positive numbers; got {kernel_sizes!r}.")
    s0 = check_positive_float("kernel_sizes[0]", sizes[0])
    s1 = check_positive_float("kernel_sizes[1]", sizes[1])
    y, lower, upper, weights, dtype = _check_intervals(y, lower, upper, weights)
    inv_sqrt_k0 = jnp.asarray(1 / math.sqrt(s0), dtype)
    decay = jnp.asarray(math.exp(-1 / s1), dtype)
    return _hsic_kernel(y, lower, upper, weights, inv_sqrt_k0, decay)


# --------------------------------------------------------------------- CWC and Winkler


@partial(jax.jit, static_argnames=("normalize",))
def _cwc_kernel(y, lower, upper, weights, eta, confidence_level, normalize):
    dtype = lower.dtype
    has_levels = lower.ndim == 2
    lower, upper = _as_levels(lower), _as_levels(upper)
    coverage = _mean(_covered(y, lower, upper), weights, dtype)
    width = _mean(jnp.abs(upper - lower), weights, dtype)
    if normalize:
        width = safe_divide(width, _live_range(y, weights))
    eta = eta.astype(dtype)
    level = confidence_level.astype(dtype)
    return _finish((1 - width) * jnp.exp(-eta * (coverage - level) ** 2), has_levels)


def coverage_width_based(
    y: Any,
    lower: Any,
    upper: Any,
    *,
    eta: float,
    confidence_level: Any,
    normalize: bool = True,
    weights: Any = None,
) -> jax.Array:
    """Coverage width-based criterion (CWC), MAPIE's variant.

    .. math:: \\mathrm{CWC} = \\Big(1 - \\frac{\\mathrm{MWS}}{\\max_i y_i - \\min_i y_i}\\Big)
              \\exp\\big(-\\eta\\,(\\mathrm{RCS} - (1 - \\alpha))^2\\big)

    with MWS the mean width (:func:`regression_mean_width_score`), RCS the coverage
    (:func:`regression_coverage_score`) and ``1 - alpha = confidence_level``. This is
    MAPIE's ``coverage_width_based``, which normalises the mean width by the range of the
    targets (Khosravi et al.'s PINAW). The seed document writes ``1 - MWS`` without the
    normalisation; ``normalize=False`` computes that formula literally (only meaningful
    when the widths are already on a unit scale). Neither is Khosravi et al.'s (2010) own
    CWC, ``PINAW (1 + gamma(PICP) exp(-eta (PICP - mu)))``; MAPIE's form is followed.

    ``eta`` may be negative (MAPIE documents that a negative eta rewards coverage over
    width). With a level axis, each level has its own coverage and width and the same
    range of ``y``; ``confidence_level`` is one number or one per level.

    Args:
      y: ``(N,)`` targets; with ``normalize`` and weights, the range is over the samples
        with positive weight.
      lower: ``(N,)`` lower bounds, or ``(N, L)`` for L confidence levels.
      upper: upper bounds, shape of ``lower``.
      eta: finite real number (traced: sweeping it does not recompile).
      confidence_level: the target coverage ``1 - alpha`` in [0, 1], a number or ``(L,)``.
      normalize: True (MAPIE) divides the mean width by ``max y - min y``; False is the
        seed's unnormalised formula.
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis. A constant ``y`` (zero range) with
      ``normalize=True`` raises eagerly; traced, the normalised width is taken as 0.

    Example:
      >>> import jax.numpy as jnp
      >>> y = jnp.array([5.0, 7.5, 9.5, 10.5, 12.5])
      >>> lo, up = jnp.array([4.0, 6, 9, 8.5, 10.5]), jnp.array([6.0, 9, 10, 12.5, 12])
      >>> round(float(coverage_width_based(y, lo, up, eta=0.01, confidence_level=0.9)), 4)
      0.6933

    References:
      Khosravi, Nahavandi & Creighton (2010), "Construction of optimal prediction intervals
      for load forecasting problems", IEEE Trans. Power Systems 25(3);
      MAPIE 1.6, ``mapie.metrics.regression.coverage_width_based``.
    """
    if normalize not in (True, False):
        raise ValueError(f"`normalize` must be True or False; got {normalize!r}.")
    eta = _check_eta(eta)
    y, lower, upper, weights, _ = _check_intervals(y, lower, upper, weights)
    has_levels = lower.ndim == 2
    level = _check_levels(
        confidence_level,
        "confidence_level",
        lower.shape[1] if has_levels else None,
        open_interval=False,
    )
    if normalize and is_concrete(y, weights) and float(_live_range(y, weights)) == 0:
        raise ValueError(
            "`y` must not be constant: MAPIE's CWC divides the mean width by "
            "max(y) - min(y) = 0 (over the samples with positive weight); "
            "pass normalize=False for the unnormalised formula."
        )
    xp = jnp if isinstance(level, jax.Array) else np
    level = xp.broadcast_to(level, (lower.shape[1] if has_levels else 1,))
    return _cwc_kernel(y, lower, upper, weights, eta, level, bool(normalize))


@jax.jit
def _mwi_kernel(y, lower, upper, weights, confidence_level):
    dtype = lower.dtype
    has_levels = lower.ndim == 2
    lower, upper = _as_levels(lower), _as_levels(upper)
    lo, up = jnp.minimum(lower, upper), jnp.maximum(lower, upper)  # undo quantile crossing
    target = y[:, None]
    alpha = 1 - confidence_level.astype(dtype)
    miss = jnp.maximum(target - up, 0) + jnp.maximum(lo - target, 0)
    score = (up - lo) + (2 / alpha)[None, :] * miss
    return _finish(_mean(score, weights, dtype), has_levels)


def regression_mwi_score(
    y: Any, lower: Any, upper: Any, *, confidence_level: Any, weights: Any = None
) -> jax.Array:
    """Mean Winkler interval score (the interval score of Gneiting & Raftery 2007).

    .. math:: \\mathrm{MWI} = \\frac{1}{n}\\sum_i \\Big[(u_i - l_i)
              + \\frac{2}{\\alpha}(y_i - u_i)_+ + \\frac{2}{\\alpha}(l_i - y_i)_+\\Big],
              \\qquad \\alpha = 1 - \\text{confidence\\_level}

    Same as MAPIE's ``regression_mwi_score``, including its handling of crossed intervals:
    they are **reordered** (``l, u = min(l, u), max(l, u)``) before scoring, never
    rejected. The seed writes the penalty sum without the 1/n; MAPIE (and Winkler's mean
    score) average both terms, as this function does. Smaller is better; it is a proper
    scoring rule for the central (1 - alpha) interval, with a useful gradient in the bounds.

    Args:
      y: ``(N,)`` targets.
      lower: ``(N,)`` lower bounds, or ``(N, L)`` for L confidence levels.
      upper: upper bounds, shape of ``lower`` (crossing allowed).
      confidence_level: ``1 - alpha`` in (0, 1): a number, or ``(L,)`` one per level.
      weights: optional ``(N,)`` non-negative sample weights (weighted mean score).

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> y = jnp.array([5.0, 7.5, 9.5, 10.5, 12.5])
      >>> lo, up = jnp.array([4.0, 6, 9, 8.5, 10.5]), jnp.array([6.0, 9, 10, 12.5, 12])
      >>> round(float(regression_mwi_score(y, lo, up, confidence_level=0.9)), 4)
      4.3

    References:
      Winkler (1972), "A decision-theoretic approach to interval estimation", JASA 67;
      Gneiting & Raftery (2007), JASA 102, section 6.2; MAPIE 1.6,
      ``mapie.metrics.regression.regression_mwi_score``.
    """
    y, lower, upper, weights, _ = _check_intervals(y, lower, upper, weights, crossed="reorder")
    has_levels = lower.ndim == 2
    level = _check_levels(
        confidence_level,
        "confidence_level",
        lower.shape[1] if has_levels else None,
        open_interval=True,
    )
    xp = jnp if isinstance(level, jax.Array) else np
    level = xp.broadcast_to(level, (lower.shape[1] if has_levels else 1,))
    return _mwi_kernel(y, lower, upper, weights, level)
