"""Scores and binary targets of every calibration view, with argmax's first-index rule.

A calibration metric compares scores with binary targets. :func:`scores_and_targets` is
the one place that turns ``(probs, labels)`` into them, for each view jaxcal uses:

* ``"binary"``: 1-D ``probs`` ``(N,)``, the probability of the positive class, against
  ``labels == 1``;
* ``"confidence"`` (top label): 2-D ``probs`` ``(N, K)``, the confidence ``max_k p_k``
  against correctness ``argmax_k p_k == y``, with the predicted class as the group
  (top-label ECE bins within it);
* ``"classwise"``: every column ``p_k`` against ``labels == k``, the targets given as the
  label index (one-hot), as :func:`jaxcal._binning.bin_sums` takes them.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._checks import check_probs_labels

# Up to this many classes XLA:CPU's argmax is as fast as max; beyond it argmax's variadic
# reduction is ~10x slower than max plus a gather (221 ms versus 20 ms at N=1e6, K=100).
_ARGMAX_MAX_CLASSES = 32


def top_label(probs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Confidence ``max_k p_k`` and predicted class (first index among ties), shapes ``(N,)``."""
    if probs.shape[-1] <= _ARGMAX_MAX_CLASSES:
        return probs.max(axis=-1), jnp.argmax(probs, axis=-1).astype(jnp.int32)
    conf = probs.max(axis=-1)
    is_max = probs == conf[..., None]
    # First index attaining the max: argmax of a bool row is cheap to express as a min.
    iota = jnp.arange(probs.shape[-1], dtype=jnp.int32).reshape((1,) * (probs.ndim - 1) + (-1,))
    pred = jnp.min(jnp.where(is_max, iota, probs.shape[-1]), axis=-1)
    return conf, pred


@jax.custom_jvp
def top_confidence(probs: jax.Array) -> jax.Array:
    """``max_k p_k`` ``(..., )`` whose derivative is the one-hot of the predicted class.

    Equivalent to ``jax.grad`` of ``max`` except among exact ties (which share the
    gradient there; here the first maximal index takes it, as ``argmax`` does). The
    tangent is one fused masked row sum, where the default rule of ``max`` costs a
    comparison, a count and a division per element.
    """
    return top_label(probs)[0]


@top_confidence.defjvp
def _top_confidence_jvp(primals, tangents):
    (probs,), (dprobs,) = primals, tangents
    conf, pred = top_label(probs)
    classes = jnp.arange(probs.shape[-1], dtype=jnp.int32).reshape((1,) * pred.ndim + (-1,))
    onehot = pred[..., None] == classes
    return conf, jnp.sum(jnp.where(onehot, dprobs, 0), axis=-1)


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
    probs: jax.Array, labels: jax.Array | None, view: str | None = None
) -> ScoresAndTargets:
    """The scores and binary targets of ``view`` (default: binary for 1-D, else confidence).

    1-D ``probs`` asked for the confidence or classwise view are first taken as the two
    columns ``(1 - p, p)``. ``labels`` None gives the scores and groups alone (targets
    None), for procedures that draw their own labels (consistency bands).
    """
    if view is None:
        view = "binary" if probs.ndim == 1 else "confidence"
    if view == "binary":
        return ScoresAndTargets(probs, None if labels is None else labels == 1, None)
    if probs.ndim == 1:
        probs = jnp.stack([1 - probs, probs], axis=-1)
    if view == "classwise":
        return ScoresAndTargets(probs, None if labels is None else labels.astype(jnp.int32), None)
    _, pred = top_label(probs)
    return ScoresAndTargets(top_confidence(probs), None if labels is None else pred == labels, pred)


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
