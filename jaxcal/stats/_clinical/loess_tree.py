"""The moment tree of the blocked LOWESS sums (``jaxcal/stats/_clinical/loess.py``).

Moments ``sum_j ((x_R - x_j) / span)^e v_j`` (e < ``ORDERS``, v the two columns (r, r y))
of every node of a segment tree over sorted samples, about the node's own right end (and
left end), scaled by its own span; shifts between frames (``shift()``) are sums of
products of numbers in [0, 1] with positive binomial coefficients, so nothing cancels.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.numerics import vary_like

#: Moments 0..11: (x^3)^3 of the tricube weight times x^2 of the local linear fit.
ORDERS = 12


def powers(z: jax.Array) -> list[jax.Array]:
    out = [jnp.ones_like(z), z]
    for _ in range(ORDERS - 2):
        out.append(out[-1] * z)
    return out


def shift(moments: jax.Array, delta: jax.Array | None, rho: jax.Array) -> jax.Array:
    """sum_t C(e, t) delta^(e - t) rho^t M_t: the moments of (delta + rho t) from those of t.

    ``moments`` ``(..., ORDERS, 2)``; ``delta`` (None: 0), ``rho`` ``(...)`` in [0, 1].
    Written as 78 elementwise multiply-adds (XLA fuses them into one loop; a batched
    12 x 12 matrix product per point is many times slower on CPU).
    """
    rho_t = powers(rho[..., None])
    scaled = [rho_t[t] * moments[..., t, :] for t in range(ORDERS)]
    if delta is None:
        return jnp.stack(scaled, axis=-2)
    delta_t = powers(delta[..., None])
    out = []
    for e in range(ORDERS):
        term = scaled[e]
        for t in range(e):
            term = term + (math.comb(e, t) * delta_t[e - t]) * scaled[t]
        out.append(term)
    return jnp.stack(out, axis=-2)


class Tree(NamedTuple):
    """A segment tree in heap layout: node v has children 2v, 2v + 1; leaf j is P + j.

    right/left: ``(2P, ORDERS, 2)`` moments of (v_j, v_j y_j)-weighted powers of
    (x_R - x_j) / span and (x_j - x_L) / span; xl, xr: ``(2P,)`` the node's end points.
    """

    right: jax.Array
    left: jax.Array
    xl: jax.Array
    xr: jax.Array


def parents(right, left, xl, xr):
    """Moments and end points of the parents of adjacent pairs of nodes (arrays of 2s)."""
    span1, span2 = xr[0::2] - xl[0::2], xr[1::2] - xl[1::2]
    pl, pr = xl[0::2], xr[1::2]
    span = pr - pl
    safe = jnp.where(span > 0, span, 1)
    up_r = shift(right[0::2], (pr - xr[0::2]) / safe, span1 / safe) + shift(
        right[1::2], None, span2 / safe
    )
    up_l = shift(left[0::2], None, span1 / safe) + shift(
        left[1::2], (xl[1::2] - pl) / safe, span2 / safe
    )
    return up_r, up_l, pl, pr


def build(leaves: Tree, levels: int) -> Tree:
    """The tree over P = 2**levels leaves (``leaves``: ``(P, ...)`` moments and ends).

    One ``fori_loop`` body for every level (fixed slices of P and P / 2 nodes, the write
    masked to the level): O(P log P) work on P = N / ``BLOCK`` leaves, one copy of
    ``parents()`` to compile.
    """
    size = leaves.xl.shape[0]
    half = size // 2

    def heap(leaf):
        return jnp.zeros((2 * size, *leaf.shape[1:]), leaf.dtype).at[size:].set(leaf)

    def level(m, tree):
        # Parents [P >> m, P >> (m - 1)) from children [P >> (m - 1), P >> (m - 2)).
        start = jnp.right_shift(jnp.int32(size), m)
        kids = [jax.lax.dynamic_slice_in_dim(a, 2 * start, size) for a in tree]
        mine = jnp.arange(half, dtype=jnp.int32) < start

        def put(a, new):
            old = jax.lax.dynamic_slice_in_dim(a, start, half)
            keep = mine.reshape((half,) + (1,) * (a.ndim - 1))
            return jax.lax.dynamic_update_slice_in_dim(a, jnp.where(keep, new, old), start, 0)

        return Tree(*(put(a, new) for a, new in zip(tree, parents(*kids), strict=True)))

    return jax.lax.fori_loop(1, levels + 1, level, Tree(*(heap(a) for a in leaves)))


def query(tree: Tree, levels: int, ranges, anchors, scales):
    """Left leaf range [a, b): sum ((x_L - x_j) / h_L)^e v_j; right range [c, d): sum
    ((x_j - x_R) / h_R)^e v_j, with ``anchors`` (x_L, x_R) and ``scales`` (h_L, h_R).

    The bottom-up segment-tree walk: at each level, an odd left end or an odd right end
    is a whole node of the range (at most two nodes per level and range).
    """
    size = tree.xl.shape[0] // 2
    zero = jnp.zeros((anchors[0].shape[0], ORDERS, 2), anchors[0].dtype)

    def level(m, carry):
        bounds, accs = carry
        start = jnp.right_shift(jnp.int32(size), m)
        new_bounds, new_accs = [], []
        for side, ((lo, hi), acc) in enumerate(zip(bounds, accs, strict=True)):
            live = lo < hi
            take_lo = live & (lo % 2 == 1)
            take_hi = live & (hi % 2 == 1)
            xi, h = anchors[side], scales[side]
            for take, node in ((take_lo, lo), (take_hi, hi - 1)):
                v = start + jnp.clip(node, 0, size - 1)
                span = (tree.xr[v] - tree.xl[v]) / h
                if side == 0:
                    part = shift(tree.right[v], (xi - tree.xr[v]) / h, span)
                else:
                    part = shift(tree.left[v], (tree.xl[v] - xi) / h, span)
                acc = acc + jnp.where(take[:, None, None], part, 0)
            new_bounds.append(
                ((lo + take_lo.astype(lo.dtype)) // 2, (hi - take_hi.astype(hi.dtype)) // 2)
            )
            new_accs.append(acc)
        return tuple(new_bounds), tuple(new_accs)

    zero = vary_like(vary_like(zero, anchors[0]), tree.right)  # the body reads both
    _, accs = jax.lax.fori_loop(0, levels, level, (ranges, (zero, zero)))
    return accs


def moments(z: jax.Array, v: jax.Array) -> jax.Array:
    """``(..., ORDERS, 2)``: z^e v for e < ORDERS, z ``(...)`` in [0, 1], v ``(..., 2)``."""
    return jnp.stack(powers(z), axis=-1)[..., :, None] * v[..., None, :]


def summed_moments(z: jax.Array, v: jax.Array) -> jax.Array:
    """``moments(z, v)`` summed over the last axis of z ``(G, B)``: ``(G, ORDERS, 2)``, as
    a batched product (the ``(G, B, ORDERS, 2)`` terms are never written out)."""
    return jnp.einsum("gbe,gbv->gev", jnp.stack(powers(z), axis=-1), v)
