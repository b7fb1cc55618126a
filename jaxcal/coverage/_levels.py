"""The level axis of the coverage kernels, and the per-level means they share.

Every kernel works on a level axis: intervals ``(N, L)``, set masks ``(N, K, L)``, one
level being ``L = 1``. The public functions accept inputs without that axis; the kernels
add it on entry (``as_levels()``, ``sets_with_levels()``) and drop it from their
outputs again (``squeeze_levels()``), so one code path serves both shapes.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.numerics import mask_unweighted, safe_divide


def level_mean(values: jax.Array, weights: jax.Array | None, dtype) -> jax.Array:
    """(Weighted) mean over axis 0 of ``values`` ``(N, L)``; bool values count exactly.

    Float sums are XLA's tree-shaped reductions (see ``jaxcal/_core/numerics.py``); counts of
    bool values are int32, exact.
    """
    n = values.shape[0]
    if weights is None:
        if values.dtype == jnp.bool_:
            hits = jnp.sum(values, axis=0, dtype=jnp.int32)
            return hits.astype(dtype) / jnp.asarray(n, dtype)
        return jnp.sum(values.astype(dtype), axis=0) / jnp.asarray(n, dtype)
    w = weights.astype(dtype)
    return safe_divide(jnp.sum(w[:, None] * values.astype(dtype), axis=0), jnp.sum(w))


def is_covered(y: jax.Array, lower: jax.Array, upper: jax.Array) -> jax.Array:
    """``lower <= y <= upper`` per level, shape ``(N, L)`` (MAPIE's closed interval)."""
    return (lower <= y[:, None]) & (y[:, None] <= upper)


def mask_padding_intervals(
    y: jax.Array, lower: jax.Array, upper: jax.Array, weights: jax.Array | None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(y, lower, upper)`` with non-finite values in rows of weight 0 set to 0.

    Padding rows may hold NaN under ``jit``; a kernel that sums ``weight * width`` or
    sorts the widths would carry it into the result (``0 * nan`` is NaN).
    """
    return tuple(mask_unweighted(x, weights, 0) for x in (y, lower, upper))


def as_levels(x: jax.Array) -> jax.Array:
    """Interval bounds ``(N,)`` or ``(N, L)`` as ``(N, L)``."""
    return x if x.ndim == 2 else x[:, None]


def sets_with_levels(sets: jax.Array) -> jax.Array:
    """A set mask ``(N, K)`` or ``(N, K, L)`` as ``(N, K, L)``."""
    return sets if sets.ndim == 3 else sets[:, :, None]


def squeeze_levels(out: Any, has_levels: bool) -> Any:
    """Drop the level axis (the leading axis of each output) when the input had none."""
    return out if has_levels else jax.tree.map(lambda a: a[0], out)
