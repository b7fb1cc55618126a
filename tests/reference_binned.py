"""NumPy ports of the reference code of the binned and adaptive measures, function for
function, in float64:

* ``T_mn_estimator`` and the "Ours" interval: sylydya/CI-ECE (``experiments/estimator.py``,
  ``experiments/plot.ipynb``), top-1 case;
* ``plugin_ece`` and ``adaptive_T_Cal``'s scales: dh7401/T-Cal (``utils.py``);
* ``em_monotonic_sweep`` / ``_calc_ece_postbin``: google-research
  ``caltrain/calibration_metrics.py``;
* ``tce`` with ``_pavabc`` and the quantile ``_calibration_process``:
  facebookresearch/tce (``calibration_metric.py``).

Their sorts use ``kind="stable"`` (the references' ``np.argsort`` leaves ties unspecified);
otherwise the code is the references'.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy import stats
from scipy.stats import binomtest, rankdata


def t_mn_estimator(y, z, num_bins):
    """CI-ECE's T_mn_estimator for topk = 1: (statistic, sigma_1^2). Bins lower <= Z < upper."""
    y, z = np.asarray(y, float)[:, None], np.asarray(z, float)[:, None]
    num_data = z.shape[0]
    ests, first, second, counts = [], [], [], []
    for b in range(num_bins):
        flag = ((z >= b / num_bins) & (z < (b + 1) / num_bins)).sum(1) == 1
        nb = flag.sum()
        if nb == 0:
            continue
        u = y[flag] - z[flag]
        est = nb * np.power(u.mean(0), 2).sum() - np.power(u, 2).sum(1).mean()
        if nb > 1:
            est = est * nb / (nb - 1)
        um = u.mean(0, keepdims=True)
        sq = u.T @ u / nb
        ests.append(est)
        first.append((4 * um @ sq @ um.T - 3 * np.power(np.power(um, 2).sum(), 2)).item())
        second.append(np.power(um, 2).sum())
        counts.append(nb)
    counts = np.array(counts)
    var = (np.array(first) * counts / num_data).sum() - (
        np.array(second) * counts / num_data
    ).sum() ** 2
    return np.sum(ests) / num_data, var


def adjusted_interval(statistic, sigma2, n, alpha):
    """plot.ipynb's "Ours" (adjust_lower_bound, adjust_upper_bound) for one data set."""
    z_alpha = stats.norm.ppf(1 - alpha)
    z_half = stats.norm.ppf(1 - alpha / 2)
    s = np.sqrt(sigma2) / np.sqrt(n)
    t_plus = (statistic > 0) * statistic
    lower_1 = t_plus - z_half * s
    cond_1 = t_plus >= 2 * z_half * s
    lower_2 = t_plus / 2
    cond_2 = (t_plus < 2 * z_half * s) & (t_plus >= 2 * z_alpha * s)
    lower_3 = t_plus - z_alpha * s
    lower_3 = lower_3 * (lower_3 > 0)
    cond_3 = t_plus < 2 * z_alpha * s
    lower = lower_1 * cond_1 + lower_2 * cond_2 + lower_3 * cond_3
    return lower, t_plus + z_half * s


def plugin_ece(scores, labels, num_bins, p=2, debias=True):
    """T-Cal's plugin_ece."""
    indexes = np.floor(num_bins * scores).astype(int)
    indexes = rankdata(indexes, method="dense") - 1
    counts = np.bincount(indexes)
    counts[counts == 0] += 1
    if p == 2 and debias:
        error = (
            (
                np.bincount(indexes, weights=scores - labels) ** 2
                - np.bincount(indexes, weights=(scores - labels) ** 2)
            )
            / counts
        ).sum()
    else:
        error = (
            np.abs(np.bincount(indexes, weights=scores - labels)) ** p / counts ** (p - 1)
        ).sum()
    return error / len(scores)


def tcal_scales(n):
    """adaptive_T_Cal's B."""
    return int(2 * np.log2(n / np.sqrt(np.log(n))))


