"""Float64 NumPy / SciPy oracles for the calibrators, written from the definitions.

Nothing here imports jaxcal: each objective is the textbook formula, minimised with
SciPy's own solvers.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit, log_softmax, logsumexp, softmax


def temperature_nll(t, logits, labels, weights=None):
    """Weighted mean NLL of softmax(logits / t), float64."""
    z = np.asarray(logits, np.float64) / t
    nll = logsumexp(z, axis=1) - z[np.arange(len(labels)), labels]
    return float(np.average(nll, weights=weights))


def temperature_scipy(logits, labels, weights=None, bounds=(1e-4, 1e4)):
    """T minimising the NLL by SciPy's bounded Brent minimiser on T (very tight xatol)."""
    res = minimize_scalar(
        temperature_nll,
        bounds=bounds,
        method="bounded",
        args=(logits, labels, weights),
        options={"xatol": 1e-12, "maxiter": 10_000},
    )
    return float(res.x), float(res.fun)


def affine_objective(kind, x, labels, weights=None, l2=0.0, lam=0.0, mu=0.0):
    """(loss(theta), grad(theta), unpack) of vector / matrix scaling with Kull et al.'s penalties."""
    x = np.asarray(x, np.float64)
    n, k = x.shape
    y = np.eye(k)[labels]
    w = np.ones(n) if weights is None else np.asarray(weights, np.float64)
    wn = w / w.sum()

    def unpack(theta):
        if kind == "vector":
            return theta[:k], theta[k:]
        return theta[: k * k].reshape(k, k), theta[k * k :]

    def fun(theta):
        a, b = unpack(theta)
        logits = (x * a + b) if kind == "vector" else (x @ a.T + b)
        logp = log_softmax(logits, axis=1)
        loss = -np.sum(wn * np.sum(y * logp, axis=1))
        dlogits = wn[:, None] * (np.exp(logp) - y)
        gb = dlogits.sum(axis=0)
        ga = (dlogits * x).sum(axis=0) if kind == "vector" else dlogits.T @ x
        if kind != "vector":
            loss += l2 * (np.sum(a**2) + np.sum(b**2))
            ga = ga + 2 * l2 * a
            gb = gb + 2 * l2 * b
            off = a * (1 - np.eye(k))
            loss += lam / (k * (k - 1)) * np.sum(off**2) + mu / k * np.sum(b**2)
            ga = ga + 2 * lam / (k * (k - 1)) * off
            gb = gb + 2 * mu / k * b
        return loss, np.concatenate([ga.ravel(), gb])

    return fun, unpack


def affine_scipy(kind, x, labels, weights=None, **penalty):
    """Minimise the affine objective with SciPy's L-BFGS-B from the identity; (loss, probs fn)."""
    x = np.asarray(x, np.float64)
    k = x.shape[1]
    fun, unpack = affine_objective(kind, x, labels, weights, **penalty)
    a0 = np.ones(k) if kind == "vector" else np.eye(k).ravel()
    res = minimize(
        fun,
        np.concatenate([a0, np.zeros(k)]),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 20_000, "gtol": 1e-12, "ftol": 1e-16},
    )
    a, b = unpack(res.x)

    def probs(xnew):
        xnew = np.asarray(xnew, np.float64)
        return softmax((xnew * a + b) if kind == "vector" else (xnew @ a.T + b), axis=1)

    return float(res.fun), probs


def logistic_scipy(features, targets, weights=None):
    """Unpenalised logistic regression with soft targets in [0, 1]: (coef, intercept)."""
    f = np.asarray(features, np.float64)
    f = f[:, None] if f.ndim == 1 else f
    t = np.asarray(targets, np.float64)
    w = np.ones(len(t)) if weights is None else np.asarray(weights, np.float64)
    wn = w / w.sum()

    def fun(theta):
        z = f @ theta[:-1] + theta[-1]
        loss = np.sum(wn * (np.logaddexp(0, z) - t * z))
        r = wn * (expit(z) - t)
        return loss, np.concatenate([f.T @ r, [r.sum()]])

    res = minimize(
        fun,
        np.zeros(f.shape[1] + 1),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 20_000, "gtol": 1e-12, "ftol": 1e-16},
    )
    return res.x[:-1], res.x[-1]


def histogram_means(bins, labels, n_bins, weights=None):
    """Per-bin weighted mean label by an explicit loop; NaN marks an empty bin."""
    w = np.ones(len(labels)) if weights is None else np.asarray(weights, np.float64)
    out = np.full(n_bins, np.nan)
    for b in range(n_bins):
        idx = [i for i in range(len(labels)) if bins[i] == b and w[i] > 0]
        if idx:
            out[b] = sum(w[i] * labels[i] for i in idx) / sum(w[i] for i in idx)
    return out
