"""ECE-KDE as a training loss on logits (Popordanoska, Sayer & Blaschko 2022).

Inputs follow ``jaxcal/losses/_inputs.py``; the estimator is the metric's
(``jaxcal/metrics/_ece_kde.py``) on ``softmax(logits)``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax

from jaxcal.losses._inputs import check_logits_labels, mask_padding_logits, probabilities
from jaxcal.metrics._ece_kde import check_ece_kde_options, ece_kde_value


@partial(jax.jit, static_argnames=("p", "kind"))
def _ece_kde_loss_kernel(logits, labels, weights, bandwidth, p, kind):
    logits, labels = mask_padding_logits(logits, labels, weights)
    return ece_kde_value(probabilities(logits), labels, weights, bandwidth, p, kind)


def ece_kde_loss(
    logits: Any,
    labels: Any,
    *,
    bandwidth: Any = None,
    p: float = 1,
    kind: str = "canonical",
    weights: Any = None,
) -> jax.Array:
    """ECE-KDE of ``softmax(logits)`` as a training loss (canonical calibration).

    The estimator of :func:`~jaxcal.metrics.ece_kde` (its conventions: the p-th power without a
    root, binary log-odds doubled, ``kind`` canonical / marginal / top-label) on the
    probabilities of ``logits``: ``softmax`` rows, or ``sigmoid`` of 1-D binary log-odds.
    The paper trains with it as a regulariser beside the cross-entropy of the minibatch::

      loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
      loss = loss + lam * jaxcal.losses.ece_kde_loss(logits, labels, bandwidth=b)

    with lambda chosen on validation data. The gradient reaches every logit through
    the leave-one-out kernel ratio (O(B^2 K) for a minibatch of B); it is finite for
    every finite input (saturated rows, a class seen once in the batch: where the
    reference's ``logsumexp`` backward gives NaN, its code notes). ``bandwidth=None``
    selects it per call by the reference's leave-one-out likelihood over 20 values (20
    more kernel passes, no gradient through the choice): select it once with
    :func:`~jaxcal.metrics.kde_bandwidth` on held-out predictions and pass it instead;
    ``bandwidth`` is traced (annealing does not recompile).

    Args:
      logits: ``(N, K)`` logits or ``(N,)`` binary log-odds.
      labels: ``(N,)`` int labels in ``[0, K)`` (0/1 for 1-D logits).
      bandwidth: ``b > 0`` (number or 0-d array), or None (see above).
      p: the exponent, >= 1 (static).
      kind: ``"canonical"``, ``"marginal"`` or ``"top_label"``.
      weights: optional ``(N,)`` non-negative weights; 0 masks padding rows (which may
        hold NaN logits and the ignore label under ``jit``).

    Returns:
      0-d array. Zero total weight gives 0.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> z = jnp.array([[2.0, 0.5, -1.0], [0.1, 1.5, 0.2], [0.3, 0.2, 2.5], [1.0, 1.2, 0.0]])
      >>> y = jnp.array([0, 1, 2, 0])
      >>> g = jax.grad(lambda z: ece_kde_loss(z, y, bandwidth=0.1))(z)
      >>> bool(jnp.all(jnp.isfinite(g)))
      True

    References:
      Popordanoska, Sayer & Blaschko (2022), "A Consistent and Differentiable Lp Canonical
      Calibration Error Estimator", NeurIPS; code ``tpopordanoska/ece-kde``.
    """
    bandwidth, p = check_ece_kde_options(bandwidth, p, kind)
    logits, labels, weights = check_logits_labels(logits, labels, weights)
    kind = "canonical" if logits.ndim == 1 else kind
    return _ece_kde_loss_kernel(logits, labels, weights, bandwidth, p, kind)
