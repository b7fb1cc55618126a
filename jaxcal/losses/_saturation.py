"""A diagnostic a training loop logs beside a calibration regulariser: is the batch the
regulariser sees still miscalibrated, or already saturated (all correct, confident)?"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.docstrings import shared_doc
from jaxcal._core.numerics import safe_divide, upcast
from jaxcal.losses._dece import two_column_logits
from jaxcal.losses._inputs import check_logits_labels, mask_padding_logits


class SaturationStats(NamedTuple):
    """What a calibration regulariser sees in one batch (each field a 0-d array).

    Attributes:
      accuracy: weighted share of rows whose argmax is the label.
      confidence: weighted mean top-label probability.
      all_correct: 1.0 when every row of positive weight is predicted right, else 0.0;
        its mean over logged steps is the share of all-correct batches.
      regularizer: the regulariser's value on the batch (``regularizer(logits, labels)``),
        or, without one, the batch's ``|confidence - accuracy|`` (its DCA).
    """

    accuracy: jax.Array
    confidence: jax.Array
    all_correct: jax.Array
    regularizer: jax.Array


def _stats(logits, labels, weights):
    logits, labels = mask_padding_logits(logits, labels, weights)
    probs = jax.nn.softmax(two_column_logits(logits), axis=-1)
    dtype = probs.dtype
    w = jnp.ones(probs.shape[:1], dtype) if weights is None else upcast(weights).astype(dtype)
    correct = (jnp.argmax(probs, axis=-1).astype(jnp.int32) == labels.astype(jnp.int32)).astype(
        dtype
    )
    total = jnp.sum(w)
    accuracy = safe_divide(jnp.sum(w * correct), total)
    confidence = safe_divide(jnp.sum(w * jnp.max(probs, axis=-1)), total)
    all_correct = jnp.all((correct > 0) | (w <= 0)).astype(dtype)
    return accuracy, confidence, all_correct


_stats_kernel = jax.jit(_stats)


@shared_doc
def saturation_stats(
    logits: Any,
    labels: Any,
    *,
    regularizer: Callable[..., jax.Array] | None = None,
    weights: Any = None,
) -> SaturationStats:
    """Batch accuracy, mean confidence, whether every row is right, and the regulariser.

    A calibration term computed on a training batch acts only while that batch is
    miscalibrated. Once a network fits its training data, the batch is all correct and
    confident: the soft-binned ECE and DCA are then ``1 - confidence``, near 0, and MMCE_w
    (:func:`~jaxcal.losses.mmce_loss`) is exactly 0 (it needs a wrong prediction). Log
    this on the batch the regulariser sees, at every step or every few: a mean
    ``all_correct`` near 1, or an accuracy near 1 with the regulariser near 0, says the
    term has nothing left to correct there, and that a held-out batch
    (:func:`~jaxcal.losses.heldout_objective`) or temperature scaling is the remedy.

    Argmax ties go to the first maximal class (as ``jnp.argmax``). 1-D binary log-odds
    ``z``: predicted class ``z > 0``, confidence ``max(sigmoid(z), 1 - sigmoid(z))``.

    Args:
      {{logits_labels}}
      regularizer: optional ``regularizer(logits, labels) -> scalar``, e.g.
        :func:`~jaxcal.losses.mmce_loss` or a ``functools.partial`` of one (called with
        ``weights=`` when weights are given); ``None``: the batch's
        ``|confidence - accuracy|``.
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding rows.

    Returns:
      :class:`~jaxcal.losses.SaturationStats` of 0-d arrays. Zero total weight gives
      accuracy and confidence 0 and ``all_correct`` 1.

    Validation runs only on concrete inputs; under ``jit``/``vmap`` it is skipped.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal import losses
      >>> logits = jnp.array([[4.0, 0.0], [0.0, 5.0], [3.0, 0.0]])
      >>> s = losses.saturation_stats(logits, jnp.array([0, 1, 0]), regularizer=losses.mmce_loss)
      >>> float(s.accuracy), float(s.all_correct), float(s.regularizer)
      (1.0, 1.0, 0.0)

    References:
      Kumar, Sarawagi & Jain (2018), Section 4 (MMCE_w vanishes without a wrong
      prediction); Karandikar et al. (2021), Section 5 (the training batches of an
      over-fitted network are calibrated).
    """
    logits, labels, weights = check_logits_labels(logits, labels, weights)
    accuracy, confidence, all_correct = _stats_kernel(logits, labels, weights)
    if regularizer is None:
        value = jnp.abs(confidence - accuracy)
    elif weights is None:
        value = regularizer(logits, labels)
    else:
        value = regularizer(logits, labels, weights=weights)
    value = jnp.asarray(value)
    return SaturationStats(accuracy, confidence, all_correct, value.astype(accuracy.dtype))
