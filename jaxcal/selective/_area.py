"""Areas under the risk-coverage curve: AURC (two conventions), E-AURC, AUGRC, PRR.

Each is a weighted sum over the sorted samples of ``jaxcal/selective/_curve.py`` (one sort,
then O(N)); E-AURC and PRR compare with the oracle ranking of the same samples, which
0/1 risks reach by a stable partition (no second sort) and a float quality by a sort.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_option, values_checkable
from jaxcal._core.numerics import safe_divide, safe_log
from jaxcal.selective._curve import (
    Sums,
    oracle_permutation,
    per_segment,
    plain_sums,
    prepare,
    tie_averaged_sums,
)
from jaxcal.selective._inputs import check_inputs, check_level

AURC_CONVENTIONS = ("mean", "trapezoid")
AUGRC_CONVENTIONS = ("traub", "trapezoid")
OPTIMA = ("exact", "closed_form")


def mean_area(s: Sums, risk: jax.Array) -> jax.Array:
    """Area under a step curve: ``sum_i w_i risk_i / W`` (the mean of the running risks)."""
    return safe_divide(jnp.sum(s.weight * risk), s.total)


def trapezoid_area(s: Sums, y: jax.Array) -> jax.Array:
    """torch-uncertainty's normalised trapezoid: from the first accepted point to coverage 1.

    ``trapz(y, coverage) / (1 - coverage_first)``: the segments from the first point
    with positive accepted weight on, divided by the coverage they span. A curve of one
    point (one sample of positive weight) has no width: its value at full coverage.
    """
    previous = jnp.concatenate([jnp.zeros((1,), y.dtype), y[:-1]])
    started = jnp.concatenate([jnp.zeros((1,), bool), s.accepted[:-1] > 0])
    area = jnp.sum(jnp.where(started, s.weight * (y + previous) / 2, 0))
    first = jnp.min(jnp.where(s.accepted > 0, s.accepted, s.total))
    return jnp.where(s.total - first > 0, safe_divide(area, s.total - first), y[-1])


def _selective_risk(s: Sums) -> jax.Array:
    return safe_divide(s.errors, s.accepted)


def _aurc_of(s: Sums, convention: str) -> jax.Array:
    risk = _selective_risk(s)
    return mean_area(s, risk) if convention == "mean" else trapezoid_area(s, risk)


def _closed_form(s: Sums) -> jax.Array:
    """Geifman et al. (2019)'s optimal AURC r + (1 - r) ln(1 - r), r the overall risk."""
    r = safe_divide(s.total_errors, s.total)
    return r + (1 - r) * safe_log(1 - r)


@partial(jax.jit, static_argnames=("kind", "convention", "excess", "optimal"))
def _aurc_kernel(confidence, labels, weights, masks, kind, convention, excess, optimal):
    s = prepare(confidence, labels, weights, kind)
    perm = oracle_permutation(s, kind) if excess and optimal == "exact" else None

    def one(w):
        area = _aurc_of(tie_averaged_sums(w, s.risk, s.starts), convention)
        if not excess:
            return area
        if optimal == "closed_form":
            return area - _closed_form(plain_sums(w, s.risk))
        return area - _aurc_of(plain_sums(w[perm], s.risk[perm]), convention)

    return per_segment(one, s, masks)


_COMMON_ARGS = """
    Args:
      probs: ``(N, K)`` class probabilities (top-label confidence; a sample is wrong
        when its argmax, first index among ties, is not its label) or ``(N,)`` a binary
        model's probability of the positive class (the rows ``(1 - p, p)``: confidence
        max(p, 1 - p), predicted class 1 when p > 1/2), as everywhere in jaxcal.
      labels: ``(N,)`` class labels in ``[0, K)`` (0/1 with ``(N,)`` probs).
      confidence: keyword only, instead of ``probs`` and ``labels``: ``(N,)`` confidence
        scores, any real, higher = more confident (an LLM's verbalised confidence, a
        negative entropy, a log-likelihood), with ``correct``.
      correct: keyword only, with ``confidence``: ``(N,)`` correctness of each
        prediction, 0/1 (bool or int), or a float quality in [0, 1] (risk =
        1 - quality).
      weights: optional ``(N,)`` non-negative sample weights (zero total weight: 0).
      groups: optional segments, one value per segment in one call: integer ids
        ``(N,)`` in ``[0, n_groups)``, or a bool membership matrix ``(N, G)``.
      n_groups: G, static; required with integer ``groups``."""


def _doc(fn):
    fn.__doc__ = fn.__doc__.replace("    {args}", _COMMON_ARGS.strip("\n"))
    return fn


