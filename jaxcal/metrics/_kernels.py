"""What the kernel calibration errors share: kernels on predictions, the median heuristic,
and kernel double sums that never form an (N, N) array.

The SKCE (``jaxcal/metrics/_skce.py``), the UCME (``jaxcal/metrics/_ucme.py``) and their
tests (``jaxcal/stats/_kernel/``) evaluate a kernel ``k(x_i, x_j)`` between the rows of the
predictions the kernel sees, ``X`` ``(N, D)``:

* ``"laplacian"``: ``k = exp(-||x - x'||_2 / h)`` (KernelFunctions.jl's
  ``ExponentialKernel() ∘ ScaleTransform(1 / h)``);
* ``"gaussian"``: ``k = exp(-||x - x'||_2^2 / (2 h^2))`` (``SqExponentialKernel() ∘
  ScaleTransform(1 / h)``).

Double sums ``sum_ij k(x_i, x_j) <A_i, A_j>`` are computed tile by tile (``pair_sum()``):
``TILE`` x ``TILE`` blocks of the kernel matrix, the upper triangle of tiles only (the
matrix is symmetric), each formed from a Gram product and reduced at once, so memory is
O(TILE^2 + N D) at any N; the scan body is rematerialised under ``grad`` (no tile is kept
for the backward pass). For one-dimensional ``X`` and the Laplacian kernel,
``laplace_pair_sum()`` does the same sum exactly in O(N log N).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.numerics import bisect_nonnegative, safe_sqrt, vary_like
from jaxcal._core.sort import argsort

KERNELS = ("laplacian", "gaussian")

#: Rows per side of a tile of the kernel matrix: a float32 tile is 4 MiB (the measured
#: optimum on a 2-core CPU lies between 512 and 1024; 2048 is 15 % slower).
TILE = 1024

#: The median heuristic looks at the pairwise distances of at most this many rows (a
#: deterministic, evenly strided subsample beyond): 523,776 pairs.
MEDIAN_ROWS = 1024


def distances(xi: jax.Array, xj: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(d, d^2)``: Euclidean distances ``(B1, B2)`` between the rows of ``xi``, ``xj``.

    One column: the exact ``|x_i - x_j|``. Several: ``|x_i|^2 + |x_j|^2 - 2 x_i . x_j``
    (a matrix product, clipped at 0), whose round-off is a few ulps of ``|x|^2``: for rows
    centred first (``centred()``) and distances above ~1e-3 this is a relative error of
    ~1e-4 in float32 at most, nothing in float64. The root has a zero gradient at 0.
    """
    if xi.shape[1] == 1:
        diff = xi[:, 0][:, None] - xj[:, 0][None, :]
        return jnp.abs(diff), diff * diff
    sqi = jnp.sum(xi * xi, axis=1)
    sqj = jnp.sum(xj * xj, axis=1)
    d2 = jnp.maximum(sqi[:, None] + sqj[None, :] - 2 * (xi @ xj.T), 0)
    return safe_sqrt(d2), d2


def kernel_values(d: jax.Array, d2: jax.Array, h: jax.Array, kernel: str) -> jax.Array:
    """The kernel from distances ``d`` (and their squares ``d2``) at bandwidth ``h``."""
    if kernel == "laplacian":
        return jnp.exp(-d / h)
    return jnp.exp(-d2 / (2 * h * h))


def kernel_matrix(xi: jax.Array, xj: jax.Array, h: jax.Array, kernel: str) -> jax.Array:
    """``k(x_i, x_j)`` ``(B1, B2)`` (no diagonal fix-up: see ``pair_sum()``)."""
    return kernel_values(*distances(xi, xj), h, kernel)


def centred(x: jax.Array, w: jax.Array) -> jax.Array:
    """``x`` minus its ``w``-weighted mean row: distances are unchanged, the Gram form's
    round-off (a few ulps of ``|x|^2``) smaller."""
    if x.shape[1] == 1:
        return x
    total = jnp.sum(w)
    mean = jnp.where(total > 0, (w @ x) / jnp.where(total > 0, total, 1), 0)
    return x - mean[None, :]


