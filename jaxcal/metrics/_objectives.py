"""What the differentiable objectives share: their (score, target) pairs and their scalar
hyperparameters.

The objectives are the soft-binned ECE (``jaxcal/metrics/_soft_ece.py``), the MMCE
(``jaxcal/metrics/_mmce.py``) and the smooth ECE (``jaxcal/metrics/_smooth_ece.py``). All three take
``(probs, labels)`` like :func:`jaxcal.ece`: 1-D ``probs`` are the probability of the
positive class against 0/1 labels, 2-D ``probs`` give the top-label confidence
``max_k p_k`` against correctness ``argmax_k p_k == y``. The correctness indicator is
piecewise constant (no gradient); the gradient flows through the confidence. Each works
under ``jit``, ``vmap`` and ``grad``, with finite gradients for every valid input,
including probabilities of exactly 0 or 1 and empty bins.

Their scalar hyperparameters (``temperature``, ``bandwidth``) may be Python numbers or
0-d arrays; they are traced, not static, so annealing them inside a jitted training
loop does not recompile.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import values_checkable
from jaxcal._core.confidence import RowStats, scores_and_targets
from jaxcal._core.numerics import scale_free, upcast


def check_hyperparameter(name: str, value: Any, minimum: float = 0.0) -> Any:
    """Validate a positive scalar hyperparameter given as a number or a 0-d array.

    Python numbers and concrete arrays must be finite and > ``minimum`` (>= when
    ``minimum`` > 0); tracers are only checked for rank. Returns the value as given
    (the kernels cast it to their compute dtype), so that it stays traced.
    """
    if isinstance(value, bool):
        raise ValueError(f"`{name}` must be a positive number; got {value!r}.")
    if isinstance(value, (int, float, np.integer, np.floating)):
        v = float(value)
    else:
        try:
            arr = jnp.asarray(value)
        except TypeError as err:
            raise ValueError(f"`{name}` must be a positive number; got {value!r}.") from err
        if arr.ndim != 0 or not (
            jnp.issubdtype(arr.dtype, jnp.floating) or jnp.issubdtype(arr.dtype, jnp.integer)
        ):
            raise ValueError(
                f"`{name}` must be a positive scalar; got shape {arr.shape}, dtype {arr.dtype}."
            )
        if not values_checkable(arr):
            return arr
        v = float(arr)
    ok = np.isfinite(v) and (v >= minimum if minimum > 0 else v > 0)
    if not ok:
        bound = f">= {minimum}" if minimum > 0 else "> 0"
        raise ValueError(f"`{name}` must be a finite number {bound}; got {v}.")
    return value


def float_scores_targets(
    probs: jax.Array, labels: jax.Array, rows: RowStats | None = None
) -> tuple[jax.Array, jax.Array]:
    """(score, float target) in the compute dtype: positive class, or top-label confidence.

    The target (the label, or correctness) is piecewise constant in ``probs``: no gradient;
    the confidence's gradient is the one-hot of the predicted class
    (:func:`~jaxcal.calibrators.top_label`). ``rows``: the kernel's
    ``input_row_stats()``, shared with its validity summary.
    """
    scores, targets, _ = scores_and_targets(probs, labels, rows=rows)
    scores = upcast(scores)
    return scores, targets.astype(scores.dtype)


def sample_weights(weights: jax.Array | None, like: jax.Array) -> jax.Array:
    """``weights`` in the dtype of ``like`` scaled by ``scale_free()``
    (so that their scale cannot overflow a sum), or ones where they are None."""
    return jnp.ones_like(like) if weights is None else scale_free(weights.astype(like.dtype))
