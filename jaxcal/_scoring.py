"""Proper scoring rules: Brier score, log loss, and the exact Brier decomposition."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._binning import bin_centres, bin_edges_and_index, check_binning, segment_stats
from jaxcal._checks import check_probs_labels, compute_dtype


def _one_hot_targets(probs: jax.Array, labels: jax.Array):
    """(probabilities, 0/1 targets) as ``(N, C)``: C = 1 for binary, K for multiclass."""
    if probs.ndim == 1:
        return probs[:, None], (labels == 1)[:, None].astype(probs.dtype)
    return probs, (labels[:, None] == jnp.arange(probs.shape[1], dtype=jnp.int32)[None, :]).astype(
        probs.dtype
    )


def _weighted_mean(x: jax.Array, weights: jax.Array | None) -> jax.Array:
    """Mean of ``x`` ``(N,)``; weighted; 0 when the total weight is 0."""
    if weights is None:
        return jnp.mean(x)
    total = weights.sum()
    return jnp.where(total > 0, jnp.sum(weights * x) / jnp.where(total > 0, total, 1), 0)


def _upcast(probs: jax.Array) -> jax.Array:
    return probs.astype(compute_dtype(probs.dtype))


@jax.jit
def _brier_kernel(probs, labels, weights):
    p, o = _one_hot_targets(_upcast(probs), labels)
    return _weighted_mean(jnp.sum((p - o) ** 2, axis=1), weights)


def brier_score(probs: Any, labels: Any, *, weights: Any = None) -> jax.Array:
    """Brier score: mean squared distance between predictions and one-hot outcomes.

    Binary ``(N,)``: ``mean((p - y)^2)`` (scikit-learn's ``brier_score_loss``), in [0, 1].
    Multiclass ``(N, K)``: ``mean(sum_k (p_k - 1[y = k])^2)``, Brier's original score
    summed over classes (the ECML-PKDD tutorial's convention), in [0, 2].

    Args:
      probs: ``(N,)`` or ``(N, K)``.
      labels: ``(N,)`` ints.
      weights: optional ``(N,)`` sample weights (weighted mean; 0 total weight gives 0).

    Returns:
      0-d array.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(brier_score(jnp.array([0.1, 0.9]), jnp.array([0, 0]))), 4)
      0.41

    References:
      Brier (1950), "Verification of forecasts expressed in terms of probability".
    """
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _brier_kernel(probs, labels, weights)


@jax.jit
def _log_loss_kernel(probs, labels, weights):
    p = _upcast(probs)
    eps = jnp.finfo(p.dtype).eps
    p_true = (
        jnp.where(labels == 1, p, 1 - p)
        if p.ndim == 1
        else jnp.take_along_axis(p, labels[:, None], axis=1)[:, 0]
    )
    return _weighted_mean(-jnp.log(jnp.clip(p_true, eps, 1 - eps)), weights)


def log_loss(probs: Any, labels: Any, *, weights: Any = None) -> jax.Array:
    """Log loss (cross-entropy, negative log-likelihood) of the true class, in nats.

    ``-mean(log p_{y})``; binary ``(N,)`` uses ``p`` for y = 1 and ``1 - p`` for y = 0.
    The probability of the true class is clipped to ``[eps, 1 - eps]`` with ``eps`` the
    machine epsilon of the compute dtype (scikit-learn's ``eps="auto"``), so a sample
    whose true class has probability 0 costs ``-log(eps)`` = 15.94 in float32 (36.04 in
    float64) instead of inf. Multiclass rows are not renormalised after clipping.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(log_loss(jnp.array([[0.5, 0.5], [0.9, 0.1]]), jnp.array([0, 0]))), 4)
      0.3993

    References:
      Good (1952), "Rational decisions"; scikit-learn's ``log_loss``.
    """
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _log_loss_kernel(probs, labels, weights)


class BrierDecomposition(NamedTuple):
    """Exact decomposition brier = reliability - resolution + uncertainty + wbv - wbc.

    Attributes (0-d arrays):
      brier: the Brier score (as :func:`brier_score`).
      reliability: REL = sum_b (n_b/N) (f_b - o_b)^2 (lower is better calibrated).
      resolution: RES = sum_b (n_b/N) (o_b - o)^2 (higher is better).
      uncertainty: UNC = o (1 - o), the base rate's variance.
      within_bin_variance: WBV = (1/N) sum_b sum_{i in b} (f_i - f_b)^2.
      within_bin_covariance: WBC = (2/N) sum_b sum_{i in b} (o_i - o_b)(f_i - f_b).
    """

    brier: jax.Array
    reliability: jax.Array
    resolution: jax.Array
    uncertainty: jax.Array
    within_bin_variance: jax.Array
    within_bin_covariance: jax.Array


def _binary_decomposition(f, o, weights, n_bins, binning, closed):
    """The six terms for one binary problem: forecasts ``f`` and outcomes ``o`` ``(N,)``.

    ``f`` keeps the input dtype for binning (edges rounded to it, as :func:`ece` bins) and
    is upcast for the arithmetic.
    """
    edges, bins = bin_edges_and_index(f, n_bins, binning, closed, weights)
    f = _upcast(f)
    o = o.astype(f.dtype)
    stats = segment_stats(bins, f, o, n_bins, weights, bin_centres(edges))
    w = jnp.ones_like(f) if weights is None else weights.astype(f.dtype)
    total = jnp.sum(w)
    safe_total = jnp.where(total > 0, total, 1)
    nonempty = stats.weight > 0
    safe_weight = jnp.where(nonempty, stats.weight, 1)
    f_bin = jnp.where(nonempty, stats.sum_score / safe_weight, 0)
    o_bin = jnp.where(nonempty, stats.sum_target / safe_weight, 0)
    o_bar = jnp.sum(w * o) / safe_total
    share = stats.weight / safe_total
    # Deviations from the bin means, per sample: exact sums, no cancellation of large terms.
    df, do = f - f_bin[bins], o - o_bin[bins]
    return jnp.stack(
        [
            jnp.sum(w * (f - o) ** 2) / safe_total,
            jnp.sum(share * (f_bin - o_bin) ** 2),
            jnp.sum(share * (o_bin - o_bar) ** 2),
            o_bar * (1 - o_bar),
            jnp.sum(w * df**2) / safe_total,
            2 * jnp.sum(w * do * df) / safe_total,
        ]
    )


@partial(jax.jit, static_argnames=("n_bins", "binning", "closed"))
def _decomposition_kernel(probs, labels, weights, n_bins, binning, closed):
    p, o = _one_hot_targets(probs, labels)
    terms = jax.vmap(
        lambda f, t: _binary_decomposition(f, t, weights, n_bins, binning, closed),
        in_axes=(1, 1),
    )(p, o)
    return BrierDecomposition(*terms.sum(axis=0))


def brier_decomposition(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    binning: str = "uniform",
    closed: str = "right",
    weights: Any = None,
) -> BrierDecomposition:
    """Murphy's (1973) decomposition of the Brier score, made exact by Stephenson's terms.

    With forecasts binned as in :func:`ece` (f_b, o_b the mean forecast and outcome of bin
    b, o the base rate):

    .. math::
       \\mathrm{BS} = \\underbrace{\\textstyle\\sum_b \\frac{n_b}{N}(f_b - o_b)^2}_{REL}
       - \\underbrace{\\textstyle\\sum_b \\frac{n_b}{N}(o_b - o)^2}_{RES}
       + \\underbrace{o(1 - o)}_{UNC} + \\mathrm{WBV} - \\mathrm{WBC}

    and the identity holds to round-off for any binning. Multiclass ``(N, K)``: every term
    is summed over the K one-vs-rest problems (column k against ``labels == k``), matching
    :func:`brier_score`'s sum over classes. Weighted means with ``weights``.

    Example:
      >>> import jax.numpy as jnp
      >>> d = brier_decomposition(jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1]), n_bins=2)
      >>> bool(jnp.isclose(d.brier, d.reliability - d.resolution + d.uncertainty
      ...                  + d.within_bin_variance - d.within_bin_covariance))
      True

    References:
      Murphy (1973), "A new vector partition of the probability score"; Stephenson, Coelho
      & Jolliffe (2008), "Two extra components in the Brier score decomposition".
    """
    n_bins = check_binning(n_bins, binning, closed)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _decomposition_kernel(probs, labels, weights, n_bins, binning, closed)
