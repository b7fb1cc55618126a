"""Murphy diagrams: the mean elementary score of probability forecasts over thresholds.

Every proper scoring rule of binary probability forecasts is a mixture of the elementary
scores (Ehm, Gneiting, Jordan & Krüger 2016, sec. 3; Schervish 1989)

.. math::
   S_\\theta(x, y) = (1 - \\theta)\\,1\\{x \\le \\theta < y\\}
   + \\theta\\,1\\{y \\le \\theta < x\\},\\qquad \\theta \\in (0, 1),

the cost-loss score of acting when x > θ: a miss costs 1 - θ, a false alarm θ. The
Brier score is ∫ 2 S_θ dθ and the log score ∫ S_θ / (θ(1 - θ)) dθ. A forecast that
has the lower mean elementary score at every θ is preferred by every proper score
(forecast dominance), which the Murphy diagram shows at a glance.

The mean over the samples at T thresholds costs one binary search per sample (its
first threshold at or above it) and two histograms over the T + 1 gaps, O(N log T),
never an (N, T) array.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import (
    as_float,
    check_option,
    check_positive_int,
    check_probs_labels,
    is_concrete,
)
from jaxcal._core.numerics import compute_dtype, safe_divide, scale_free
from jaxcal._core.validity import mask_padding
from jaxcal.metrics._corp import REDUCTIONS, binary_problems


class MurphyDiagram(NamedTuple):
    """Result of :func:`~jaxcal.metrics.murphy_diagram`.

    Attributes:
      thresholds: ``(T,)`` the thresholds θ, increasing.
      scores: ``(T,)`` the mean elementary score at each θ (lower is better).
    """

    thresholds: jax.Array
    scores: jax.Array


def elementary_scores(scores, targets, weights, thresholds):
    """Mean elementary score of binary forecasts ``(G, N)`` (summed over G) at each θ.

    A sample with x <= θ_j for j >= j0 (j0 its first threshold at or above x) is a miss
    at those thresholds when y = 1; one with j < j0 a false alarm when y = 0.
    """
    t = thresholds.shape[0]
    dtype = thresholds.dtype
    n = scores.shape[-1]
    w = jnp.ones((n,), dtype) if weights is None else scale_free(weights.astype(dtype))
    first = jnp.searchsorted(thresholds, scores.astype(dtype), side="left").reshape(-1)
    ww = jnp.broadcast_to(w, scores.shape).reshape(-1)
    pos = targets.reshape(-1)
    hits = jax.ops.segment_sum(jnp.where(pos, ww, 0), first, t + 1)
    misses_at = jnp.cumsum(hits)[:t]  # positives with x <= θ_j
    negatives = jax.ops.segment_sum(jnp.where(pos, 0, ww), first, t + 1)
    false_at = jnp.sum(negatives) - jnp.cumsum(negatives)[:t]  # negatives with x > θ_j
    total = jnp.sum(w)
    return safe_divide((1 - thresholds) * misses_at + thresholds * false_at, total)


@partial(jax.jit, static_argnames=("reduction",))
def _murphy_kernel(probs, labels, weights, thresholds, reduction):
    probs, labels, _ = mask_padding(probs, labels, weights)  # rows of weight 0: anything
    scores, targets = binary_problems(probs, labels, reduction)
    return MurphyDiagram(thresholds, elementary_scores(scores, targets, weights, thresholds))


def _check_thresholds(thresholds: Any, n_thresholds: int, dtype) -> jax.Array:
    if thresholds is None:
        n_thresholds = check_positive_int("n_thresholds", n_thresholds)
        grid = np.arange(1, n_thresholds + 1, dtype=np.float64) / (n_thresholds + 1)
        return jnp.asarray(grid.astype(dtype))
    arr = as_float(thresholds, "thresholds")
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(f"`thresholds` must be a non-empty 1-D array; got shape {arr.shape}.")
    if is_concrete(arr):
        host = np.asarray(arr, dtype=np.float64)
        if not np.all(np.isfinite(host)) or np.any(host < 0) or np.any(host > 1):
            raise ValueError("`thresholds` must be finite and lie in [0, 1].")
        if np.any(np.diff(host) < 0):
            raise ValueError("`thresholds` must be sorted in increasing order.")
    return arr.astype(dtype)


def murphy_diagram(
    probs: Any,
    labels: Any,
    *,
    thresholds: Any = None,
    n_thresholds: int = 99,
    reduction: str = "classwise",
    weights: Any = None,
) -> MurphyDiagram:
    """Murphy diagram: the mean elementary score at each threshold θ.

    .. math::
       \\bar S_\\theta = \\frac{1}{W} \\sum_i w_i \\big[(1 - \\theta)\\,1\\{x_i \\le \\theta,
       y_i = 1\\} + \\theta\\,1\\{x_i > \\theta, y_i = 0\\}\\big]

    (Ehm et al. 2016; the factor 1/2 of their expectile form left out, so that
    ``2 * mean over θ`` approximates :func:`jaxcal.brier_score` on a fine uniform grid).
    Plot several models' curves together: where one lies below another at every θ it
    is better under every proper score. Vmaps over a leading model axis
    (``jax.vmap(lambda p: murphy_diagram(p, y).scores)(stacked_probs)``).

    Views as :func:`~jaxcal.metrics.score_decomposition`: 1-D ``probs`` the positive class; 2-D the sum
    over classes one-vs-rest (``reduction="classwise"``, default; 2 ∫ S̄_θ dθ is then
    the multiclass Brier score) or the top-label confidence against correctness
    (``"top_label"``).

    Args:
      probs: ``(N,)`` or ``(N, K)`` predictions.
      labels: ``(N,)`` integer labels.
      thresholds: optional increasing 1-D array of θ in [0, 1]; default: the
        ``n_thresholds`` points j / (n_thresholds + 1), j = 1..n_thresholds.
      n_thresholds: size of the default grid (ignored with ``thresholds``).
      reduction: ``"classwise"`` or ``"top_label"`` (2-D ``probs`` only).
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      :class:`~jaxcal.metrics.MurphyDiagram` ``(thresholds, scores)``, each ``(T,)``.

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.array([0.2, 0.4, 0.7, 0.9])
      >>> y = jnp.array([0, 1, 0, 1])
      >>> m = murphy_diagram(p, y, thresholds=jnp.array([0.3, 0.5, 0.8]))
      >>> [round(v, 4) for v in m.scores.tolist()]
      [0.075, 0.25, 0.05]

    References:
      Ehm, Gneiting, Jordan & Krüger (2016), "Of quantiles and expectiles: consistent
      scoring functions, Choquet representations and forecast rankings", JRSS B 78(3);
      Murphy (1977), "The value of climatological, categorical and probabilistic
      forecasts in the cost-loss ratio situation"; Schervish (1989).
    """
    check_option("reduction", reduction, REDUCTIONS)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    grid = _check_thresholds(thresholds, n_thresholds, compute_dtype(probs.dtype))
    return _murphy_kernel(probs, labels, weights, grid, reduction)
