"""Bin edges, bin indices and per-bin sufficient statistics: the one place binning lives.

Conventions (DESIGN.md):

* ``binning="uniform"``: M equal-width bins. ``closed="right"`` (Guo et al. 2017, the
  ECML-PKDD tutorial, scikit-learn's ``calibration_curve``): [0, 1/M], (1/M, 2/M], ...,
  ((M-1)/M, 1]. ``closed="left"`` (torchmetrics): [0, 1/M), ..., [(M-1)/M, 1]. The edge
  k/M is the value of k/M *rounded to the input's dtype*, so a probability typed as 0.6
  lands in the bin the convention says in bfloat16, float16, float32 and float64 alike.
* ``binning="quantile"``: equal-mass bins whose inner edges are empirical quantiles of
  the scores (weighted, when weights are given). Bins are decided by comparing values with
  edges, so equal scores always share a bin; with N distinct scores and M bins each bin
  holds N/M of them when M divides N.

Per-bin sums (``bin_sums()``) are accumulated in blocks of ``BLOCK`` samples, then
added across blocks by a radix-32 tree (``jaxcal/_core/numerics.py``), so float32 sums stay
accurate far beyond 2**24 samples; sample counts are int32 and exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_option, check_positive_int
from jaxcal._core.numerics import (
    BLOCK,
    block_partial_sums,
    block_segment_ids,
    compute_dtype,
    tree_sum,
    two_product,
    vary_like,
)
from jaxcal._core.sort import argsort, sort

BINNINGS = ("uniform", "quantile")
CLOSED = ("right", "left")

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


class BinMoments(NamedTuple):
    """Within-segment moments of the deviations ``d = score - offset``, each ``(S,)``.

    With the offset a bin's anchor (``bin_anchors()``), ``|d| <= 1 / M``, and the within-bin variance
    ``sum d^2 - (sum d)^2 / W`` keeps float32's relative precision (the unshifted
    ``sum s^2 - (sum s)^2 / W`` cancels catastrophically; see ``bin_sums()``).

    Attributes:
      sum_dev: weighted sum of ``d``.
      sum_dev_sq: weighted sum of ``d^2``.
      sum_dev_target: weighted sum of ``d * target``.
    """

    sum_dev: jax.Array
    sum_dev_sq: jax.Array
    sum_dev_target: jax.Array


def cube_root_bins(n: int) -> int:
    """``ceil(n ** (1/3))`` exactly, in integers (at least 1): the cube-root rule.

    Example:
      >>> [cube_root_bins(n) for n in (1, 8, 9, 27, 28, 1000, 1001)]
      [1, 2, 3, 3, 4, 10, 11]
    """
    m = max(1, round(n ** (1 / 3)))
    while m**3 < n:
        m += 1
    while m > 1 and (m - 1) ** 3 >= n:
        m -= 1
    return m


def check_binning(n_bins: int | str, binning: str, closed: str, rows=None) -> int:
    """Static validation of the three binning options; returns ``n_bins`` as int.

    ``n_bins="cube_root"``: ``ceil(N ** (1/3))`` bins for N the rows of the scores
    ``rows`` (a static shape, resolved at trace time; under ``jit`` padding rows count).
    """
    if isinstance(n_bins, str):
        if n_bins != "cube_root":
            raise ValueError(f"`n_bins` must be an integer >= 1 or 'cube_root'; got {n_bins!r}.")
        shape = () if rows is None else tuple(getattr(rows, "shape", None) or np.shape(rows))
        if not shape:
            raise ValueError(
                "`n_bins='cube_root'` (ceil(N^(1/3)) bins) needs the number of samples, which "
                "this function does not know (a state, or a factory built before the data); "
                "pass an integer."
            )
        n_bins = cube_root_bins(int(shape[0]))
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
    "Reaches" is decided exactly, ``M cum_k >= b W`` (``>`` for left), never through a
    rounded ``b W / M``: unweighted, the positions ``ceil(b N / M) - 1`` and
    ``floor(b N / M)`` are integers known from the shape; weighted, the float cumulative
    sums are compared by error-free products (``two_product()``), so
    integer weights (exact sums) give exactly equal masses. N = 1000 distinct scores into
    M = 10 bins give ten bins of 100, in every dtype and for every M dividing N. The edges
    of many disjoint segments at once, by the same rules (``inner_positions()``,
    ``first_reaching()``) in one sort: ``segment_quantile_edges()``.

    Args:
      scores: ``(N,)`` values in [0, 1].
      n_bins: M >= 1.
      closed: ``"right"`` or ``"left"``, the convention the edges will be used with.
      weights: optional ``(N,)`` non-negative weights (weighted quantiles; the cumulative
        sums are float sums in the scores' compute dtype, taken in the order of (score,
        weight), so the edges do not depend on the order of the samples).

    Returns:
      ``(M + 1,)`` non-decreasing edges in the scores' compute dtype.

    Example:
      >>> import jax.numpy as jnp
      >>> quantile_edges(jnp.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.9]), 3).tolist()  # doctest: +ELLIPSIS
      [0.0, 0.2..., 0.4..., 1.0]
    """
    dtype = compute_dtype(scores.dtype)
    s = scores.astype(dtype)
    n = s.shape[0]
    if weights is None:
        inner = sort(s)[inner_positions(n, n_bins, closed)]
    else:
        # Equal scores are ordered by weight, so the float cumulative sums (and a mass
        # that reaches b/M exactly in real arithmetic, decided by their rounding) do not
        # depend on the order the samples came in: a permutation of (scores, weights)
        # gives the same edges, bit for bit.
        w = weights.astype(dtype)
        by_weight = argsort(w)
        order = by_weight[argsort(s[by_weight])]
        cum = jnp.cumsum(w[order])
        b = jnp.arange(1, n_bins, dtype=dtype)
        inner = s[order[first_reaching(cum, b, n_bins, strict=closed == "left")]]
    return jnp.concatenate([jnp.zeros(1, dtype), inner, jnp.ones(1, dtype)])


