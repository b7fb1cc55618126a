"""What the training losses share: their ``(logits, labels, weights)`` inputs and the
probabilities and weighted means formed from them.

The losses of :mod:`jaxcal.losses` take logits, as optax's losses do, never
probabilities: the softmax (or sigmoid) is part of the loss, so that its derivative is
formed stably and saturated logits (a row of +-1e4) give exact one-hot probabilities and
finite gradients.

* ``logits`` ``(N, K)``, K >= 2: multiclass; probabilities ``softmax(logits)``, labels in
  ``[0, K)``.
* ``logits`` ``(N,)``: binary log-odds of the positive class; probability
  ``sigmoid(logits)``, labels 0/1 (or bool).

``weights`` ``(N,)`` are non-negative sample weights; 0 masks the padding rows of a
fixed-shape batch: under ``jit`` they may hold anything (NaN logits, the ignore label
-100), which every kernel first makes harmless (``mask_padding_logits()``). Every loss
is a weighted mean or a functional of weighted sums, and zero total weight gives 0.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.checks import as_float, check_finite, check_labels, check_weights
from jaxcal._core.numerics import mask_unweighted, upcast


def check_logits_labels(
    logits: Any, labels: Any, weights: Any = None
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """Validate ``(logits, labels, weights)``: shapes always, values when concrete.

    ``logits`` must be ``(N,)`` or ``(N, K)`` with K >= 2 and N >= 1, finite; labels
    ``(N,)`` integers in ``[0, K)`` (0/1 for 1-D logits); weights ``(N,)`` non-negative.
    """
    arr = as_float(logits, "logits")
    if arr.ndim not in (1, 2):
        raise ValueError(
            f"`logits` must be 1-D (N,) binary log-odds or 2-D (N, K); got {arr.ndim}-D "
            f"shape {arr.shape}."
        )
    if arr.shape[0] == 0:
        raise ValueError(f"`logits` must not be empty; got shape {arr.shape}.")
    if arr.ndim == 2 and arr.shape[1] < 2:
        raise ValueError(
            f"`logits` must have at least 2 class columns (or be 1-D binary log-odds); "
            f"got shape {arr.shape}."
        )
    check_finite("logits", arr)
    n = arr.shape[0]
    num_classes = 2 if arr.ndim == 1 else arr.shape[1]
    return arr, check_labels(labels, n, num_classes), check_weights(weights, n)


def mask_padding_logits(
    logits: jax.Array, labels: jax.Array, weights: jax.Array | None
) -> tuple[jax.Array, jax.Array]:
    """Kernel: ``(logits, labels)`` with the padding of zero-weight rows made harmless.

    As the metrics' ``mask_padding()`` does for probabilities: in rows
    without positive weight, non-finite logits become 0 and labels outside ``[0, K)``
    become 0; the weight 0 keeps those rows out of every sum. The select comes before the
    softmax, so the masked entries get a zero derivative, not ``0 * NaN``; valid rows and
    the derivatives with respect to them are unchanged. No weights: the inputs as they are.
    """
    k = 2 if logits.ndim == 1 else logits.shape[1]
    logits = mask_unweighted(logits, weights, 0)
    labels = mask_unweighted(labels, weights, 0, (labels < 0) | (labels >= k))
    return logits, labels


def probabilities(logits: jax.Array) -> jax.Array:
    """Kernel: ``softmax`` rows ``(N, K)`` or the ``sigmoid`` ``(N,)``, in the compute dtype."""
    z = upcast(logits)
    return jax.nn.sigmoid(z) if z.ndim == 1 else jax.nn.softmax(z, axis=-1)


def true_class_log_prob(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Kernel: ``log p_y`` ``(N,)``, from ``log_softmax`` (or ``log_sigmoid`` of +-z)."""
    z = upcast(logits)
    if z.ndim == 1:
        return jax.nn.log_sigmoid(jnp.where(labels == 1, z, -z))
    log_p = jax.nn.log_softmax(z, axis=-1)
    return jnp.take_along_axis(log_p, labels[:, None].astype(jnp.int32), axis=-1)[:, 0]
