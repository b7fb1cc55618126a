"""Float64 NumPy ports of the reference implementations of selective prediction.

Each function names the file and function it was ported from (read, not imported: the
references pull in torch, torchmetrics, or a whole evaluation framework). Only the
tensor library changed: ``torch.argsort(descending=True)`` became a stable NumPy
argsort of the negated scores (torch's sort is not stable; on distinct scores the two
agree), ``torchmetrics.utilities.compute._auc_compute`` (``torch.trapz`` of y over
increasing x) became ``np.trapezoid``. Beside them, :func:`tie_average` computes the
definition jaxcal uses for tied confidences by brute force: the mean over every order of
the tied samples.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

_trapezoid = getattr(np, "trapezoid", None) or getattr(np, "trapz")  # noqa: B009 - NumPy < 2

# ------------------------------------------------------------------ torch-uncertainty
# ENSTA-U2IS-AI/torch-uncertainty, src/torch_uncertainty/metrics/classification/
# risk_coverage.py (commit 0d0df2b2).


def tu_scores_errors(probs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``AURC.update``: top probability and 0/1 error of the argmax (1-D: two columns)."""
    probs = np.asarray(probs, np.float64)
    if probs.ndim == 1:
        probs = np.stack([1 - probs, probs], axis=-1)
    return probs.max(-1), (probs.argmax(-1) != np.asarray(targets)).astype(np.float64)


