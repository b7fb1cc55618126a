"""Float64 ports of the evaluation harnesses' calibration code (the presets' oracles).

Ported, not imported (the harnesses pull in torch, an API client, datasets): the code is
kept as written, tensor library aside. Sources:

* HLE: centerforaisafety/hle ``hle_eval/run_judge_results.py`` ``calib_err`` (read from
  the fork kflu/hle, commit 0572f38e; the function is the upstream one, itself copied
  from hendrycks/outlier-exposure ``utils/calibration_tools.py``).
* HELM: stanford-crfm/helm ``src/helm/benchmark/metrics/basic_metrics.py``
  ``compute_calibration_metrics`` (commit 63754d05), and the package it imports as
  ``calibration``: p-lambda/verified_calibration ``calibration/utils.py`` (commit
  ee81c34): ``split``, ``get_equal_bins``, ``get_equal_prob_bins``, ``fast_bin``,
  ``plugin_ce``, ``get_ece``, ``get_ece_em`` (their 1-D path), ``get_selective_stats``,
  ``get_platt_scaler`` (scikit-learn's ``LogisticRegression``, as there).
* Hendrycks et al.'s ``tune_temp`` (outlier-exposure ``utils/calibration_tools.py``):
  torch's autograd of ``F.cross_entropy(logits / t, labels)`` replaced by its closed
  form mean(z_y − E_p[z]) / t², in float64.
* lm-evaluation-harness ``lm_eval/api/metrics.py`` ``brier_score`` (commit 4e7e0d47).
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression

# ------------------------------------------------------------------ HLE


def hle_calib_err(confidence, correct, p="2", beta=100, kind="stable"):
    """``calib_err``; ``kind``: the argsort (the reference's default is "quicksort")."""
    confidence = np.asarray(confidence, np.float64)
    correct = np.asarray(correct)
    idxs = np.argsort(confidence, kind=kind)
    confidence = confidence[idxs]
    correct = correct[idxs]
    bins = [[i * beta, (i + 1) * beta] for i in range(len(confidence) // beta)]
    bins[-1] = [bins[-1][0], len(confidence)]

    cerr = 0
    total_examples = len(confidence)
    for i in range(len(bins) - 1):
        bin_confidence = confidence[bins[i][0] : bins[i][1]]
        bin_correct = correct[bins[i][0] : bins[i][1]]
        num_examples_in_bin = len(bin_confidence)

        if num_examples_in_bin > 0:
            difference = np.abs(np.nanmean(bin_confidence) - np.nanmean(bin_correct))

            if p == "2":
                cerr += num_examples_in_bin / total_examples * np.square(difference)
            elif p == "1":
                cerr += num_examples_in_bin / total_examples * difference
            elif p in ("infty", "infinity", "max"):
                cerr = np.maximum(cerr, difference)
            else:
                raise AssertionError("p must be '1', '2', or 'infty'")

    if p == "2":
        cerr = np.sqrt(cerr)

    return float(cerr)


# ------------------------------------------------------------------ uncertainty-calibration


def _split(sequence, parts):
    assert parts <= len(sequence)
    array_splits = np.array_split(sequence, parts)
    splits = [list(x) for x in array_splits]
    assert len(splits) == parts
    return splits


def get_equal_bins(probs, num_bins=10):
    sorted_probs = sorted(probs)
    if num_bins > len(sorted_probs):
        num_bins = len(sorted_probs)
    binned_data = _split(sorted_probs, num_bins)
    bins = []
    for i in range(len(binned_data) - 1):
        last_prob = binned_data[i][-1]
        next_first_prob = binned_data[i + 1][0]
        bins.append((last_prob + next_first_prob) / 2.0)
    bins.append(1.0)
    return sorted(set(bins))


def get_equal_prob_bins(probs, num_bins=10):
    return [i * 1.0 / num_bins for i in range(1, num_bins + 1)]


def _fast_bin(data, bins):
    prob_label = np.array(data)
    bin_indices = np.searchsorted(bins, prob_label[:, 0])
    bin_sort_indices = np.argsort(bin_indices)
    sorted_bins = bin_indices[bin_sort_indices]
    splits = np.searchsorted(sorted_bins, list(range(1, len(bins))))
    return np.split(prob_label[bin_sort_indices], splits)


def _plugin_ce(binned_data, power=2):
    def bin_error(data):
        if len(data) == 0:
            return 0.0
        data = np.array(data)
        return abs(np.mean(data[:, 0]) - np.mean(data[:, 1])) ** power

    bin_sizes = list(map(len, binned_data))
    num_data = sum(bin_sizes)
    bin_probs = [b * 1.0 / num_data for b in bin_sizes]
    bin_errors = list(map(bin_error, binned_data))
    return np.dot(bin_probs, bin_errors) ** (1.0 / power)


def _ce_1d(probs, labels, num_bins, binning_scheme, p=1):
    probs, labels = np.asarray(probs, np.float64), np.asarray(labels)
    data = list(zip(probs, labels, strict=True))
    bins = binning_scheme(probs, num_bins=num_bins)
    return float(_plugin_ce(_fast_bin(data, bins), power=p))


def get_ece(probs, labels, num_bins=15):
    return _ce_1d(probs, labels, num_bins, get_equal_prob_bins)


def get_ece_em(probs, labels, num_bins=15):
    return _ce_1d(probs, labels, num_bins, get_equal_bins)


def get_selective_stats(probs, correct, kind="stable"):
    """``kind``: the argsort (the reference's default is "quicksort")."""
    probs = np.array(probs, np.float64)
    correct = np.array(correct)
    sort_indices = np.argsort(-probs, kind=kind)
    sorted_correct = correct[sort_indices]
    accs = np.cumsum(sorted_correct) / np.arange(1, len(sorted_correct) + 1)
    coverage_acc_area = np.mean(accs)
    acc_percentile_90 = accs[int(0.1 * len(sorted_correct))]
    return float(coverage_acc_area), float(acc_percentile_90)


def get_platt_scaler(model_probs, labels, get_clf=False):
    clf = LogisticRegression(C=1e10, solver="lbfgs")
    eps = 1e-12
    model_probs = model_probs.astype(dtype=np.float64)
    model_probs = np.expand_dims(model_probs, axis=-1)
    model_probs = np.clip(model_probs, eps, 1 - eps)
    model_probs = np.log(model_probs / (1 - model_probs))
    clf.fit(model_probs, labels)

    def calibrator(probs):
        x = np.array(probs, dtype=np.float64)
        x = np.clip(x, eps, 1 - eps)
        x = np.log(x / (1 - x))
        x = x * clf.coef_[0] + clf.intercept_
        return 1 / (1 + np.exp(-x))

    if get_clf:
        return calibrator, clf
    return calibrator


# ------------------------------------------------------------------ HELM


def helm_calibration_stats(max_probs, correct) -> dict[str, float]:
    """``compute_calibration_metrics``'s stats, by name (logprob checks left out)."""
    max_probs, correct = list(map(float, max_probs)), [int(c) for c in correct]
    stats = {}
    stats["ece_10_bin"] = get_ece_em(max_probs, correct, num_bins=10)
    stats["ece_1_bin"] = get_ece(max_probs, correct, num_bins=1)
    area, acc10 = get_selective_stats(max_probs, correct)
    stats["selective_cov_acc_area"] = area
    stats["selective_acc@10"] = acc10
    if np.sum(correct) == 0 or np.sum(correct) == len(correct):
        stats["platt_ece_10_bin"] = 0.0
        stats["platt_ece_1_bin"] = 0.0
    else:
        platt_scaler, clf = get_platt_scaler(np.array(max_probs), np.array(correct), get_clf=True)
        stats["platt_coef"] = float(clf.coef_[0][0])
        stats["platt_intercept"] = float(clf.intercept_[0])
        cal_max_probs = platt_scaler(np.array(max_probs))
        stats["platt_ece_10_bin"] = get_ece_em(cal_max_probs, correct, num_bins=10)
        stats["platt_ece_1_bin"] = get_ece(cal_max_probs, correct, num_bins=1)
    return stats


# ------------------------------------------------------------------ temperature


def _cross_entropy(logits, labels, t):
    z = logits / t
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return float(-np.mean(logp[np.arange(len(labels)), labels]))


def _slope(logits, labels, t):
    z = logits / t
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    z_y = logits[np.arange(len(labels)), labels]
    return float(np.mean(z_y - (p * logits).sum(1)) / t**2)


def tune_temp(logits, labels, lower=0.2, upper=5.0, eps=0.0001):
    """``tune_temp(binary_search=True)``."""
    logits, labels = np.asarray(logits, np.float64), np.asarray(labels)
    while upper - lower > eps:
        if _slope(logits, labels, 0.5 * (lower + upper)) > 0:
            upper = 0.5 * (lower + upper)
        else:
            lower = 0.5 * (lower + upper)
    return min(
        [lower, 0.5 * (lower + upper), upper], key=lambda x: _cross_entropy(logits, labels, x)
    )


def lm_eval_brier_score(items):
    """``brier_score`` aggregation of (gold, probabilities) items."""
    gold, predictions = list(zip(*items, strict=True))
    _, num_class = np.array(predictions).shape
    gold_one_hot = np.eye(num_class)[list(gold)]
    return float(np.mean(np.sum((np.array(predictions) - gold_one_hot) ** 2, axis=1)))
