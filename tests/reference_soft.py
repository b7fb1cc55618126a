"""Float64 NumPy oracles of the differentiable objectives, and the data their tests share.

Oracles are transcriptions of the papers' formulas, independent of the library's algebra:
the soft ECE divides by the soft bin masses as Eq. (11) does, the MMCE forms the full
kernel matrix (MMCE_w term by term as the reference code), and the smooth ECE sums the
reflected kernel's mirror images explicitly. relplot is the external reference for the
smooth ECE (in its test file). Nothing here imports jaxcal.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special

# ---------------------------------------------------------------------------------------
# float64 oracles
# ---------------------------------------------------------------------------------------


def scores_targets(probs, labels):
    probs, labels = np.asarray(probs, np.float64), np.asarray(labels)
    if probs.ndim == 1:
        return probs, (labels == 1).astype(np.float64)
    return probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(np.float64)


def np_soft_ece(probs, labels, temperature, n_bins=15, norm="l1", weights=None):
    """Karandikar et al. (2021), Eq. (11), as written: soft masses, confidences, accuracies."""
    s, y = scores_targets(probs, labels)
    w = np.ones_like(s) if weights is None else np.asarray(weights, np.float64)
    anchors = (np.arange(n_bins) + 0.5) / n_bins
    u = scipy.special.softmax(-((s[:, None] - anchors[None, :]) ** 2) / temperature, axis=1)
    total = 0.0
    for j in range(n_bins):
        mass = np.sum(w * u[:, j])
        if mass == 0:
            continue
        conf = np.sum(w * u[:, j] * s) / mass
        acc = np.sum(w * u[:, j] * y) / mass
        gap = abs(acc - conf)
        total += mass / w.sum() * (gap if norm == "l1" else gap**2)
    return total if norm == "l1" else math.sqrt(total)


def np_mmce(probs, labels, bandwidth=0.4, variant="unweighted", weights=None):
    """Kumar et al. (2018): Eq. (2), and MMCE_w term by term as their reference code."""
    r, c = scores_targets(probs, labels)
    w = np.ones_like(r) if weights is None else np.asarray(weights, np.float64)
    k = np.exp(-np.abs(r[:, None] - r[None, :]) / bandwidth)
    if variant == "unweighted":
        a = w * (c - r)
        return math.sqrt(max(a @ k @ a, 0.0)) / w.sum()
    ok, bad = c == 1, c == 0
    m, n = w[ok].sum(), w[bad].sum()
    if m == 0 or n == 0:
        return 0.0
    p, q = w[ok] * (1 - r[ok]), w[bad] * r[bad]
    mmd = (
        p @ k[np.ix_(ok, ok)] @ p / m**2
        + q @ k[np.ix_(bad, bad)] @ q / n**2
        - 2 * p @ k[np.ix_(ok, bad)] @ q / (m * n)
    )
    return math.sqrt(max(mmd, 0.0))


def np_smooth_ece(probs, labels, sigma, weights=None, n_eval=8001):
    """integral_0^1 |sum_i w_i (y_i - s_i) K(t, s_i)| / W dt, K summed over mirror images."""
    s, y = scores_targets(probs, labels)
    w = np.ones_like(s) if weights is None else np.asarray(weights, np.float64)
    t = np.linspace(0, 1, n_eval)
    reps = int(np.ceil(1 + 8 * sigma))
    images = [sign * s + 2 * k for k in range(-reps, reps + 1) for sign in (1, -1)]
    kern = sum(np.exp(-0.5 * ((t[:, None] - im[None, :]) / sigma) ** 2) for im in images)
    kern /= sigma * math.sqrt(2 * math.pi)
    resid = kern @ (w * (y - s)) / w.sum()
    return float(np.trapezoid(np.abs(resid), t))


# ---------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------


N = 256  # one sample size for most tests: each new shape is a compilation
N_GRAD = 96  # finite-difference checks evaluate the function O(10) times per direction


def multiclass(n=N, k=5, seed=0, scale=2.0):
    """Overconfident softmax outputs: labels drawn from the logits at temperature 1.5."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * scale
    probs = scipy.special.softmax(logits, axis=1)
    truth = scipy.special.softmax(logits / 1.5, axis=1).cumsum(axis=1)
    labels = np.minimum((truth < rng.random(n)[:, None]).sum(axis=1), k - 1)
    return logits, probs, labels


def binary(n=N, seed=1, shift=0.1):
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n)
    truth = np.clip(p + shift * np.sin(3 * p), 0, 1)
    return p, (rng.random(n) < truth).astype(np.int32)
