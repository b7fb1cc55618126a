"""Centred isotonic regression (Oron & Flournoy 2017): strictly increasing PAV."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcal._core.cache import cached_factory
from jaxcal._core.isotonic import IsotonicParams, pava, sorted_groups
from jaxcal._core.numerics import safe_divide
from jaxcal.calibrators._base import Calibrator
from jaxcal.calibrators._nonparametric import interpolating_calibrator


def centred_isotonic_fit(s: jax.Array, y: jax.Array, weights: jax.Array | None) -> IsotonicParams:
    """Kernel: the knots of the CIR curve (in IsotonicParams' buffers of size N)."""
    n = s.shape[0]
    x, weight, total, size = sorted_groups(s, y, weights, "exact")
    live = jnp.arange(n, dtype=jnp.int32) < size
    mean = safe_divide(total, weight)
    fitted = pava(jnp.where(live, weight, 1), jnp.where(live, mean * weight, 0), size)
    start = jnp.concatenate([jnp.ones((1,), bool), fitted[1:] != fitted[:-1]]) & live
    block = jnp.maximum(jnp.cumsum(start.astype(jnp.int32)) - 1, 0)
    bw = jax.ops.segment_sum(jnp.where(live, weight, 0), block, n)
    bx = jax.ops.segment_sum(jnp.where(live, weight * x, 0), block, n)
    centre = safe_divide(bx, bw)[block]
    # Flat stretches on the bound of the outcome (0 or 1) are not pooled (R's cir
    # default, interiorStrict with ybounds = 0:1): each distinct score stays a knot.
    bound = (fitted == 0) | (fitted == 1)
    knot = live & (start | bound)
    kx = jnp.where(bound, x, centre)
    slot = jnp.where(knot, jnp.cumsum(knot.astype(jnp.int32)) - 1, n)
    count = jnp.sum(knot).astype(jnp.int32)
    xs = jnp.zeros((n,), s.dtype).at[slot].set(kx, mode="drop")
    ys = jnp.zeros((n,), s.dtype).at[slot].set(fitted, mode="drop")
    last = jnp.maximum(count - 1, 0)
    used = jnp.arange(n, dtype=jnp.int32) < count
    return IsotonicParams(jnp.where(used, xs, xs[last]), jnp.where(used, ys, ys[last]), count)


@cached_factory
def centred_isotonic(*, inputs: str = "probs") -> Calibrator:
    """Centred isotonic regression (CIR, Oron & Flournoy 2017): a strictly increasing PAV.

    Isotonic regression is a step function: it maps every score of a pooled block to one
    value, so distinct scores become ties and the model's ranking (its AUC) changes.
    CIR keeps the pool-adjacent-violators fit's values but shrinks each pooled block of
    distinct scores to one knot, at the weighted mean of its scores, and interpolates
    linearly between the knots: the curve is strictly increasing between the first and
    the last knot, so distinct scores there stay distinct and in order. As in the R
    package ``cir``'s ``cirPAVA`` (defaults ``interiorStrict=TRUE, ybounds=0:1``): blocks
    of equal fitted values are pooled (PAV merges equal means), except flat stretches at
    0 or 1, whose scores each stay a knot; beyond the outer knots the curve is flat
    (R's extension to the data range with ``rule=2``).

    Each distinct score is its own group (exact ties; weights sum within a group), the
    pooling is the shared PAV (``pava()``), and ``apply`` is the
    interpolation of :func:`jaxcal.calibrators.isotonic`. Zero total weight gives the
    identity.

    Returns:
      ``Calibrator``: ``fit(scores (N,), labels (N,) 0/1, *, weights=None) ->
      IsotonicParams`` (the knots); ``apply(params, scores (M,)) -> probs (M,)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import centred_isotonic
      >>> cal = centred_isotonic()
      >>> s = jnp.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
      >>> params = cal.fit(s, jnp.array([0, 1, 0, 1, 1, 1]))
      >>> [round(float(v), 3) for v in cal.apply(params, s)]
      [0.0, 0.333, 0.667, 1.0, 1.0, 1.0]

    References:
      Oron & Flournoy (2017), "Centered isotonic regression: point and interval
      estimation for dose-response studies", Statistics in Biopharmaceutical Research
      9(3).
    """
    return interpolating_calibrator(centred_isotonic_fit, inputs, "centred_isotonic()")
