"""Inductive Venn-Abers predictors (Vovk & Petej 2014) in O(n log n).

For a test score s, p0 (p1) is the isotonic regression at s of the calibration set
extended by (s, 0) (by (s, 1)). Where s falls between two distinct calibration scores
decides everything, so both values are precomputed at fit time for each of the U + 1
gaps between the U distinct scores, and ``apply`` is one binary search per test point.

The precomputation follows Vovk, Petej & Fedorova (2015), Algorithms 1-2, on the
cumulative sum diagram (CSD) of the groups, P_0 = (0, 0), P_j = (W_j, S_j) (cumulative
weight and weighted label sum of groups 1..j). With the test point (weight 1, label 1)
after group i, the CSD is Q_0..Q_i, P_i..P_U with Q_a = P_a - (1, 1), and p1 is the slope
of its greatest convex minorant (GCM) over the test point's segment Q_i -> P_i.

1. The *corner fit*: the GCM for the gap i = 0 (test point first) is an isotonic
   regression, computed by the shared PAV (``pava()``); its block
   ends are the GCM's corners.
2. A sweep over the gaps i = 0..U keeps the GCM's corners from the last corner at or
   left of Q_i onwards on a stack (leftmost on top): p1(i) is the slope of the top
   segment; the next point Q_{i+1} either lies on or above that segment (the GCM there
   is unchanged) or becomes the new leftmost corner (pop the stale top, then pop the
   corners that no longer turn left, push Q_{i+1}). The right end P_i of the test
   segment is never an interior corner (its segment has slope 1, the largest), so
   dropping it as i moves on changes nothing. Each step pushes or pops: O(U) in all.

p0 follows by symmetry: isotonic regression is equivariant under (s, y) -> (-s, 1 - y),
so p0 at gap i is 1 - p1 at gap U - i of the mirrored groups.

References:
  Vovk & Petej (2014), "Venn-Abers predictors", UAI; Vovk, Petej & Fedorova (2015),
  "Large-scale probabilistic predictors with and without guarantees of validity",
  NeurIPS (Algorithms 1-4).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.cache import cached_factory
from jaxcal._core.checks import check_option
from jaxcal._core.isotonic import pava, sorted_groups
from jaxcal._core.numerics import compute_dtype, safe_divide, vary_like
from jaxcal.calibrators._base import Calibrator, from_kernels
from jaxcal.calibrators._implicit import not_differentiable
from jaxcal.calibrators._inputs import (
    BINARY_INPUTS,
    MULTICLASS_INPUTS,
    check_binary_inputs,
    check_multiclass_inputs,
    probs_of,
)


class VennAbersParams(NamedTuple):
    """A fitted inductive Venn-Abers predictor (buffers of the calibration size n).

    Attributes:
      x: ``(n,)`` distinct calibration scores in increasing order (the first ``size``).
      p0: ``(n + 1,)`` p0 for a test score in gap g (``searchsorted(x, s, "right")``).
      p1: ``(n + 1,)`` p1 for a test score in gap g (``searchsorted(x, s, "left")``).
      size: int32 number U of distinct scores with positive weight (0: the identity).

    Multiclass predictors stack these over the K classes (leading axis K).
    """

    x: jax.Array
    p0: jax.Array
    p1: jax.Array
    size: jax.Array


#: Gaps recorded per step of the sweep while the GCM does not change (most gaps).
CHUNK = 16


def _cross(o, a, b):
    """z of (a - o) x (b - o): positive when o -> a -> b turns left."""
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _upper_probs(weight: jax.Array, total: jax.Array, size: jax.Array) -> jax.Array:
    """p1 at every gap 0..U of groups (weights, weighted label sums), ``(n + 1,)``."""
    n = weight.shape[0]
    dtype = weight.dtype
    live = jnp.arange(n, dtype=jnp.int32) < size
    cum = jnp.stack(
        [jnp.cumsum(jnp.where(live, weight, 0)), jnp.cumsum(jnp.where(live, total, 0))], axis=1
    )
    pts = jnp.concatenate([jnp.zeros((1, 2), dtype), cum])  # P_0..P_n
    shift = jnp.ones((2,), dtype)

    # 1. The corner fit: isotonic regression of (test point, groups); its block ends.
    wg = jnp.concatenate([jnp.ones((1,), dtype), jnp.where(live, weight, 1)])
    sg = jnp.concatenate([jnp.ones((1,), dtype), jnp.where(live, total, 0)])
    fitted = pava(wg, sg, size + 1)
    idx = jnp.arange(n + 1, dtype=jnp.int32)
    ends = (idx <= size) & ((idx == size) | (fitted != jnp.roll(fitted, -1)))
    # Stack bottom (index 0) = rightmost corner P_U ... top = Q_0.
    n_corners = jnp.sum(ends).astype(jnp.int32)
    slot = n_corners - jnp.cumsum(ends.astype(jnp.int32))  # P_e at its slot from the bottom
    stack = jnp.zeros((n + 3, 2), dtype)
    stack = stack.at[jnp.where(ends, slot, n + 2)].set(pts, mode="drop")
    stack = stack.at[n_corners].set(-shift)  # Q_0 = (-1, -1)
    top, below = -shift, stack[jnp.maximum(n_corners - 1, 0)]
    out = jnp.zeros((n + 1 + CHUNK,), dtype)
    origin = jnp.int32(0)
    ahead = jnp.arange(CHUNK, dtype=jnp.int32)
    padded = jnp.concatenate([pts, jnp.broadcast_to(pts[-1], (CHUNK, 2))]) - shift[None, :]  # Q_j

    # 2. The sweep. Carry: gap i, stack height h, top two corners a (left) and b, phase.
    def step(carry):
        i, h, a, b, popping, stack, out = carry
        # Record phase: the gaps i.. keep the top segment while Q_{j+1} lies on or above
        # it; a chunk of them is recorded at once, up to the first Q_{j+1} below.
        qs = jax.lax.dynamic_slice(padded, (i + 1, origin), (CHUNK, 2))
        below = (i + ahead < size) & (_cross(a, b, qs.T) < 0)
        first = jnp.where(jnp.any(below), jnp.argmax(below).astype(jnp.int32), CHUNK)
        record = ~popping
        slope = jnp.broadcast_to(safe_divide(b[1] - a[1], b[0] - a[0]), (CHUNK,))
        out = jax.lax.dynamic_update_slice(out, slope, (jnp.where(record, i, n + 1),))
        # The point that enters next: Q_{i + first + 1} (record) or the pending one.
        q = padded[jnp.minimum(i + first + 1, n + CHUNK)]
        q = jnp.where(record, q, padded[jnp.minimum(i + 1, n + CHUNK)])
        # Popping phase: pop while the turn q -> a -> b is not a left one; then push q.
        enter = record & (first < CHUNK)  # q lies below: pop the stale top
        pop = enter | (popping & (h > 1) & (_cross(q, a, b) <= 0))
        push = popping & ~pop
        stack = jax.lax.dynamic_update_slice(stack, q[None], (h, origin))  # garbage if no push
        new_h = jnp.where(pop, h - 1, jnp.where(push, h + 1, h))
        under = jax.lax.dynamic_slice(stack, (jnp.maximum(new_h - 2, 0), origin), (1, 2))[0]
        new_a = jnp.where(pop, b, jnp.where(push, q, a))
        new_b = jnp.where(pop | push, under, b)
        new_i = jnp.where(record, i + first, jnp.where(push, i + 1, i))
        new_i = jnp.where(record & (first == CHUNK), i + CHUNK, new_i)
        return new_i, new_h, new_a, new_b, (popping | enter) & ~push, stack, out

    def cond(carry):
        i, *_ = carry
        return i <= size

    init = (jnp.int32(0), n_corners + 1, top, below, jnp.asarray(False), stack, out)
    init = vary_like(init, padded)  # carries typed like the data inside shard_map
    return jax.lax.while_loop(cond, step, init)[-1][: n + 1]


def venn_abers_fit(s: jax.Array, y: jax.Array, weights: jax.Array | None) -> VennAbersParams:
    """Kernel: sort and group the scores (exact ties), p0 and p1 at every gap."""
    n = s.shape[0]
    groups = sorted_groups(s, y, weights, "exact")
    x, weight, total, size = groups
    live = jnp.arange(n, dtype=jnp.int32) < size
    # The mirror image: scores reversed, labels flipped (live groups only, then padding).
    rev = jnp.clip(size - 1 - jnp.arange(n, dtype=jnp.int32), 0, n - 1)
    m_weight = jnp.where(live, weight[rev], 0)
    m_total = jnp.where(live, weight[rev] - total[rev], 0)
    # Two loops, not one vmapped: a vmapped while_loop selects its whole carry (the
    # buffers) every step, which makes the sweep O(n^2).
    p1 = _upper_probs(weight, total, size)
    mirrored = _upper_probs(m_weight, m_total, size)
    gaps = jnp.arange(n + 1, dtype=jnp.int32)
    p0 = 1 - mirrored[jnp.clip(size - gaps, 0, n)]
    p0 = jnp.clip(jnp.where(gaps <= size, p0, p0[size]), 0, 1)
    p1 = jnp.clip(jnp.where(gaps <= size, p1, p1[size]), 0, 1)
    last = jnp.maximum(size - 1, 0)
    return VennAbersParams(jnp.where(live, x, x[last]), p0, p1, size)


def venn_abers_pair(
    params: VennAbersParams, s: jax.Array, identity: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Kernel: (p0, p1) of test scores ``s`` (the identity where nothing was fitted)."""
    x = params.x.astype(s.dtype)
    xp = jnp.where(jnp.arange(x.shape[0], dtype=jnp.int32) < params.size, x, jnp.inf)
    p0 = params.p0.astype(s.dtype)[jnp.searchsorted(xp, s, side="right")]
    p1 = params.p1.astype(s.dtype)[jnp.searchsorted(xp, s, side="left")]
    empty = params.size == 0
    return jnp.where(empty, identity, p0), jnp.where(empty, identity, p1)


