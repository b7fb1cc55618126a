"""Segment ids and membership matrices: validation and the segmented cumulative sum.

The ``groups=`` argument of the binned metrics and of the cumulative tests is either a
boolean ``(N, G)`` membership matrix (overlapping segments) or integer ids ``(N,)`` with a
static ``n_groups`` (disjoint segments); both families validate it here, and both walk
sorted segments with ``segmented_cumsum()``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxcal._core.checks import check_positive_int, values_checkable


def check_groups(groups: Any, n: int, n_groups: int | None, name: str = "groups"):
    """Validate ``groups``: ``(N, G)`` membership or ``(N,)`` integer ids with ``n_groups``.

    Returns ``(groups as an array, n_groups or None)``. Ids are checked to lie in
    ``[0, n_groups)`` on concrete input only.
    """
    if not isinstance(groups, (jax.Array, jax.core.Tracer)):
        kind = np.asarray(groups).dtype.kind
        if kind in "USO":  # strings (country names), or Python objects
            raise ValueError(
                f"`{name}` must be integer segment ids (or a boolean (N, G) membership "
                f"matrix); got {'strings' if kind in 'US' else 'Python objects'}. Map them "
                f"to integer ids first: `names, ids = np.unique({name}, return_inverse=True)`, "
                f"then pass `{name}=ids, n_groups=len(names)`."
            )
    groups = jnp.asarray(groups)
    if groups.ndim == 2:
        if groups.shape[0] != n:
            raise ValueError(
                f"`{name}` must have {n} rows to match the scores (a membership matrix "
                f"({n}, G)); got shape {groups.shape}."
            )
        if groups.shape[1] < 1:
            raise ValueError(f"`{name}` must have at least one column (segment); got 0.")
        if n_groups is not None and n_groups != groups.shape[1]:
            raise ValueError(
                f"`n_groups` must be None or {groups.shape[1]} (the columns of `{name}`) "
                f"for a membership matrix; got {n_groups}."
            )
        return groups.astype(bool), None
    if groups.ndim != 1 or groups.shape[0] != n:
        raise ValueError(
            f"`{name}` must be integer segment ids of shape ({n},) or a boolean membership "
            f"matrix of shape ({n}, G); got shape {groups.shape}."
        )
    if not jnp.issubdtype(groups.dtype, jnp.integer):
        raise ValueError(
            f"`{name}` ids must be integers (or a boolean (N, G) membership matrix); got "
            f"dtype {groups.dtype}. Cast them with `.astype(int)`."
        )
    if n_groups is None:
        raise ValueError(
            f"`n_groups` (static, the number of segments) is required with integer `{name}`;"
            " got None. Pass `n_groups=G` as a Python int (under `jit` the ids cannot tell)."
        )
    n_groups = check_positive_int("n_groups", n_groups)
    if values_checkable(groups) and n:
        host = np.asarray(groups)
        low, high = int(host.min()), int(host.max())
        if low < 0 or high >= n_groups:
            raise ValueError(
                f"`{name}` ids must lie in [0, n_groups) = [0, {n_groups}); got values in "
                f"[{low}, {high}]. Raise `n_groups` or relabel the segments."
            )
    return groups, n_groups


def reject_lone_n_groups(groups: Any, n_groups: Any) -> None:
    """Raise when ``n_groups`` is given without ``groups`` (it would be silently ignored)."""
    if groups is None and n_groups is not None:
        raise ValueError(
            f"`n_groups` ({n_groups!r}) was given without `groups`: pass the segment ids as "
            "`groups=` too, or drop `n_groups` for one result over all samples."
        )


def segmented_cumsum(values: jax.Array, starts: jax.Array) -> jax.Array:
    """Cumulative sums that restart at every ``starts`` (no cancellation across segments)."""

    def combine(a, b):
        (va, fa), (vb, fb) = a, b
        return jnp.where(fb, vb, va + vb), fa | fb

    return lax.associative_scan(combine, (values, starts))[0]
