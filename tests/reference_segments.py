"""Float64 NumPy oracles of calibration within segments (multicalibration, subpopulations).

``mcgrad_segments`` transcribes MCGrad's ``MulticalibrationError`` (mcgrad 0.1.5,
``mcgrad.metrics``: ``_calculate_cumulative_differences``, ``_ecce_per_segment``,
``_ecce_standard_deviation_per_segment``, ``ecce_pvalue_from_sigma``) in float64. It was
checked once against mcgrad itself by ``benchmarks/check_mcgrad_oracle.py`` (run in an
environment with the ``bench-torch`` extra). MCGrad walks samples in sorted order without
aggregating ties, so jaxcal equals it on distinct scores; ``aggregated_segments`` is the
tie-aggregating definition jaxcal implements. ``cdeets_subpop`` transcribes Tygert's
``cumulative`` of ``cdeets/codes/subpop_weighted.py`` (exact equality for ties instead of
``math.isclose(rel_tol=1e-14)``).
"""

from __future__ import annotations

import math
import sys

import numpy as np

ECCE_SIGMA_MAX = 8.26732673  # MCGrad clamps its p-value at machine epsilon from here
ECCE_SIGMA_MIN = 1e-20


def mcgrad_ecce_cdf(x: float) -> float:
    """MCGrad's ``_ecce_cdf``: the theta series of the range of B, to machine epsilon."""
    eps = sys.float_info.epsilon
    fact = 4.0 / math.sqrt(2.0 * math.pi) * (1.0 / x + x / math.pi**2)
    kmax = math.ceil(0.5 + x / math.pi / math.sqrt(2) * math.sqrt(math.log(fact / eps)))
    c = 0.0
    for k in range(kmax):
        h = k + 0.5
        c += (8.0 / x**2 + 2.0 / h**2 / math.pi**2) * math.exp(-2.0 * h**2 * math.pi**2 / x**2)
    return c


def mcgrad_pvalue(stat: float) -> float:
    """MCGrad's ``ecce_pvalue_from_sigma``: ``1 - CDF``, clamped at eps from 8.27."""
    if stat < ECCE_SIGMA_MIN:
        return 1.0
    if stat >= ECCE_SIGMA_MAX:
        return sys.float_info.epsilon
    return 1.0 - mcgrad_ecce_cdf(stat)


def mcgrad_segments(scores, labels, masks, weights=None):
    """MCGrad's per-segment ``(ecce, sigma, ecce_sigma, p)`` and ``(mce_sigma, mce, mce_rel)``.

    ``masks`` ``(N, G)`` bool. Samples sorted by score (stable), no tie aggregation.
    """
    s = np.asarray(scores, np.float64)
    y = np.asarray(labels, np.float64)
    m = np.asarray(masks, bool).T
    order = np.argsort(s, kind="stable")
    s, y, m = s[order], y[order], m[:, order]
    w = np.ones_like(s) if weights is None else np.asarray(weights, np.float64)[order]
    seg_w = m * w
    norm = seg_w.sum(axis=1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        diffs = np.cumsum(seg_w * (y - s) / norm, axis=1)
    diffs[np.isnan(diffs)] = 0
    diffs = np.concatenate([np.zeros((m.shape[0], 1)), diffs], axis=1)
    ecce = np.ptp(diffs, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.sqrt((m * w * w * s * (1 - s)).sum(axis=1) / norm[:, 0] ** 2)
    sigma[np.isnan(sigma)] = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where((ecce != 0) & (sigma == 0), np.inf, np.where(sigma == 0, 0, ecce / sigma))
    p = np.array([mcgrad_pvalue(v) for v in stat])
    sigma_all = np.sqrt(np.sum(w * w * s * (1 - s))) / w.sum()
    prevalence = np.sum(w * y) / w.sum()
    mce_sigma = stat.max()
    mce = mce_sigma * sigma_all
    return (ecce, sigma, stat, p), (mce_sigma, mce, mce / min(prevalence, 1 - prevalence) * 100)


def aggregated_segments(scores, labels, masks, weights=None):
    """Per segment ``(KS statistic, Kuiper statistic, top, bottom, V, W)``, ties aggregated."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(labels, np.float64)
    w = np.ones_like(s) if weights is None else np.asarray(weights, np.float64)
    out = []
    for mask in np.asarray(masks, bool).T:
        ss, d = s[mask], (w * (y - s))[mask]
        distinct, group = np.unique(ss, return_inverse=True)
        path = np.cumsum(np.bincount(group, weights=d, minlength=len(distinct)))
        top, bottom = max(path.max(initial=0), 0), min(path.min(initial=0), 0)
        v = np.sum((w * w * s * (1 - s))[mask])
        sd = math.sqrt(v) if v > 0 else math.nan
        ks = max(top, -bottom) / sd if v > 0 else 0.0
        kuiper = (top - bottom) / sd if v > 0 else 0.0
        out.append((ks, kuiper, top, bottom, v, w[mask].sum()))
    return np.array(out).T


def holm(p):
    """Holm's step-down adjusted p-values (textbook loop)."""
    p = np.asarray(p, np.float64)
    order = np.argsort(p, kind="stable")
    g = len(p)
    adjusted = np.empty(g)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (g - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def cdeets_subpop(scores, labels, in_sub, weights=None):
    """Tygert's subpopulation deviation: ``(kuiper, ks, sigma)`` (bernoulli=True)."""
    order = np.argsort(np.asarray(scores, np.float64), kind="stable")
    s = np.asarray(scores, np.float64)[order]
    r = np.asarray(labels, np.float64)[order]
    w = np.ones(len(s)) if weights is None else np.asarray(weights, np.float64)[order]
    inds = np.flatnonzero(np.asarray(in_sub, bool)[order])
    w = w / w.sum()
    ss, rs, ws = s[inds], r[inds], w[inds]
    groups = []
    start = 0
    for k in range(len(ss)):
        if k == len(ss) - 1 or ss[k] != ss[k + 1]:
            sl = slice(start, k + 1)
            wsum = ws[sl].sum()
            groups.append(
                (ss[k], (rs[sl] * ws[sl]).sum() / wsum, wsum, (ws[sl] ** 2).sum() / wsum**2)
            )
            start = k + 1
    ss, rs, ws, fs = (np.array(c) for c in zip(*groups, strict=True))
    ws = ws / ws.sum()
    q = np.concatenate([[-1e20], ss, [1e20]])
    t = (q[:-1] + q[1:]) / 2
    rc, sc = np.zeros(len(ss)), np.zeros(len(ss))
    j = 0
    for k in range(len(s)):
        if s[k] > t[j + 1]:
            j += 1
            if j == len(ss):
                break
        if s[k] >= t[0]:
            sc[j] += w[k]
            rc[j] += w[k] * r[k]
    rt = rc / sc
    f = np.concatenate([[0.0], np.cumsum(ws * rs)])
    ft = np.concatenate([[0.0], np.cumsum(ws * rt)])
    path = f - ft
    sigma = np.sqrt(np.sum(ws**2 * rt * (1 - rt) * fs))
    return path.max() - path.min(), np.max(np.abs(path)), sigma
