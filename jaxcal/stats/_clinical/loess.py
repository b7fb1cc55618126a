"""LOWESS (Cleveland 1979): local linear fits with tricube weights, in O(N log N).

The fit at x_i uses its k = floor(frac N + 1e-10) nearest neighbours (a window of
consecutive sorted points, found as statsmodels and R find it: the window slides right
while x_i > (x_left + x_right) / 2), the radius h_i = the largest distance in the window,
and weights ``r_j (1 - (|x_j - x_i| / h_i)^3)^3``. A local linear fit needs five weighted
sums over the window; the naive loop costs O(N k) = O(N^2) (statsmodels: a minute at N =
1e5).

Up to ``DENSE_MAX`` samples the sums are taken directly over all pairs (cheap to compile,
exact). Beyond, the tricube weight is expanded, 1 - 3u^3 + 3u^6 - u^9 with u = |d| / h,
so each sum is a combination of the window's moments sum |d|^e v_j (e <= 11, v in
{r, r y}), taken separately left of x_i and right of it. Prefix sums of the powers of x
would give them in O(1), but expanding (x_i - x_j)^e about a fixed origin cancels
catastrophically ((range / h)^11). Every sum here is instead of non-negative terms in a
frame where they are at most 1:

* a segment tree over blocks of ``BLOCK`` sorted samples keeps, for every node, the
  moments about its own right end (and left end), scaled by its own span; every shift
  (child to parent, node to a frame) is a product of numbers in [0, 1] with binomial
  coefficients, all positive;
* the queries are taken in the same blocks: the part of the window left of a block that
  every one of its queries holds (the core) is one tree walk per block, the rest of each
  query's left part (the fringe [L_i, L_max)) a cumulative sum within the runs
  [L_min, L_max) (disjoint across blocks: window ends never move back), both in the
  block's frame; the same on the right; the block's own samples are summed directly.

Per query: two gathers, two products of 12 moments with the powers of its offset in the
frame (``_tricube_sums()``), and 32 direct terms; per block two tree walks of
O(log N) nodes. Measured (float32, one core, loaded machine): 9.7 ms at N = 1e4, 0.16 s
at 1e5, 2.2 s at 1e6, against 53 ms, 0.87 s and 13 s for one tree walk per query over a
tree of single samples. float32 keeps ~1e-5 absolute accuracy on the fit.

References:
  Cleveland (1979), "Robust locally weighted regression and smoothing scatterplots",
  JASA 74(368); statsmodels' ``lowess`` (windows, weights, robustness weights).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.isotonic import float_keys
from jaxcal._core.numerics import safe_divide
from jaxcal._core.sort import argsort, sort
from jaxcal.stats._clinical.loess_tree import (
    ORDERS,
    Tree,
    build,
    moments,
    powers,
    query,
    summed_moments,
)

#: Samples per block: the leaves of the tree, and the queries that share its walks.
BLOCK = 32
#: Up to this ratio of a block's frame to a query's radius, ``rho**t M_t`` is taken as a
#: product; beyond, as ``exp(t log rho + log M_t)`` (no overflow of ``rho**11``).
_RHO_PRODUCT = 8.0


#: Coefficients of 1 - 3u^3 + 3u^6 - u^9.
_TRICUBE = (1.0, -3.0, 3.0, -1.0)


def _tricube_matrices() -> np.ndarray:
    """``A[p, q, t]``: sum_m c_m C(3m + p, t) [3m + p - t = q], the tricube sums' weights.

    With moments S_t of one side, the sum over its points of w (d/h)^p (w the tricube
    weight, 1 - 3u^3 + 3u^6 - u^9 = sum_m c_m u^(3m)) is sum_{q, t} delta^q A[p, q, t] S_t:
    the binomial expansion of (delta + t)^(3m + p).
    """
    a = np.zeros((3, ORDERS, ORDERS))
    for p in range(3):
        for m, c in enumerate(_TRICUBE):
            e = 3 * m + p
            for t in range(e + 1):
                a[p, e - t, t] += c * math.comb(e, t)
    return a


_TRICUBE_MATRICES = _tricube_matrices()


def _tricube_sums(moments: jax.Array, delta: jax.Array, rho: jax.Array) -> jax.Array:
    """``(N, 3, 2)``: sum over one side's points of w (d/h)^p [1, y], p = 0, 1, 2, from the
    side's moments ``(N, ORDERS, 2)`` of t in a frame with d/h = delta + rho t.

    rho^t M_t is the moment of points within the query's radius (at most their weight);
    rho is ~1 (up to the ratio of the radii of a block's queries) but rho^11 alone may
    overflow (and M_11 underflow) where it is large, so the product is taken in logarithms
    there (M_t >= 0), in a branch taken only when some rho is that large (exponentials of
    every moment cost ~2 s at N = 1e6). Then one product with the powers of delta
    (``_tricube_matrices()``): 12 x 36 + 3 x 12 x 2 multiply-adds per query.
    """
    t = jnp.arange(ORDERS, dtype=moments.dtype)[None, :, None]

    def by_logs():
        big = jnp.maximum(rho, _RHO_PRODUCT)
        positive = moments > 0
        logs = jnp.log(jnp.where(positive, moments, 1))
        logged = jnp.where(positive, jnp.exp(t * jnp.log(big)[:, None, None] + logs), 0)
        return jnp.where((rho <= _RHO_PRODUCT)[:, None, None], direct, logged)

    rho_t = jnp.stack(powers(jnp.minimum(rho, _RHO_PRODUCT)), axis=-1)
    direct = rho_t[:, :, None] * moments
    scaled = jax.lax.cond(jnp.any(rho > _RHO_PRODUCT), by_logs, lambda: direct)
    # (N, q) powers of delta times A as a (q, p t) matrix: the weights (N, p, t) of S_t.
    matrix = jnp.asarray(_TRICUBE_MATRICES.transpose(1, 0, 2).reshape(ORDERS, -1), moments.dtype)
    weights = (jnp.stack(powers(delta), axis=-1) @ matrix).reshape(-1, 3, ORDERS)
    return jnp.einsum("npt,ntv->npv", weights, scaled)


def _segmented_cumsums(values: jax.Array, segment: jax.Array) -> jax.Array:
    """Inclusive cumulative sums of ``values`` (S, N, ...) along N within runs of equal
    ``segment`` (S, N): S scans in one ``associative_scan`` (one graph to compile).

    Sums of non-negative terms only (no difference of running totals, which would cancel
    across segments): a reset at each run's start.
    """
    starts = jnp.concatenate(
        [jnp.ones((segment.shape[0], 1), bool), segment[:, 1:] != segment[:, :-1]], axis=1
    )

    def combine(a, b):
        (va, fa), (vb, fb) = a, b
        keep = fb.reshape(fb.shape + (1,) * (vb.ndim - fb.ndim))
        return jnp.where(keep, vb, va + vb), fa | fb

    return jax.lax.associative_scan(combine, (values, starts), axis=1)[0]


def _window_sums(xn, v, left, k, hn):
    """``(N, 3, 2)``: sum_j w_ij ((x_j - x_i) / h_i)^p v_j, p = 0, 1, 2, over the window.

    Queries are cut into blocks of ``BLOCK`` consecutive samples (the tree's leaves).
    Block c's queries share: the window part left of the block that every one of them
    holds (the core [L_max, q_s), one tree walk per block), and the left fringe
    [L_i, L_max), read from a cumulative sum within the runs [L_min, L_max) (disjoint
    across blocks, since the window ends never move back), both in one frame anchored at
    the block's first sample; the same on the right. Per query: one shift of 12 moments
    per side (``_tricube_sums()``) and the direct sum over the block's own 32 samples.
    O(N log N / BLOCK) for the walks, O(N BLOCK) in all.
    """
    n, dtype = xn.shape[0], xn.dtype
    b = BLOCK
    nb = -(-n // b)
    size = nb * b
    iq = jnp.minimum(jnp.arange(size, dtype=jnp.int32), n - 1)  # padded queries repeat n - 1
    x = jnp.concatenate([xn, jnp.broadcast_to(xn[-1], (size - n,))])
    v = jnp.concatenate([v, jnp.zeros((size - n, 2), dtype)])
    xq, lq, hq = x[iq], left[iq], hn[iq]
    rq = lq + k
    safe = lambda a: jnp.where(a > 0, a, 1)  # noqa: E731
    hq = safe(hq)
    qs = jnp.arange(nb, dtype=jnp.int32) * b
    qe = qs + b
    l_min, l_max, r_min, r_max = lq[qs], lq[qe - 1], rq[qs], rq[qe - 1]
    a_left, a_right = xq[qs], xq[qe - 1]  # anchors: the block's first and last query
    s_left = safe(a_left - x[l_min])  # frames: every point the block's windows reach
    s_right = safe(x[jnp.maximum(r_max - 1, 0)] - a_right)

    # The tree over blocks of samples (leaf moments about the leaf's own ends).
    blocks_x, blocks_v = x.reshape(nb, b), v.reshape(nb, b, 2)
    xl, xr = blocks_x[:, 0], blocks_x[:, -1]
    span = safe(xr - xl)[:, None]
    leaf_right = summed_moments((xr[:, None] - blocks_x) / span, blocks_v)
    leaf_left = summed_moments((blocks_x - xl[:, None]) / span, blocks_v)
    levels = max(1, math.ceil(math.log2(nb)))
    pad = 2**levels - nb
    leaves = Tree(
        *(
            jnp.concatenate([a, jnp.zeros((pad, *a.shape[1:]), dtype)])
            for a in (leaf_right, leaf_left)
        ),
        *(jnp.concatenate([a, jnp.broadcast_to(a[-1], (pad,))]) for a in (xl, xr)),
    )
    tree = build(leaves, levels)

    # Cores: [l_max, qs) left of the block, [qe, r_min) right of it; whole leaves by the
    # tree, the partial leaf at the far end directly.
    c = jnp.arange(nb, dtype=jnp.int32)
    left_core, right_core = l_max < qs, r_min > qe
    lo_leaf = jnp.where(left_core, -(-l_max // b), c)
    hi_leaf = jnp.where(right_core, r_min // b, c + 1)
    ranges = ((lo_leaf, c), (c + 1, jnp.maximum(hi_leaf, c + 1)))
    core_l, core_r = query(tree, levels, ranges, (a_left, a_right), (s_left, s_right))
    pos = jnp.arange(b, dtype=jnp.int32)[None, :]
    part_l = (l_max // b * b)[:, None] + pos  # the leaf holding l_max
    part_l_on = left_core[:, None] & (part_l >= l_max[:, None]) & (part_l < (lo_leaf * b)[:, None])
    z = jnp.where(part_l_on, (a_left[:, None] - x[part_l]) / s_left[:, None], 0)
    core_l = core_l + summed_moments(z, jnp.where(part_l_on[..., None], v[part_l], 0))
    part_r = jnp.minimum(r_min // b, nb - 1)[:, None] * b + pos  # the leaf holding r_min
    part_r_on = right_core[:, None] & (part_r >= (hi_leaf * b)[:, None]) & (part_r < r_min[:, None])
    z = jnp.where(part_r_on, (x[part_r] - a_right[:, None]) / s_right[:, None], 0)
    core_r = core_r + summed_moments(z, jnp.where(part_r_on[..., None], v[part_r], 0))

    # Fringes: [l_min, min(l_max, qs)) and [max(r_min, qe), r_max), cumulative sums
    # within each block's run, read at L_i and R_i - 1.
    j = jnp.arange(size, dtype=jnp.int32)
    fl_end, fr_start = jnp.minimum(l_max, qs), jnp.maximum(r_min, qe)
    own_l = jnp.clip(jnp.searchsorted(l_min, j, side="right") - 1, 0, nb - 1)
    in_l = (j >= l_min[own_l]) & (j < fl_end[own_l])
    z = jnp.where(in_l, (a_left[own_l] - x) / s_left[own_l], 0)
    fringe_l = moments(z, jnp.where(in_l[:, None], v, 0))
    own_r = jnp.clip(jnp.searchsorted(fr_start, j, side="right") - 1, 0, nb - 1)
    in_r = (j >= fr_start[own_r]) & (j < r_max[own_r])
    z = jnp.where(in_r, (x - a_right[own_r]) / s_right[own_r], 0)
    fringe_r = moments(z, jnp.where(in_r[:, None], v, 0))
    # the left runs summed right to left (reversed), the right runs left to right
    runs = jnp.stack([jnp.where(in_l, own_l, -1 - j)[::-1], jnp.where(in_r, own_r, -1 - j)])
    fringe_l, fringe_r = _segmented_cumsums(jnp.stack([fringe_l[::-1], fringe_r]), runs)
    fringe_l = fringe_l[::-1]

    def perquery(a):  # a block's value for each of its b queries (no gather)
        return jnp.broadcast_to(a[:, None], (nb, b, *a.shape[1:])).reshape(size, *a.shape[1:])

    has_l, has_r = lq < perquery(fl_end), rq > perquery(fr_start)
    m_left = perquery(core_l) + jnp.where(
        has_l[:, None, None], fringe_l[jnp.clip(lq, 0, size - 1)], 0
    )
    m_right = perquery(core_r) + jnp.where(
        has_r[:, None, None], fringe_r[jnp.clip(rq - 1, 0, size - 1)], 0
    )
    out_l, out_r = lq < perquery(qs), rq > perquery(qe)  # window points outside the block
    d_left = jnp.where(out_l, (xq - perquery(a_left)) / hq, 0)
    d_right = jnp.where(out_r, (perquery(a_right) - xq) / hq, 0)
    sum_left = _tricube_sums(m_left, d_left, perquery(s_left) / hq)
    sum_right = _tricube_sums(m_right, d_right, perquery(s_right) / hq)
    sums = [(-1) ** p * sum_left[:, p] + sum_right[:, p] for p in range(3)]

    # The block's own samples, directly: (nb, b queries, b samples).
    xb, hb = xq.reshape(nb, b, 1), hq.reshape(nb, b, 1)
    jb = j.reshape(nb, 1, b)
    inside = (jb >= lq.reshape(nb, b, 1)) & (jb < rq.reshape(nb, b, 1))
    d = (blocks_x[:, None, :] - xb) / hb
    u = jnp.minimum(jnp.abs(d), 1)
    w = jnp.where(inside, (1 - u * u * u) ** 3, 0)
    for p in range(3):
        wp = w * d**p if p else w
        sums[p] = sums[p] + jnp.einsum("cij,cjv->civ", wp, blocks_v).reshape(size, 2)
    return jnp.stack(sums, axis=1)[:n]


#: Up to this many samples the window sums are direct (N x N terms, cheap to compile; the
#: blocked sums compile ~3x longer for a few ms less at this size).
DENSE_MAX = 1024


def _dense_sums(xn, v, left, k, hn):
    """``_window_sums()`` by direct summation over all pairs: O(N^2), for small N."""
    n = xn.shape[0]
    j = jnp.arange(n, dtype=jnp.int32)[None, :]
    inside = (j >= left[:, None]) & (j < (left + k)[:, None])
    d = (xn[None, :] - xn[:, None]) / jnp.where(hn > 0, hn, 1)[:, None]
    u = jnp.minimum(jnp.abs(d), 1)
    w = jnp.where(inside, (1 - u * u * u) ** 3, 0)
    return jnp.stack([(w * d**p if p else w) @ v for p in range(3)], axis=1)


def _local_linear(x, xn, y, r, left_end, k, h, hn):
    """Fitted values at every sorted x from the window [left_end, left_end + k)."""
    sums_of = _dense_sums if x.shape[0] <= DENSE_MAX else _window_sums
    sums = sums_of(xn, jnp.stack([r, r * y], axis=1), left_end, k, hn)
    s0, s1, s2 = sums[:, 0], sums[:, 1], sums[:, 2]  # (N, 2): sum w (d/h)^p [1, y]
    total = s0[:, 0]
    mean_d = safe_divide(s1[:, 0], total)
    mean_y = safe_divide(s0[:, 1], total)
    sxx = safe_divide(s2[:, 0], total) - mean_d**2
    sxy = safe_divide(s1[:, 1], total) - mean_d * mean_y
    # statsmodels floors the weighted variance of x at 1e-12 (in x's units).
    floor = 1e-12 / jnp.where(h > 0, h, 1) ** 2
    return mean_y - mean_d * sxy / jnp.maximum(sxx, floor)


def _windows(x, n_valid, k):
    """Left ends and radii of the k-nearest-neighbour windows of sorted x (statsmodels)."""
    n = x.shape[0]
    j = jnp.arange(n, dtype=jnp.int32)
    right = jnp.take(x, jnp.clip(j + k, 0, n - 1))
    mids = jnp.where(j + k < n_valid, (x + right) / 2, jnp.inf)
    left_end = jnp.minimum(jnp.searchsorted(mids, x, side="left"), jnp.maximum(n_valid - k, 0))
    left_end = left_end.astype(jnp.int32)
    far = jnp.take(x, jnp.clip(left_end + k - 1, 0, n - 1))
    h = jnp.maximum(x - x[left_end], far - x)
    return left_end, h


def _fallback(x, y, r, left_end, k, h):
    """(usable, value): statsmodels' test of >= 2 weights above 1e-12, and the fit without.

    Where fewer than two points of the window have a tricube weight above 1e-12 (e.g. all
    its points tied with x_i, h = 0), statsmodels returns y_i; here the r-weighted mean of
    y over the points tied with x_i (the same for every tied point, whatever their order).
    """
    n = x.shape[0]
    reach = h * (1 - 1e-4) ** (1 / 3)  # tricube(u) > 1e-12  <=>  u < (1 - 1e-4)^(1/3)
    lo = jnp.maximum(jnp.searchsorted(x, x - reach, side="right"), left_end)
    hi = jnp.minimum(jnp.searchsorted(x, x + reach, side="left"), left_end + k)
    positive = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum((r > 0).astype(jnp.int32))])
    usable = (positive[jnp.clip(hi, 0, n)] - positive[jnp.clip(lo, 0, n)] >= 2) & (h > 0)
    t_lo = jnp.searchsorted(x, x, side="left")
    t_hi = jnp.searchsorted(x, x, side="right")
    cw = jnp.concatenate([jnp.zeros((1,), x.dtype), jnp.cumsum(r)])
    cy = jnp.concatenate([jnp.zeros((1,), x.dtype), jnp.cumsum(r * y)])
    tie_w = cw[t_hi] - cw[t_lo]
    value = jnp.where(tie_w > 0, safe_divide(cy[t_hi] - cy[t_lo], tie_w), y)
    return usable, value


def _median(values, valid, n_valid):
    s = sort(jnp.where(valid, values, jnp.inf))
    lo = jnp.maximum((n_valid - 1) // 2, 0)
    hi = jnp.maximum(n_valid // 2, 0)
    return (s[lo] + s[hi]) / 2


def lowess(
    x: jax.Array, y: jax.Array, weights: jax.Array | None, frac: float, iterations: int
) -> jax.Array:
    """Kernel: LOWESS fitted values at every x (in the input order).

    Zero-weight samples are left out (their fitted value is that of their x among the
    others, by the same formula); positive weights multiply the tricube weights. The
    span counts samples with positive weight. Robustness iterations use statsmodels'
    bisquare weights of |residual| / (6 median |residual|), and stop (keeping the fit)
    when 6 median |residual| < 1e-7 mean |residual| (R's ``lowess``), where statsmodels
    would zero the weight of every non-zero residual (binary outcomes often have a
    median absolute residual of 0).
    """
    n = x.shape[0]
    dtype = x.dtype
    w = jnp.ones((n,), dtype) if weights is None else weights.astype(dtype)
    valid = w > 0
    top = jnp.iinfo(float_keys(x).dtype).max
    order = argsort(jnp.where(valid, float_keys(x), top))
    xs, ys, ws, vs = x[order], y.astype(dtype)[order], w[order], valid[order]
    n_valid = jnp.sum(vs).astype(jnp.int32)
    last = xs[jnp.maximum(n_valid - 1, 0)]
    xs = jnp.where(vs, xs, last)
    if weights is None:
        k = jnp.int32(min(max(int(frac * n + 1e-10), 2), n))
    else:
        k = jnp.floor(frac * n_valid.astype(dtype) + 1e-10).astype(jnp.int32)
        k = jnp.clip(k, 2, jnp.maximum(n_valid, 1))
    left_end, h = _windows(xs, n_valid, k)
    lo_x = xs[0]
    scale = last - lo_x
    scale = jnp.where(scale > 0, scale, 1)
    xn = (xs - lo_x) / scale
    hn = h / scale
    base = jnp.where(vs, ws, 0)

    def fit(r):
        smooth = _local_linear(xs, xn, ys, r, left_end, k, h, hn)
        usable, value = _fallback(xs, ys, r, left_end, k, h)
        return jnp.where(usable, smooth, value)

    def robustify(_, carry):  # one compiled body for every iteration
        r, fitted = carry
        resid = jnp.abs(ys - fitted)
        med = _median(resid, vs, n_valid)
        mean = safe_divide(jnp.sum(jnp.where(vs, resid, 0)), n_valid.astype(dtype))
        stop = 6 * med < 1e-7 * mean
        u = jnp.minimum(safe_divide(resid, 6 * med), 1)
        r = jnp.where(stop, r, base * (1 - u**2) ** 2)
        return r, jnp.where(stop, fitted, fit(r))

    fitted = fit(base)
    if iterations:
        _, fitted = jax.lax.fori_loop(0, iterations, robustify, (base, fitted))
    return jnp.zeros((n,), dtype).at[order].set(fitted)
