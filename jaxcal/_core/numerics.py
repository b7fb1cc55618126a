"""Shared arithmetic: the dtype policy, guarded operations, accurate sums, bit bisection.

Every kernel of jaxcal takes these from here; nothing below imports another jaxcal module.

* **Dtype policy.** Kernels accumulate in ``compute_dtype()`` of their input: float32
  at least (bf16/f16 are upcast), float64 under ``jax_enable_x64``.
* **Guarded operations** (``safe_divide()``, ``safe_sqrt()``, ``safe_log()``):
  finite values *and* finite gradients where the plain operation would give NaN (an
  empty bin's 0 / 0, sqrt at 0, log at 0). The ``where(ok, f(where(ok, x, 1)), 0)``
  pattern keeps the untaken branch finite, so its cotangent is not NaN times 0.
* **Accurate sums.** Float32 loses integers past 2**24 and a running sum of N terms
  drifts like N ulps. Scatters (``segment_sum``) accumulate each segment sequentially, so
  ``blocked_segment_sum()`` adds rows in blocks of ``BLOCK`` (a block's partial sum
  keeps ~1e-5 relative accuracy whatever the data), then adds the partial sums by
  ``tree_sum()``, a radix-32 tree whose error grows like ``32 * log_32(n)`` ulps. Dense
  reductions (``jnp.sum``, ``jnp.mean``) are left to XLA: its reductions are already
  tree-shaped (2**25 float32 terms sum to 4e-8 relative error on XLA:CPU, pinned by
  ``tests/core/test_numerics.py``), and blocking them by hand costs 2-7x their time.
  ``two_sum()`` is the error-free addition streaming accumulators use across batches.
* **Bisection on bit patterns** (``bisect_nonnegative()``): non-negative IEEE floats
  order like their bit patterns read as integers, so the smallest float with a monotone
  property is found in 31 (float32) or 63 (float64) halvings, with full relative
  precision at any scale. It serves order statistics without a sort (the SSC coverage
  groups) and quantiles of distributions with no closed-form inverse (the beta quantile
  of Clopper-Pearson).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: Rows per block of float partial sums: small enough that a partial sum of values in
#: [0, 1] keeps ~1e-5 relative accuracy in float32 whatever the data.
BLOCK = 256

#: The largest block of ``rows_per_block()`` (the packed int32 count-and-hits scatter of
#: ``bin_sums()`` holds at most 65535 of either per block).
MAX_BLOCK = 8192

#: Fan-out of ``tree_sum()``: ceil(log_32 n) reshape-and-sum levels, each one XLA
#: fusion (a pairwise tree needs log_2 n slice-and-add levels and compiles several times
#: slower, commit 7326683).
TREE_RADIX = 32


def compute_dtype(dtype: Any) -> jnp.dtype:
    """The float dtype kernels accumulate in: float32 at least, float64 under x64.

    Example:
      >>> import jax.numpy as jnp
      >>> str(compute_dtype(jnp.bfloat16)), str(compute_dtype(jnp.int32))
      ('float32', 'float32')
    """
    dtype = jnp.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.floating) and dtype.itemsize >= 4:
        return jnp.dtype(jax.dtypes.canonicalize_dtype(dtype))
    return jnp.dtype(jax.dtypes.canonicalize_dtype(jnp.float64))


def upcast(x: jax.Array) -> jax.Array:
    """``x`` in its ``compute_dtype()``."""
    return x.astype(compute_dtype(x.dtype))


def safe_divide(num: jax.Array, den: jax.Array) -> jax.Array:
    """``num / den`` where ``den > 0``, else 0; finite gradients (an empty bin's 0 / 0 is 0).

    Example:
      >>> import jax.numpy as jnp
      >>> safe_divide(jnp.array([1.0, 1.0]), jnp.array([4.0, 0.0])).tolist()
      [0.25, 0.0]
    """
    positive = den > 0
    return jnp.where(positive, num / jnp.where(positive, den, 1), 0)


def safe_sqrt(x: jax.Array) -> jax.Array:
    """``sqrt(max(x, 0))`` with a finite (zero) gradient at and below 0; NaN stays NaN.

    A NaN sum (from invalid input under ``jit``) must not come back as a plausible 0.
    """
    positive = x > 0
    below = jnp.where(jnp.isnan(x), x, jnp.zeros_like(x))
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1)), below)


def safe_log(x: jax.Array) -> jax.Array:
    """``log(x)`` where ``x > 0``, else 0: the convention 0 log 0 = 0 of entropies, as
    ``x * safe_log(x)``, with finite gradients at 0."""
    positive = x > 0
    return jnp.where(positive, jnp.log(jnp.where(positive, x, 1)), 0)


def weighted_mean(x: jax.Array, weights: jax.Array | None) -> jax.Array:
    """Mean of ``x`` over axis 0 (weighted by ``weights`` ``(N,)``); 0 for zero total weight.

    XLA's tree-shaped reductions keep float32 means accurate for any N (module notes);
    the weights are scaled first (``normalize_weights()``), so their scale cannot
    overflow or underflow the sums.
    """
    if weights is None:
        return jnp.mean(x, axis=0)
    w, _ = normalize_weights(weights.astype(x.dtype))
    return safe_divide(jnp.sum(w.reshape((-1,) + (1,) * (x.ndim - 1)) * x, axis=0), jnp.sum(w))


def pow2(k: jax.Array, dtype: Any) -> jax.Array:
    """``2.0 ** k`` exactly in ``dtype``, for integer ``k`` in the normal exponent range.

    Built from the bit pattern (biased exponent, zero mantissa): XLA's ``exp2`` and
    ``ldexp`` are not exact for every integer, and a ``pow`` by a float is slow.
    """
    info = jnp.finfo(dtype)
    itype = int_dtype_of(dtype)
    bias = -int(info.minexp) + 1  # 127 for float32, 1023 for float64
    bits = (k.astype(itype) + bias) << int(info.nmant)
    return jax.lax.bitcast_convert_type(bits, jnp.dtype(dtype))


def normalize_weights(weights: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Weights divided by a power of two near their largest: ``(w', e)``, ``w = w' * 2**e``.

    Every weighted kernel scales its weights this way before squaring or summing them, so
    a positive rescaling of the weights gives the same answer to round-off (exactly, for
    a power of two): all weights 1e36 would overflow ``sum w`` in float32, 1e-20 underflow
    ``sum w**2`` (D14). ``w' = w * 2**-e``, with ``e`` the binary exponent of ``max w``
    (:func:`jax.numpy.frexp`), lies in [0, 1) with its largest value in [1/2, 1); the
    scaling is two exact multiplications by powers of two (one would overflow for
    ``e < -126``). All-zero weights stay zero (``e = 0``). Subnormal weights (below
    1.2e-38 in float32) cannot be rescaled: XLA:CPU flushes them to zero in every
    arithmetic operation, so the value checks reject them (``check_weights()``).

    Example:
      >>> import jax.numpy as jnp
      >>> w, e = normalize_weights(jnp.array([3e-30, 1e-30, 0.0]))
      >>> [round(v, 6) for v in w.tolist()], int(e)
      ([0.950738, 0.316913, 0.0], -98)
    """
    _, e = jnp.frexp(jnp.max(jax.lax.stop_gradient(weights)))
    return times_pow2(weights, -e), e


def times_pow2(x: jax.Array, k: jax.Array) -> jax.Array:
    """``x * 2**k`` for an integer ``k`` in ``[2 minexp, 2 (maxexp - 1)]`` of ``x``'s dtype:
    two multiplications by exact powers of two (one alone would leave the normal range for
    ``|k| > 126`` in float32), so no rounding unless the product leaves the normal range.

    Example:
      >>> import jax.numpy as jnp
      >>> x = times_pow2(jnp.float32(3 * 2.0**100), jnp.int32(-200))  # 2**-200 is no float32
      >>> float(x) == 3 * 2.0**-100
      True
    """
    half = k // 2
    return x * pow2(half, x.dtype) * pow2(k - half, x.dtype)


def scale_free(weights: jax.Array | None) -> jax.Array | None:
    """``weights`` scaled by ``normalize_weights()`` (None stays None)."""
    return None if weights is None else normalize_weights(weights)[0]


def mask_unweighted(
    x: jax.Array, weights: jax.Array | None, fill: Any, bad: jax.Array | None = None
) -> jax.Array:
    """``x`` ``(N, ...)`` with its ``bad`` entries in rows of weight 0 replaced by ``fill``.

    Padding rows of fixed-shape batches carry weight 0 and may hold anything (NaN, an
    ignore label); weight 0 alone does not mask them, because ``0 * nan`` is NaN. Entries
    that are not ``bad`` (default: the finite ones) stay, so valid rows, and derivatives
    with respect to the weights, are unchanged. No weights: ``x`` itself.

    Example:
      >>> import jax.numpy as jnp
      >>> mask_unweighted(jnp.array([0.5, jnp.nan, jnp.nan]), jnp.array([1.0, 0.0, 1.0]), 0.0)
      Array([0.5, 0. , nan], dtype=float32)
    """
    if weights is None:
        return x
    unweighted = ~(weights > 0)
    bad = ~jnp.isfinite(x) if bad is None else bad
    mask = unweighted.reshape(unweighted.shape + (1,) * (x.ndim - 1)) & bad
    return jnp.where(mask, jnp.asarray(fill, x.dtype), x)


def tree_sum(x: jax.Array, radix: int = TREE_RADIX) -> jax.Array:
    """Sum over axis 0 by a tree of fan-out ``radix``: error ~ radix ceil(log_radix n) ulps."""
    while x.shape[0] > 1:
        r = min(radix, x.shape[0])
        pad = -x.shape[0] % r
        if pad:
            x = jnp.concatenate([x, jnp.zeros((pad, *x.shape[1:]), x.dtype)])
        x = x.reshape(-1, r, *x.shape[1:]).sum(axis=1)
    return x[0] if x.shape[0] == 1 else jnp.zeros(x.shape[1:], x.dtype)


def rows_per_block(num_segments: int) -> int:
    """Rows per block for S segments: ``BLOCK``, or more when S is large.

    The partial sums are a ``ceil(N / block) x S`` table, written by the scatter and read
    by the tree: with ``BLOCK`` rows and S = 8192 segments (a fine histogram of 4096
    buckets and two classes) that is 32 entries per row, 30x the cost of the scatter.
    Blocks of ``S`` rows (a power of two, at most ``MAX_BLOCK``) keep the table the size
    of the input. The price: a segment's sum within a block is sequential over up to
    that many rows, ~``block * eps / 2`` relative error in the worst case (one weight
    repeated in one segment: 6e-5 in float32 at 8192 rows, against 2e-6 at 256); counts
    and unweighted target sums stay exact integers, and score sums stay accurate as
    deviations from the segment's offset.
    """
    if num_segments <= BLOCK:
        return BLOCK
    return min(MAX_BLOCK, 1 << (num_segments - 1).bit_length())


def block_segment_ids(
    segment_ids: jax.Array, num_segments: int, block: int = BLOCK
) -> tuple[jax.Array, int]:
    """Flat ``block * S + segment`` ids for blocks of ``block`` consecutive rows.

    ``(N, K)`` ids are blocked by row, not by flat position: each row sends its K entries
    to distinct segments (``class * M + bin``), so a segment still takes at most ``BLOCK``
    values per block, while the partial sums stay ``ceil(N / BLOCK) x S`` numbers
    (blocking the N K flat entries would multiply them by K).

    Returns:
      ``(ids, n_blocks)``: int32 ids of ``segment_ids.size`` entries, and the block count.
    """
    n = segment_ids.shape[0]
    n_blocks = max(1, -(-n // block))
    index = jnp.arange(n, dtype=jnp.int32) // block
    index = index.reshape((n,) + (1,) * (segment_ids.ndim - 1))
    return (index * num_segments + segment_ids).reshape(-1), n_blocks


def block_partial_sums(
    values: jax.Array, block_ids: jax.Array, n_blocks: int, num_segments: int
) -> jax.Array:
    """Per-(block, segment) sums ``(n_blocks, S)`` of flat ``values`` at ``block_ids``."""
    return jax.ops.segment_sum(
        values.reshape(-1), block_ids, n_blocks * num_segments, mode="promise_in_bounds"
    ).reshape(n_blocks, num_segments)


def blocked_segment_sum(
    values: Sequence[jax.Array], segment_ids: jax.Array, num_segments: int
) -> jax.Array:
    """Per-segment sums of several arrays at once, accurate for any number of rows.

    Rows are grouped in blocks of ``BLOCK`` (``block_segment_ids()``); within a block
    each array is summed by its own scalar ``segment_sum`` (on XLA:CPU, C scalar scatters
    are several times faster than one scatter of C-wide rows), then the blocks are added
    by ``tree_sum()``.

    Args:
      values: C arrays, each of the shape of ``segment_ids`` and one float dtype.
      segment_ids: int32 ``(N,)`` or ``(N, K)`` in ``[0, num_segments)``; for ``(N, K)``
        each row must send its K entries to distinct segments.
      num_segments: S (``ceil(N / BLOCK) * S`` must fit in int32).

    Returns:
      ``(C, S)`` sums in the values' dtype.

    Example:
      >>> import jax.numpy as jnp
      >>> ids = jnp.array([[0, 2], [1, 3], [0, 3]])
      >>> v = jnp.array([[0.5, 0.5], [0.25, 0.75], [1.0, 0.0]])
      >>> blocked_segment_sum([v, v * v], ids, 4).tolist()
      [[1.5, 0.25, 0.5, 0.75], [1.25, 0.0625, 0.25, 0.5625]]
    """
    ids, n_blocks = block_segment_ids(segment_ids, num_segments)
    partial = jnp.stack(
        [block_partial_sums(v, ids, n_blocks, num_segments) for v in values], axis=1
    )  # (blocks, C, S)
    return tree_sum(partial)


def two_sum(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Knuth's TwoSum: ``s = fl(a + b)`` and the exact rounding error ``a + b - s``.

    References:
      Knuth, "The Art of Computer Programming", vol. 2, section 4.2.2.
    """
    s = a + b
    b_virtual = s - a
    a_virtual = s - b_virtual
    return s, (a - a_virtual) + (b - b_virtual)


def compensated_add(highs, lows, batches) -> tuple[tuple, tuple]:
    """Running sums ``highs`` (with low-order parts ``lows``) plus ``batches``, each by
    ``two_sum``: the new highs, and the lows with the rounding errors added (a streaming
    state's compensated sums; a batch is cast to its sum's dtype first)."""
    new_highs, new_lows = [], []
    for high, low, batch in zip(highs, lows, batches, strict=True):
        total, err = two_sum(high, batch.astype(high.dtype))
        new_highs.append(total)
        new_lows.append(low + err)
    return tuple(new_highs), tuple(new_lows)


def two_product(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Dekker's TwoProduct: ``p = fl(a b)`` and the exact rounding error ``a b - p``.

    Veltkamp's split cuts each factor into two halves whose products are exact, so no
    fused multiply-add is needed (and one changes nothing). Exact while no product or
    ``2**(t/2) * a`` overflows and no partial product underflows (|a b| well inside the
    dtype's range), t the dtype's mantissa bits. ``(p, e)`` pairs compare exactly in
    lexicographic order: ``a b >= c d`` iff ``p1 > p2`` or (``p1 == p2`` and ``e1 >= e2``).

    References:
      Dekker (1971), "A floating-point technique for extending the available
      precision", Numer. Math. 18.
    """
    factor = 2.0 ** ((jnp.finfo(a.dtype).nmant + 2) // 2) + 1

    def split(x):
        c = factor * x
        high = c - (c - x)
        return high, x - high

    p = a * b
    a_hi, a_lo = split(a)
    b_hi, b_lo = split(b)
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def vary_like(tree: Any, data: jax.Array) -> Any:
    """``tree`` typed as varying across devices wherever ``data`` varies (a no-op elsewhere).

    Inside ``jax.shard_map`` (with the default ``check_vma=True``) every value carries the
    set of mesh axes it varies over, and a loop's carry must keep its type through the
    body. A carry started from a constant (``jnp.zeros(())``) is device-invariant, while the
    body, which reads the per-device data, makes it varying: ``while_loop`` then refuses
    the loop. Every loop of jaxcal starts its carries through this function, with ``data``
    a value computed from everything the body reads (a loss at the starting point, a
    row of the input). ``jnp.zeros_like(data)`` has the type of ``data`` and no data
    dependence; a select between two equal operands takes its type and folds away in XLA.
    Outside ``shard_map`` every value is invariant and the result is ``tree`` itself.

    Example:
      >>> import jax.numpy as jnp
      >>> vary_like((jnp.float32(0), jnp.int32(3)), jnp.ones(4))
      (Array(0., dtype=float32), Array(3, dtype=int32))
    """
    flag = jnp.zeros_like(data, dtype=bool, shape=())
    return jax.tree.map(lambda x: jnp.where(flag, x, x), tree)


def int_dtype_of(dtype: Any) -> jnp.dtype:
    """The signed integer dtype of ``dtype``'s width (for bit-pattern arithmetic).

    16-bit floats (bf16/f16 weights reach ``pow2()``) get int16: int64 does not exist
    without x64, and a bit cast needs equal widths.
    """
    return jnp.dtype({2: jnp.int16, 4: jnp.int32}.get(jnp.dtype(dtype).itemsize, jnp.int64))


def bisect_nonnegative(
    predicate: Callable[[jax.Array], jax.Array],
    shape: tuple[int, ...],
    dtype: Any,
    upper: float = float("inf"),
) -> jax.Array:
    """Smallest float ``x`` in ``[0, upper]`` with ``predicate(x)``, elementwise, by bisection.

    ``predicate`` maps a candidate array of ``shape`` to a bool array of ``shape`` and must
    be monotone (false below the answer, true from it on) and true at ``upper``.
    Non-negative floats order like their bit patterns, so the search halves an integer
    interval of bit patterns: ceil(log2(bits(upper))) steps (31 for float32 on [0, inf],
    30 on [0, 1]), each exact, whatever the scale of the answer.

    Args:
      predicate: monotone bool function of a float array of ``shape``.
      shape: the shape of the answers.
      dtype: float32 or float64.
      upper: the largest candidate (``inf`` or a finite bound); returned where the
        predicate first holds there.

    Returns:
      ``(shape)`` array of ``dtype``.

    Example:
      >>> import jax.numpy as jnp
      >>> x = bisect_nonnegative(lambda x: x * x >= 2.0, (), jnp.float32, upper=2.0)
      >>> float(x), float(jnp.nextafter(x, 0) ** 2) < 2.0
      (1.4142136573791504, True)
    """
    dtype = jnp.dtype(dtype)
    itype = int_dtype_of(dtype)
    top_bits = int(np.asarray(upper, dtype).view(np.dtype(itype)))
    steps = max(1, int(np.ceil(np.log2(top_bits + 1))))

    def halve(_, bounds):  # invariant: the answer's bits lie in [lo, hi]
        lo, hi = bounds
        mid = lo + (hi - lo) // 2
        holds = predicate(jax.lax.bitcast_convert_type(mid, dtype))
        return jnp.where(holds, lo, mid + 1), jnp.where(holds, mid, hi)

    lo = jnp.zeros(shape, itype)
    hi = jnp.full(shape, top_bits, itype)
    # The bounds vary across devices (inside shard_map) as the predicate's data do; only
    # the type of this probe is used, so XLA never evaluates it.
    probe = predicate(jnp.full(shape, upper, dtype))
    _, hi = jax.lax.fori_loop(0, steps, halve, vary_like((lo, hi), probe))
    return jax.lax.bitcast_convert_type(hi, dtype)


def order_statistics(key: jax.Array, positions: jax.Array) -> jax.Array:
    """``sort(key)[positions]`` for non-negative float ``key`` ``(N,)``, without a sort.

    One counting pass per bisection step (``bisect_nonnegative()``): O(N P) work for P
    positions, worth it for very few positions (at 1e6 keys each costs about a third of
    ``jaxcal/_core/sort.py``'s NumPy sort). A position past the end gives +inf.

    Example:
      >>> import jax.numpy as jnp
      >>> order_statistics(jnp.array([3.0, 1.0, 2.0, 5.0]), jnp.array([0, 2, 4])).tolist()
      [1.0, 3.0, inf]
    """

    needed = positions.astype(jnp.int32) + 1

    def enough(x):  # at least position + 1 keys are <= x
        return jnp.sum(key[:, None] <= x[None, :], axis=0, dtype=jnp.int32) >= needed

    return bisect_nonnegative(enough, positions.shape, key.dtype)
