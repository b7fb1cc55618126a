"""Size-stratified coverage (SSC): coverage by interval-width rank or by set size.

Regression groups are ranks of the widths, cut as ``np.array_split`` cuts the sorted
samples; a few group boundaries are order statistics found by bisection on the widths'
bit patterns (``order_statistics()``), more by a stable sort.
Classification groups are fixed ranges of the set size. Per-group sums are
``bin_sums()``.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.binning import bin_sums
from jaxcal._core.checks import check_positive_int
from jaxcal._core.numerics import order_statistics, safe_divide
from jaxcal._core.sort import argsort
from jaxcal.coverage._checks import check_intervals, check_set_bins, check_sets
from jaxcal.coverage._levels import (
    as_levels,
    mask_padding_intervals,
    sets_with_levels,
    squeeze_levels,
)


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
# patterns (B - 1 order statistics in 31 / 63 counting passes); beyond, by a full sort
# (jaxcal._core.sort: NumPy's on CPU). At 1e6 samples on CPU the two are within ~10 % of each
# other (the per-group sums dominate both); selection was faster at B = 4, the sort at
# B = 8 and 17 (benchmarks/compare_revisions.py-style interleaved CPU time, loaded core).
_SELECT_MAX_BOUNDARIES = 3


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
    order = argsort(key)
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
    y, lower, upper = mask_padding_intervals(y, lower, upper, weights)
    level = partial(_regression_ssc_level, num_bins=num_bins)
    stats = jax.vmap(level, in_axes=(None, 1, 1, None))(
        y, as_levels(lower), as_levels(upper), weights
    )
    return squeeze_levels(_ssc_from_stats(stats), lower.ndim == 2)


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
    :func:`~jaxcal.coverage.regression_ssc_score` their minimum.

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

    Computation: with B <= 4 the group boundaries are the B - 1 order statistics of the
    widths, found by bisection on their bit patterns (no sort); with more groups, a
    stable sort (``jaxcal/_core/sort.py``). Both give the same groups.

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
    y, lower, upper, weights, _ = check_intervals(y, lower, upper, weights)
    return _regression_ssc_kernel(y, lower, upper, weights, num_bins)


def regression_ssc_score(
    y: Any, lower: Any, upper: Any, *, num_bins: int = 3, weights: Any = None
) -> jax.Array:
    """The smallest size-stratified coverage over the non-empty width groups.

    ``min_b coverage_b`` over the groups of :func:`~jaxcal.coverage.regression_ssc` (MAPIE's
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
    stats = jax.vmap(level, in_axes=(None, 2, None))(labels, sets_with_levels(sets), weights)
    return squeeze_levels(_ssc_from_stats(stats), sets.ndim == 3)


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
    labels, sets, weights, dtype = check_sets(labels, sets, weights)
    num_bins = check_set_bins(num_bins, sets.shape[1])
    return _classification_ssc_kernel(labels, sets, weights, num_bins, dtype)


def classification_ssc_score(
    labels: Any, sets: Any, *, num_bins: int | None = None, weights: Any = None
) -> jax.Array:
    """The smallest size-stratified coverage over the non-empty set-size groups.

    ``min_g coverage_g`` over the groups of :func:`~jaxcal.coverage.classification_ssc` that hold samples
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