def _calc_ece_postbin(n_bins, bins, fx, y, norm):
    ece, monotonic, last_ym = 0.0, True, -1000
    for i in range(n_bins):
        cur = bins == i
        if any(cur):
            fxm, ym = np.mean(fx[cur]), np.mean(y[cur])
            if ym < last_ym:
                monotonic = False
            last_ym = ym
            ece += np.sum(cur) * pow(np.abs(ym - fxm), norm)
    return pow(ece / fx.shape[0], 1.0 / norm), monotonic


def em_ece_sweep(fx, y, norm=2):
    """caltrain's em_monotonic_sweep then _calc_ece_postbin: (ece, number of bins)."""
    sort_ix = np.argsort(fx, kind="stable")
    n = fx.shape[0]
    bins = np.zeros(n, dtype=int)
    prev = np.zeros(n, dtype=int)
    final = None
    for n_bins in range(2, n):
        bins[sort_ix] = np.minimum(n_bins - 1, np.floor((np.arange(n) / n) * n_bins)).astype(int)
        _, monotonic = _calc_ece_postbin(n_bins, bins, fx, y, norm)
        if not monotonic:
            final = prev
            break
        prev = np.copy(bins)
    if final is None:
        final = bins
    nb = np.max(final) + 1
    return _calc_ece_postbin(nb, final, fx, y, norm)[0], nb


def pavabc(x, y, n_min=0, n_max=10000):
    """facebookresearch/tce's _pavabc: (bin_preds, bin_count, bin_total)."""
    order = np.argsort(x, kind="stable")
    xsort, ysort, num_y = x[order], y[order], len(y)

    def condition(y0, y1, w0, w1):
        return (w0 + w1 <= n_min) or ((w0 + w1 <= n_max) and (y0 / w0 >= y1 / w1))

    count, iso_y, iso_w = -1, [], []
    for i in range(num_y - n_min):
        count += 1
        iso_y.append(ysort[i])
        iso_w.append(1)
        while count > 0 and condition(
            iso_y[count - 1], iso_y[count], iso_w[count - 1], iso_w[count]
        ):
            iso_y[count - 1] += iso_y[count]
            iso_w[count - 1] += iso_w[count]
            iso_y.pop()
            iso_w.pop()
            count -= 1
    if n_min > 0:
        count += 1
        iso_y.append(sum(ysort[num_y - n_min : num_y]))
        iso_w.append(n_min)
        if iso_w[-1] + n_min <= n_max:
            iso_y[count - 1] += iso_y[count]
            iso_w[count - 1] += iso_w[count]
            iso_y.pop()
            iso_w.pop()
            count -= 1
    index = np.r_[0, np.cumsum(iso_w)]
    bin_preds = [xsort[index[j] : index[j + 1]] for j in range(len(index) - 1)]
    return bin_preds, np.array(iso_y), np.array(iso_w)


def quantile_bins(preds, labels, n_bin):
    """facebookresearch/tce's _calibration_process(strategy="quantile")."""
    quantile = np.linspace(0, 1, n_bin + 1)
    si = np.argsort(preds, kind="stable")
    sl, sp = labels[si], preds[si]
    idp = (quantile * len(labels)).astype(int)
    bc = np.array([sum(sl[s:e]) for s, e in itertools.pairwise(idp)]).astype(int)
    bt = np.array([len(sl[s:e]) for s, e in itertools.pairwise(idp)]).astype(int)
    bp = [sp[s:e] for s, e in itertools.pairwise(idp)]
    return bp, bc, bt


def tce(preds, labels, siglevel=0.05, strategy="pavabc", n_min=10, n_max=1000, n_bin=10):
    """facebookresearch/tce's tce (percent)."""
    if strategy == "pavabc":
        bp, bc, bt = pavabc(preds, labels, n_min, n_max)
    else:
        bp, bc, bt = quantile_bins(preds, labels, n_bin)
    rejected = 0
    for i in range(len(bc)):
        pvals = np.array([binomtest(int(bc[i]), int(bt[i]), p=p).pvalue for p in bp[i]])
        rejected += np.sum(pvals <= siglevel)
    return 100 * rejected / np.sum(bt)
