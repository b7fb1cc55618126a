"""Proper scoring rules: Brier score, log loss, and the exact Brier decomposition."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.binning import BinMoments, BinStats, check_binning
from jaxcal._core.checks import check_probs_labels
from jaxcal._core.docstrings import shared_doc
from jaxcal._core.numerics import safe_divide, scale_free, upcast, weighted_mean
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._ece import binned_stats, classwise_stats
from jaxcal.metrics._segment_bins import check_binned_groups, segment_means


def brier_per_sample(probs: jax.Array, labels: jax.Array) -> jax.Array:
    """Squared distance of each prediction from its one-hot outcome ``(N,)``, upcast.

    Binary ``(N,)``: ``(p - y)^2``. Multiclass: ``sum_k (p_k - 1[y = k])^2``.
    """
    p = upcast(probs)
    if p.ndim == 1:
        # (p - y)^2 as the distance to the observed side: XLA:CPU fuses this form with a
        # gather of resampled rows (bootstrap: 2.5 ms for 200 x 1e4, against 10 ms for
        # (p - y) ** 2, which its reduction fusion pulls apart).
        distance = jnp.where(labels == 1, 1 - p, p)
        return distance * distance
    # Squares of the differences, not sum p^2 - 2 p_y + 1: that cancels to an absolute
    # error of eps where a confident correct row's score is ~1e-6.
    onehot = labels[:, None] == jnp.arange(p.shape[1], dtype=labels.dtype)[None, :]
    return jnp.sum((p - onehot.astype(p.dtype)) ** 2, axis=1)


def log_loss_per_sample(probs: jax.Array, labels: jax.Array) -> jax.Array:
    """``-log p_y`` of each sample ``(N,)``, the true class's probability clipped to
    ``[eps, 1 - eps]`` (eps of the compute dtype, scikit-learn's ``eps="auto"``)."""
    p = upcast(probs)
    eps = jnp.finfo(p.dtype).eps
    if p.ndim == 1:
        p_true = jnp.where(labels == 1, p, 1 - p)
    else:
        p_true = jnp.take_along_axis(p, labels[:, None].astype(jnp.int32), axis=1)[:, 0]
    return -jnp.log(jnp.clip(p_true, eps, 1 - eps))


def _mean_score(per_sample, weights, groups, n_groups):
    """The weighted mean of the per-sample scores, or its ``(G,)`` per-segment means."""
    if groups is None:
        return weighted_mean(per_sample, weights)
    return segment_means(per_sample, scale_free(weights), groups, n_groups)


@partial(jax.jit, static_argnames=("n_groups",))
def _brier_kernel(probs, labels, weights, groups, n_groups):
    probs, labels, _, summary = kernel_inputs(probs, labels, weights, rows=False)
    return _mean_score(brier_per_sample(probs, labels), weights, groups, n_groups), summary


@shared_doc
def brier_score(
    probs: Any,
    labels: Any,
    *,
    weights: Any = None,
    renormalize: bool = False,
    groups: Any = None,
    n_groups: int | None = None,
) -> jax.Array:
    """Brier score: mean squared distance between predictions and one-hot outcomes.

    Binary ``(N,)``: ``mean((p - y)^2)`` (scikit-learn's ``brier_score_loss``), in [0, 1].
    Multiclass ``(N, K)``: ``mean(sum_k (p_k - 1[y = k])^2)``, Brier's original score
    summed over classes (the ECML-PKDD tutorial's convention), in [0, 2].

    Args:
      probs: ``(N,)`` or ``(N, K)``.
      labels: ``(N,)`` ints.
      weights: optional ``(N,)`` sample weights (weighted mean; 0 total weight gives 0).
      {{renormalize}}
      groups: optional segments, one score per segment in one call: integer ids ``(N,)``
        in ``[0, n_groups)`` (disjoint), or a boolean membership matrix ``(N, G)``
        (overlapping). Segment g's score is the weighted mean over its rows alone.
      n_groups: the number of segments G, static; required with integer ``groups``.

    Returns:
      0-d array, or ``(G,)`` with ``groups`` (an empty segment gives 0: kept on purpose,
      the rule of every metric for zero total weight, finite and differentiable under
      ``jit``; it is no perfect score, so read a segment's size beside it, e.g. the
      ``counts`` of :func:`jaxcal.reliability_curve` with the same ``groups``).

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(brier_score(jnp.array([0.1, 0.9]), jnp.array([0, 0]))), 4)
      0.41
      >>> b = brier_score(jnp.array([0.1, 0.9]), jnp.array([0, 0]), groups=jnp.array([1, 0]),
      ...                 n_groups=3)
      >>> [round(v, 4) for v in b.tolist()]
      [0.81, 0.01, 0.0]

    References:
      Brier (1950), "Verification of forecasts expressed in terms of probability".
    """
    probs, labels, weights = check_probs_labels(
        probs, labels, weights, values=False, renormalize=renormalize
    )
    groups, n_groups = check_binned_groups(groups, probs.shape[0], n_groups)
    return run_validated(_brier_kernel, probs, labels, weights, groups, n_groups)


@partial(jax.jit, static_argnames=("n_groups",))
def _log_loss_kernel(probs, labels, weights, groups, n_groups):
    probs, labels, _, summary = kernel_inputs(probs, labels, weights, rows=False)
    return _mean_score(log_loss_per_sample(probs, labels), weights, groups, n_groups), summary


def log_loss(
    probs: Any,
    labels: Any,
    *,
    weights: Any = None,
    renormalize: bool = False,
    groups: Any = None,
    n_groups: int | None = None,
) -> jax.Array:
    """Log loss (cross-entropy, negative log-likelihood) of the true class, in nats.

    ``-mean(log p_{y})``; binary ``(N,)`` uses ``p`` for y = 1 and ``1 - p`` for y = 0.
    The probability of the true class is clipped to ``[eps, 1 - eps]`` with ``eps`` the
    machine epsilon of the compute dtype (scikit-learn's ``eps="auto"``), so a sample
    whose true class has probability 0 costs ``-log(eps)`` = 15.94 in float32 (36.04 in
    float64) instead of inf. Multiclass rows are not renormalised after clipping.

    ``renormalize=True`` divides each row of ``(N, K)`` probabilities by its sum
    first, for probabilities rounded on export (default False).

    ``groups`` (integer ids ``(N,)`` in ``[0, n_groups)`` with a static ``n_groups``, or a
    boolean membership matrix ``(N, G)``): the ``(G,)`` log losses of the segments, each
    the weighted mean over its rows alone, in one call; an empty segment gives 0 (zero
    total weight, the rule of every metric: no perfect score; read the segment's size
    beside it, as for :func:`jaxcal.brier_score`).

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(log_loss(jnp.array([[0.5, 0.5], [0.9, 0.1]]), jnp.array([0, 0]))), 4)
      0.3993
      >>> both = jnp.array([[True, True], [True, False]])  # overlapping segments
      >>> l = log_loss(jnp.array([[0.5, 0.5], [0.9, 0.1]]), jnp.array([0, 0]), groups=both)
      >>> [round(v, 4) for v in l.tolist()]
      [0.3993, 0.6931]

    References:
      Good (1952), "Rational decisions"; scikit-learn's ``log_loss``.
    """
    probs, labels, weights = check_probs_labels(
        probs, labels, weights, values=False, renormalize=renormalize
    )
    groups, n_groups = check_binned_groups(groups, probs.shape[0], n_groups)
    return run_validated(_log_loss_kernel, probs, labels, weights, groups, n_groups)


class BrierDecomposition(NamedTuple):
    """Exact decomposition brier = reliability - resolution + uncertainty + wbv - wbc.

    Attributes (0-d arrays):
      brier: the Brier score (as :func:`~jaxcal.metrics.brier_score`).
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


def decomposition_terms(
    stats: BinStats, moments: BinMoments, total: jax.Array
) -> tuple[jax.Array, ...]:
    """REL, RES, UNC, WBV, WBC per group from per-(group, bin) sums ``(G, M)``.

    The one formula of the decomposition, shared by :func:`~jaxcal.metrics.brier_decomposition` and the
    streaming state. ``moments`` are those of the deviations d = f - c_b of the forecasts
    from their bin's anchor (``bin_anchors()``): the within-bin
    variance is ``sum d^2 - (sum d)^2 / W_b`` and the covariance
    ``sum d o - (sum d)(sum o) / W_b``, both free of the catastrophic cancellation of the
    unshifted moments (``|d| <= 1 / M``), so float32 keeps their
    relative precision (absolute error of order eps / M^2).

    Args:
      stats: per-bin count, weight, sum of forecasts and of outcomes, ``(G, M)``.
      moments: per-bin sums of d, d^2 and d o, ``(G, M)``.
      total: 0-d total weight W.

    Returns:
      five ``(G,)`` arrays: reliability, resolution, uncertainty, within-bin variance and
      within-bin covariance, each a weighted mean over the samples (divided by W).
    """
    f_bin = safe_divide(stats.sum_score, stats.weight)
    o_bin = safe_divide(stats.sum_target, stats.weight)
    o_bar = safe_divide(stats.sum_target.sum(axis=-1), total)
    share = safe_divide(stats.weight, total)
    rel = jnp.sum(share * (f_bin - o_bin) ** 2, axis=-1)
    res = jnp.sum(share * (o_bin - o_bar[..., None]) ** 2, axis=-1)
    unc = o_bar * (1 - o_bar)
    s_d, s_dd, s_do = moments
    wbv = jnp.maximum(s_dd - safe_divide(s_d * s_d, stats.weight), 0)
    wbc = s_do - safe_divide(s_d * stats.sum_target, stats.weight)
    return (
        rel,
        res,
        unc,
        safe_divide(wbv.sum(axis=-1), total),
        2 * safe_divide(wbc.sum(axis=-1), total),
    )


@partial(jax.jit, static_argnames=("n_bins", "binning", "closed"))
def _decomposition_kernel(probs, labels, weights, n_bins, binning, closed):
    probs, labels, _, summary = kernel_inputs(probs, labels, weights, rows=False)
    weights = scale_free(weights)  # any scale of the weights, one answer
    brier = weighted_mean(brier_per_sample(probs, labels), weights)
    if probs.ndim == 1:  # the positive class only
        _, (stats, moments) = binned_stats(
            probs, labels == 1, weights, n_bins, binning, closed, moments=True
        )
    else:  # every class one-vs-rest, summed
        stats, moments = classwise_stats(probs, labels, weights, n_bins, binning, closed, True)
    total = jnp.sum(stats.weight[0])
    terms = decomposition_terms(stats, moments, total)
    return BrierDecomposition(brier, *(t.sum() for t in terms)), summary


def brier_decomposition(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    binning: str = "uniform",
    closed: str = "right",
    weights: Any = None,
    renormalize: bool = False,
) -> BrierDecomposition:
    """Murphy's (1973) decomposition of the Brier score, made exact by Stephenson's terms.

    With forecasts binned as in :func:`~jaxcal.metrics.ece` (f_b, o_b the mean forecast and outcome of bin
    b, o the base rate):

    .. math::
       \\mathrm{BS} = \\underbrace{\\textstyle\\sum_b \\frac{n_b}{N}(f_b - o_b)^2}_{REL}
       - \\underbrace{\\textstyle\\sum_b \\frac{n_b}{N}(o_b - o)^2}_{RES}
       + \\underbrace{o(1 - o)}_{UNC} + \\mathrm{WBV} - \\mathrm{WBC}

    and the identity holds to round-off for any binning. Multiclass ``(N, K)``: every term
    is summed over the K one-vs-rest problems (column k against ``labels == k``), matching
    :func:`~jaxcal.metrics.brier_score`'s sum over classes. Weighted means with ``weights``.

    ``renormalize=True`` divides each row of ``(N, K)`` probabilities by its sum
    first, for probabilities rounded on export (default False).

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
    n_bins = check_binning(n_bins, binning, closed, probs)
    probs, labels, weights = check_probs_labels(
        probs, labels, weights, values=False, renormalize=renormalize
    )
    return run_validated(_decomposition_kernel, probs, labels, weights, n_bins, binning, closed)
