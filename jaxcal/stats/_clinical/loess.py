"""LOWESS (Cleveland 1979): local linear fits with tricube weights, in O(N log N).

The fit at x_i uses its k = floor(frac N + 1e-10) nearest neighbours (a window of
consecutive sorted points, found as statsmodels and R find it: the window slides right
while x_i > (x_left + x_right) / 2), the radius h_i = the largest distance in the window,
and weights ``r_j (1 - (|x_j - x_i| / h_i)^3)^3``. A local linear fit needs five weighted
sums over the window; the naive loop costs O(N k) = O(N^2) (statsmodels: a minute at N =
1e5).

Here the tricube weight is expanded, 1 - 3u^3 + 3u^6 - u^9 with u = |d| / h, so each sum
is a combination of the window's moments sum |d|^e v_j (e <= 11, v in {r, r y}), taken
separately left of x_i (|d| = x_i - x_j) and right of it. Prefix sums of the powers of x
would give them in O(1), but expanding (x_i - x_j)^e about a fixed origin cancels
catastrophically ((range / h)^11). Instead a segment tree keeps, for every node, the
moments about its own right end (and left end), scaled by its own span: every term of
every shift (child to parent, node to x_i) is then a product of numbers in [0, 1] with
binomial coefficients, all positive, so nothing cancels. A window splits into at most
2 log2 N nodes: O(N log N) in all, and float32 keeps ~1e-6 relative accuracy.

References:
  Cleveland (1979), "Robust locally weighted regression and smoothing scatterplots",
  JASA 74(368); statsmodels' ``lowess`` (windows, weights, robustness weights).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.isotonic import float_keys
from jaxcal._core.numerics import safe_divide, vary_like
from jaxcal._core.sort import argsort, sort

#: Moments 0..11: (x^3)^3 of the tricube weight times x^2 of the local linear fit.
ORDERS = 12
#: Coefficients of 1 - 3u^3 + 3u^6 - u^9.
_TRICUBE = (1.0, -3.0, 3.0, -1.0)


def _powers(z: jax.Array) -> list[jax.Array]:
    out = [jnp.ones_like(z), z]
    for _ in range(ORDERS - 2):
        out.append(out[-1] * z)
    return out


def _shift(moments: jax.Array, delta: jax.Array | None, rho: jax.Array) -> jax.Array:
    """sum_t C(e, t) delta^(e - t) rho^t M_t: the moments of (delta + rho t) from those of t.

    ``moments`` ``(..., ORDERS, 2)``; ``delta`` (None: 0), ``rho`` ``(...)`` in [0, 1].
    Written as 78 elementwise multiply-adds (XLA fuses them into one loop; a batched
    12 x 12 matrix product per point is many times slower on CPU).
    """
    rho_t = _powers(rho[..., None])
    scaled = [rho_t[t] * moments[..., t, :] for t in range(ORDERS)]
    if delta is None:
        return jnp.stack(scaled, axis=-2)
    delta_t = _powers(delta[..., None])
    out = []
    for e in range(ORDERS):
        term = scaled[e]
        for t in range(e):
            term = term + (math.comb(e, t) * delta_t[e - t]) * scaled[t]
        out.append(term)
    return jnp.stack(out, axis=-2)


class _Tree(NamedTuple):
    """A segment tree in heap layout: node v has children 2v, 2v + 1; leaf j is P + j.

    right/left: ``(2P, ORDERS, 2)`` moments of (v_j, v_j y_j)-weighted powers of
    (x_R - x_j) / span and (x_j - x_L) / span; xl, xr: ``(2P,)`` the node's end points.
    """

    right: jax.Array
    left: jax.Array
    xl: jax.Array
    xr: jax.Array


def _build(x: jax.Array, v: jax.Array, levels: int) -> _Tree:
    size = x.shape[0]  # P = 2**levels leaves
    dtype = x.dtype
    leaf = jnp.zeros((size, ORDERS, 2), dtype).at[:, 0, :].set(v)
    right = jnp.zeros((2 * size, ORDERS, 2), dtype).at[size:].set(leaf)
    ends = jnp.zeros((2 * size,), dtype).at[size:].set(x)
    init = _Tree(right, right, ends, ends)
    half = size // 2

    def level(m, tree):
        # Parents [P >> m, P >> (m - 1)) from children [P >> (m - 1), P >> (m - 2)); the
        # slices have the fixed sizes P and P / 2, the write is masked to the level.
        start = jnp.right_shift(jnp.int32(size), m)
        kids = [
            jax.lax.dynamic_slice_in_dim(a, 2 * start, size)
            for a in (tree.right, tree.left, tree.xl, tree.xr)
        ]
        right, left, xl, xr = kids
        span1, span2 = xr[0::2] - xl[0::2], xr[1::2] - xl[1::2]
        pl, pr = xl[0::2], xr[1::2]
        span = pr - pl
        safe = jnp.where(span > 0, span, 1)
        up_r = _shift(right[0::2], (pr - xr[0::2]) / safe, span1 / safe) + _shift(
            right[1::2], None, span2 / safe
        )
        up_l = _shift(left[0::2], None, span1 / safe) + _shift(
            left[1::2], (xl[1::2] - pl) / safe, span2 / safe
        )
        mine = jnp.arange(half, dtype=jnp.int32) < start

        def put(a, new):
            old = jax.lax.dynamic_slice_in_dim(a, start, half)
            keep = mine.reshape((half,) + (1,) * (a.ndim - 1))
            return jax.lax.dynamic_update_slice_in_dim(a, jnp.where(keep, new, old), start, 0)

        return _Tree(
            put(tree.right, up_r), put(tree.left, up_l), put(tree.xl, pl), put(tree.xr, pr)
        )

    return jax.lax.fori_loop(1, levels + 1, level, init)


def _query(tree: _Tree, levels: int, ranges, xi: jax.Array, h: jax.Array):
    """Left range [a, b): sum ((x_i - x_j) / h)^e v_j; right range [c, d): ((x_j - x_i) / h)^e.

    The bottom-up segment-tree walk: at each level, an odd left end or an odd right end
    is a whole node of the range (at most two nodes per level and range).
    """
    size = tree.xl.shape[0] // 2
    zero = jnp.zeros((xi.shape[0], ORDERS, 2), xi.dtype)

    def level(m, carry):
        bounds, accs = carry
        start = jnp.right_shift(jnp.int32(size), m)
        new_bounds, new_accs = [], []
        for side, ((lo, hi), acc) in enumerate(zip(bounds, accs, strict=True)):
            live = lo < hi
            take_lo = live & (lo % 2 == 1)
            take_hi = live & (hi % 2 == 1)
            for take, node in ((take_lo, lo), (take_hi, hi - 1)):
                v = start + jnp.clip(node, 0, size - 1)
                span = (tree.xr[v] - tree.xl[v]) / h
                if side == 0:
                    part = _shift(tree.right[v], (xi - tree.xr[v]) / h, span)
                else:
                    part = _shift(tree.left[v], (tree.xl[v] - xi) / h, span)
                acc = acc + jnp.where(take[:, None, None], part, 0)
            new_bounds.append(
                ((lo + take_lo.astype(lo.dtype)) // 2, (hi - take_hi.astype(hi.dtype)) // 2)
            )
            new_accs.append(acc)
        return tuple(new_bounds), tuple(new_accs)

    zero = vary_like(vary_like(zero, xi), tree.right)  # the body reads both
    _, accs = jax.lax.fori_loop(0, levels, level, (ranges, (zero, zero)))
    return accs


def _local_linear(x, xn, y, r, left_end, k, h, hn):
    """Fitted values at every sorted x from the window [left_end, left_end + k)."""
    n = x.shape[0]
    levels = max(1, math.ceil(math.log2(n)))
    size = 2**levels
    pad = size - n
    xp = jnp.concatenate([xn, jnp.broadcast_to(xn[-1], (pad,))])
    vp = jnp.concatenate([jnp.stack([r, r * y], axis=1), jnp.zeros((pad, 2), x.dtype)])
    tree = _build(xp, vp, levels)
    i = jnp.arange(n, dtype=jnp.int32)
    split = jnp.clip(i + 1, left_end, left_end + k)
    safe_h = jnp.where(hn > 0, hn, 1)
    ranges = ((left_end, split), (split, left_end + k))
    t_left, t_right = _query(tree, levels, ranges, xn, safe_h)
    sums = []
    for p in range(3):
        s = sum(
            c * ((-1) ** p * t_left[:, 3 * m + p] + t_right[:, 3 * m + p])
            for m, c in enumerate(_TRICUBE)
        )
        sums.append(s)  # (N, 2): sum w (d/h)^p, sum w (d/h)^p y
    s0, s1, s2 = sums
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
