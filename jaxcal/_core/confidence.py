"""Scores and binary targets of every calibration view, with argmax's first-index rule.

A calibration metric compares scores with binary targets. ``scores_and_targets()`` is
the one place that turns ``(probs, labels)`` into them, for each view jaxcal uses:

* ``"binary"``: 1-D ``probs`` ``(N,)``, the probability of the positive class, against
  ``labels == 1``;
* ``"confidence"`` (top label): 2-D ``probs`` ``(N, K)``, the confidence ``max_k p_k``
  against correctness ``argmax_k p_k == y``, with the predicted class as the group
  (top-label ECE bins within it);
* ``"classwise"``: every column ``p_k`` against ``labels == k``, the targets given as the
  label index (one-hot), as ``bin_sums()`` takes them.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import RANGE_ATOL, check_probs_labels
from jaxcal._core.numerics import compute_dtype

# How the top label (row max, first index of it) is found, by K (``_top_index()``). On
# XLA:CPU (jax 0.10.2) only plain reductions of the input (max, sum over the minor axis)
# run at the speed of a read; a reduction of anything computed from the row (a compare
# with the row maximum, a select by index) costs 2-4x a read, a write of an (N, K)
# intermediate ~10x, and a variadic (max, index) reduction over rows of more than ~25
# entries ~10x (its fast path holds for short rows only).
#
# * K <= _VARIADIC_MAX_CLASSES: one variadic reduction per row finds the max, its first
#   index and a checked row sum in a single pass (N = 1e6, K = 10: ~4 ms, the cost of max
#   and argmax alone; ~10 ms as separate reductions).
# * K < _BLOCKED_MIN_CLASSES: the same variadic reduction over blocks of B consecutive
#   entries (B in _VARIADIC_BLOCKS, a divisor of K), then the first block holding the row
#   max among the K / B: ~2x a read.
# * otherwise: plain maxima of blocks of B <= _MAX_BLOCK entries (one read), the first
#   block holding the max, and the first index within it, gathered: 1.1-1.5x a read.
# * no divisor in range (a prime K): the max, then its first index, in two passes.
# benchmarks/bench_widek.py times them against the read.
_VARIADIC_MAX_CLASSES = 32
_VARIADIC_BLOCKS = range(25, 7, -1)
_BLOCKED_MIN_CLASSES = 256
_MIN_BLOCK, _MAX_BLOCK = 4, 64


class RowStats(NamedTuple):
    """Per-row statistics of ``(..., K)`` scores, each of shape ``(...)``.

    Attributes:
      max: the largest entry (the top-label confidence).
      argmax: int32 index of the first largest entry (NumPy's tie rule).
      checked_sum: the row sum in at least float32, plus 4 when an entry is below
        ``-RANGE_ATOL``: ``|checked_sum - 1|`` within the simplex tolerance says the row
        is on the simplex (no negative entry, the sum 1, hence no entry above 1), in one
        number per row; NaN if the row holds NaN or inf.
    """

    max: jax.Array
    argmax: jax.Array
    checked_sum: jax.Array


def block_size(k: int) -> int | None:
    """The block length B of the wide-K top label for K classes, None for none.

    The divisor of K in ``[_MIN_BLOCK, _MAX_BLOCK]`` with K / B >= 2 closest to sqrt(K)
    on a log scale (the cost has a term in K / B and one in B; blocks longer than 64 read
    at half speed on XLA:CPU); None when K has no such divisor (a prime K, for instance).
    """
    divisors = [b for b in range(_MIN_BLOCK, _MAX_BLOCK + 1) if k % b == 0 and k // b >= 2]
    if not divisors:
        return None
    return min(divisors, key=lambda b: (abs(math.log(b) - 0.5 * math.log(k)), b))


def _variadic_block(k: int) -> int | None:
    """The block length of the blockwise variadic reduction: the largest divisor of K in
    ``_VARIADIC_BLOCKS`` (8 to 25) with K / B >= 2, None for none."""
    return next((b for b in _VARIADIC_BLOCKS if k % b == 0 and k // b >= 2), None)


def _first_equal(x: jax.Array, target: jax.Array) -> jax.Array:
    """int32 index of the first entry of ``x`` (..., C) equal to ``target`` (...), its max.

    Written with arithmetic only, ``min_j (j + C * ceil(target - x_j))``: every entry is at
    most ``target``, so the ceiling is 0 exactly where an entry equals it (a difference of
    two distinct floats is never 0) and at least 1 elsewhere. XLA:CPU keeps such a
    reduction in its fast reduction path; a compare-and-select materialises the compared
    array first. Clipped to ``[0, C)`` (a NaN row gives 0).
    """
    c = x.shape[-1]
    dtype = compute_dtype(x.dtype)
    gap = jnp.ceil(target[..., None].astype(dtype) - x.astype(dtype))
    iota = jax.lax.broadcasted_iota(dtype, gap.shape, gap.ndim - 1)
    first = jnp.min(iota + c * gap, axis=-1)
    first = jnp.where(jnp.isnan(first), 0, first)
    return jnp.clip(first, 0, c - 1).astype(jnp.int32)


def _variadic_max(x: jax.Array, extra: jax.Array | None = None) -> tuple[jax.Array, ...]:
    """One variadic reduction over the last axis: (max, first index of it[, sum of extra]).

    Computed in at least float32 (XLA:CPU compiles no variadic reduction of 16-bit
    floats); the max is cast back exactly (it is an entry of ``x``).
    """
    k = x.shape[-1]
    acc = compute_dtype(x.dtype)
    iota = jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    operands = (x.astype(acc), iota) if extra is None else (x.astype(acc), iota, extra)
    init = (jnp.array(-jnp.inf, acc), jnp.array(k, jnp.int32))
    init = init if extra is None else (*init, jnp.array(0, extra.dtype))

    def combine(a, b):
        take_b = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] < a[1]))
        out = jnp.where(take_b, b[0], a[0]), jnp.where(take_b, b[1], a[1])
        return out if extra is None else (*out, a[2] + b[2])

    out = jax.lax.reduce(operands, init, combine, (x.ndim - 1,))
    return (out[0].astype(x.dtype), *out[1:])


def _top_index(probs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Row max and its first index (NumPy's tie rule) for K > ``_VARIADIC_MAX_CLASSES``.

    The rows are cut into nb blocks of B consecutive entries (K = nb x B), reduced per
    block (max and, below ``_BLOCKED_MIN_CLASSES``, its first index within the block, by
    the variadic reduction that is fast on short rows); the row max is the max of the nb
    block maxima and the first block that holds it holds its first occurrence. Above the
    threshold the blocks are reduced by plain maxima (a read), and the first index within
    the first block holding the max is found among its B entries, gathered
    (``take_along_axis``): O(nb + B) = O(sqrt(K)) more work per row. See the notes above
    ``_VARIADIC_MAX_CLASSES`` for the measured costs; without a usable divisor of K the
    max and then its first index are found in two passes over the rows.
    """
    lead, k = probs.shape[:-1], probs.shape[-1]
    b = _variadic_block(k) if k < _BLOCKED_MIN_CLASSES else None
    if b is not None:
        block_max, block_first = _variadic_max(probs.reshape(-1, b))
        block_max, block_first = block_max.reshape(*lead, k // b), block_first.reshape(*lead, -1)
        top = jnp.max(block_max, axis=-1)
        first_block = _first_equal(block_max, top)
        within = jnp.take_along_axis(block_first, first_block[..., None], axis=-1)[..., 0]
        return top, first_block * b + within
    b = block_size(k)
    if b is None:
        top = jnp.max(probs, axis=-1)
        return top, _first_equal(probs, top)
    blocks = probs.reshape(*lead, k // b, b)
    # The barrier keeps XLA from fusing the block maxima into their consumers (it then
    # recomputes them in a slow loop fusion).
    block_max = jax.lax.optimization_barrier(jnp.max(blocks, axis=-1))
    top = jnp.max(block_max, axis=-1)
    first_block = _first_equal(block_max, top)
    block = jnp.take_along_axis(blocks, first_block[..., None, None], axis=-2)[..., 0, :]
    return top, first_block * b + _first_equal(block, top)


def row_stats(probs: jax.Array) -> RowStats:
    """Max, first argmax and checked sum of every row, in one pass where it pays.

    Not differentiable itself (a variadic reduction has no derivative rule): call it on
    ``stop_gradient`` inputs, and take a differentiable confidence from ``top_label()``.
    Outputs nobody uses are dropped by XLA (for K > 32 the checked sum is its own pair
    of plain reductions, so a kernel under ``jit`` does not pay for it); two calls on one
    array inside one jitted function are one computation after common-subexpression
    elimination, so a validation summary (the checked sum) rides on the pass that finds
    the top label where one reduction computes both (K <= 32).
    """
    k = probs.shape[-1]
    acc = compute_dtype(probs.dtype)
    x = probs.astype(acc)
    if k > _VARIADIC_MAX_CLASSES:
        top, first = _top_index(probs)
        # Plain row reductions (a masked sum would be materialised first, see above).
        negative = jnp.min(x, axis=-1) < -RANGE_ATOL
        total = jnp.sum(x, axis=-1) + jnp.where(negative, 4, 0).astype(acc)
        return RowStats(top, first, total)
    penalised = x + jnp.where(x < -RANGE_ATOL, 4, 0).astype(acc)
    return RowStats(*_variadic_max(probs, penalised))


@jax.custom_jvp
def _with_top_tangent(probs: jax.Array, top: jax.Array, index: jax.Array) -> jax.Array:
    """``top`` (the rows' max), differentiable in ``probs`` as ``probs[..., index]``."""
    del probs, index
    return top


@_with_top_tangent.defjvp
def _with_top_tangent_jvp(primals, tangents):
    probs, top, index = primals
    dprobs = tangents[0]
    iota = jnp.arange(probs.shape[-1], dtype=jnp.int32).reshape((1,) * index.ndim + (-1,))
    # One fused masked row sum; the default rule of max costs a comparison, a count and
    # a division per element.
    return top, jnp.sum(jnp.where(index[..., None] == iota, dprobs, 0), axis=-1)


def input_row_stats(probs: jax.Array) -> RowStats | None:
    """``row_stats()`` of ``(N, K)`` probabilities (on ``stop_gradient``), None for 1-D.

    Kernels compute it once and hand it to :func:`~jaxcal.calibrators.top_label` / ``scores_and_targets()``
    and to the validity summary, so that both read the rows in one pass.
    """
    return None if probs.ndim == 1 else row_stats(jax.lax.stop_gradient(probs))


def top_label(probs: jax.Array, rows: RowStats | None = None) -> tuple[jax.Array, jax.Array]:
    """Confidence ``max_k p_k`` and predicted class (first index among ties), shapes ``(N,)``.

    The confidence is differentiable: its derivative is the one-hot of the predicted class
    (``jax.grad`` of ``max`` except among exact ties, which share the gradient there; here
    the first maximal index takes it, as ``argmax`` does). ``rows``: the
    ``input_row_stats()`` of ``probs`` when the caller has them.
    """
    stats = input_row_stats(probs) if rows is None else rows
    return _with_top_tangent(probs, stats.max, stats.argmax), stats.argmax


def top_confidence(probs: jax.Array) -> jax.Array:
    """``max_k p_k`` ``(...)`` whose derivative is the one-hot of the predicted class."""
    return top_label(probs)[0]


VIEWS = ("binary", "confidence", "classwise")


class ScoresAndTargets(NamedTuple):
    """Scores, binary targets and groups of one calibration view.

    Attributes:
      scores: ``(N,)`` (binary, confidence) or ``(N, K)`` (classwise), in the input dtype
        (bins compare scores with edges rounded to it); differentiable in ``probs``.
      targets: bool ``(N,)`` (binary, confidence); for classwise the int32 label ``(N,)``,
        i.e. one-hot targets given by their index; None without labels.
      groups: the predicted class ``(N,)`` (confidence), else ``None``.
    """

    scores: jax.Array
    targets: jax.Array | None
    groups: jax.Array | None


def scores_and_targets(
    probs: jax.Array,
    labels: jax.Array | None,
    view: str | None = None,
    rows: RowStats | None = None,
) -> ScoresAndTargets:
    """The scores and binary targets of ``view`` (default: binary for 1-D, else confidence).

    1-D ``probs`` asked for the confidence or classwise view are first taken as the two
    columns ``(1 - p, p)``. ``labels`` None gives the scores and groups alone (targets
    None), for procedures that draw their own labels (consistency bands). ``rows``: the
    ``input_row_stats()`` of 2-D ``probs``, when the caller has them.
    """
    if view is None:
        view = "binary" if probs.ndim == 1 else "confidence"
    if view == "binary":
        return ScoresAndTargets(probs, None if labels is None else labels == 1, None)
    if probs.ndim == 1:
        probs = jnp.stack([1 - probs, probs], axis=-1)
    if view == "classwise":
        return ScoresAndTargets(probs, None if labels is None else labels.astype(jnp.int32), None)
    conf, pred = top_label(probs, rows)
    return ScoresAndTargets(conf, None if labels is None else pred == labels, pred)


@partial(jax.jit, inline=True)
def _confidence_and_correctness(probs: jax.Array, labels: jax.Array):
    scores, correct, _ = scores_and_targets(probs, labels, "confidence")
    return scores, correct


def confidence_and_correctness(probs: Any, labels: Any) -> tuple[jax.Array, jax.Array]:
    """Top-label confidence and whether the top label is right.

    The predicted class is ``argmax(probs, axis=1)`` with NumPy's tie rule (the first
    maximal index), so a row (1/3, 1/3, 1/3) predicts class 0.

    Args:
      probs: ``(N, K)`` rows on the simplex (validated as in :func:`jaxcal.ece`). A 1-D
        ``(N,)`` positive-class probability is treated as ``(N, 2)`` rows ``(1 - p, p)``.
      labels: ``(N,)`` integers in ``[0, K)``.

    Returns:
      ``(confidence, correct)``: float ``(N,)`` in [1/K, 1] and bool ``(N,)``.

    Example:
      >>> import jax.numpy as jnp
      >>> c, ok = confidence_and_correctness(jnp.array([[0.2, 0.8], [0.5, 0.5]]), jnp.array([1, 1]))
      >>> c.tolist(), ok.tolist()
      ([0.800000011920929, 0.5], [True, False])

    References:
      Guo, Pleiss, Sun & Weinberger (2017), "On Calibration of Modern Neural Networks".
    """
    probs, labels, _ = check_probs_labels(probs, labels)
    return _confidence_and_correctness(probs, labels)
