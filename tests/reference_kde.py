"""Float64 NumPy ports of the ECE-KDE and proper-calibration-error reference code.

Function for function from ``tpopordanoska/ece-kde`` (``ece_kde.py``) and
``tpopordanoska/proper-calibration-error`` (``src/calibration_error/bregman_ce.py``),
PyTorch replaced by NumPy/SciPy in float64 (``torch.lgamma`` -> ``gammaln``,
``torch.logsumexp`` -> ``logsumexp``), the diagonal trick and the special cases kept.
Written independently of jaxcal's tiled kernels; used as the oracle of
tests/metrics/test_ece_kde.py and by benchmarks/bench_kernel_ce.py.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, logsumexp

_DIAG = np.finfo(np.float32).min  # torch.finfo(torch.float).min


def beta_kernel(z, zi, bandwidth):
    p = zi / bandwidth + 1
    q = (1 - zi) / bandwidth + 1
    z = z[..., None, :]  # z.unsqueeze(-2)
    log_beta = gammaln(p) + gammaln(q) - gammaln(p + q)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_num = (p - 1) * np.log(z) + (q - 1) * np.log(1 - z)
    return log_num - log_beta


def dirichlet_kernel(z, bandwidth):
    alphas = z / bandwidth + 1
    log_beta = np.sum(gammaln(alphas), axis=1) - gammaln(np.sum(alphas, axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_num = np.log(z) @ (alphas - 1).T
    return log_num - log_beta


def get_kernel(f, bandwidth):
    if f.shape[1] == 1:
        log_kern = np.squeeze(beta_kernel(f, f, bandwidth))
    else:
        log_kern = dirichlet_kernel(f, bandwidth)
    return log_kern + np.diag(_DIAG * np.ones(len(f)))


def get_bandwidth(f):
    """ece-kde's choice (its max_l = 0 start kept: returns -1 if no likelihood > 0)."""
    bandwidths = np.concatenate([np.logspace(-5, -1, 15), np.linspace(0.2, 1, 5)])
    max_b, max_l = -1, 0
    n = len(f)
    for b in bandwidths:
        log_fhat = logsumexp(get_kernel(f, b), axis=1) - np.log((n - 1) * b)
        ll = np.sum(log_fhat)
        if ll > max_l:
            max_l, max_b = ll, b
    return max_b


def get_bandwidth_proper(f):
    """proper-calibration-error's choice."""
    bandwidths = np.concatenate([np.logspace(-5, -1, 50), np.linspace(0.2, 1, 5)])
    max_b, max_l = -1, np.finfo(np.float32).min
    n = len(f)
    for b in bandwidths:
        log_fhat = logsumexp(get_kernel(f, b), axis=1) - np.log(n - 1)
        ll = np.sum(log_fhat)
        if ll > max_l:
            max_l, max_b = ll, b
    return max_b


def get_kde_for_ece(f, y, log_kern, p):
    f = np.squeeze(f, axis=1)
    n = len(f)
    idx = np.where(y == 1)[0]
    if idx.size == 0:
        return np.sum(np.abs(-f) ** p) / n
    if idx.size == 1:
        i = idx[0]
        log_kern = np.concatenate([log_kern[:i], log_kern[i + 1 :]])
        f_one = f[i]
        f = np.concatenate([f[:i], f[i + 1 :]])
    log_kern_y = log_kern[:, idx]
    ratio = np.exp(logsumexp(log_kern_y, axis=1) - logsumexp(log_kern, axis=1))
    ratio = np.abs(ratio - f) ** p
    if idx.size == 1:
        return (ratio.sum() + f_one**p) / n
    return np.mean(ratio)


def get_ratio_binary(f, y, bandwidth, p):
    return get_kde_for_ece(f, y, get_kernel(f, bandwidth), p)


def get_ratio_canonical(f, y, bandwidth, p):
    """The log path of the reference (its linear path for K <= 60 is the same quantity)."""
    log_kern = get_kernel(f, bandwidth)
    y_onehot = np.eye(f.shape[1])[y]
    with np.errstate(divide="ignore"):
        log_y = np.log(y_onehot)
    log_den = logsumexp(log_kern, axis=1)
    final = 0
    for k in range(f.shape[1]):
        inner = np.exp(logsumexp(log_kern + log_y[:, k][None, :], axis=1) - log_den)
        final = final + np.abs(inner - f[:, k]) ** p
    return np.mean(final)


def get_ratio_marginal(f, y, bandwidth, p):
    y_onehot = np.eye(f.shape[1])[y]
    log_kern = beta_kernel(f, f, bandwidth)  # (N, N, K): [i, j, c]
    log_kern = log_kern + (_DIAG * np.eye(len(f)))[:, :, None]
    log_kern_y = log_kern * y_onehot[None, :, :]
    log_kern_y[log_kern_y == 0] = _DIAG
    ratio = np.exp(logsumexp(log_kern_y, axis=1) - logsumexp(log_kern, axis=1))
    return np.sum(np.mean(np.abs(ratio - f) ** p, axis=0))


def get_ratio_toplabel(f, y, bandwidth, p):
    f_max = f.max(1)[:, None]
    y_max = (y == f.argmax(1)).astype(int)
    return get_ratio_binary(f_max, y_max, bandwidth, p)


def get_ece_kde(f, y, bandwidth, p, mc_type):
    f = np.asarray(f, float)
    if f.shape[1] == 1:
        return 2 * get_ratio_binary(f, y, bandwidth, p)
    if mc_type == "canonical":
        return get_ratio_canonical(f, y, bandwidth, p)
    if mc_type == "marginal":
        return get_ratio_marginal(f, y, bandwidth, p)
    return get_ratio_toplabel(f, y, bandwidth, p)


# ---------------------------------------------------------------- proper calibration error


def get_ratio(f, y, bandwidth):
    log_kern = get_kernel(f, bandwidth)
    y_onehot = np.eye(f.shape[1])[y]
    with np.errstate(divide="ignore"):
        log_kern_y = logsumexp(log_kern[:, :, None] + np.log(y_onehot)[None, :, :], axis=1)
    return np.exp(log_kern_y - logsumexp(log_kern, axis=1)[:, None])


def l2_norm(x):
    return np.sum(x**2, axis=1)


def negative_entropy(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sum(x * np.log(x), axis=1)
    return np.where(np.isnan(out), 0, out)


def _grad(convex, g):
    if convex is l2_norm:
        return 2 * g
    return np.log(g) + 1


def get_bregman_ce(convex, gx, y, bandwidth):
    gx = np.asarray(gx, float)
    ratio = np.maximum(get_ratio(gx, y, bandwidth), 1e-45)
    dot = np.sum(_grad(convex, gx) * (ratio - gx), axis=1)
    return np.mean(convex(ratio) - convex(gx) - dot)


def get_classwise_bregman_ce(convex, gx, y, bandwidth):
    gx = np.asarray(gx, float)
    out = []
    for i in range(gx.shape[1]):
        cy = (y == i).astype(int)
        cg = np.stack([1 - gx[:, i], gx[:, i]], axis=1)
        ratio = get_ratio(cg, cy, bandwidth)
        dot = np.sum(_grad(convex, cg) * (ratio - cg), axis=1)
        out.append(np.mean(convex(ratio) - convex(cg) - dot))
    return np.mean(out)
