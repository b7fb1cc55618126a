"""The score decomposition S = MCB - DSC + UNC of the Brier and the log score.

For a binary problem with forecasts x_i, outcomes y_i and weights w_i, a recalibration
ĉ_i (the CORP curve's value at x_i, or the mean outcome of x_i's bin), and the base
rate ō (Dimitriadis, Gneiting & Jordan 2021, eq. 2; Murphy 1973 for the binned Brier):

* S = mean S(x_i, y_i), the score of the forecasts;
* MCB = S - mean S(ĉ_i, y_i), what recalibration would save (miscalibration);
* DSC = mean S(ō, y_i) - mean S(ĉ_i, y_i), what the recalibrated forecasts gain over the
  climatological one (discrimination, or resolution);
* UNC = mean S(ō, y_i), the score of the base rate (uncertainty).

Everything after S is computed from groups j (CORP blocks or bins) of weight W_j whose
recalibrated value c_j is the group's mean outcome: mean S(ĉ_i, y_i) = Σ_j (W_j/W) e(c_j)
and DSC = Σ_j (W_j/W) d(c_j, ō), with e the expected score of a calibrated forecast
(the generalised entropy) and d its Bregman divergence:

* Brier: e(c) = c(1 - c), d(c, o) = (c - o)^2;
* log: e(c) = -c log c - (1 - c) log(1 - c), d(c, o) = c log(c/o) + (1 - c) log((1 -
  c)/(1 - o)), with 0 log 0 = 0, so both are finite when a calibrated value is 0 or 1
  (a block whose outcomes all agree), and DSC >= 0 term by term.

The log score of the forecasts themselves clips the probability of the outcome to
[eps, 1 - eps] as :func:`jaxcal.log_loss` does (a forecast of 0 for an event that occurs
costs -log eps, not infinity), so ``score`` equals :func:`jaxcal.log_loss` (binary). The
clipped forecast is still a non-decreasing function of the forecast, so CORP's MCB stays
>= 0. MCB is computed as S minus the recalibrated score, so the identity
S = MCB - DSC + UNC holds to round-off (a few ulps of UNC).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.binning import check_binning
from jaxcal._core.checks import check_option, check_probs_labels
from jaxcal._core.numerics import compute_dtype, safe_divide, safe_log, scale_free, weighted_mean
from jaxcal._core.validity import mask_padding
from jaxcal.metrics._corp import (
    REDUCTIONS,
    binary_problems,
    calibrated_blocks,
    knot_sums,
    knots_of,
    packed_knots,
)
from jaxcal.metrics._ece import binned_stats

SCORES = ("brier", "log")
METHODS = ("corp", "binned")


class ScoreDecomposition(NamedTuple):
    """Result of :func:`~jaxcal.metrics.score_decomposition`: S = MCB - DSC + UNC (0-d arrays).

    Attributes:
      score: S, the mean score of the forecasts (lower is better).
      miscalibration: MCB, S minus the score of the recalibrated forecasts (>= 0 for
        CORP; lower is better).
      discrimination: DSC, UNC minus the score of the recalibrated forecasts (>= 0;
        higher is better).
      uncertainty: UNC, the score of the base rate (the climatological forecast).
    """

    score: jax.Array
    miscalibration: jax.Array
    discrimination: jax.Array
    uncertainty: jax.Array


def score_per_sample(score: str, scores: jax.Array, targets: jax.Array) -> jax.Array:
    """S(x, y) of each forecast: ``(x - y)^2``, or ``-log`` of the outcome's probability
    clipped to [eps, 1 - eps] (:func:`jaxcal.log_loss`'s convention)."""
    if score == "brier":
        distance = jnp.where(targets, 1 - scores, scores)
        return distance * distance
    eps = jnp.finfo(scores.dtype).eps
    return -jnp.log(jnp.clip(jnp.where(targets, scores, 1 - scores), eps, 1 - eps))


def entropy(score: str, c: jax.Array) -> jax.Array:
    """e(c): the expected score of the calibrated forecast c (0 log 0 = 0)."""
    if score == "brier":
        return c * (1 - c)
    return -(c * safe_log(c) + (1 - c) * safe_log(1 - c))


def divergence(score: str, c: jax.Array, o: jax.Array) -> jax.Array:
    """d(c, o) = e(o) - e(c) - e'(o)(o - c) >= 0, the score's Bregman divergence."""
    if score == "brier":
        return (c - o) ** 2
    return c * (safe_log(c) - safe_log(o)) + (1 - c) * (safe_log(1 - c) - safe_log(1 - o))


def group_terms(score: str, weight: jax.Array, calibrated: jax.Array, positives_total, total):
    """(recalibrated score, DSC, UNC) from groups of weight ``weight`` ``(..., J)`` whose
    recalibrated value ``calibrated`` is their mean outcome."""
    share = safe_divide(weight, total[..., None])
    base = safe_divide(positives_total, total)
    recalibrated = jnp.sum(share * entropy(score, calibrated), axis=-1)
    dsc = jnp.sum(share * divergence(score, calibrated, base[..., None]), axis=-1)
    return recalibrated, dsc, entropy(score, base)


def corp_terms(score: str, scores, targets, weights):
    """(recalibrated score, DSC, UNC) of one binary problem by CORP."""
    if weights is None:
        knots = packed_knots(scores, targets)
    else:
        knots = knot_sums(knots_of(scores, weights), targets, weights)
    weight, c = calibrated_blocks(knots)
    return group_terms(score, weight, c, jnp.sum(knots.positives), jnp.sum(knots.weight))


def assemble(score_value, recalibrated, dsc, unc) -> ScoreDecomposition:
    """The decomposition from S and the (summed) group terms: MCB = S - recalibrated."""
    return ScoreDecomposition(score_value, score_value - recalibrated, dsc, unc)


def binned_terms(score, scores, targets, weights, n_bins, binning, closed):
    """(recalibrated score, DSC, UNC) per problem ``(G,)`` by binning each problem."""

    def one(s, t):
        _, stats = binned_stats(s, t, weights, n_bins, binning, closed)
        c = safe_divide(stats.sum_target[0], stats.weight[0])
        total = jnp.sum(stats.weight[0])
        return group_terms(score, stats.weight[0], c, jnp.sum(stats.sum_target[0]), total)

    return jax.vmap(one)(scores, targets)


def decompose(score, method, probs, labels, weights, n_bins, binning, closed, reduction):
    """The decomposition of the view's binary problems, summed over them (traceable)."""
    scores, targets = binary_problems(probs, labels, reduction)
    scores = scores.astype(compute_dtype(scores.dtype))
    weights = None if weights is None else scale_free(weights.astype(scores.dtype))
    per_sample = jax.vmap(partial(score_per_sample, score))(scores, targets)
    s_value = jnp.sum(jax.vmap(lambda v: weighted_mean(v, weights))(per_sample))
    if method == "binned":
        terms = binned_terms(score, scores, targets, weights, n_bins, binning, closed)
    elif scores.shape[0] == 1:  # no vmap around the sequential PAV for one problem
        terms = jax.tree.map(lambda t: t[None], corp_terms(score, scores[0], targets[0], weights))
    else:
        terms = jax.vmap(partial(corp_terms, score), in_axes=(0, 0, None))(scores, targets, weights)
    return assemble(s_value, *(jnp.sum(t) for t in terms))


@partial(jax.jit, static_argnames=("score", "method", "n_bins", "binning", "closed", "reduction"))
def _decomposition_kernel(
    probs, labels, weights, score, method, n_bins, binning, closed, reduction
):
    probs, labels, _ = mask_padding(probs, labels, weights)  # rows of weight 0: anything
    return decompose(score, method, probs, labels, weights, n_bins, binning, closed, reduction)


def check_decomposition_options(
    score, method, n_bins, binning, closed, reduction, rows=None
) -> int:
    """Static checks of the options of :func:`~jaxcal.metrics.score_decomposition`; returns ``n_bins``."""
    check_option("score", score, SCORES)
    check_option("method", method, METHODS)
    check_option("reduction", reduction, REDUCTIONS)
    return check_binning(n_bins, binning, closed, rows)


def score_decomposition(
    probs: Any,
    labels: Any,
    *,
    score: str = "brier",
    method: str = "corp",
    n_bins: int = 15,
    binning: str = "uniform",
    closed: str = "right",
    reduction: str = "classwise",
    weights: Any = None,
) -> ScoreDecomposition:
    """Decompose the Brier or log score into miscalibration, discrimination, uncertainty.

    .. math::
       \\bar S = \\underbrace{\\bar S - \\bar S_C}_{MCB}
       - \\underbrace{(\\bar S_R - \\bar S_C)}_{DSC}
       + \\underbrace{\\bar S_R}_{UNC}

    with S̄ the mean score of the forecasts, S̄_C that of the recalibrated forecasts and
    S̄_R that of the base rate (the climatological forecast). ``method="corp"``
    (Dimitriadis, Gneiting & Jordan 2021) recalibrates by the CORP curve
    (:func:`~jaxcal.metrics.corp_curve`, isotonic regression with exact ties pooled): the optimal
    non-decreasing recalibration for every proper score at once, so MCB >= 0 and
    DSC >= 0. ``method="binned"`` recalibrates each forecast to the mean outcome of its
    bin (binned as :func:`jaxcal.ece`): for the Brier score DSC is Murphy's (1973)
    resolution and MCB = REL + WBV - WBC of :func:`jaxcal.brier_decomposition`; MCB can
    then be negative (a bin's mean outcome is not the best recalibration of forecasts
    that vary within the bin). The exact terms and their conventions (0 log 0 = 0, the
    forecasts' log score clipped as :func:`jaxcal.log_loss`) are in
    ``jaxcal/metrics/_corp_decomposition.py``.

    Views: 1-D ``probs``: the positive class. 2-D ``(N, K)``: ``reduction="classwise"``
    (default) every column one-vs-rest, each term summed over the K classes, so that
    the Brier ``score`` equals :func:`jaxcal.brier_score` (Brier's score summed over
    classes, as :func:`jaxcal.brier_decomposition`); the log ``score`` is then the sum of
    the K binary log losses, not the multiclass :func:`jaxcal.log_loss`.
    ``reduction="top_label"``: the top-label confidence against correctness.

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` integer labels.
      score: ``"brier"`` or ``"log"`` (nats).
      method: ``"corp"`` or ``"binned"``.
      n_bins, binning, closed: the bins of ``method="binned"``, as :func:`jaxcal.ece`.
      reduction: ``"classwise"`` or ``"top_label"`` (2-D ``probs`` only).
      weights: optional ``(N,)`` non-negative sample weights (weighted means).

    Returns:
      :class:`~jaxcal.metrics.ScoreDecomposition` ``(score, miscalibration, discrimination,
      uncertainty)`` of 0-d arrays. Zero total weight gives zeros.

    Validation runs on concrete inputs only; works under ``jit``, ``vmap`` and ``grad``
    (only S and MCB depend smoothly on the forecasts; DSC and UNC depend on their order).

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.array([0.1, 0.3, 0.3, 0.6, 0.8, 0.9])
      >>> y = jnp.array([0, 1, 0, 0, 1, 1])
      >>> d = score_decomposition(p, y)
      >>> [round(float(v), 4) for v in d]
      [0.1667, 0.0556, 0.1389, 0.25]
      >>> bool(jnp.isclose(d.score, d.miscalibration - d.discrimination + d.uncertainty))
      True

    References:
      Dimitriadis, Gneiting & Jordan (2021), "Stable reliability diagrams for
      probabilistic classifiers", PNAS 118(8) e2016191118; Murphy (1973), "A new vector
      partition of the probability score", J. Appl. Meteor. 12; Bröcker (2009),
      "Reliability, sufficiency, and the decomposition of proper scores".
    """
    n_bins = check_decomposition_options(score, method, n_bins, binning, closed, reduction, probs)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _decomposition_kernel(
        probs, labels, weights, score, method, n_bins, binning, closed, reduction
    )
