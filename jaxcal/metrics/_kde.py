"""Leave-one-out Dirichlet kernel density estimates of E[Y | f(X)], in log space and in
tiles: what ECE-KDE and the proper calibration errors share (``jaxcal/metrics/_ece_kde.py``).

The Dirichlet kernel centred at a prediction ``f_j`` (rows on the simplex, K >= 2; a
binary score ``s`` is the row ``(s, 1 - s)``, whose Dirichlet kernel is the reference's
Beta kernel) evaluated at ``z``:

.. math:: \\log k_b(z; f_j) = \\sum_c \\frac{f_{jc}}{b} \\log z_c - \\log B(f_j / b + 1),

a matrix product of ``log z`` with ``f / b`` minus a per-centre constant. The ratio
``r_i = sum_{j != i} k_ij y_j / sum_{j != i} k_ij`` is formed tile by tile with a running
row maximum (the online log-sum-exp of attention kernels): the densities themselves, up
to e^(1e6) at small bandwidths, never appear, so float32 neither overflows nor divides
0 by 0 at any K. ``log z`` is taken of ``max(z, tiny)`` (the smallest normal float): an
exact 0 in a centre multiplies it by 0, and an exact 0 in an evaluation point gives a
very small finite density, where the reference's ``log 0`` gives NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.numerics import safe_divide, vary_like
from jaxcal.metrics._kernels import TILE

#: The reference's bandwidth grids: tpopordanoska/ece-kde ``get_bandwidth`` and
#: tpopordanoska/proper-calibration-error ``get_bandwidth``.
ECE_KDE_GRID = np.concatenate([np.logspace(-5, -1, 15), np.linspace(0.2, 1, 5)])
PROPER_CE_GRID = np.concatenate([np.logspace(-5, -1, 50), np.linspace(0.2, 1, 5)])


def simplex_rows(scores: jax.Array) -> jax.Array:
    """Binary scores ``(N,)`` as rows ``(s, 1 - s)`` ``(N, 2)``."""
    return jnp.stack([scores, 1 - scores], axis=1)


def log_points(f: jax.Array) -> jax.Array:
    """``log(max(f, tiny))``: the evaluation points in log space, finite."""
    return jnp.log(jnp.maximum(f, jnp.finfo(f.dtype).tiny))


def log_beta(f: jax.Array, b: jax.Array) -> jax.Array:
    """``log B(f_j / b + 1)`` ``(N,)``, the Dirichlet normaliser of each centre."""
    alpha = f / b + 1
    return jnp.sum(jax.lax.lgamma(alpha), axis=1) - jax.lax.lgamma(jnp.sum(alpha, axis=1))


def _padded(x, rows):
    pad = rows - x.shape[0]
    return x if pad == 0 else jnp.concatenate([x, jnp.zeros((pad, *x.shape[1:]), x.dtype)])


def loo_sums(f, targets, w, b, tile=TILE):
    """Leave-one-out kernel sums, tile by tile: ``(m, num, den)``.

    For each row i: ``den_i = sum_{j != i} w_j k_ij e^{-m_i}``, ``num_i = sum_{j != i} w_j
    k_ij e^{-m_i} targets_j`` ``(N, C)``, with ``m_i`` the running maximum of the log
    terms (``stop_gradient``: the ratio ``num / den`` does not depend on it, the log
    density ``m + log den`` only through the forward value). Centres of weight 0 drop out
    (log weight -inf). Memory O(tile^2 + N (K + C)); the scan body is rematerialised under
    ``grad``.
    """
    n, k = f.shape
    dtype = f.dtype
    bt = max(1, min(tile, n))
    t = -(-n // bt)
    lz = _padded(log_points(f), bt * t).reshape(t, bt, k)
    a = _padded(f / b, bt * t).reshape(t, bt, k)
    lb = _padded(log_beta(f, b), bt * t).reshape(t, bt)
    lw = jnp.where(w > 0, jnp.log(jnp.where(w > 0, w, 1)), -jnp.inf)
    lw = jnp.concatenate([lw, jnp.full((bt * t - n,), -jnp.inf, dtype)]).reshape(t, bt)
    ys = _padded(targets.astype(dtype), bt * t).reshape(t, bt, targets.shape[1])
    floor = jnp.asarray(jnp.finfo(dtype).min / 4, dtype)  # a finite "-inf" for the max
    eye = jnp.eye(bt, dtype=bool)

    def row_tile(i):
        @jax.checkpoint
        def body(carry, j):
            m, num, den = carry
            logk = lz[i] @ a[j].T - lb[j][None, :] + lw[j][None, :]
            logk = jnp.where(eye & (i == j), -jnp.inf, logk)
            new = jax.lax.stop_gradient(jnp.maximum(m, jnp.max(logk, axis=1)))
            scale = jnp.exp(m - new)
            e = jnp.exp(logk - new[:, None])
            return (new, num * scale[:, None] + e @ ys[j], den * scale + jnp.sum(e, axis=1)), None

        init = (
            jnp.full((bt,), floor, dtype),
            jnp.zeros((bt, ys.shape[2]), dtype),
            jnp.zeros((bt,), dtype),
        )
        (m, num, den), _ = jax.lax.scan(body, vary_like(init, f), jnp.arange(t))
        return m, num, den

    m, num, den = jax.lax.map(row_tile, jnp.arange(t))
    return m.reshape(-1)[:n], num.reshape(bt * t, ys.shape[2])[:n], den.reshape(-1)[:n]


def loo_ratio(f, targets, w, b, tile=TILE):
    """``r_i = sum_{j != i} w_j k_ij targets_j / sum_{j != i} w_j k_ij`` ``(N, C)``; 0 where
    no other centre has weight (the reference's empty numerator)."""
    _, num, den = loo_sums(f, targets, w, b, tile)
    return safe_divide(num, den[:, None])


def loo_log_likelihood(f, w, b, penalise_bandwidth: bool):
    """The references' bandwidth criterion, ``sum_i w_i log fhat_{-i}(f_i)`` with

    ``log fhat_{-i} = log sum_{j != i} w_j k_ij - log(sum_{j != i} w_j)`` (the average of
    the other centres' densities) ``- log b`` when ``penalise_bandwidth`` (ece-kde's
    ``- log((n - 1) b)``; proper-calibration-error's ``- log(n - 1)`` has no ``log b``).
    Weights scaled to a maximum of 1; for equal weights the references' sums exactly.
    """
    m, _, den = loo_sums(
        f, jnp.zeros((f.shape[0], 1), f.dtype), w, b
    )  # (a 0-column carry loses its shard_map type)
    others = jnp.sum(w) - w
    live = (w > 0) & (den > 0) & (others > 0)
    log_fhat = m + jnp.log(jnp.where(live, den, 1)) - jnp.log(jnp.where(live, others, 1))
    if penalise_bandwidth:
        log_fhat = log_fhat - jnp.log(b)
    return jnp.sum(jnp.where(live, w * log_fhat, 0))


def select_bandwidth(f, w, grid: np.ndarray, penalise_bandwidth: bool):
    """The grid's bandwidth of largest leave-one-out likelihood (the first among ties);
    no gradient (a data-driven hyperparameter)."""
    f, w = jax.lax.stop_gradient(f), jax.lax.stop_gradient(w)
    values = jnp.asarray(grid, f.dtype)

    def score(b):
        return loo_log_likelihood(f, w, b, penalise_bandwidth)

    scores = jax.lax.map(score, values)
    scores = jnp.where(jnp.isnan(scores), -jnp.inf, scores)
    return values[jnp.argmax(scores)]
