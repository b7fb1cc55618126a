"""The public bin-edge helpers: ``binning()``'s edges, with their arguments checked.

The kernels call :func:`~jaxcal.metrics.uniform_edges` and
:func:`~jaxcal.metrics.quantile_edges` on validated, possibly traced values; a user calling
them directly gets the checks every public function makes (D15: ``uniform_edges(0)`` gave
``[nan]``, integer dtypes edges of 0 and 1, scores outside [0, 1] edges that were not
monotone, a list an ``AttributeError``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.binning import CLOSED
from jaxcal._core.binning import quantile_edges as binned_quantile_edges
from jaxcal._core.binning import uniform_edges as binned_uniform_edges
from jaxcal._core.checks import (
    as_float,
    check_option,
    check_positive_int,
    check_unit_interval,
    check_weights,
)

#: The kernels' quantile edges, compiled once per shape and options: called eagerly, its
#: ``jnp.searchsorted`` traced a new scan (one compile) on every call.
_quantile_edges = jax.jit(binned_quantile_edges, static_argnums=(1, 2))


def uniform_edges(n_bins: int, dtype: Any = jnp.float32) -> jax.Array:
    """The M + 1 edges k/M of uniform bins, each rounded to ``dtype``.

    The edges the metrics compare scores of ``dtype`` with: k/M rounded to ``dtype``
    (so 0.6 lands in the bin the convention says in every precision), returned in the
    compute dtype (float32 at least, float64 under x64).

    Args:
      n_bins: M, an integer >= 1.
      dtype: a floating dtype, that of the scores the edges will be compared with.

    Returns:
      ``(M + 1,)`` array; ``edges[0] == 0``, ``edges[-1] == 1``.

    Example:
      >>> uniform_edges(5).tolist()  # doctest: +ELLIPSIS
      [0.0, 0.2..., 0.4..., 0.6..., 0.8..., 1.0]
    """
    n_bins = check_positive_int("n_bins", n_bins)
    try:
        given = jnp.dtype(dtype)
    except TypeError:
        given = None
    if given is None or not jnp.issubdtype(given, jnp.floating):
        shown = dtype if given is None else given.name
        raise ValueError(f"`dtype` must be a floating dtype (that of the scores); got {shown!r}.")
    return binned_uniform_edges(n_bins, dtype)


def quantile_edges(
    scores: Any, n_bins: int, closed: str = "right", weights: Any = None
) -> jax.Array:
    """Equal-mass edges: 0, the M - 1 inner (weighted) empirical quantiles of ``scores``, 1.

    The edges the metrics use with ``binning="quantile"``: inner edge b is, for
    ``closed="right"``, the first sorted score at which the cumulative weight reaches b/M
    of the total, so bin (e_b, e_{b+1}] holds the next M-th of the mass; for
    ``closed="left"``, the first score beyond it. 1000 distinct unweighted scores into
    10 bins give 100 per bin.

    Args:
      scores: ``(N,)`` values in [0, 1] (N >= 1).
      n_bins: M >= 1 (an int).
      closed: the bin convention the edges are meant for, ``"right"`` or ``"left"``.
      weights: ``(N,)`` non-negative weights for weighted quantiles, or None.

    Returns:
      ``(M + 1,)`` non-decreasing edges in the scores' compute dtype.

    Value checks (range, weights) run on concrete inputs only, as everywhere in jaxcal.

    Example:
      >>> import jax.numpy as jnp
      >>> quantile_edges(jnp.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.9]), 3).tolist()  # doctest: +ELLIPSIS
      [0.0, 0.2..., 0.4..., 1.0]
    """
    n_bins = check_positive_int("n_bins", n_bins)
    check_option("closed", closed, CLOSED)
    arr = as_float(scores, "scores")
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(f"`scores` must be 1-D of shape (N,) with N >= 1; got shape {arr.shape}.")
    check_unit_interval("scores", arr)
    weights = check_weights(weights, arr.shape[0])
    return _quantile_edges(arr, n_bins, closed, weights)