def merge(p0: jax.Array, p1: jax.Array) -> jax.Array:
    """The log-loss merge p1 / (1 - p0 + p1) (the denominator is >= 1 since p0 <= p1)."""
    return p1 / (1 - p0 + p1)


def _normalise(q: jax.Array, p: jax.Array) -> jax.Array:
    total = jnp.sum(q, axis=1, keepdims=True)
    return jnp.where(total > 0, safe_divide(q, total), p)


@cached_factory
def venn_abers(*, inputs: str = "probs", multiclass: bool = False) -> Calibrator:
    """Inductive Venn-Abers calibration (Vovk & Petej 2014), O(n log n) fit and apply.

    For a test score s, the calibration set extended by (s, 0) and by (s, 1) gives two
    isotonic regressions; their values at s are p0 <= p1, a multiprobability whose
    interval holds the calibrated probability (Venn predictors are valid: perfectly
    calibrated in the sense of Vovk & Petej). ``apply`` returns the log-loss merge
    ``p = p1 / (1 - p0 + p1)`` (the package ``venn-abers``'s ``p_prime``);
    :func:`~jaxcal.calibrators.venn_abers_interval` returns ``(p0, p1)``.

    Fit: the scores are sorted once, equal scores (exact ties) form one group, and p0, p1
    are computed for every gap between distinct scores by the O(n) sweep of Vovk, Petej
    & Fedorova (2015) over the cumulative sum diagram, started from the isotonic "corner
    fit" of the shared PAV (see ``jaxcal/calibrators/_venn_abers.py``). Apply: one binary
    search per test score. Both jit and vmap. The scores are only ranked, so
    ``inputs="logits"`` gives the same answer as their sigmoids.

    Weights are frequency weights (a weight of 2 counts a sample twice; 0 drops it); the
    test point has weight 1. Zero total weight gives the identity (``p0 = p1 = p``), as
    for every jaxcal binary calibrator.

    ``multiclass=True``: ``(N, K)`` inputs, one-vs-rest as the package's
    ``predict_proba_prefitted_va(..., va_tpe="one_vs_rest")``: class k's predictor is
    fitted on ``(p_k, labels == k)``, each class's merged probability computed, and each
    row divided by its sum (a row of zeros keeps its input probabilities).

    Why ``(p0, p1)`` is not part of ``apply``'s output: a :class:`~jaxcal.calibrators.Calibrator`'s ``apply``
    returns probabilities, which the reductions, the report's cross-fitting and every
    metric consume; a tuple there would break them all. The interval comes from the same
    params through :func:`~jaxcal.calibrators.venn_abers_interval`.

    Args:
      inputs: ``"probs"`` or ``"logits"`` (binary), ``"probs"``, ``"logits"`` or
        ``"log_probs"`` (multiclass; converted to probabilities first).
      multiclass: ``(N, K)`` inputs, one-vs-rest, normalised.

    Returns:
      ``Calibrator``: ``fit(scores (N,) or (N, K), labels (N,), *, weights=None) ->
      VennAbersParams``; ``apply(params, scores) -> probs`` of the input's shape.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import venn_abers, venn_abers_interval
      >>> cal = venn_abers()
      >>> s = jnp.array([0.1, 0.3, 0.5, 0.7])
      >>> params = cal.fit(s, jnp.array([0, 1, 0, 1]))
      >>> p0, p1 = venn_abers_interval(params, jnp.array([0.2, 0.6]))
      >>> [round(float(v), 4) for v in p0], [round(float(v), 4) for v in p1]
      ([0.0, 0.3333], [0.6667, 1.0])
      >>> [round(float(v), 4) for v in cal.apply(params, jnp.array([0.2, 0.6]))]
      [0.4, 0.6]

    References:
      Vovk & Petej (2014), "Venn-Abers predictors", UAI; Vovk, Petej & Fedorova (2015),
      "Large-scale probabilistic predictors with and without guarantees of validity",
      NeurIPS; Manokhin (2017), "Multi-class probabilistic classification using inductive
      and cross Venn-Abers predictors", COPA (one-vs-rest and its normalisation).
    """
    check_option("multiclass", multiclass, (False, True))
    check_option("inputs", inputs, MULTICLASS_INPUTS if multiclass else BINARY_INPUTS)

    if multiclass:

        @jax.jit
        def _fit(x, labels, weights):
            p = probs_of(x, inputs)
            classes = jnp.arange(p.shape[1], dtype=jnp.int32)
            # One class after another: the fit's sweeps are while_loops, and a vmapped
            # while_loop selects its whole carry every step (O(K n^2) for K classes; the
            # 10-class cross-fit of `jaxcal report --demo` ran 0.95 s against 0.2 s).
            return jax.lax.map(
                lambda args: venn_abers_fit(args[0], labels == args[1], weights), (p.T, classes)
            )

        @jax.jit
        def _apply(params, x):
            p = probs_of(x, inputs)
            p0, p1 = jax.vmap(venn_abers_pair, in_axes=(0, 1, 1), out_axes=1)(params, p, p)
            return _normalise(merge(p0, p1), p)

    else:

        @jax.jit
        def _fit(x, labels, weights):
            return venn_abers_fit(x.astype(compute_dtype(x.dtype)), labels, weights)

        @jax.jit
        def _apply(params, x):
            s = x.astype(compute_dtype(x.dtype))
            return merge(*venn_abers_pair(params, s, probs_of(x, inputs)))

    # Like isotonic(): the fit sorts the scores and pools them, so its output is piecewise
    # constant in them; a gradient through it would be a silent zero. Differentiating the
    # fit raises instead (apply stays differentiable in the test scores).
    name = "venn_abers(multiclass=True)" if multiclass else "venn_abers()"
    return from_kernels(not_differentiable(_fit, name), _apply, inputs, binary=not multiclass)


