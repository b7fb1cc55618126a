"""Per-segment sums for the binned metrics and the scores: one pass for all segments.

The ``groups=`` form of :func:`jaxcal.ece`, :func:`jaxcal.reliability_curve`,
:func:`jaxcal.brier_score` and :func:`jaxcal.log_loss` (the tests' form lives in
:mod:`jaxcal._segment_paths`, whose :func:`~jaxcal._segment_paths.check_groups` validates
``groups`` for both):

* **Disjoint segments** (integer ids ``(N,)``, static ``n_groups`` = G): no sort and no
  loop over segments. The binned sums are ONE call of :func:`jaxcal._binning.bin_sums`
  with segment id ``group * M + bin`` (per-bin sums are the same kernel as without
  groups); the per-sample sums one :func:`jaxcal._numerics.blocked_segment_sum`. Ids
  outside ``[0, G)`` (possible only under ``jit``, where they are not checked) go to one
  extra segment that is dropped: they belong to no segment.
* **Overlapping segments** (a boolean membership matrix ``(N, G)``). Binned sums: one
  :func:`bin_sums` pass per segment, in a ``lax.map`` over the G columns (no Python loop),
  the rows outside the segment sent to an extra bin that is dropped: time G times one
  ungrouped pass, memory ``O(N)`` at a time beside the ``(G, N)`` bool transpose (N G
  bytes, the input's size). (A matrix product ``masks^T F`` of the one-hot bins costs
  ``N G 3M`` multiply-adds, 6x slower at M = 15.) Per-sample means: the matrix product
  ``masks^T [w x, w]`` (C = 2 columns), block of rows by block of rows
  (:func:`masked_sums`): memory ``O(B G)`` per block plus ``(N / B, G, 2)`` partial sums,
  B = :func:`jaxcal._numerics.rows_per_block` of ``2 G``, added by a radix tree; never an
  ``(N, G)`` float copy of the masks.

Scores are summed as deviations from their bin's anchor and counts are exact integers, as
everywhere :func:`bin_sums` sums.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from jaxcal._binning import BinStats, bin_sums, uniform_anchors, uniform_bin_index
from jaxcal._numerics import blocked_segment_sum, rows_per_block, tree_sum
from jaxcal._segment_paths import check_groups


def check_binned_groups(groups: Any, n: int, n_groups: int | None, binning: str = "uniform"):
    """:func:`~jaxcal._segment_paths.check_groups` for the binned metrics: uniform bins only.

    Quantile edges within each segment would need each segment's own order statistics;
    the segments share the uniform edges instead, so bins mean the same in every segment.
    """
    if groups is None:  # n_groups alone is ignored, as by the tests' ``groups=``
        return None, None
    if binning != "uniform":
        raise ValueError(
            f'`groups` requires `binning="uniform"` (the bins shared by every segment); got '
            f'binning={binning!r}. Pass binning="uniform", or call without `groups` on '
            "each segment's rows for quantile bins of its own."
        )
    return check_groups(groups, n, n_groups)


def segment_ids(groups: jax.Array, n_groups: int) -> jax.Array:
    """int32 ids with every id outside ``[0, n_groups)`` sent to the extra id ``n_groups``."""
    ids = groups.astype(jnp.int32)
    return jnp.where((ids >= 0) & (ids < n_groups), ids, n_groups)


def masked_sums(masks: jax.Array, features: jax.Array) -> jax.Array:
    """``masks^T @ features``: ``(N, G)`` bool and ``(N, C)`` floats -> ``(G, C)``.

    Blocks of B rows (:func:`rows_per_block` of ``G C``): one product per block, in the
    features' dtype, then a radix tree over the ``(N / B, G, C)`` partials; only one
    block's ``(B, G)`` float copy of the masks exists at a time.
    """
    n, num = masks.shape
    c = features.shape[1]
    block = min(rows_per_block(num * c), max(n, 1))
    pad = -n % block
    m = jnp.pad(masks, ((0, pad), (0, 0))).reshape(-1, block, num)
    f = jnp.pad(features, ((0, pad), (0, 0))).reshape(-1, block, c)
    # The product itself in full precision: JAX's default may round float32 operands to
    # bfloat16 on accelerators.
    prec = lax.Precision.HIGHEST
    partial = lax.map(lambda mf: jnp.matmul(mf[0].T.astype(f.dtype), mf[1], precision=prec), (m, f))
    return tree_sum(partial)


def segment_bin_stats(
    scores: jax.Array,
    targets: jax.Array,
    weights: jax.Array | None,
    n_bins: int,
    closed: str,
    groups: jax.Array,
    n_groups: int | None,
) -> BinStats:
    """Per-(segment, uniform bin) sums, fields ``(G, M)``.

    ``groups``: int ids ``(N,)`` with ``n_groups``, or bool ``(N, G)`` membership.
    """
    bins = uniform_bin_index(scores, n_bins, closed)
    anchor = uniform_anchors(n_bins)
    if groups.ndim == 1:
        num = (n_groups + 1) * n_bins  # the extra segment holds the invalid ids
        ids = segment_ids(groups, n_groups) * n_bins + bins
        sums = bin_sums(ids, scores, targets, num, weights, anchor, block=rows_per_block(num))
        return BinStats(*(f[: n_groups * n_bins].reshape(n_groups, n_bins) for f in sums))

    def one_segment(member: jax.Array) -> BinStats:
        # Rows outside the segment go to an extra bin, dropped: the unweighted sums keep
        # bin_sums' packed integer path (a 0/1 weight would take the weighted one).
        sums = bin_sums(
            jnp.where(member, bins, n_bins), scores, targets, n_bins + 1, weights, anchor
        )
        return BinStats(*(f[:n_bins] for f in sums))

    return lax.map(one_segment, groups.T)


def segment_means(values: jax.Array, weights: jax.Array | None, groups, n_groups) -> jax.Array:
    """Weighted mean of ``values`` ``(N,)`` within each segment ``(G,)``; 0 for an empty one.

    ``weights`` should be scaled (:func:`jaxcal._numerics.scale_free`) so their sums cannot
    overflow.
    """
    w = jnp.ones_like(values) if weights is None else weights.astype(values.dtype)
    if groups.ndim == 1:
        ids = segment_ids(groups, n_groups)
        total, mass = blocked_segment_sum([w * values, w], ids, n_groups + 1)[:, :n_groups]
    else:
        total, mass = masked_sums(groups, jnp.stack([w * values, w], axis=1)).T
    positive = mass > 0
    return jnp.where(positive, total / jnp.where(positive, mass, 1), 0)
