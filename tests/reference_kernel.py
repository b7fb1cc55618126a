"""Float64 NumPy oracles of the kernel calibration errors and their tests.

Written from the references' formulas, term by term and loop by loop, independently of
the tiled and sorted kernels of jaxcal: CalibrationErrors.jl (``src/skce.jl``,
``src/ucme.jl``: ``unsafe_skce_eval``, ``unsafe_ucme_eval`` with the white kernel on
targets) and CalibrationTests.jl (``src/skce/*.jl``, ``src/cme.jl``).
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def kernel(p, q, kind, h):
    """k(p, q) on predictions: scalars or vectors."""
    d = np.sqrt(np.sum((np.atleast_1d(np.asarray(p, float)) - np.atleast_1d(q)) ** 2))
    return np.exp(-d / h) if kind == "laplacian" else np.exp(-(d**2) / (2 * h * h))


def skce_h(p, y, q, z, kind, h):
    """``unsafe_skce_eval(k ⊗ WhiteKernel(), p, y, q, z)``: scalar p (bool y) or vector p."""
    k = kernel(p, q, kind, h)
    if np.ndim(p) == 0:
        return k * 2 * (y - p) * (z - q)
    # (y == z) - p[z] - q[y] + <p, q>, CalibrationErrors.jl's white-kernel form
    return k * ((y == z) - p[z] - q[y] + np.dot(p, q))


def h_matrix(probs, labels, kind, h):
    probs = np.asarray(probs, float)
    n = len(labels)
    out = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            out[i, j] = skce_h(probs[i], labels[i], probs[j], labels[j], kind, h)
    return out


def skce(probs, labels, kind="laplacian", h=1.0, estimator="unbiased", block_size=2, weights=None):
    """The three estimators of CalibrationErrors.jl's ``SKCE``, with sample weights."""
    probs, labels = np.asarray(probs, float), np.asarray(labels)
    n = len(labels)
    w = np.ones(n) if weights is None else np.asarray(weights, float)
    if estimator == "block":
        m = block_size
        num = den = 0.0
        for b in range(n // m):
            s = slice(b * m, (b + 1) * m)
            hb = h_matrix(probs[s], labels[s], kind, h)
            wb = w[s]
            ww = np.outer(wb, wb)
            np.fill_diagonal(ww, 0)
            num += np.sum(ww * hb)
            den += np.sum(ww)
        return num / den if den > 0 else 0.0
    hm = h_matrix(probs, labels, kind, h)
    ww = np.outer(w, w)
    if estimator == "unbiased":
        np.fill_diagonal(ww, 0)
    return np.sum(ww * hm) / np.sum(ww) if np.sum(ww) > 0 else 0.0


def median_distance(probs, weights=None):
    """Lower weighted median of the pairwise distances (i < j)."""
    x = np.asarray(probs, float).reshape(len(probs), -1)
    n = len(x)
    w = np.ones(n) if weights is None else np.asarray(weights, float)
    d, pw = [], []
    for i in range(n):
        for j in range(i + 1, n):
            d.append(np.sqrt(np.sum((x[i] - x[j]) ** 2)))
            pw.append(w[i] * w[j])
    d, pw = np.array(d), np.array(pw)
    if np.sum(pw[d == 0]) >= np.sum(pw) / 2:
        pw = np.where(d > 0, pw, 0)
    if pw.sum() == 0:
        return 1.0
    order = np.argsort(d, kind="stable")
    cum = np.cumsum(pw[order])
    return d[order][np.searchsorted(cum, pw.sum() / 2 - 1e-12 * pw.sum())]


def asymptotic_statistic(probs, labels, kind, h):
    """CalibrationTests.jl's ``estimate_statistic_kernelmatrix``: (U, n/(n-1) U - V, H)."""
    hm = h_matrix(probs, labels, kind, h)
    n = len(labels)
    u = (hm.sum() - np.trace(hm)) / (n * (n - 1))
    v = hm.sum() / n**2
    return u, n / (n - 1) * u - v, hm


def bootstrap_statistic(hm, counts):
    """``bootstrap_ccdf``'s T' of one resample from its counts C (Julia's loop)."""
    n = hm.shape[0]
    alpha = n / (n - 1)
    z = 0.0
    for i in range(n):
        if counts[i] == 0:
            continue
        zi = np.mean([((counts[j] - (i == j)) * alpha - 2) * hm[j, i] for j in range(n)])
        z += counts[i] * zi
    return z / n


def block_test(probs, labels, kind, h, block_size):
    """``AsymptoticBlockSKCETest``: (estimate, stderr, z, p)."""
    n = len(labels)
    nb = n // block_size
    xs = [
        skce(
            probs[b * block_size : (b + 1) * block_size],
            labels[b * block_size : (b + 1) * block_size],
            kind,
            h,
        )
        for b in range(nb)
    ]
    est = np.mean(xs)
    se = np.sqrt(np.sum((np.array(xs) - est) ** 2) / (nb * (nb - 1)))
    z = est / se
    return est, se, z, stats.norm.sf(z)


def distribution_free_p(estimate, n, estimator):
    """``DistributionFreeSKCETest``'s p-value, B = 2 (a negative estimate gives 1 here)."""
    b = 2.0
    if estimator == "biased":
        s = np.sqrt(n * max(estimate, 0) / b) - 1
        return np.exp(-(max(s, 0) ** 2) / 2)
    return np.exp(-(n // 2) * (max(estimate, 0) / b) ** 2 / 2)


def ucme_deviation(p, y, tp, ty, kind, h):
    """``unsafe_ucme_eval(k ⊗ WhiteKernel(), p, y, tp, ty)``."""
    k = kernel(p, tp, kind, h)
    if np.ndim(p) == 0:
        return k * ((1 if ty else -1) * (y - p))
    return k * ((y == ty) - p[ty])


def ucme_deviations(probs, labels, test_probs, test_labels, kind, h):
    return np.array(
        [
            [
                ucme_deviation(p, y, tp, ty, kind, h)
                for tp, ty in zip(test_probs, test_labels, strict=True)
            ]
            for p, y in zip(np.asarray(probs, float), labels, strict=True)
        ]
    )


def ucme(probs, labels, test_probs, test_labels, kind="laplacian", h=1.0):
    dev = ucme_deviations(probs, labels, test_probs, test_labels, kind, h)
    return np.mean(np.mean(dev, axis=0) ** 2)


def cme_test(probs, labels, test_probs, test_labels, kind="laplacian", h=1.0):
    """``AsymptoticCMETest``: (estimate, statistic, p) with ``inv(cov)`` as the test file."""
    dev = ucme_deviations(probs, labels, test_probs, test_labels, kind, h)
    n, m = dev.shape
    mean = dev.mean(axis=0)
    cov = np.cov(dev, rowvar=False).reshape(m, m)
    statistic = n * mean @ np.linalg.inv(cov) @ mean
    return np.mean(mean**2), statistic, stats.chi2.sf(statistic, m)
