"""Bin edges, bin indices and per-bin sufficient statistics: the one place binning lives.

Conventions (DESIGN.md):

* ``binning="uniform"``: M equal-width bins. ``closed="right"`` (Guo et al. 2017, the
  ECML-PKDD tutorial): [0, 1/M], (1/M, 2/M], ..., ((M-1)/M, 1]. ``closed="left"``
  (scikit-learn, torchmetrics): [0, 1/M), ..., [(M-1)/M, 1]. The edge k/M is the value
  of k/M *rounded to the input's dtype*, so a probability typed as 0.6 lands in the bin
  the convention says in bfloat16, float16, float32 and float64 alike.
* ``binning="quantile"``: equal-mass bins whose inner edges are empirical quantiles of
  the scores (weighted, when weights are given). Bins are decided by comparing values with
  edges, so equal scores always share a bin; with N distinct scores and M bins each bin
  holds N/M of them when M divides N.

Per-bin sums are accumulated in blocks of ``_BLOCK`` samples, then added across blocks by
a pairwise tree, so float32 sums stay accurate far beyond 2**24 samples; sample counts are
int32 and exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._checks import check_option, check_positive_int, compute_dtype

BINNINGS = ("uniform", "quantile")
CLOSED = ("right", "left")

# Samples per block of float partial sums; small enough that a partial sum of values in
# [0, 1] keeps ~1e-5 relative accuracy in float32 whatever the data.
_BLOCK = 256

# Up to this many bins, counting the edges below a score (M - 1 fused compares) is faster
# than floor-and-correct with two gathers from the edge table (0.6 versus 1.2 ms at 1e6).
_COUNT_EDGES_MAX_BINS = 64


class BinStats(NamedTuple):
    """Sufficient statistics of S segments (bins, or bins x classes), each shape ``(S,)``.

    Attributes:
      count: int32 number of samples with positive weight (exact beyond 2**24).
      weight: sum of sample weights (equal to ``count`` without weights).
      sum_score: weighted sum of the scores (confidences / probabilities).
      sum_target: weighted sum of the binary targets (correctness / labels).
    """

    count: jax.Array
    weight: jax.Array
    sum_score: jax.Array
    sum_target: jax.Array


def check_binning(n_bins: int, binning: str, closed: str) -> int:
    """Static validation of the three binning options; returns ``n_bins`` as int."""
    n_bins = check_positive_int("n_bins", n_bins)
    check_option("binning", binning, BINNINGS)
    check_option("closed", closed, CLOSED)
    return n_bins


def uniform_edges(n_bins: int, dtype=jnp.float32) -> jax.Array:
    """The M + 1 edges k/M, each rounded to ``dtype`` then cast to its compute dtype.

    Args:
      n_bins: M >= 1.
      dtype: the dtype of the scores the edges will be compared with.

    Returns:
      ``(M + 1,)`` array in ``compute_dtype(dtype)``; ``edges[0] == 0``, ``edges[-1] == 1``.

    Example:
      >>> uniform_edges(5).tolist()  # doctest: +ELLIPSIS
      [0.0, 0.2..., 0.4..., 0.6..., 0.8..., 1.0]
    """
    return jnp.asarray(_host_uniform_edges(n_bins, dtype))


def _host_uniform_edges(n_bins: int, dtype) -> np.ndarray:
    """NumPy edges k/M rounded to ``dtype`` (correctly: NumPy's division and casts are)."""
    exact = np.arange(n_bins + 1, dtype=np.float64) / n_bins
    return exact.astype(jnp.dtype(dtype)).astype(compute_dtype(dtype))


def quantile_edges(
    scores: jax.Array, n_bins: int, closed: str = "right", weights: jax.Array | None = None
) -> jax.Array:
    """Equal-mass edges: 0, the M - 1 inner empirical quantiles of ``scores``, and 1.

    With ``closed="right"`` the inner edge b is the smallest sorted score whose cumulative
    weight reaches b/M of the total (bins (e_b, e_{b+1}] then hold the first b/M of the
    mass); with ``closed="left"`` it is the first score past that mass (bins [e_b, e_{b+1})).
    Unweighted, N = 1000 distinct scores into M = 10 bins give ten bins of 100.

    Args:
      scores: ``(N,)`` values in [0, 1].
      n_bins: M >= 1.
      closed: ``"right"`` or ``"left"``, the convention the edges will be used with.
      weights: optional ``(N,)`` non-negative weights (weighted quantiles).

    Returns:
      ``(M + 1,)`` non-decreasing edges in the scores' compute dtype.
    """
    dtype = compute_dtype(scores.dtype)
    s = scores.astype(dtype)
    order = jnp.argsort(s)
    sorted_scores = s[order]
    w = jnp.ones_like(s) if weights is None else weights.astype(dtype)[order]
    cum = jnp.cumsum(w)
    # b * W / M, multiplying first: b / M * W rounds 0.9 * 1000 to 900.00006 in float32.
    targets = jnp.arange(1, n_bins, dtype=dtype) * cum[-1] / n_bins
    side = "left" if closed == "right" else "right"
    idx = jnp.clip(jnp.searchsorted(cum, targets, side=side), 0, s.shape[0] - 1)
    inner = sorted_scores[idx]
    return jnp.concatenate([jnp.zeros(1, dtype), inner, jnp.ones(1, dtype)])


def uniform_bin_index(scores: jax.Array, n_bins: int, closed: str = "right") -> jax.Array:
    """Index of the uniform bin of each score, by the edge convention of ``closed``.

    Up to ``_COUNT_EDGES_MAX_BINS`` bins, the index is the number of inner edges below the
    score (``e < s`` right-closed, ``e <= s`` left-closed), compared with host-computed
    constants: one fused elementwise pass, no gather. Beyond, ``floor(s * M)`` is off by at
    most one near an edge (``0.6 * 5`` is 3.0000001 in float32) and one comparison with the
    dtype-rounded edges on each side corrects it. Scores of exactly 0 and 1 land in the
    first and last bins under both conventions.

    Args:
      scores: any shape, values in [0, 1]; bf16/f16 are compared in their own precision.
      n_bins: M.
      closed: ``"right"`` or ``"left"``.

    Returns:
      int32 array of the shape of ``scores``, values in [0, M).
    """
    dtype = compute_dtype(scores.dtype)
    s = scores.astype(dtype)
    # Edges from a host-computed table: XLA:CPU turns k / M into k * (1 / M), which is not
    # correctly rounded (5 / 6 gives 0.8333334 in float32, the edge is 0.8333333).
    host_edges = _host_uniform_edges(n_bins, scores.dtype)
    if n_bins <= _COUNT_EDGES_MAX_BINS:
        index = jnp.zeros(s.shape, jnp.int32)
        for e in host_edges[1:-1]:
            below = (s > e) if closed == "right" else (s >= e)
            index = index + below.astype(jnp.int32)
        return index
    guess = jnp.clip(jnp.floor(s * n_bins).astype(jnp.int32), 0, n_bins - 1)
    edges = jnp.asarray(host_edges)
    lo, hi = edges[guess], edges[guess + 1]
    if closed == "right":  # bin b holds (e_b, e_{b+1}]; bin 0 also holds 0
        down = (s <= lo) & (guess > 0)
        up = (s > hi) & (guess < n_bins - 1)
    else:  # bin b holds [e_b, e_{b+1}); the last bin also holds 1
        down = (s < lo) & (guess > 0)
        up = (s >= hi) & (guess < n_bins - 1)
    return guess - down.astype(jnp.int32) + up.astype(jnp.int32)


def edges_bin_index(scores: jax.Array, edges: jax.Array, closed: str = "right") -> jax.Array:
    """Index of the bin of each score given explicit (e.g. quantile) ``edges`` ``(M + 1,)``."""
    inner = edges[1:-1]
    s = scores.astype(edges.dtype)
    side = "left" if closed == "right" else "right"
    return jnp.searchsorted(inner, s, side=side, method="compare_all").astype(jnp.int32)


def bin_edges_and_index(
    scores: jax.Array,
    n_bins: int,
    binning: str = "uniform",
    closed: str = "right",
    weights: jax.Array | None = None,
    quantile_scores: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Edges ``(M + 1,)`` and bin indices (shape of ``scores``) for either binning.

    ``quantile_scores`` (default: ``scores``) are the values whose quantiles define
    equal-mass edges; classwise binning passes each class's column.
    """
    if binning == "uniform":
        return uniform_edges(n_bins, scores.dtype), uniform_bin_index(scores, n_bins, closed)
    source = scores if quantile_scores is None else quantile_scores
    edges = quantile_edges(source.reshape(-1), n_bins, closed, weights)
    return edges, edges_bin_index(scores, edges, closed)


def bin_centres(edges: jax.Array, n_groups: int = 1) -> jax.Array:
    """Mid-points of the bins ``(M,)``, tiled over ``n_groups`` (segment offsets)."""
    return jnp.tile((edges[:-1] + edges[1:]) / 2, n_groups)


def uniform_centres(n_bins: int) -> Callable[[jax.Array], jax.Array]:
    """Offsets for :func:`segment_stats` with ``class * M + bin`` ids: ``(bin + 1/2) / M``.

    Computed from the segment id by arithmetic (no gather); the same function gives the
    per-sample shift and the per-segment add-back, so the two agree bit for bit.
    """

    def centre(segment_ids: jax.Array) -> jax.Array:
        return ((segment_ids % n_bins).astype(jnp.float32) + 0.5) / n_bins

    return centre


def _pairwise_sum(x: jax.Array) -> jax.Array:
    """Sum over axis 0 by a balanced tree: error grows like log(n), not n."""
    while x.shape[0] > 1:
        if x.shape[0] % 2:
            x = jnp.concatenate([x, jnp.zeros_like(x[:1])])
        x = x[0::2] + x[1::2]
    return x[0]


def _block_ids(segment_ids: jax.Array, num_segments: int) -> tuple[jax.Array, int]:
    """Flat ``block * S + segment`` for blocks of ``_BLOCK`` consecutive rows.

    ``(N, K)`` ids are blocked by row, not by flat position: each row sends its K entries
    to distinct segments (``class * M + bin``), so a segment still takes at most
    ``_BLOCK`` values per block while the partial sums stay ``N / _BLOCK x S`` (blocking
    the N * K flat entries would multiply them by K).
    """
    n = segment_ids.shape[0]
    n_blocks = max(1, -(-n // _BLOCK))
    block = jnp.arange(n, dtype=jnp.int32) // _BLOCK
    block = block.reshape((n,) + (1,) * (segment_ids.ndim - 1))
    return (block * num_segments + segment_ids).reshape(-1), n_blocks


def _block_sums(values: jax.Array, ids: jax.Array, n_blocks: int, num_segments: int) -> jax.Array:
    """Per-(block, segment) sums of ``values`` ``(N,)``, shape ``(n_blocks, S)``."""
    return jax.ops.segment_sum(
        values, ids, n_blocks * num_segments, mode="promise_in_bounds"
    ).reshape(n_blocks, num_segments)


def segment_stats(
    segment_ids: jax.Array,
    scores: jax.Array,
    targets: jax.Array,
    num_segments: int,
    weights: jax.Array | None = None,
    offsets: jax.Array | Callable[[jax.Array], jax.Array] | None = None,
) -> BinStats:
    """Per-segment sums of samples, binary targets and scores.

    Sums run in blocks of ``_BLOCK`` samples (one scatter per quantity, sharing one index)
    and the blocks are added by a radix tree: float32 stays accurate for any N and counts
    are exact int32. Without weights, count and hits travel packed in one int32 scatter
    (``1 + (target << 16)``; a block never holds more than 256 of either). Scores are
    summed as deviations from a per-segment ``offsets`` value (e.g. the bin's centre), then
    ``offset * weight`` is added back: the partial sums stay small, so 2e7 identical
    float32 scores in one bin keep their mean to float32 resolution.

    Args:
      segment_ids: ``(N,)`` int32 in ``[0, num_segments)`` (bin, or class * M + bin), or
        ``(N, K)`` when each row sends its K entries to distinct segments (classwise).
      scores: floats of the shape of ``segment_ids`` (accumulated in at least float32).
      targets: binary targets (bool or 0/1) of that shape.
      num_segments: S.
      weights: optional ``(N,)`` non-negative row weights; zero-weight rows are absent.
      offsets: optional reference score of each segment (default 0): an ``(S,)`` array,
        or a function of the segment ids (e.g. :func:`uniform_centres`), which avoids a
        gather.

    Returns:
      ``BinStats`` with fields of shape ``(S,)``.
    """
    dtype = compute_dtype(scores.dtype)
    s = scores.astype(dtype)
    if offsets is None:
        segment_offsets = None
    elif callable(offsets):
        s = s - offsets(segment_ids).astype(dtype)
        segment_offsets = offsets(jnp.arange(num_segments, dtype=jnp.int32)).astype(dtype)
    else:
        segment_offsets = offsets.astype(dtype)
        s = s - segment_offsets[segment_ids]
    y = targets.astype(jnp.int32)
    ids, n_blocks = _block_ids(segment_ids, num_segments)
    s, y = s.reshape(-1), y.reshape(-1)
    if weights is not None and segment_ids.ndim == 2:
        weights = jnp.repeat(weights, segment_ids.shape[1])
    if weights is None:
        packed = _block_sums(1 + (y << 16), ids, n_blocks, num_segments)
        count = jnp.sum(packed & 0xFFFF, axis=0)
        hits = jnp.sum(packed >> 16, axis=0)
        weight = count.astype(dtype)
        sum_score = _radix_tree_sum(_block_sums(s, ids, n_blocks, num_segments))
        sum_target = hits.astype(dtype)
    else:
        w = weights.astype(dtype)
        count = jnp.sum(_block_sums((w > 0).astype(jnp.int32), ids, n_blocks, num_segments), 0)
        weight, sum_score, sum_target = (
            _radix_tree_sum(_block_sums(v, ids, n_blocks, num_segments))
            for v in (w, w * s, w * y.astype(dtype))
        )
    if segment_offsets is not None:
        sum_score = sum_score + segment_offsets * weight
    return BinStats(count.astype(jnp.int32), weight, sum_score, sum_target)


def segment_sums(values, segment_ids: jax.Array, num_segments: int) -> jax.Array:
    """Per-segment sums of several arrays at once, accurate for any number of rows.

    Rows (axis 0) are grouped in blocks of ``_BLOCK``; within a block each array is summed
    by its own scalar ``segment_sum`` (on XLA:CPU, C scalar scatters are several times
    faster than one scatter of C-wide rows, as ``_blocked_segment_sum`` does), then the
    blocks are added by a radix-32 tree (:func:`_radix_tree_sum`: fewer XLA ops than a
    pairwise tree, so a faster compile). ``segment_ids`` may be ``(N,)`` or ``(N, K)``:
    for ``(N, K)`` ids where each row sends its K entries to distinct segments (e.g.
    ``class * M + bin``), a segment takes at most ``_BLOCK`` values per block, so float32
    sums keep ~1e-5 relative accuracy for any N, and the partial sums take
    ``ceil(N / _BLOCK) * S`` numbers per array (blocks of ``_BLOCK`` flattened entries
    would take K times more).

    Args:
      values: sequence of C arrays, each of the shape of ``segment_ids`` and one float
        dtype.
      segment_ids: int32 ``(N,)`` or ``(N, K)`` in ``[0, num_segments)``.
      num_segments: S (``ceil(N / _BLOCK) * S`` must fit in int32).

    Returns:
      ``(C, S)`` sums in the values' dtype.

    Example:
      >>> import jax.numpy as jnp
      >>> ids = jnp.array([[0, 2], [1, 3], [0, 3]])
      >>> v = jnp.array([[0.5, 0.5], [0.25, 0.75], [1.0, 0.0]])
      >>> segment_sums([v, v * v], ids, 4).tolist()
      [[1.5, 0.25, 0.5, 0.75], [1.25, 0.0625, 0.25, 0.5625]]
    """
    n = segment_ids.shape[0]
    n_blocks = max(1, -(-n // _BLOCK))
    block = jnp.arange(n, dtype=jnp.int32) // _BLOCK
    block = block.reshape((n,) + (1,) * (segment_ids.ndim - 1))
    ids = (block * num_segments + segment_ids).reshape(-1)
    partial = jnp.stack(
        [
            jax.ops.segment_sum(v.reshape(-1), ids, n_blocks * num_segments).reshape(
                n_blocks, num_segments
            )
            for v in values
        ],
        axis=1,
    )  # (blocks, C, S)
    return _radix_tree_sum(partial)


def _radix_tree_sum(x: jax.Array, radix: int = 32) -> jax.Array:
    """Sum over axis 0 by a tree of fan-out ``radix``: O(radix log_radix n) error growth.

    Same accuracy class as :func:`_pairwise_sum` (error ~ radix * ceil(log_radix n) ulps
    in the worst case, 2 levels for 1e5 / 256 blocks, 4 for 1e8 / 256), with
    ceil(log_radix n) reshape-and-sum ops instead of log2 n slice-and-add levels: each
    level is one XLA fusion, so this compiles several times faster.
    """
    while x.shape[0] > 1:
        r = min(radix, x.shape[0])
        pad = -x.shape[0] % r
        if pad:
            x = jnp.concatenate([x, jnp.zeros((pad, *x.shape[1:]), x.dtype)])
        x = x.reshape(-1, r, *x.shape[1:]).sum(axis=1)
    return x[0]
