"""The reliability diagram's data: per-bin counts, mean confidence and accuracy.

Binned exactly as :func:`jaxcal.ece` bins (``binned_stats()``); with
``groups=``, one curve per segment from the same per-segment sums as the grouped ECE
(``jaxcal/metrics/_segment_bins.py``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import chex
import jax
import jax.numpy as jnp

from jaxcal._core.binning import BinStats, check_binning
from jaxcal._core.checks import check_probs_labels
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.numerics import compute_dtype, normalize_weights, safe_divide
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._ece import binned_stats
from jaxcal.metrics._segment_bins import check_binned_groups, segment_bin_stats


@chex.dataclass(frozen=True)
class ReliabilityCurve:
    """Per-bin data of a reliability diagram (all arrays of shape ``(M,)`` but ``edges``).

    With ``groups=`` (:func:`~jaxcal.metrics.reliability_curve`) every per-bin field has a leading segment
    axis, ``(G, M)``; ``edges`` stay ``(M + 1,)``, shared by the segments, with uniform
    bins, and are ``(G, M + 1)``, each segment's own, with quantile bins.

    Attributes:
      edges: ``(M + 1,)`` bin edges.
      counts: int32 number of samples (with positive weight) per bin.
      weights: total sample weight per bin (equal to ``counts`` without weights).
      mean_confidence: mean score in each bin; 0 for empty bins (mask with ``counts > 0``).
      mean_accuracy: mean target (accuracy, or positive rate) in each bin; 0 for empty bins.
    """

    edges: jax.Array
    counts: jax.Array
    weights: jax.Array
    mean_confidence: jax.Array
    mean_accuracy: jax.Array


@partial(jax.jit, static_argnames=("n_bins", "binning", "closed", "n_groups"))
def _reliability_kernel(probs, labels, weights, n_bins, binning, closed, groups, n_groups):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights)
    scores, targets, _ = scores_and_targets(probs, labels, rows=rows)
    scaled, scale = weights, 0
    if weights is not None:  # sum scaled weights; report them in the caller's scale
        scaled, scale = normalize_weights(weights.astype(compute_dtype(weights.dtype)))
    if groups is None:
        edges, stats = binned_stats(scores, targets, scaled, n_bins, binning, closed)
        stats = BinStats(*(f[0] for f in stats))
    else:
        args = (n_bins, binning, closed, groups, n_groups)
        edges, stats = segment_bin_stats(scores, targets, scaled, *args)
    weight = jnp.ldexp(stats.weight, scale)
    curve = ReliabilityCurve(
        edges=edges,
        counts=stats.count,
        weights=weight,
        mean_confidence=safe_divide(stats.sum_score, stats.weight),
        mean_accuracy=safe_divide(stats.sum_target, stats.weight),
    )
    return curve, summary


def reliability_curve(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    binning: str = "uniform",
    closed: str = "right",
    weights: Any = None,
    renormalize: bool = False,
    groups: Any = None,
    n_groups: int | None = None,
) -> ReliabilityCurve:
    """The reliability diagram's data: per-bin counts, mean confidence and accuracy.

    Binary (1-D ``probs``: positive-class probability vs. positive rate) or confidence
    (2-D: top-label confidence vs. accuracy), binned exactly as :func:`~jaxcal.metrics.ece` bins, so
    ``sum(counts / N * |mean_accuracy - mean_confidence|) == ece(...)``.

    ``renormalize=True`` divides each row of ``(N, K)`` probabilities by its sum
    first, for probabilities rounded on export (default False).

    ``groups`` (integer ids ``(N,)`` in ``[0, n_groups)`` with a static ``n_groups``, or a
    boolean membership matrix ``(N, G)``): one curve per segment, from its rows alone, in
    one call; ``counts``, ``weights``, ``mean_confidence`` and ``mean_accuracy`` are then
    ``(G, M)``. Uniform bins share the ``(M + 1,)`` edges; quantile bins give each segment
    the edges of its own rows (weighted quantiles with ``weights``), ``edges`` ``(G, M +
    1)``, row g equal to ``reliability_curve(probs[m], labels[m], weights=w[m],
    binning="quantile").edges`` for m the segment's rows. An empty segment has counts 0
    and means 0 (quantile edges ``(0, 0, ..., 0, 1)``).

    Example:
      >>> import jax.numpy as jnp
      >>> c = reliability_curve(jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1]), n_bins=2)
      >>> c.counts.tolist(), c.mean_accuracy.tolist()
      ([2, 2], [0.5, 1.0])
      >>> g = reliability_curve(jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1]),
      ...                       n_bins=2, groups=jnp.array([0, 1, 0, 1]), n_groups=2)
      >>> g.counts.tolist(), g.mean_accuracy.tolist()
      ([[1, 1], [1, 1]], [[0.0, 1.0], [1.0, 1.0]])
      >>> q = reliability_curve(jnp.array([0.1, 0.4, 0.8, 0.9, 0.3, 0.6]),
      ...                       jnp.array([0, 1, 1, 1, 0, 1]), n_bins=2, binning="quantile",
      ...                       groups=jnp.array([0, 1, 0, 1, 0, 1]), n_groups=2)
      >>> [[round(e, 2) for e in row] for row in q.edges.tolist()], q.counts.tolist()
      ([[0.0, 0.3, 1.0], [0.0, 0.6, 1.0]], [[2, 1], [2, 1]])

    References:
      DeGroot & Fienberg (1983); Niculescu-Mizil & Caruana (2005); scikit-learn's
      ``calibration_curve`` (which drops empty bins and uses ``closed="left"``).
    """
    n_bins = check_binning(n_bins, binning, closed, probs)
    probs, labels, weights = check_probs_labels(
        probs, labels, weights, values=False, renormalize=renormalize
    )
    groups, n_groups = check_binned_groups(groups, probs.shape[0], n_groups)
    static = (n_bins, binning, closed, groups, n_groups)
    return run_validated(_reliability_kernel, probs, labels, weights, *static)
