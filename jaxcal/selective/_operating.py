"""Operating points of selective prediction, and the AUROC of correctness.

``risk_at_coverage`` and ``coverage_at_risk`` read the risk-coverage curve at given
levels (torch-uncertainty's ``RiskAtxCov`` and ``CovAtxRisk``); ``correctness_auroc``
is the AUROC of the confidence as a detector of correct predictions (ties half). All
take the one sort of ``jaxcal/selective/_curve.py`` and O(N) (O(N L) for L levels).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.numerics import safe_divide
from jaxcal.selective._curve import curve_of, per_segment, prepare, tie_averaged_sums
from jaxcal.selective._inputs import check_inputs, check_level

#: Coverage levels are compared with W_i / W allowing this many ulps of round-off, so
#: that a level k/N reached exactly is found in float32 (0.3 * 10 may round above 3).
_LEVEL_ULPS = 8


@partial(jax.jit, static_argnames=("kind", "levels"))
def _risk_at_kernel(confidence, labels, weights, masks, kind, levels):
    s = prepare(confidence, labels, weights, kind)
    many = isinstance(levels, tuple)
    c = jnp.asarray(levels if many else (levels,), s.weight.dtype)

    def one(w):
        sums = tie_averaged_sums(w, s.risk, s.starts)
        _, risk, _ = curve_of(sums)
        eps = jnp.finfo(risk.dtype).eps
        target = c * sums.total * (1 - _LEVEL_ULPS * eps)
        idx = jnp.searchsorted(sums.accepted, target, side="left")
        out = risk[jnp.clip(idx, 0, risk.shape[0] - 1)]
        return out if many else out[0]

    return per_segment(one, s, masks)


def risk_at_coverage(
    probs: Any = None,
    labels: Any = None,
    *,
    confidence: Any = None,
    correct: Any = None,
    coverage: float | tuple[float, ...] = 0.8,
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> jax.Array:
    """Selective risk when the most confident share ``coverage`` of the samples is accepted.

    The risk of the first point of the risk-coverage curve whose coverage reaches the
    level (within 8 ulps of round-off): with N unit-weight samples, the error rate of the
    ceil(N c) most confident, torch-uncertainty's ``RiskAtxCov`` (``error_rates[ceil(N
    * c) - 1]``). Ties: the curve's average over the orders of tied samples.

    Args:
      probs: ``(N, K)`` class probabilities or ``(N,)`` positive-class probabilities
        (see :func:`~jaxcal.selective.aurc`).
      labels: ``(N,)`` class labels (0/1 with ``(N,)`` probs).
      confidence: keyword only, instead of ``probs`` and ``labels``: ``(N,)``
        confidence scores of any scale, with ``correct``.
      correct: keyword only: ``(N,)`` 0/1 correctness or a float quality in [0, 1].
      coverage: a level in (0, 1], or a sequence of levels (static).
      weights: optional ``(N,)`` sample weights.
      groups: optional integer ids ``(N,)`` (with ``n_groups``) or bool ``(N, G)``.
      n_groups: G, static; required with integer ``groups``.

    Returns:
      0-d array; ``(L,)`` for L levels; a leading ``(G,)`` axis with groups. Zero total
      weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> conf = jnp.array([0.9, 0.8, 0.7, 0.6, 0.5])
      >>> correct = jnp.array([1, 1, 0, 1, 0])
      >>> r = risk_at_coverage(confidence=conf, correct=correct, coverage=(0.4, 0.6, 1.0))
      >>> [round(v, 4) for v in r.tolist()]
      [0.0, 0.3333, 0.4]

    References:
      Geifman & El-Yaniv (2017), "Selective classification for deep neural networks";
      torch-uncertainty ``src/torch_uncertainty/metrics/classification/risk_coverage.py``.
    """
    levels = check_level("coverage", coverage)
    c = check_inputs(
        probs, labels, weights, groups, n_groups, confidence=confidence, correct=correct
    )
    return _risk_at_kernel(c.confidence, c.labels, c.weights, c.masks, c.kind, levels)


@partial(jax.jit, static_argnames=("kind", "levels"))
def _coverage_at_kernel(confidence, labels, weights, masks, kind, levels):
    s = prepare(confidence, labels, weights, kind)
    many = isinstance(levels, tuple)
    t = jnp.asarray(levels if many else (levels,), s.weight.dtype)

    def one(w):
        sums = tie_averaged_sums(w, s.risk, s.starts)
        coverage, risk, _ = curve_of(sums)
        ok = (sums.accepted > 0)[None, :] & (risk[None, :] <= t[:, None])
        out = jnp.max(jnp.where(ok, coverage[None, :], 0), axis=1)
        return out if many else out[0]

    return per_segment(one, s, masks)


def coverage_at_risk(
    probs: Any = None,
    labels: Any = None,
    *,
    confidence: Any = None,
    correct: Any = None,
    risk: float | tuple[float, ...] = 0.05,
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> jax.Array:
    """The largest coverage whose selective risk is at most ``risk``.

    The maximum coverage over the points of the risk-coverage curve with selective risk
    <= the level (the curve need not be monotone: the largest such point), as
    torch-uncertainty's ``CovAtxRisk`` means it. When no point qualifies, the answer is
    0 (abstain on everything), where torch-uncertainty returns NaN. (Its code also
    reads the admissibility flag at the unflipped index, so it returns NaN for some
    inputs that do have an admissible coverage, e.g. a wrong most-confident sample
    followed by a right one at risk 0.6: here 1.0.)

    Args:
      probs: ``(N, K)`` class probabilities or ``(N,)`` positive-class probabilities
        (see :func:`~jaxcal.selective.aurc`).
      labels: ``(N,)`` class labels (0/1 with ``(N,)`` probs).
      confidence: keyword only, instead of ``probs`` and ``labels``: ``(N,)``
        confidence scores of any scale, with ``correct``.
      correct: keyword only: ``(N,)`` 0/1 correctness or a float quality in [0, 1].
      risk: a level in [0, 1], or a sequence of levels (static).
      weights: optional ``(N,)`` sample weights.
      groups: optional integer ids ``(N,)`` (with ``n_groups``) or bool ``(N, G)``.
      n_groups: G, static; required with integer ``groups``.

    Returns:
      0-d array in [0, 1]; ``(L,)`` for L levels; a leading ``(G,)`` axis with groups.

    Example:
      >>> import jax.numpy as jnp
      >>> probs = jnp.array([[0.9, 0.1], [0.6, 0.4], [0.8, 0.2], [0.5, 0.5], [0.7, 0.3]])
      >>> y = jnp.array([0, 1, 0, 1, 0])
      >>> round(float(coverage_at_risk(probs, y, risk=0.3)), 4)  # torch-uncertainty's example
      0.8

    References:
      Geifman & El-Yaniv (2017), "Selective classification for deep neural networks";
      torch-uncertainty ``src/torch_uncertainty/metrics/classification/risk_coverage.py``.
    """
    levels = check_level("risk", risk, low_open=False)
    c = check_inputs(
        probs, labels, weights, groups, n_groups, confidence=confidence, correct=correct
    )
    return _coverage_at_kernel(c.confidence, c.labels, c.weights, c.masks, c.kind, levels)


@partial(jax.jit, static_argnames=("kind",))
def _auroc_kernel(confidence, labels, weights, masks, kind):
    s = prepare(confidence, labels, weights, kind)
    n = s.risk.shape[0]
    iota = jnp.arange(n, dtype=jnp.int32)
    ends = jnp.concatenate([s.starts[1:], jnp.ones((1,), bool)])
    first = jax.lax.cummax(jnp.where(s.starts, iota, 0))
    last = jax.lax.cummin(jnp.where(ends, iota, n - 1), reverse=True)

    def one(w):
        right, wrong = w * (1 - s.risk), w * s.risk
        cum_wrong = jnp.cumsum(wrong)
        total_wrong = cum_wrong[-1]
        before = jnp.where(first > 0, cum_wrong[jnp.maximum(first - 1, 0)], 0)
        through = cum_wrong[last]
        # wrong mass ranked strictly below, plus half the wrong mass tied with the sample
        below = (total_wrong - through) + (through - before) / 2
        den = jnp.sum(right) * total_wrong
        return jnp.where(den > 0, safe_divide(jnp.sum(right * below), den), 0.5)

    return per_segment(one, s, masks)


def correctness_auroc(
    probs: Any = None,
    labels: Any = None,
    *,
    confidence: Any = None,
    correct: Any = None,
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> jax.Array:
    """AUROC of the confidence as a detector of correct predictions (ties count half).

    The probability that a random correct sample has a higher confidence than a random
    wrong one, ``scikit-learn``'s ``roc_auc_score(correct, confidence,
    sample_weight=weights)``. A float quality q counts each sample as mass q correct
    and 1 − q wrong (pairs within a run of tied confidences, a sample with itself
    included, count half). All correct or all wrong: 0.5, where scikit-learn raises.

    Args:
      probs: ``(N, K)`` class probabilities or ``(N,)`` positive-class probabilities
        (see :func:`~jaxcal.selective.aurc`).
      labels: ``(N,)`` class labels (0/1 with ``(N,)`` probs).
      confidence: keyword only, instead of ``probs`` and ``labels``: ``(N,)``
        confidence scores of any scale, with ``correct``.
      correct: keyword only: ``(N,)`` 0/1 correctness or a float quality in [0, 1].
      weights: optional ``(N,)`` sample weights.
      groups: optional integer ids ``(N,)`` (with ``n_groups``) or bool ``(N, G)``.
      n_groups: G, static; required with integer ``groups``.

    Returns:
      0-d array in [0, 1] (``(G,)`` with groups).

    Example:
      >>> import jax.numpy as jnp
      >>> conf = jnp.array([0.9, 0.8, 0.7, 0.7])
      >>> correct = jnp.array([1, 0, 1, 0])
      >>> float(correctness_auroc(confidence=conf, correct=correct))  # (1 + 1 + 0 + 1/2) / 4
      0.625

    References:
      Hendrycks & Gimpel (2017), "A baseline for detecting misclassified and
      out-of-distribution examples in neural networks"; Hanley & McNeil (1982).
    """
    c = check_inputs(
        probs, labels, weights, groups, n_groups, confidence=confidence, correct=correct
    )
    return _auroc_kernel(c.confidence, c.labels, c.weights, c.masks, c.kind)