def _tiles(n: int, tile: int) -> tuple[int, int]:
    b = max(1, min(tile, n))
    return b, -(-n // b)


def _padded(x: jax.Array, rows: int) -> jax.Array:
    pad = rows - x.shape[0]
    if pad == 0:
        return x
    return jnp.concatenate([x, jnp.zeros((pad, *x.shape[1:]), x.dtype)])


def pair_sum(
    x: jax.Array,
    a: jax.Array,
    h: jax.Array,
    kernel: str,
    *,
    diagonal: bool,
    tile: int = TILE,
) -> jax.Array:
    """``sum_{i, j} k(x_i, x_j) <a_i, a_j>`` over all pairs (``diagonal``) or ``i != j``.

    ``x`` ``(N, D)``, ``a`` ``(N, C)``. Tiles of ``tile`` rows; only the tiles on and above
    the diagonal are formed (the others by symmetry), each as ``k * (a_I a_J^T)`` summed
    at once; the tiles' sums are added with Kahan compensation. On the diagonal
    ``k(x_i, x_i) = 1`` exactly (the Gram form's round-off is not trusted there).
    Memory: O(tile^2 + N (D + C)).
    """
    n, dtype = x.shape[0], x.dtype
    b, t = _tiles(n, tile)
    xs = _padded(x, b * t).reshape(t, b, x.shape[1])
    as_ = _padded(a, b * t).reshape(t, b, a.shape[1])
    rows, cols = np.triu_indices(t)
    eye = jnp.eye(b, dtype=bool)

    @jax.checkpoint
    def tile_sum(i, j):
        k = kernel_matrix(xs[i], xs[j], h, kernel)
        g = as_[i] @ as_[j].T
        same = eye & (i == j)
        terms = jnp.where(same, g if diagonal else 0, k * g)
        return jnp.sum(terms) * jnp.where(i == j, 1, 2).astype(dtype)

    def body(carry, ij):
        total, comp = carry
        y = tile_sum(*ij) - comp
        new = total + y
        return (new, (new - total) - y), None

    zero = vary_like(jnp.zeros((), dtype), a)
    (total, _), _ = jax.lax.scan(
        body, (zero, zero), (jnp.asarray(rows, jnp.int32), jnp.asarray(cols, jnp.int32))
    )
    return total


def kernel_matvec(
    x: jax.Array, e: jax.Array, h: jax.Array, kernel: str, v: jax.Array, *, tile: int = TILE
) -> jax.Array:
    """``H v`` ``(N, R)`` for ``H_ij = k(x_i, x_j) <e_i, e_j>`` (diagonal ``k = 1``), ``v``
    ``(N, R)``: tile by tile, never the (N, N) matrix; O(N^2 (D + C + R)) work."""
    n = x.shape[0]
    b, t = _tiles(n, tile)
    xs = _padded(x, b * t).reshape(t, b, x.shape[1])
    es = _padded(e, b * t).reshape(t, b, e.shape[1])
    vs = _padded(v, b * t).reshape(t, b, v.shape[1])
    eye = jnp.eye(b, dtype=bool)

    def row_tile(i):
        def body(acc, j):
            k = jnp.where(eye & (i == j), 1, kernel_matrix(xs[i], xs[j], h, kernel))
            return acc + (k * (es[i] @ es[j].T)) @ vs[j], None

        init = vary_like(jnp.zeros((b, v.shape[1]), v.dtype), v)
        acc, _ = jax.lax.scan(body, init, jnp.arange(t))
        return acc

    out = jax.lax.map(row_tile, jnp.arange(t))
    return out.reshape(b * t, v.shape[1])[:n]


def laplace_pair_sum(x: jax.Array, a: jax.Array, h: jax.Array) -> jax.Array:
    """``sum_{i != j} a_i a_j exp(-|x_i - x_j| / h)`` for scalar ``x`` ``(N,)``, exactly, in
    O(N log N) time and O(N) memory.

    Over ``x`` sorted ascending, ``L_i = sum_{j <= i} a_j exp(-(x_i - x_j) / h)`` obeys
    ``L_i = a_i + exp(-(x_i - x_{i-1}) / h) L_{i-1}``: a linear recurrence whose factors
    lie in [0, 1], evaluated by ``jax.lax.associative_scan`` (O(log N) depth; stable for
    every h > 0, unlike rescaled prefix sums, which overflow for small h). Each unordered
    pair is counted once in the strict prefix ``L_i - a_i``, so

    .. math:: \\sum_{i \\ne j} a_i a_j e^{-|x_i - x_j|/h}
              = 2 \\sum_i a_i\\, e^{-(x_i - x_{i-1})/h} L_{i-1}.

    Ties are harmless (their factor is 1 whatever their order).
    """
    order = argsort(x)
    xs, as_ = x[order], a[order]
    gap = jnp.concatenate([jnp.zeros((1,), xs.dtype), xs[1:] - xs[:-1]])
    decay = jnp.exp(-gap / h)

    def combine(left, right):
        d1, s1 = left
        d2, s2 = right
        return d1 * d2, s1 * d2 + s2

    _, cum = jax.lax.associative_scan(combine, (decay, as_))
    before = jnp.concatenate([jnp.zeros((1,), cum.dtype), cum[:-1]])
    return 2 * jnp.sum(as_ * decay * before)


def median_bandwidth(x: jax.Array, w: jax.Array, max_rows: int = MEDIAN_ROWS) -> jax.Array:
    """The median heuristic: the weighted (lower) median of ``||x_i - x_j||_2``, i < j.

    Pairs are weighted ``w_i w_j`` (zero-weight padding drops out). Beyond ``max_rows``
    rows, the distances among ``max_rows`` evenly strided rows (``floor(r N / max_rows)``,
    deterministic). When half the pairs or more are ties at distance 0, the median of the
    positive distances; when no two rows differ, 1 (the kernel matrix is then all ones
    whatever the bandwidth). Found by bisection on the bits of the distance (31 counting
    passes, no sort). The bandwidth is a data-driven hyperparameter: it carries no
    gradient (``stop_gradient``).
    """
    x, w = jax.lax.stop_gradient(x), jax.lax.stop_gradient(w)
    n = x.shape[0]
    if n > max_rows:
        idx = (np.arange(max_rows, dtype=np.int64) * n) // max_rows
        x, w = x[idx], w[idx]
        n = max_rows
    d, _ = distances(x, x)
    upper = jnp.triu(jnp.ones((n, n), bool), 1)
    pw = jnp.where(upper, w[:, None] * w[None, :], 0)
    positive = jnp.where(d > 0, pw, 0)
    tied = jnp.sum(pw) - jnp.sum(positive) >= jnp.sum(pw) / 2
    pw = jnp.where(tied, positive, pw)
    half = jnp.sum(pw) / 2

    def reaches(t):
        return jnp.sum(jnp.where(d <= t, pw, 0)) >= half

    med = bisect_nonnegative(reaches, (), x.dtype)
    return jnp.where(jnp.sum(pw) > 0, med, 1).astype(x.dtype)


def resolve_bandwidth(bandwidth: Any, x: jax.Array, w: jax.Array) -> jax.Array:
    """``bandwidth`` in the compute dtype, or the median heuristic where it is None."""
    if bandwidth is None:
        return median_bandwidth(x, w)
    return jnp.asarray(bandwidth).astype(x.dtype)
