"""The sorted path of cumulative differences and its extremes, with an order-free JVP.

The path C_k of ``jaxcal/stats/_paths/cumulative.py`` (its definition, the aggregation of ties and the
weights are explained there), computed from one sort; ``extremes()`` is what the KS and
Kuiper tests read, ``sorted_path()`` what :func:`jaxcal.cumulative_differences` draws.

**Speed.** Scores in [0, 1] and a 0/1 label are packed into one integer key (the score's
IEEE bits, which order non-negative floats like the floats themselves, shifted left once,
plus the label), so one sort of integer values (``sort()``: NumPy's SIMD
sort on CPU, XLA's elsewhere) orders scores and carries labels with no gather. Weighted,
one stable argsort of the score bits (``argsort()``; on CPU a sort within
buckets of the key) orders scores, labels and weights by gathers, and a scatter-add in
that order sums each group's weights in input order.
:func:`jaxcal.calibration_tests` returns all three tests from that one sort.

**Gradients.** The KS and Kuiper statistics are piecewise smooth in the scores (and
weights): with the order of the scores fixed, C_k is linear in them. A custom JVP gives
that gradient without a second sort: the extreme point k* of the path is the sum over the
samples with ``s <= s_k*``, a masked sum in input order. Forward passes pay nothing for it.
:func:`jaxcal.cumulative_differences` is for inspection and plots and is not differentiated.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxcal._core.sort import argsort, sort


class SortedPath(NamedTuple):
    """The path after the sort (fields as commented)."""

    scores: jax.Array  # (N,) sorted ascending
    total: jax.Array  # (N,) W C_k: exact at group ends; the previous end's value (or a
    # partial sum inside the group, unweighted) elsewhere
    is_end: jax.Array  # (N,) bool: last sample of its group of equal scores
    weight: jax.Array  # (N,) weight of each step: 1 each, or the group weight at its end
    variance: jax.Array  # () sum w^2 s (1 - s)


def _group_ends(score_bits: jax.Array) -> jax.Array:
    """(N,) bool: the last sample of each group of equal sorted scores."""
    return jnp.concatenate([score_bits[1:] != score_bits[:-1], jnp.ones(1, bool)])


def sorted_path(s: jax.Array, y: jax.Array, w: jax.Array | None) -> SortedPath:
    """Sort once and walk the path of cumulative differences (see the module docstring).

    Unweighted, the sorted keys alone carry scores and labels. Weighted, a stable order
    of the scores gathers labels and weights, and scatter-adds to each group's last
    sample sum ``sum w`` over the group's labels 0 and 1 and ``sum w^2`` there, from which
    the step is ``(1 - s) W_1 - s W_0``. (Three 1-D scatters: one of ``(N, 3)`` rows
    costs XLA:CPU several times more; a binary search of each sample's group, the
    former way, cost more than the order.)
    """
    n, dtype = s.shape[0], s.dtype
    itype = jnp.int32 if dtype == jnp.float32 else jnp.int64
    bits = lax.bitcast_convert_type(lax.stop_gradient(s), itype)
    label = lax.stop_gradient(y).astype(itype)
    if w is None:
        key_sorted = sort(jnp.left_shift(bits, itype(1)) | label)
        score_bits = jnp.right_shift(key_sorted, itype(1))
        ss = lax.bitcast_convert_type(score_bits, dtype)
        is_end = _group_ends(score_bits)
        total = jnp.cumsum((key_sorted & itype(1)).astype(dtype) - ss)
        return SortedPath(ss, total, is_end, jnp.ones_like(ss), jnp.sum(ss * (1 - ss)))
    # A stable order by score alone: each group's samples stay in input order, so the
    # scatter-add below sums them in input order, the same floats as one in input order.
    perm = argsort(bits)
    score_bits = bits[perm]
    ss = lax.bitcast_convert_type(score_bits, dtype)
    is_end = _group_ends(score_bits)
    end = lax.cummin(jnp.where(is_end, jnp.arange(n, dtype=jnp.int32), n), reverse=True)
    w, is_one = lax.stop_gradient(w)[perm], label[perm].astype(dtype)
    zeros = jnp.zeros_like(ss)
    w0, w1, w2 = (
        zeros.at[end].add(part, indices_are_sorted=True)
        for part in (w * (1 - is_one), w * is_one, w * w)
    )
    total = jnp.cumsum((1 - ss) * w1 - ss * w0)
    return SortedPath(ss, total, is_end, w0 + w1, jnp.sum(w2 * ss * (1 - ss)))


def _extremes_sorted(s: jax.Array, y: jax.Array, w: jax.Array | None):
    """(max_k T_k, min_k T_k, V) over k = 0..N at group ends, T = W C, V = (W sigma)^2.

    Also returns (sorted scores, T at group ends and 0 elsewhere) for the JVP.
    """
    path = sorted_path(s, y, w)
    at_ends = jnp.where(path.is_end, path.total, jnp.zeros_like(path.total))
    # The origin T_0 = 0 is always on the path: max >= 0 >= min.
    top = jnp.maximum(jnp.max(at_ends), 0)
    bottom = jnp.minimum(jnp.min(at_ends), 0)
    return (top, bottom, path.variance), (path.scores, at_ends)


def _extremes_jvp(primals, tangents):
    """Tangents of (top, bottom, V), order-free.

    With the order of the scores fixed, T at the group end of score s* is
    ``sum_i [s_i <= s*] w_i (y_i - s_i)``: a masked sum in input order, no sort needed.
    """
    s, y, *rest = primals
    ds, dy, *drest = tangents
    w = rest[0] if rest else None
    (top, bottom, variance), (ss, at_ends) = _extremes_sorted(s, y, w)

    def threshold(value):
        # The smallest score whose group end attains the extreme; -1 (no sample) when
        # the extreme is the origin.
        hit = at_ends == value
        first = jnp.min(jnp.where(hit, ss, jnp.full_like(ss, 2)))
        return jnp.where(value != 0, first, -1)

    de = dy - ds
    dv = (1 - 2 * s) * ds
    if w is not None:
        (dw,) = drest
        de = w * de + dw * (y - s)
        dv = w * w * dv + 2 * w * dw * s * (1 - s)
    zero = jnp.zeros_like(de)
    d_top = jnp.sum(jnp.where(s <= threshold(top), de, zero))
    d_bottom = jnp.sum(jnp.where(s <= threshold(bottom), de, zero))
    return (top, bottom, variance), (d_top, d_bottom, jnp.sum(dv))


@jax.custom_jvp
def _extremes_unweighted(s, y):
    return _extremes_sorted(s, y, None)[0]


@jax.custom_jvp
def _extremes_weighted(s, y, w):
    return _extremes_sorted(s, y, w)[0]


_extremes_unweighted.defjvp(_extremes_jvp)
_extremes_weighted.defjvp(_extremes_jvp)


def extremes(s: jax.Array, y: jax.Array, w: jax.Array | None):
    """(max_k T_k, min_k T_k, V), differentiable in s (and w) for a fixed order."""
    return _extremes_unweighted(s, y) if w is None else _extremes_weighted(s, y, w)