def inner_positions(n, n_bins: int, closed: str):
    """Sorted positions of the M - 1 inner unweighted quantiles: exact integers.

    The first k with ``M (k + 1) >= b N`` (right-closed: ``ceil(b N / M) - 1``) or
    ``M (k + 1) > b N`` (left-closed: ``floor(b N / M)``), b = 1..M-1, as int32, clipped
    to ``[0, max(N - 1, 0)]``. ``n``: a Python int (host constants ``(M - 1,)``), or an
    int32 array ``(G,)`` of segment sizes (traced; ``(G, M - 1)``). With ``N = q M + r``
    the products stay below ``N + M^2``: ``b q + ceil(b r / M) - 1`` never overflows int32.
    """
    xp = np if isinstance(n, int) else jnp
    b = (
        np.arange(1, n_bins, dtype=np.int64)
        if xp is np
        else jnp.arange(1, n_bins, dtype=n.dtype)[None, :]
    )
    n = n if xp is np else n[:, None]
    q, r = n // n_bins, n % n_bins
    if closed == "right":
        pos = b * q + (b * r + n_bins - 1) // n_bins - 1
    else:
        pos = b * q + b * r // n_bins
    return xp.clip(pos, 0, xp.maximum(n - 1, 0)).astype(np.int32)


def first_reaching(
    cum: jax.Array,
    b: jax.Array,
    n_bins,
    strict: bool,
    start: jax.Array | None = None,
    stop: jax.Array | None = None,
) -> jax.Array:
    """For each b, the first k with ``M cum_k >= b W`` (``>`` if strict), W = cum[-1].

    Decided exactly on the float ``cum`` (error-free products, after an exact
    power-of-two rescaling that keeps them in range), never through a rounded
    ``b W / M``. Non-decreasing ``cum`` makes the property monotone in k: a bisection
    of ceil(log2(N + 1)) steps. No such k: N - 1.

    Args:
      cum: ``(N,)`` non-decreasing cumulative weights (with ``start``/``stop``: each
        segment's run ``cum[start:stop]`` non-decreasing, its cumulative sums alone).
      b: ``(B,)`` numerators (integers, in ``cum``'s dtype).
      n_bins: M, an integer (Python or 0-d array).
      strict: ``>`` instead of ``>=``.
      start, stop: optional int32 bounds of each query's segment, broadcast against
        ``b`` (e.g. ``(G, 1)``): k is searched in ``[start, stop)`` with W =
        ``cum[stop - 1]``, and no such k gives ``stop - 1`` (``start - 1`` for an empty
        segment, which the caller masks). Default: the whole of ``cum``.
    """
    n, dtype = cum.shape[0], cum.dtype
    start = jnp.zeros((), jnp.int32) if start is None else start
    stop = jnp.full((), n, jnp.int32) if stop is None else stop
    shape = jnp.broadcast_shapes(b.shape, start.shape, stop.shape)
    total = cum[jnp.maximum(stop - 1, 0)]
    big, small = dtype.type(2.0**64), dtype.type(2.0**-64)
    scale = jnp.where(total > big, small, jnp.where(total < small, big, dtype.type(1)))
    total = total * scale
    target, target_err = two_product(jnp.broadcast_to(total, shape), jnp.broadcast_to(b, shape))
    m = jnp.asarray(n_bins).astype(dtype)

    def reaches(k):
        p, err = two_product(cum[k] * scale, jnp.broadcast_to(m, k.shape))
        ahead = (err > target_err) if strict else (err >= target_err)
        return (p > target) | ((p == target) & ahead)

    def halve(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        ok = reaches(jnp.minimum(mid, n - 1))
        open_ = lo < hi
        return jnp.where(open_ & ~ok, mid + 1, lo), jnp.where(open_ & ok, mid, hi)

    lo = jnp.broadcast_to(start, shape).astype(jnp.int32)
    hi = jnp.broadcast_to(stop, shape).astype(jnp.int32)
    bounds = vary_like((lo, hi), cum)  # typed like the data in shard_map
    lo, _ = jax.lax.fori_loop(0, max(1, n.bit_length()), halve, bounds)
    return jnp.minimum(lo, stop - 1)


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


def edges_bin_index(
    scores: jax.Array, edges: jax.Array, closed: str = "right", ids: jax.Array | None = None
) -> jax.Array:
    """Index of the bin of each score given explicit (e.g. quantile) ``edges`` ``(M + 1,)``.

    The number of inner edges below the score (``e < s`` right-closed, ``e <= s``
    left-closed). With ``ids`` ``(N,)`` (int32 in ``[0, G)``), ``edges`` are ``(G, M + 1)``,
    one row per segment, and each score is compared with its own segment's row: one
    gather of the row, counted in the same loop (XLA fuses them; separate gathers per
    edge were materialised, 14 arrays of N at M = 15).
    """
    s = scores.astype(edges.dtype)
    if ids is None:
        side = "left" if closed == "right" else "right"
        return jnp.searchsorted(edges[1:-1], s, side=side, method="compare_all").astype(jnp.int32)
    inner, s = edges[ids, 1:-1], s[:, None]
    below = (inner < s) if closed == "right" else (inner <= s)
    return jnp.sum(below, axis=1, dtype=jnp.int32)


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


def bin_anchors(edges: jax.Array, n_groups: int = 1) -> jax.Array:
    """Reference scores of the bins ``(M,)``, tiled over ``n_groups`` (segment offsets).

    The mid-point of each bin, except the first bin (anchored at its lower edge, 0) and
    the last (at its upper edge, 1): deviations from the anchor stay within one bin width,
    and a score of exactly 0 or 1 deviates by exactly 0, so perfect predictions give a
    calibration error of exactly 0 (not 5e-7).
    """
    mid = (edges[:-1] + edges[1:]) / 2
    mid = mid.at[0].set(edges[0]).at[-1].set(edges[-1])
    return jnp.tile(mid, n_groups)


def uniform_anchors(n_bins: int) -> Callable[[jax.Array], jax.Array]:
    """Offsets for ``bin_sums()`` with ``group * M + bin`` ids: ``bin_anchors()`` of
    the uniform bins, ``(bin + 1/2) / M`` inside and 0 and 1 at the ends.

    Computed from the segment id by arithmetic (no gather); the same function gives the
    per-sample shift and the per-segment add-back, so the two agree bit for bit.
    """

    def anchor(segment_ids: jax.Array) -> jax.Array:
        b = segment_ids % n_bins
        mid = (b.astype(jnp.float32) + 0.5) / n_bins
        return jnp.where(b == n_bins - 1, 1.0, jnp.where(b == 0, 0.0, mid)).astype(jnp.float32)

    return anchor


def bin_sums(
    segment_ids: jax.Array,
    scores: jax.Array,
    targets: jax.Array | None,
    num_segments: int,
    weights: jax.Array | None = None,
    offsets: jax.Array | Callable[[jax.Array], jax.Array] | None = None,
    moments: bool = False,
    block: int = BLOCK,
) -> BinStats | tuple[BinStats, BinMoments]:
    """Per-segment sums of samples, weights, scores and binary targets (and moments).

    The one per-bin summing kernel of jaxcal: the ECE family, reliability curves, the
    Brier decomposition (one-shot and streaming), the streaming update, histogram binning
    and the bootstrap's fast path all read these sums.

    Sums run in blocks of ``BLOCK`` samples (one scatter per quantity, sharing one index)
    and the blocks are added by a radix tree (``jaxcal/_core/numerics.py``): float32 stays
    accurate for any N and counts are exact int32. Without weights, count and hits travel
    packed in one int32 scatter (``1 + (target << 16)``; a block never holds more than 8192
    of either). Scores are summed as deviations ``d = score - offset`` from a per-segment
    reference (e.g. ``bin_anchors()``), then ``offset * weight`` is added back: the partial
    sums stay small, so 2e7 identical float32 scores in one bin keep their mean to float32
    resolution.

    Args:
      segment_ids: ``(N,)`` int32 in ``[0, num_segments)`` (bin, or group * M + bin), or
        ``(N, K)`` when each row sends its K entries to distinct segments (classwise).
      scores: floats of the shape of ``segment_ids`` (accumulated in at least float32).
      targets: binary targets (bool or 0/1) of the shape of ``segment_ids``; or, for
        ``(N, K)`` ids, the ``(N,)`` int column index of each row's single positive
        target (one-hot targets: only entry ``(i, targets[i])`` is 1), summed with one
        scatter of N values instead of N K. None: no targets (``sum_target`` is 0), for
        per-bin counts and score sums alone.
      num_segments: S.
      weights: optional ``(N,)`` non-negative row weights; zero-weight rows are absent.
      offsets: optional reference score of each segment (default 0): an ``(S,)`` array,
        or a function of the segment ids (e.g. ``uniform_anchors()``), which avoids a
        gather.
      moments: also return ``BinMoments`` (the within-segment moments of ``d``).
      block: rows per block of partial sums (``BLOCK``; many segments want more:
        ``rows_per_block()``).

    Returns:
      ``BinStats`` with fields of shape ``(S,)``, and with ``moments`` the pair
      ``(BinStats, BinMoments)``.
    """
    if targets is None:  # all false: XLA folds the constant away
        targets = jnp.zeros(segment_ids.shape, jnp.bool_)
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
    one_hot_index = segment_ids.ndim == 2 and targets.ndim == 1
    if one_hot_index:  # the positive entry of each row: its segment and deviation
        column = targets[:, None].astype(jnp.int32)
        target_ids = jnp.take_along_axis(segment_ids, column, axis=1)[:, 0]
        target_dev = jnp.take_along_axis(s, column, axis=1)[:, 0]
        y = (jnp.arange(segment_ids.shape[1], dtype=jnp.int32)[None, :] == column).astype(jnp.int32)
    else:
        y = targets.astype(jnp.int32)
    ids, n_blocks = block_segment_ids(segment_ids, num_segments, block)

    def total(values, at=ids):
        return tree_sum(block_partial_sums(values, at, n_blocks, num_segments))

    row_weights = None if weights is None else weights.astype(dtype)
    w = row_weights
    if w is not None and segment_ids.ndim == 2:
        w = jnp.broadcast_to(w[:, None], segment_ids.shape)
    if w is None:
        packed = block_partial_sums(1 + (y << 16), ids, n_blocks, num_segments)
        count = jnp.sum(packed & 0xFFFF, axis=0)
        weight = count.astype(dtype)
        sum_target = jnp.sum(packed >> 16, axis=0).astype(dtype)
        sum_dev = total(s)
    else:
        count = jnp.sum(
            block_partial_sums((w > 0).astype(jnp.int32), ids, n_blocks, num_segments), 0
        )
        weight, sum_dev = total(w), total(w * s)
        if one_hot_index:
            target_ids_flat, _ = block_segment_ids(target_ids, num_segments, block)
            sum_target = total(row_weights, target_ids_flat)
        else:
            sum_target = total(w * y.astype(dtype))
    sum_score = sum_dev if segment_offsets is None else sum_dev + segment_offsets * weight
    stats = BinStats(count.astype(jnp.int32), weight, sum_score, sum_target)
    if not moments:
        return stats
    sum_dev_sq = total(s * s if w is None else w * s * s)
    if one_hot_index:
        target_ids_flat, _ = block_segment_ids(target_ids, num_segments, block)
        dy = target_dev if row_weights is None else row_weights * target_dev
        sum_dev_target = total(dy, target_ids_flat)
    else:
        dy = s * y.astype(dtype)
        sum_dev_target = total(dy if w is None else w * dy)
    return stats, BinMoments(sum_dev, sum_dev_sq, sum_dev_target)