def tu_rejection_rates(scores: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """``_aurc_rejection_rate_compute``: running error rates by descending score."""
    errors = np.asarray(errors, np.float64)[np.argsort(-np.asarray(scores), kind="stable")]
    return np.cumsum(errors) / np.arange(1, errors.size + 1)


def tu_aurc(scores, errors) -> float:
    """``AURC.compute``: trapezoid over coverage k/N from 1/N, divided by 1 - 1/N."""
    rates = tu_rejection_rates(scores, errors)
    n = rates.size
    if n < 2:
        return math.nan
    cov = np.arange(1, n + 1) / n
    return float(_trapezoid(rates, cov) / (1 - 1 / n))


def tu_augrc(scores, errors) -> float:
    """``AUGRC.compute``: the same trapezoid of the generalized risk rates * cov."""
    rates = tu_rejection_rates(scores, errors)
    n = rates.size
    if n < 2:
        return math.nan
    cov = np.arange(1, n + 1) / n
    return float(_trapezoid(rates * cov, cov) / (1 - 1 / n))


def tu_risk_at_cov(scores, errors, cov_threshold: float) -> float:
    """``RiskAtxCov.compute``."""
    rates = tu_rejection_rates(scores, errors)
    return float(rates[math.ceil(rates.size * cov_threshold) - 1])


def tu_cov_at_risk(scores, errors, risk_threshold: float) -> float:
    """``CovAtxRisk.compute``, its indexing as written (see ``coverage_at_risk``)."""
    n = len(scores)
    if n < 1:
        return math.nan
    rates = tu_rejection_rates(scores, errors)
    admissible = (rates > risk_threshold) * 1
    max_cov_at_risk = int(np.argmin(admissible[::-1]))
    if admissible[max_cov_at_risk] > risk_threshold:
        return math.nan
    return 1 - max_cov_at_risk / n


# ------------------------------------------------------------------ LM-Polygraph
# IINemo/lm-polygraph, src/lm_polygraph/ue_metrics/ (commit efea882d).


def lmp_normalize(target) -> np.ndarray:
    """``ue_metric.normalize``: min-max scaling (a constant target goes to 0.5)."""
    min_t, max_t = np.min(target), np.max(target)
    if np.isclose(min_t, max_t):
        min_t -= 1
        max_t += 1
    return (np.array(target, np.float64) - min_t) / (max_t - min_t)


def lmp_prediction_rejection_area(estimator, target, max_rejection: float = 1.0) -> float:
    """``pred_rej_area.PredictionRejectionArea.__call__`` (estimator: uncertainty)."""
    target = lmp_normalize(target)
    ue = np.array(estimator, np.float64)
    num_obs = len(ue)
    num_rej = int(max_rejection * num_obs)
    ue_argsort = np.argsort(ue, kind="stable")
    sorted_metrics = np.array(target)[ue_argsort]
    cumsum = np.cumsum(sorted_metrics)[-num_rej:]
    scores = (cumsum / np.arange((num_obs - num_rej) + 1, num_obs + 1))[::-1]
    return float(np.sum(scores) / num_rej)


def lmp_random_scores(function, metrics, num_iter: int = 1000, seed: int = 42) -> float:
    """``ue_metric.get_random_scores``: the mean over shuffled rankings."""
    np.random.seed(seed)  # noqa: NPY002 - the reference's own global-state seeding
    rand_scores = np.arange(len(metrics))
    value = []
    for _ in range(num_iter):
        np.random.shuffle(rand_scores)  # noqa: NPY002
        value.append(function(rand_scores, metrics))
    return float(np.mean(value))


def lmp_normalize_metric(target_score, oracle_score, random_score) -> float:
    """``ue_metric.normalize_metric``."""
    if not (oracle_score == random_score):
        target_score = (target_score - random_score) / (oracle_score - random_score)
    return float(target_score)


def lmp_prr(uncertainty, quality, max_rejection: float = 1.0, random=None) -> float:
    """``utils/manager.py`` ``UEManager.eval_ue``'s ``prr_normalized``.

    ``random``: the random baseline; None runs the reference's 1000 shuffles.
    """
    quality = np.asarray(quality, np.float64)

    def area(e, t):
        return lmp_prediction_rejection_area(e, t, max_rejection)

    value = area(uncertainty, quality)
    oracle = area(-quality, quality)
    if random is None:
        random = lmp_random_scores(area, quality)
    return lmp_normalize_metric(value, oracle, random)


def lmp_rcc_auc(estimator, target) -> float:
    """``risk_cov_curve.RiskCoverageCurveAUC.__call__`` (normalize=True)."""
    target = lmp_normalize(target)
    risk = 1 - np.array(target)
    cr_pair = sorted(zip(estimator, risk, strict=True), key=lambda x: x[0])
    cumulative_risk = np.cumsum([x[1] for x in cr_pair])
    cumulative_risk = cumulative_risk / np.arange(1, len(estimator) + 1)
    return float(cumulative_risk.mean())


# ------------------------------------------------------------------ fd-shifts
# IML-DKFZ/fd-shifts, fd_shifts/analysis/rc_stats_utils.py and rc_stats.py (commit
# 56276af1), the reference of Traub et al. (2024), AUC_DISPLAY_SCALE left out (it is 1000).


def fds_generalized_risk_stats(confids, residuals) -> tuple[np.ndarray, np.ndarray]:
    """``generalized_risk_stats``: (coverages, risks) at the distinct thresholds."""
    n = len(residuals)
    idx_sorted = np.argsort(confids, kind="stable")
    residuals = np.asarray(residuals, np.float64)[idx_sorted]
    confidence = np.asarray(confids)[idx_sorted]
    cov = n
    error_sum = sum(residuals)
    coverages, risks = [1.0], [error_sum / n]
    for i in range(n - 1):
        cov -= 1
        error_sum -= residuals[i]
        if confidence[i] != confidence[i + 1]:
            coverages.append(cov / n)
            risks.append(error_sum / n)
    coverages.append(0)
    risks.append(0)
    return np.array(coverages), np.array(risks)


def fds_augrc(confids, residuals) -> float:
    """``RiskCoverageStatsMixin.augrc`` (``evaluate_auc``, linear interpolation)."""
    coverages, risks = fds_generalized_risk_stats(confids, residuals)
    return float(-_trapezoid(risks, coverages))


def fds_aurc_optimal(residuals) -> float:
    """``RiskCoverageStatsMixin.aurc_optimal`` for binary residuals (the closed form)."""
    err = np.mean(np.asarray(residuals, np.float64))
    return float(err + (1 - err) * (np.log(1 - err + np.finfo(err.dtype).eps)))


# ------------------------------------------------------------------ the definitions


def running_risks(scores, risks, weights=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(accepted weight W_i, accepted risk E_i, w_i) by descending score, no tie rule."""
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    w = np.ones(len(order)) if weights is None else np.asarray(weights, np.float64)[order]
    r = np.asarray(risks, np.float64)[order]
    return np.cumsum(w), np.cumsum(w * r), w


def aurc_mean(scores, risks, weights=None) -> float:
    """sum_i w_i (E_i / W_i) / W, a Python loop."""
    acc, err, w = running_risks(scores, risks, weights)
    total = 0.0
    for i in range(len(w)):
        if acc[i] > 0:
            total += w[i] * err[i] / acc[i]
    return total / acc[-1]


def oracle_aurc_mean(risks) -> float:
    """The mean-convention AURC of the best ranking (ascending risk), unit weights."""
    r = np.sort(np.asarray(risks, np.float64))
    return aurc_mean(-np.arange(r.size), r)


def tie_average(fn, scores, risks):
    """Mean of ``fn(scores', risks')`` over every order of the tied samples.

    ``scores'`` are distinct ranks that keep the score order and break each run of ties
    one way; every combination of the runs' permutations is enumerated (small inputs).
    """
    scores = np.asarray(scores, np.float64)
    risks = np.asarray(risks, np.float64)
    order = np.argsort(-scores, kind="stable")
    runs = [list(g) for _, g in itertools.groupby(order, key=lambda i: scores[i])]
    values = []
    for perms in itertools.product(*(itertools.permutations(run) for run in runs)):
        ranked = [i for p in perms for i in p]
        ranks = np.empty(scores.size)
        ranks[ranked] = -np.arange(scores.size)  # first accepted has the highest rank
        values.append(fn(ranks, risks))
    return float(np.mean(values)) if np.ndim(values[0]) == 0 else np.mean(values, axis=0)
