"""The confidence interval of Sun, Chaudhari, Barnett & Dobriban (2024) for the squared
l2 ECE of a data set (the state's version: ``jaxcal/streaming/_l2_interval.py``)."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.binning import uniform_bin_index
from jaxcal._core.checks import check_positive_int, check_probs_labels
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.numerics import blocked_segment_sum, upcast
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._l2_interval import L2ECEInterval, check_level, interval_from_sums


def bin_u_sums(probs, labels, weights, n_bins, rows=None):
    """Per-bin ``(n_b, sum U, sum U^2)`` ``(M,)`` of ``U = Y - Z`` over uniform bins of the
    score (positive class, or top-label confidence and correctness), ``closed="left"``."""
    scores, targets, _ = scores_and_targets(probs, labels, rows=rows)
    z = upcast(scores)
    u = targets.astype(z.dtype) - z
    w = jnp.ones_like(z) if weights is None else weights.astype(z.dtype)
    ids = uniform_bin_index(scores, n_bins, "left")
    count, su, su2 = blocked_segment_sum([w, w * u, w * u * u], ids, n_bins)
    return count, su, su2


@partial(jax.jit, static_argnames=("n_bins", "confidence"))
def _interval_kernel(probs, labels, weights, n_bins, confidence):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights)
    count, su, su2 = bin_u_sums(probs, labels, weights, n_bins, rows)
    return interval_from_sums(count, su, su2, confidence), summary


def l2_ece_interval(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    confidence: float = 0.9,
    weights: Any = None,
) -> L2ECEInterval:
    """Debiased estimate and confidence interval of the squared l2 ECE (Sun et al. 2024).

    For the binned model ``Z -> E[Y | bin(Z)]`` with M uniform bins of the score Z (the
    positive-class probability for 1-D ``probs``, the top-label confidence with Y the
    correctness for 2-D), ``U = Y - Z`` and per-bin counts ``n_b``:

    .. math:: T = \\frac{1}{n} \\sum_b \\frac{(\\sum_{i \\in b} U_i)^2 -
              \\sum_{i \\in b} U_i^2}{n_b - 1}

    (bins with ``n_b <= 1`` contribute 0): unbiased for ``sum_b p_b (E[U | b])^2``, the
    squared l2 ECE of the binned scores. Its asymptotic law changes at a perfectly
    calibrated model (the variance sigma^2 of the linear term vanishes there), so the
    interval adapts (the reference's ``plot.ipynb``, "Ours"), with ``alpha = 1 -
    confidence``, ``T+ = max(T, 0)``, ``s = sqrt(sigma^2 / n)``:

    * upper ``T+ + z_{1-alpha/2} s``;
    * lower ``T+ - z_{1-alpha/2} s`` when ``T+ >= 2 z_{1-alpha/2} s``, ``T+ / 2`` when
      ``2 z_{1-alpha} s <= T+ < 2 z_{1-alpha/2} s``, else ``max(T+ - z_{1-alpha} s, 0)``,

    with ``sigma^2 = sum_b (n_b/n)(4 m_b^2 q_b - 3 m_b^4) - (sum_b (n_b/n) m_b^2)^2``
    (``m_b``, ``q_b`` the bin means of U and U^2; clipped at 0). Everything comes from
    ``(n_b, sum U, sum U^2)``, so a streamed state gives the same interval
    (:func:`~jaxcal.streaming.l2_ece_interval`).

    Bins: ``[k/M, (k+1)/M)``, the last one closed (jaxcal's ``closed="left"``). The
    reference (``sylydya/CI-ECE``, ``experiments/estimator.py``, top-1 case) bins
    ``lower <= Z < upper`` for every bin and so drops scores equal to 1; here they are in
    the last bin. Weights are frequency weights (``n_b`` is their sum); the reference has
    none. The paper's simulations use 50 bins at n = 1000.

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int labels.
      n_bins: M >= 1.
      confidence: the interval's level, in (0, 1) (the reference's ``alpha = 0.1``).
      weights: optional ``(N,)`` non-negative frequency weights; 0 masks padding.

    Returns:
      ``L2ECEInterval(estimate, lower, upper, std_error)``. The interval is for the
      squared ECE; take square roots of its ends for the ECE itself.

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.linspace(0.05, 0.95, 200)
      >>> y = (jnp.arange(200) % 10 < 7).astype(jnp.int32)  # 70 % positives everywhere
      >>> res = l2_ece_interval(p, y, n_bins=5)
      >>> bool(res.lower <= res.estimate <= res.upper), bool(res.lower > 0)
      (True, True)

    References:
      Sun, Chaudhari, Barnett & Dobriban (2024), "A Confidence Interval for the l2
      Expected Calibration Error", arXiv:2408.08998; code ``sylydya/CI-ECE``.
    """
    n_bins = check_positive_int("n_bins", n_bins)
    confidence = check_level(confidence)
    probs, labels, weights = check_probs_labels(probs, labels, weights, values=False)
    return run_validated(_interval_kernel, probs, labels, weights, n_bins, confidence)
