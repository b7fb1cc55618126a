"""Fine-histogram arithmetic on per-bucket sums: exact re-binning, equal-mass groups, PAV.

A state of resolution R keeps its sums at R uniform buckets. Everything here works on the
bucket arrays alone (no state), so that the state module, the public functions on fine
states and the Arrow table share it.

* **Exact re-binning** to M bins with M dividing R: the bin edges k/M are the bucket
  edges kR/M (the same rationals, hence the same values rounded to any dtype), so every
  sample's coarse bin is its bucket's; counts, weights and sums add up. The moments of
  the Brier decomposition are deviations from the *bucket's* anchor a_j (its centre; 0
  and 1 for the end buckets, ``bin_anchors()``); re-anchored on the
  coarse bin's anchor A_b (shift delta = a_j - A_b, |delta| <= 1/M) they become
  sum d' = sum d + delta W, sum d'^2 = sum d^2 + 2 delta sum d + delta^2 W and
  sum d' y = sum d y + delta T, exact identities (round-off only).
* **Equal-mass groups**: the quantile edges of the data lie inside buckets; a bucket
  cannot be split, so the inner edge b goes to the bucket holding the exact quantile.
  Only the samples of those (at most M - 1) edge buckets can sit in a different bin than
  with exact quantile edges.
* **PAV over buckets**: the isotonic fit of the outcomes on the bucket order is the exact
  CORP fit of the forecasts rounded to their bucket (PAV sees only the order and the
  sums), computed by ``pooled_pava()`` on the non-empty buckets.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcal._core.binning import uniform_anchors
from jaxcal._core.isotonic import pooled_pava


def anchors(n: int, dtype) -> jax.Array:
    """The anchors of n uniform bins, computed by ``uniform_anchors()``
    (float32 arithmetic, then cast), so the shifts match the update's offsets."""
    return uniform_anchors(n)(jnp.arange(n, dtype=jnp.int32)).astype(dtype)


def coarsen(x: jax.Array, n_bins: int) -> jax.Array:
    """Sums over groups of R / M consecutive buckets on the last axis: ``(..., M)``."""
    r = x.shape[-1]
    return x.reshape(*x.shape[:-1], n_bins, r // n_bins).sum(axis=-1)


def coarsen_moments(sums: jax.Array, n_bins: int) -> jax.Array:
    """Re-bin classwise sums ``(6, K, R)`` (weight, sum p, sum y, sum d, d^2, d y) to M.

    The three moments are re-anchored from the buckets' anchors to the bins' anchors (the
    module's identities); applied to the high and low parts of a compensated sum alike
    (the map is linear in the sums).
    """
    r = sums.shape[-1]
    dtype = sums.dtype
    delta = (anchors(r, dtype) - jnp.repeat(anchors(n_bins, dtype), r // n_bins))[None, :]
    w, s_p, s_y, s_d, s_dd, s_dy = sums
    shifted = (
        w,
        s_p,
        s_y,
        s_d + delta * w,
        s_dd + 2 * delta * s_d + delta * delta * w,
        s_dy + delta * s_y,
    )
    return jnp.stack([coarsen(f, n_bins) for f in shifted])


def equal_mass_groups(weight: jax.Array, n_bins: int, closed: str) -> tuple[jax.Array, jax.Array]:
    """Bin of each bucket ``(R,)`` for M approximately equal-mass bins, and edge flags.

    The inner edge b (target mass bW/M) sits in bucket j_b, the first whose cumulative
    weight reaches the target (``closed="right"``: the exact edge is the smallest score
    whose cumulative weight reaches it; bucket j_b then closes bin b) or exceeds it
    (``closed="left"``: the exact edge is the first score past it; bucket j_b opens bin
    b + 1). Returns the int32 bin of each bucket and the bool flags of the edge buckets
    (only their samples can be binned otherwise than by exact quantile edges).
    """
    r = weight.shape[0]
    cum = jnp.cumsum(weight)
    targets = jnp.arange(1, n_bins, dtype=weight.dtype) * cum[-1] / n_bins
    side = "left" if closed == "right" else "right"
    edge_bucket = jnp.clip(jnp.searchsorted(cum, targets, side=side), 0, r - 1)
    j = jnp.arange(r, dtype=jnp.int32)
    if closed == "right":  # bucket j is in bin b when j > j_1, ..., j_b
        group = jnp.sum(j[:, None] > edge_bucket[None, :], axis=1)
    else:  # bucket j_b already belongs to bin b + 1
        group = jnp.sum(j[:, None] >= edge_bucket[None, :], axis=1)
    is_edge = jnp.zeros(r, bool).at[edge_bucket].set(True) & (weight > 0)
    return group.astype(jnp.int32), is_edge


def bucket_pav(weight: jax.Array, positives: jax.Array) -> tuple[jax.Array, jax.Array]:
    """PAV fit of the bucket means on the order of the non-empty buckets.

    Args:
      weight: ``(R,)`` total weight of each bucket.
      positives: ``(R,)`` weighted sum of the outcomes of each bucket.

    Returns:
      ``(order, calibrated)``: the buckets in the order PAV saw them (non-empty first,
      increasing) and the fitted value of each of those, ``(R,)`` each; entries past the
      number of non-empty buckets repeat the last fitted value.
    """
    r = weight.shape[0]
    present = weight > 0
    order = jnp.argsort(~present, stable=True).astype(jnp.int32)
    size = jnp.sum(present, dtype=jnp.int32)
    w, s = weight[order], positives[order]
    fitted = pooled_pava(jnp.where(w > 0, w, 1), s, size)
    last = jnp.maximum(size - 1, 0)
    live = jnp.arange(r, dtype=jnp.int32) < size
    return order, jnp.where(live, fitted, fitted[last])
