"""ECE_sweep (Roelofs, Cain, Shlens & Mozer 2022): the equal-mass ECE at the largest bin
count before the bin accuracies stop being monotone."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_option, check_probs_labels, values_checkable
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.numerics import safe_divide, safe_sqrt, upcast
from jaxcal._core.sort import argsort
from jaxcal._core.validity import kernel_inputs, run_validated

SWEEP_NORMS = ("l2", "l1")

#: The sweep stops at this many bins (bin positions are exact int32 arithmetic up to
#: here: i r < b^2 < 2**31).
MAX_SWEEP_BINS = 46340


def _mul64(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Exact product of uint32 ``a * b`` as (high, low) uint32 words (16-bit limbs)."""
    m = np.uint32(0xFFFF)
    s16 = np.uint32(16)
    a_lo, a_hi, b_lo, b_hi = a & m, a >> s16, b & m, b >> s16
    ll, lh, hl, hh = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (ll >> s16) + (lh & m) + (hl & m)
    low = (ll & m) | ((mid & m) << s16)
    high = hh + (lh >> s16) + (hl >> s16) + (mid >> s16)
    return high, low


def _less(x: tuple[jax.Array, jax.Array], y: tuple[jax.Array, jax.Array]) -> jax.Array:
    return (x[0] < y[0]) | ((x[0] == y[0]) & (x[1] < y[1]))


def bin_starts(m: jax.Array, b: jax.Array, n: int) -> jax.Array:
    """First sorted position of each of b equal-mass bins of m samples, ``(n + 1,)``.

    Position j is in bin ``floor(j b / m)`` (the reference's), so bin i starts at
    ``ceil(i m / b) = i q + ceil(i r / b)`` with ``m = q b + r``; entries past b are m.
    """
    i = jnp.arange(n + 1, dtype=jnp.int32)
    q, r = m // b, m % b
    start = i * q + (i * r + b - 1) // b
    return jnp.where(i <= b, start, m)


def _monotone(cum_pos: jax.Array, m: jax.Array, b: jax.Array, n: int) -> jax.Array:
    """Whether the b bins' accuracies never decrease (pos_i / n_i >= pos_{i-1} / n_{i-1},
    compared exactly as integer cross products)."""
    start = bin_starts(m, b, n)
    pos = (cum_pos[start[1:]] - cum_pos[start[:-1]]).astype(jnp.uint32)
    cnt = (start[1:] - start[:-1]).astype(jnp.uint32)
    i = jnp.arange(1, n, dtype=jnp.int32)
    drop = _less(_mul64(pos[1:], cnt[:-1]), _mul64(pos[:-1], cnt[1:])) & (i < b)
    return ~jnp.any(drop)


def sweep_bins(cum_pos: jax.Array, m: jax.Array, n: int) -> jax.Array:
    """The reference's bin count: the last b before the first b >= 2 whose bins are not
    monotone (b from 2 to m - 1; 1 for m <= 2), capped at ``MAX_SWEEP_BINS``."""
    top = jnp.minimum(m - 1, MAX_SWEEP_BINS)

    def cond(b):
        return (b <= top) & _monotone(cum_pos, m, b, n)

    return jax.lax.while_loop(cond, lambda b: b + 1, jnp.int32(2)) - 1


@partial(jax.jit, static_argnames=("norm",))
def _sweep_kernel(probs, labels, weights, norm):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights)
    scores, targets, _ = scores_and_targets(probs, labels, rows=rows)
    z = upcast(scores)
    n = z.shape[0]
    valid = jnp.ones((n,), bool) if weights is None else weights > 0
    key = jnp.where(valid, jax.lax.stop_gradient(z), jnp.inf)
    order = argsort(key)
    zs, ys, live = z[order], targets[order].astype(jnp.int32), valid[order]
    m = jnp.sum(valid, dtype=jnp.int32)
    cum_pos = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(ys * live.astype(jnp.int32))])
    nb = sweep_bins(cum_pos, m, n)
    start = bin_starts(m, nb, n)
    pos = jnp.arange(n, dtype=jnp.int32)
    bin_of = jnp.clip(jnp.searchsorted(start, pos, side="right") - 1, 0, n - 1)
    one = live.astype(z.dtype)
    count = jax.ops.segment_sum(one, bin_of, n)
    sz = jax.ops.segment_sum(one * zs, bin_of, n)
    sy = jax.ops.segment_sum(one * ys.astype(z.dtype), bin_of, n)
    gap = jnp.abs(safe_divide(sy - sz, count))
    total = jnp.sum(count)
    if norm == "l1":
        return safe_divide(jnp.sum(count * gap), total), summary
    return safe_sqrt(safe_divide(jnp.sum(count * gap * gap), total)), summary


def ece_sweep(probs: Any, labels: Any, *, norm: str = "l2", weights: Any = None) -> jax.Array:
    """ECE_sweep: equal-mass binning with as many bins as keep the accuracies monotone.

    Roelofs, Cain, Shlens & Mozer (2022), ``em_ece_sweep`` of google-research
    ``caltrain/calibration_metrics.py``: sort the scores; for b = 2, 3, ... put sorted
    position j in bin ``floor(j b / n)`` (equal counts) and stop at the first b whose
    bin accuracies are not non-decreasing; the ECE is taken with the bins of b - 1 (one
    bin if already b = 2 breaks, n - 1 bins if none does):

    .. math:: \\mathrm{ECE_{sweep}} = \\Big(\\sum_b \\frac{n_b}{n}\\,|\\bar y_b -
              \\bar s_b|^p\\Big)^{1/p},

    ``norm="l2"`` (p = 2 with the root, the reference's default) or ``"l1"``. The score
    is the positive-class probability (1-D) or the top-label confidence against
    correctness (2-D, the reference's ``multiclass_setting="top_label"``).

    Differences from the reference: ties are ordered stably (input order; the reference's
    ``np.argsort`` leaves their order unspecified); the monotonicity check compares the
    bins' positive counts exactly (integer cross products; the reference compares float
    means); the sweep stops at 46340 bins (the reference's loop, O(n^2) per data set,
    is impractical long before). Each step is O(n): O(n b*) for b* bins, after one sort.
    Differentiable in ``probs`` through the bins' mean scores (the bins are piecewise
    constant).

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int labels.
      norm: ``"l2"`` or ``"l1"``.
      weights: optional ``(N,)`` 0/1 mask (the reference has no weights): rows of weight 0
        are dropped; other weights must be 1 (checked on concrete inputs; under tracing
        any positive weight counts as 1).

    Returns:
      0-d array. No row of positive weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9])
      >>> y = jnp.array([0, 1, 0, 0, 1, 1, 1, 1])
      >>> round(float(ece_sweep(p, y)), 4)
      0.1267

    References:
      Roelofs, Cain, Shlens & Mozer (2022), "Mitigating Bias in Calibration Error
      Estimation", AISTATS; google-research ``caltrain/calibration_metrics.py``.
    """
    check_option("norm", norm, SWEEP_NORMS)
    probs, labels, weights = check_probs_labels(probs, labels, weights, values=False)
    check_mask(weights)
    return run_validated(_sweep_kernel, probs, labels, weights, norm)


def check_mask(weights: Any) -> None:
    """``weights`` None, or (when concrete) only 0 and 1: a mask, not sample weights."""
    if weights is None or not values_checkable(weights):
        return
    w = np.asarray(jax.device_get(weights))
    bad = ~((w == 0) | (w == 1))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"`weights` must be a 0/1 mask here (rows of weight 0 are dropped; the measure "
            f"counts samples, it has no weighted form); got {w[i]!r} at index {i}."
        )
