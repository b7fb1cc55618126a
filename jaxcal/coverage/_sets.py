"""Prediction-set metrics: coverage and mean size of boolean set masks.

MAPIE's ``classification_coverage_score`` and ``classification_mean_width_score`` on
``(N, K)`` / ``(N, K, L)`` masks: each a (weighted) mean over the samples, per level.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal.coverage._checks import check_sets
from jaxcal.coverage._levels import level_mean, sets_with_levels, squeeze_levels


def _set_covered(labels: jax.Array, sets: jax.Array) -> jax.Array:
    """``sets[i, labels[i], l]``, shape ``(N, L)``."""
    return jnp.take_along_axis(sets, labels[:, None, None], axis=1)[:, 0, :]


@partial(jax.jit, static_argnames=("dtype",))
def _classification_coverage_kernel(labels, sets, weights, dtype):
    out = level_mean(_set_covered(labels, sets_with_levels(sets)), weights, dtype)
    return squeeze_levels(out, sets.ndim == 3)


def classification_coverage_score(labels: Any, sets: Any, *, weights: Any = None) -> jax.Array:
    """Fraction of samples whose true label is in their prediction set.

    .. math:: \\mathrm{CCS} = \\frac{\\sum_i w_i\\,\\mathbf 1(y_i \\in \\hat C(x_i))}{\\sum_i w_i}

    Same meaning as MAPIE's ``classification_coverage_score(y_true, y_pred_set)``.

    Args:
      labels: ``(N,)`` integer labels in ``[0, K)``.
      sets: boolean mask ``(N, K)``, or ``(N, K, L)`` for L confidence levels (0/1 numbers
        are accepted).
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> sets = jnp.array([[True, True, False], [False, True, True], [True, False, False]])
      >>> round(float(classification_coverage_score(jnp.array([1, 0, 0]), sets)), 4)
      0.6667

    References:
      MAPIE 1.6, ``mapie.metrics.classification.classification_coverage_score``.
    """
    labels, sets, weights, dtype = check_sets(labels, sets, weights)
    return _classification_coverage_kernel(labels, sets, weights, dtype)


@partial(jax.jit, static_argnames=("dtype",))
def _classification_width_kernel(sets, weights, dtype):
    sizes = jnp.sum(sets_with_levels(sets), axis=1, dtype=jnp.int32).astype(dtype)
    return squeeze_levels(level_mean(sizes, weights, dtype), sets.ndim == 3)


def classification_mean_width_score(sets: Any, *, weights: Any = None) -> jax.Array:
    """Mean size of the prediction sets, ``sum_i w_i |C(x_i)| / sum_i w_i``.

    Same meaning as MAPIE's ``classification_mean_width_score(y_pred_set)``.

    Args:
      sets: boolean mask ``(N, K)``, or ``(N, K, L)`` for L confidence levels.
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> sets = jnp.array([[True, True, False], [False, True, True], [True, False, False]])
      >>> round(float(classification_mean_width_score(sets)), 4)
      1.6667

    References:
      MAPIE 1.6, ``mapie.metrics.classification.classification_mean_width_score``.
    """
    _, sets, weights, dtype = check_sets(None, sets, weights, need_labels=False)
    return _classification_width_kernel(sets, weights, dtype)
