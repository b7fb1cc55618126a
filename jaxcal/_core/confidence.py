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

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import RANGE_ATOL, check_probs_labels
from jaxcal._core.numerics import compute_dtype

# Up to this many classes one variadic reduction computes the max, its first index and a
# checked row sum in a single pass over the rows (at N = 1e6, K = 10 about 4 ms, the
# cost of max and argmax alone; ~10 ms as separate reductions). Beyond it XLA:CPU's variadic reduction is ~10x slower than a max plus a
# first-index search (221 ms versus 20 ms at N = 1e6, K = 100).
_VARIADIC_MAX_CLASSES = 32


class RowStats(NamedTuple):
    """Per-row statistics of ``(..., K)`` scores, each of shape ``(...)``.

    Attributes:
      max: the largest entry (the top-label confidence).
      argmax: int32 index of the first largest entry (NumPy's tie rule).
      checked_sum: the row sum in at least float32, plus 4 for every entry below
        ``-RANGE_ATOL``: ``|checked_sum - 1|`` within the simplex tolerance says the row
        is on the simplex (no negative entry, the sum 1, hence no entry above 1), in one
        number per row; NaN if the row holds NaN or inf.
    """

    max: jax.Array
    argmax: jax.Array
    checked_sum: jax.Array


def row_stats(probs: jax.Array) -> RowStats:
    """Max, first argmax and checked sum of every row, in one pass where it pays.

    Not differentiable itself (a variadic reduction has no derivative rule): call it on
    ``stop_gradient`` inputs, and take a differentiable confidence from :func:`~jaxcal.calibrators.top_label`.
    Outputs nobody uses are dropped by XLA, and two calls on one array inside one jitted
    function are one reduction after common-subexpression elimination, so a validation
    summary (the checked sum) rides on the pass that finds the top label (max, argmax).
    """
    k = probs.shape[-1]
    acc = compute_dtype(probs.dtype)
    x = probs.astype(acc)
    penalised = x + jnp.where(x < -RANGE_ATOL, 4, 0).astype(acc)
    if k > _VARIADIC_MAX_CLASSES:
        top = probs.max(axis=-1)
        iota = jnp.arange(k, dtype=jnp.int32).reshape((1,) * (probs.ndim - 1) + (-1,))
        first = jnp.min(jnp.where(probs == top[..., None], iota, k), axis=-1)
        # A matrix-vector product: masked minor-axis sums are slow on XLA:CPU.
        return RowStats(top, first, penalised @ jnp.ones(k, acc))

    def combine(a, b):
        take_b = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] < a[1]))
        return jnp.where(take_b, b[0], a[0]), jnp.where(take_b, b[1], a[1]), a[2] + b[2]

    # XLA:CPU compiles no variadic reduction of 16-bit floats: reduce in float32 and
    # cast the max back (exactly: it is an entry of the input).
    iota = jax.lax.broadcasted_iota(jnp.int32, probs.shape, probs.ndim - 1)
    init = (jnp.array(-jnp.inf, acc), jnp.array(k, jnp.int32), jnp.array(0, acc))
    top, first, total = jax.lax.reduce((x, iota, penalised), init, combine, (probs.ndim - 1,))
    return RowStats(top.astype(probs.dtype), first, total)


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