@jax.jit
def _interval(params, x, identity):
    if x.ndim == 1:
        return venn_abers_pair(params, x, identity)
    return jax.vmap(venn_abers_pair, in_axes=(0, 1, 1), out_axes=1)(params, x, identity)


def venn_abers_interval(
    params: VennAbersParams, scores: jax.Array, *, inputs: str = "probs"
) -> tuple[jax.Array, jax.Array]:
    """The Venn-Abers multiprobability ``(p0, p1)`` of test scores, from fitted params.

    ``p0`` (``p1``) is the isotonic regression at s of the calibration set extended by
    (s, 0) (by (s, 1)), looked up in the table the fit precomputed (one binary search per
    score); ``p0 <= p1`` and the merged probability of ``apply`` lies between them.
    Multiclass params (from ``venn_abers(multiclass=True)``) take ``(N, K)`` scores and
    give ``(N, K)`` pairs, one per class's one-vs-rest predictor (before normalisation).

    Args:
      params: a ``venn_abers`` calibrator's fitted params.
      scores: ``(N,)`` or ``(N, K)`` test scores, in the space the calibrator was built
        for (``inputs``; only the identity fallback of an empty fit converts them).
      inputs: that space.

    Returns:
      ``(p0, p1)``, arrays of the shape of ``scores``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import venn_abers, venn_abers_interval
      >>> s = jnp.array([0.2, 0.4, 0.6, 0.8])
      >>> params = venn_abers().fit(s, jnp.array([0, 0, 1, 1]))
      >>> [v.tolist() for v in venn_abers_interval(params, jnp.array([0.5]))]
      [[0.0], [1.0]]

    References:
      Vovk & Petej (2014), "Venn-Abers predictors", UAI.
    """
    multiclass = params.x.ndim == 2
    check_option("inputs", inputs, MULTICLASS_INPUTS if multiclass else BINARY_INPUTS)
    if multiclass:  # the predictors were fitted on probabilities
        s = probs_of(check_multiclass_inputs(scores, inputs, "scores"), inputs)
        return _interval(params, s, s)
    x = check_binary_inputs(scores, inputs)
    return _interval(params, x.astype(compute_dtype(x.dtype)), probs_of(x, inputs))