@_doc
def aurc(
    probs: Any = None,
    labels: Any = None,
    *,
    confidence: Any = None,
    correct: Any = None,
    convention: str = "mean",
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> jax.Array:
    """Area under the risk-coverage curve (AURC), lower is better.

    With samples accepted by descending confidence, e_k the selective risk (error rate)
    of the k most confident, and N samples:

    * ``convention="mean"`` (Geifman & El-Yaniv; the code of Geifman et al. 2019, CRL
      (Moon et al. 2020) and LM-Polygraph's ``rcc-auc`` on 0/1 targets): the mean of
      the running risks, (1/N) Σ_k e_k. Weighted: Σ_i w_i e_i / W, the area under the
      step curve whose steps have the widths w_i / W (free of the weights' scale; a
      weight k is not k copies of a sample, whose copies would add steps in between).
    * ``convention="trapezoid"`` (torch-uncertainty's ``AURC``): the trapezoid of e_k
      over coverage k/N from 1/N to 1, divided by the width 1 - 1/N ("as if its support
      was between 0 and 1"). One sample: its risk (torch-uncertainty returns NaN).

    The two differ by O(1/N). Tied confidences: the risk is averaged over the orders of
    the tied samples (``risk_coverage_curve``); torch-uncertainty and LM-Polygraph take
    the order their unstable sort leaves, so on ties they agree with this only on
    average. The AURC depends on the confidence through its order only: scores outside
    [0, 1] can be bootstrapped with :func:`~jaxcal.stats.bootstrap_ci` after any
    strictly increasing map into [0, 1] (ranks / N keep ties exactly).

    {args}
      convention: ``"mean"`` or ``"trapezoid"``.

    Returns:
      0-d array in [0, 1] (``(G,)`` with groups).

    Example:
      >>> import jax.numpy as jnp
      >>> probs = jnp.array([[0.7, 0.3], [0.6, 0.4], [0.8, 0.2]])
      >>> y = jnp.array([0, 1, 0])
      >>> round(float(aurc(probs, y, convention="trapezoid")), 4)  # torch-uncertainty's
      0.0833
      >>> round(float(aurc(probs, y)), 4)  # (0 + 0 + 1/3) / 3
      0.1111

    References:
      Geifman & El-Yaniv (2017), "Selective classification for deep neural networks";
      Geifman, Uziel & El-Yaniv (2019), "Bias-reduced uncertainty estimation for deep
      neural classifiers"; torch-uncertainty
      ``src/torch_uncertainty/metrics/classification/risk_coverage.py`` (``AURC``).
    """
    check_option("convention", convention, AURC_CONVENTIONS)
    c = check_inputs(
        probs, labels, weights, groups, n_groups, confidence=confidence, correct=correct
    )
    return _aurc_kernel(
        c.confidence, c.labels, c.weights, c.masks, c.kind, convention, False, "exact"
    )


@_doc
def e_aurc(
    probs: Any = None,
    labels: Any = None,
    *,
    confidence: Any = None,
    correct: Any = None,
    convention: str = "mean",
    optimal: str = "exact",
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> jax.Array:
    """Excess AURC: the AURC minus that of the best ranking of the same samples.

    E-AURC = AURC(κ) − AURC(κ*) (Geifman, Uziel & El-Yaniv 2019), where κ* ranks every
    correct sample above every wrong one (by ascending risk, for a float quality), so
    it measures the ranking alone, not the error rate.

    * ``optimal="exact"``: AURC(κ*) of these N samples in the same ``convention``
      (ties in κ* kept in confidence order; with unit weights their order does not
      matter), so E-AURC >= 0 with unit weights.
    * ``optimal="closed_form"``: Geifman et al.'s continuous approximation
      r̂ + (1 − r̂) ln(1 − r̂), r̂ the overall error rate, as the code of CRL and
      fd-shifts (``RiskCoverageStats.aurc_optimal``, binary residuals) use; it differs
      from the exact value by O(log N / N), and needs 0/1 correctness.

    {args}
      convention: ``"mean"`` or ``"trapezoid"`` (see :func:`~jaxcal.selective.aurc`).
      optimal: ``"exact"`` or ``"closed_form"``.

    Returns:
      0-d array (``(G,)`` with groups).

    Example:
      >>> import jax.numpy as jnp
      >>> conf = jnp.array([0.9, 0.8, 0.7, 0.6])
      >>> correct = jnp.array([1, 0, 1, 1])
      >>> round(float(e_aurc(confidence=conf, correct=correct)), 4)  # (0 + 1/2 + 1/3 + 1/4 - 1/4) / 4
      0.2083

    References:
      Geifman, Uziel & El-Yaniv (2019), "Bias-reduced uncertainty estimation for deep
      neural classifiers", ICLR (E-AURC, Eq. 2-3).
    """
    check_option("convention", convention, AURC_CONVENTIONS)
    check_option("optimal", optimal, OPTIMA)
    c = check_inputs(
        probs, labels, weights, groups, n_groups, confidence=confidence, correct=correct
    )
    if optimal == "closed_form" and c.kind == "quality":
        raise ValueError(
            "`optimal='closed_form'` holds for 0/1 correctness (bool or integer `correct`); "
            "got float `correct` (a quality). Use optimal='exact'."
        )
    return _aurc_kernel(
        c.confidence, c.labels, c.weights, c.masks, c.kind, convention, True, optimal
    )


@partial(jax.jit, static_argnames=("kind", "convention"))
def _augrc_kernel(confidence, labels, weights, masks, kind, convention):
    s = prepare(confidence, labels, weights, kind)

    def one(w):
        sums = tie_averaged_sums(w, s.risk, s.starts)
        general = safe_divide(sums.errors, sums.total)
        if convention == "trapezoid":
            return trapezoid_area(sums, general)
        previous = jnp.concatenate([jnp.zeros((1,), general.dtype), general[:-1]])
        return safe_divide(jnp.sum(sums.weight * (general + previous) / 2), sums.total)

    return per_segment(one, s, masks)


@_doc
def augrc(
    probs: Any = None,
    labels: Any = None,
    *,
    confidence: Any = None,
    correct: Any = None,
    convention: str = "traub",
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> jax.Array:
    """Area under the generalized risk-coverage curve (AUGRC, Traub et al. 2024).

    The generalized risk at a coverage is the accepted weighted risk over *all*
    samples' weight, E_i / W (the probability that a sample is accepted and wrong),
    which does not overweight the few most confident samples as the selective risk
    does. Lower is better; a random ranking scores r̂/2, the oracle r̂²/2.

    * ``convention="traub"`` (Traub et al.'s reference, fd-shifts
      ``RiskCoverageStats.augrc``): the trapezoid from the point (0, 0) to coverage 1.
    * ``convention="trapezoid"`` (torch-uncertainty's ``AUGRC``): the trapezoid from
      the first sample's coverage, divided by its width 1 − 1/N.

    Ties: linear within a run of equal confidences, so ``"traub"`` equals fd-shifts'
    trapezoid over the distinct thresholds exactly.

    {args}
      convention: ``"traub"`` or ``"trapezoid"``.

    Returns:
      0-d array in [0, 1/2] (``(G,)`` with groups).

    Example:
      >>> import jax.numpy as jnp
      >>> conf = jnp.array([0.9, 0.8, 0.7, 0.6])
      >>> correct = jnp.array([1, 0, 1, 1])
      >>> round(float(augrc(confidence=conf, correct=correct)), 4)  # (0/2 + 1/8 + 1/4 + 1/4) / 4
      0.1562

    References:
      Traub, Bungert, Lüth, Baumgartner, Maier-Hein, Maier-Hein & Jaeger (2024),
      "Overcoming common flaws in the evaluation of selective classification systems",
      NeurIPS; fd-shifts ``fd_shifts/analysis/rc_stats.py``.
    """
    check_option("convention", convention, AUGRC_CONVENTIONS)
    c = check_inputs(
        probs, labels, weights, groups, n_groups, confidence=confidence, correct=correct
    )
    return _augrc_kernel(c.confidence, c.labels, c.weights, c.masks, c.kind, convention)


def _window(s: Sums, start: float) -> jax.Array:
    """Weights of the points whose preceding accepted weight is at least ``start`` of the
    total (LM-Polygraph's ``max_rejection`` window), 0 outside it."""
    eps = jnp.finfo(s.weight.dtype).eps
    inside = (s.accepted - s.weight) >= start * s.total * (1 - 8 * eps)
    return jnp.where(inside, s.weight, 0)


def _window_mean(s: Sums, start: float) -> jax.Array:
    """Mean of the running risks over the ``max_rejection`` window."""
    w = _window(s, start)
    return safe_divide(jnp.sum(w * _selective_risk(s)), jnp.sum(w))


@partial(jax.jit, static_argnames=("kind", "max_rejection"))
def _prr_kernel(confidence, labels, weights, masks, kind, max_rejection):
    """``(PRR, empty)``: ``empty`` flags a segment of positive weight whose rejection
    window holds no sample (its PRR is then NaN)."""
    s = prepare(confidence, labels, weights, kind)
    perm = oracle_permutation(s, kind)
    start = 1.0 - max_rejection

    def one(w):
        sums = tie_averaged_sums(w, s.risk, s.starts)
        model = _window_mean(sums, start)
        oracle = _window_mean(plain_sums(w[perm], s.risk[perm]), start)
        random = safe_divide(sums.total_errors, sums.total)
        den = random - oracle
        tiny = 16 * jnp.finfo(den.dtype).eps
        prr = jnp.where(den > tiny, (random - model) / jnp.where(den > tiny, den, 1), 0)
        empty = (sums.total > 0) & ~(jnp.sum(_window(sums, start)) > 0)
        return jnp.where(empty, jnp.nan, prr), empty

    return per_segment(one, s, masks)


@_doc
def prediction_rejection_ratio(
    probs: Any = None,
    labels: Any = None,
    *,
    confidence: Any = None,
    correct: Any = None,
    max_rejection: float = 1.0,
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> jax.Array:
    """Prediction-rejection ratio (PRR), as LM-Polygraph's ``prr_normalized``.

    PRR = (A_random − A_model) / (A_random − A_oracle), where A is the mean of the
    running risks (the ``"mean"`` AURC) over the points that reject at most
    ``max_rejection`` of the samples, A_oracle that of the best ranking of the same
    samples and A_random = r̂ (the overall risk), its expectation under a random
    ranking. 1 is a perfect ranking, 0 a random one, negative worse than random. With a
    float quality q (ROUGE, a judge's score) the risk is 1 − q; the ratio is invariant
    to LM-Polygraph's min-max rescaling of the target.

    Differences from LM-Polygraph (``ue_metrics/pred_rej_area.py``,
    ``PredictionRejectionArea``, normalised in ``utils/manager.py`` ``eval_ue`` by
    ``ue_metric.normalize_metric``): the random baseline is its exact expectation, not
    the mean over 1000 shuffles with seed 42 (a Monte-Carlo error of order
    r̂ / sqrt(1000 N)); ties are averaged; and when every sample has the same risk
    (oracle = random) the ratio is 0, where LM-Polygraph returns the unnormalised
    area. When the rejection window holds no sample (``int(max_rejection * N) == 0``
    for N unit-weight samples, a single sample included) the ratio is undefined
    (LM-Polygraph divides by 0): a ``ValueError`` says so; under ``jit``, where values
    are not checked, the value is NaN. LM-Polygraph takes uncertainties (higher = less confident): pass their
    negatives as ``confidence``.

    {args}
      max_rejection: the largest share of samples rejected, in (0, 1] (static):
        LM-Polygraph's ``max_rejection``, the points with at least
        ``(1 - max_rejection) W`` accepted before them (for unit weights, the last
        ``int(max_rejection * N)`` points).

    Returns:
      0-d array, at most 1 (``(G,)`` with groups).

    Raises:
      ValueError: when no sample (of a segment of positive weight) falls in the
        rejection window; raise ``max_rejection`` to at least 1/N.

    Example:
      >>> import jax.numpy as jnp
      >>> conf = jnp.array([0.9, 0.8, 0.7, 0.6])
      >>> quality = jnp.array([1.0, 0.5, 1.0, 0.0])  # e.g. ROUGE-L of each answer
      >>> round(float(prediction_rejection_ratio(confidence=conf, correct=quality)), 4)
      0.7391

    References:
      Malinin (2019), "Uncertainty estimation in deep learning with application to
      spoken language assessment", PhD thesis (PRR); Fadeeva et al. (2023),
      "LM-Polygraph: uncertainty estimation for language models".
    """
    max_rejection = check_level("max_rejection", max_rejection)
    if isinstance(max_rejection, tuple):
        raise ValueError(f"`max_rejection` must be one number in (0, 1]; got {max_rejection}.")
    c = check_inputs(
        probs, labels, weights, groups, n_groups, confidence=confidence, correct=correct
    )
    prr, empty = _prr_kernel(c.confidence, c.labels, c.weights, c.masks, c.kind, max_rejection)
    arrays = [a for a in (c.confidence, c.labels, c.weights) if a is not None]
    if values_checkable(*arrays) and bool(jnp.any(empty)):
        n = c.confidence.shape[0] if c.weights is None else int(jnp.sum(c.weights > 0))
        where = "" if c.masks is None else f" (in segment(s) {np.flatnonzero(empty).tolist()})"
        raise ValueError(
            f"`max_rejection`={max_rejection} rejects no sample{where}: the rejection window "
            "holds the points with at least (1 - max_rejection) of the weight accepted "
            f"before them, and with {n} sample(s) of positive weight int(max_rejection * N)"
            f" = {int(max_rejection * n)} (or the least confident sample alone carries more "
            "than max_rejection of the weight). A PRR over an empty window is undefined "
            "(1.0 would claim a perfect ranking); raise `max_rejection` to at least 1/N "
            f"(here {1 / max(n, 1):.4g}), or pass more samples."
        )
    return prr
