"""The sums of one batch in many weightings at once: the bootstrap replicates' update.

B replicates weight the same rows differently, so the bins, the deviations from the bins'
anchors and the per-sample scores are computed once, and only the weighted sums are
done B times: scatters whose rows are B-wide vectors (one contiguous add per row and
quantity), in blocks of rows added by a tree, as ``bin_sums()`` does
for one weighting. (``vmap`` of the one-weighting update over B recomputes nothing
either, but lowers to scatters of scalars with B-fold index arrays: 20x slower.)
``replicate_sums()`` gives a whole state's sums, ``view_sums()`` the buckets of
:func:`jaxcal.ece`'s view alone (the summary replicates of :mod:`._summary`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcal._core.binning import uniform_anchors, uniform_bin_index
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.numerics import block_segment_ids, compute_dtype, rows_per_block, tree_sum
from jaxcal.metrics._scoring import brier_per_sample, log_loss_per_sample


def _sums(ids, columns, weights, num_segments, block):
    """Per-segment sums ``(Q, S, B)`` of ``columns`` (Q arrays of the shape of ``ids``)
    weighted by ``weights`` ``(N, B)``; rows blocked by ``block``."""
    flat, n_blocks = block_segment_ids(ids, num_segments, block)
    w = weights if ids.ndim == 1 else weights[:, None, :]

    def one(column):
        data = (column[..., None] * w).reshape(flat.shape[0], -1)
        part = jax.ops.segment_sum(data, flat, n_blocks * num_segments, mode="promise_in_bounds")
        return tree_sum(part.reshape(n_blocks, num_segments, -1))

    # One column at a time: the scatters' B-wide rows of all Q columns at once held Q
    # times the memory (5 x 42 MB for the classwise sums at K = 10, N = 65536, B = 16).
    return jax.lax.map(one, jnp.stack(columns))


def _counts(ids, weights, num_segments):
    present = (weights > 0).astype(jnp.int32)
    shape = (*ids.shape, present.shape[-1])
    data = present if ids.ndim == 1 else jnp.broadcast_to(present[:, None, :], shape)
    flat = ids.reshape(-1)
    return jax.ops.segment_sum(data.reshape(flat.shape[0], -1), flat, num_segments)


def _cells(ids, scores, targets, wt, num_segments, anchor, block):
    """Counts ``(S, B)`` and sums ``(3, S, B)`` (weight, score, target) per segment.

    The scores are summed as deviations from their segment's anchor, added back per
    segment (as ``bin_sums()`` does), so a sum over many rows keeps the
    precision of the deviations.
    """
    dtype = scores.dtype
    dev = scores - anchor(ids).astype(dtype)
    sums = _sums(ids, [jnp.ones_like(dev), dev, targets.astype(dtype)], wt, num_segments, block)
    offsets = anchor(jnp.arange(num_segments, dtype=jnp.int32)).astype(dtype)
    return _counts(ids, wt, num_segments), sums.at[1].add(offsets[:, None] * sums[0])


def view_sums(probs, labels, weights, resolution, closed):
    """The buckets of :func:`jaxcal.ece`'s view of one batch under B weightings.

    The positive class's probability against ``labels == 1`` (1-D ``probs``), or the
    top-label confidence against correctness (2-D), in R = ``resolution`` uniform buckets:
    the cells that ``main_cells()`` reads from a state of that
    resolution. Returns counts ``(B, R)`` and sums ``(B, 3, R)`` (weight, score, target).
    """
    dtype = compute_dtype(probs.dtype)
    scores, targets, _ = scores_and_targets(probs, labels)
    scores = scores.astype(dtype)
    ids = uniform_bin_index(scores, resolution, closed)
    block = rows_per_block(resolution)
    wt = weights.astype(dtype).T
    count, sums = _cells(ids, scores, targets, wt, resolution, uniform_anchors(resolution), block)
    return count.T, jnp.moveaxis(sums, -1, 0)


def replicate_sums(probs, labels, weights, n_bins, closed, binary):
    """The state-layout sums of one batch under B weightings ``weights`` ``(B, N)``.

    Returns ``(top_count, top_sums, class_count, class_sums, totals)`` each with a leading
    axis B, as ``_batch_sums()`` returns them for one.
    """
    dtype = compute_dtype(probs.dtype)
    wt = weights.astype(dtype).T  # (N, B): B-wide rows
    per_sample = jnp.stack(
        [
            jnp.ones(probs.shape[0], dtype),
            brier_per_sample(probs, labels),
            log_loss_per_sample(probs, labels),
        ],
        axis=1,
    )
    totals = per_sample.T @ wt  # (3, B)
    if binary:
        probs = jnp.stack([1 - probs, probs], axis=1)
    k = probs.shape[1]
    s_top, s_class = k * n_bins, k * n_bins
    anchor = uniform_anchors(n_bins)
    conf, correct, pred = scores_and_targets(probs, labels, "confidence")
    conf = conf.astype(dtype)
    top_ids = pred.astype(jnp.int32) * n_bins + uniform_bin_index(conf, n_bins, closed)
    block = rows_per_block(s_top)
    top_count, top = _cells(top_ids, conf, correct, wt, s_top, anchor, block)
    p = probs.astype(dtype)
    class_ids = jnp.arange(k, dtype=jnp.int32)[None, :] * n_bins + uniform_bin_index(
        p, n_bins, closed
    )
    dev = p - anchor(class_ids).astype(dtype)
    y = (labels[:, None] == jnp.arange(k, dtype=labels.dtype)[None, :]).astype(dtype)
    cls = _sums(class_ids, [jnp.ones_like(p), dev, y, dev * dev, dev * y], wt, s_class, block)
    anchors = anchor(jnp.arange(s_class, dtype=jnp.int32)).astype(dtype)[:, None]
    class_sums = jnp.stack([cls[0], cls[1] + anchors * cls[0], cls[2], cls[1], cls[3], cls[4]])

    def as_state(x):  # (..., K M, B) -> (B, ..., K, M)
        return jnp.moveaxis(x.reshape(*x.shape[:-2], k, n_bins, x.shape[-1]), -1, 0)

    return (
        as_state(top_count),
        as_state(top),
        as_state(_counts(class_ids, wt, s_class)),
        as_state(class_sums),
        totals.T,
    )
