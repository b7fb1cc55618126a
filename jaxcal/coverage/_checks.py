"""Validation of the coverage metrics' inputs: intervals, prediction sets, levels, options.

The general checks (floats, finiteness, labels, weights, positive options) come from
``jaxcal/_core/checks.py``; this module adds what is particular to conformal outputs: interval
bounds that agree in shape and do not cross, boolean set masks, confidence levels (one or
one per level column) and CWC's ``eta``. Value checks run only on concrete arrays (see
``jaxcal/_core/checks.py``); every error is a ``ValueError`` naming the argument.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import (
    as_float,
    check_finite,
    check_labels,
    check_positive_int,
    check_weights,
    values_checkable,
)
from jaxcal._core.numerics import compute_dtype


def _widest(*dtypes: Any) -> jnp.dtype:
    """The widest compute dtype of several inputs (float32, or float64 under x64)."""
    return max((compute_dtype(d) for d in dtypes), key=lambda d: d.itemsize)


def _first_index(mask: np.ndarray) -> tuple[int, ...]:
    """Index of the first true entry of ``mask``, for error messages."""
    return tuple(int(i) for i in np.argwhere(mask)[0])


@jax.jit
def _interval_summary(y, lower, upper):
    """(all finite, for y / lower / upper), any ``lower > upper``: one device pass."""
    finite = [
        jnp.all(jnp.isfinite(x)) if x is not None else jnp.bool_(True) for x in (y, lower, upper)
    ]
    return finite, jnp.any(lower > upper)


def check_intervals(
    y: Any, lower: Any, upper: Any, weights: Any, *, need_y: bool = True, crossed: str = "reject"
) -> tuple[jax.Array | None, jax.Array, jax.Array, jax.Array | None, jnp.dtype]:
    """Validate ``(y, lower, upper, weights)``; returns them in one compute dtype."""
    lower = as_float(lower, "lower")
    upper = as_float(upper, "upper")
    if lower.ndim not in (1, 2):
        raise ValueError(
            f"`lower` must be (N,) or (N, L) for L confidence levels; got shape {lower.shape}."
        )
    if upper.shape != lower.shape:
        raise ValueError(
            f"`upper` must have the shape of `lower` {lower.shape}; got {upper.shape}."
        )
    n = lower.shape[0]
    if n == 0:
        raise ValueError(f"`lower` must not be empty; got shape {lower.shape}.")
    if lower.ndim == 2 and lower.shape[1] == 0:
        raise ValueError(f"`lower` must have at least one level column; got {lower.shape}.")
    dtypes = [lower.dtype, upper.dtype]
    if need_y:
        y = as_float(y, "y")
        if y.shape != (n,):
            raise ValueError(
                f"`y` must have shape ({n},) to match `lower` {lower.shape}; got {y.shape}."
            )
        dtypes.append(y.dtype)
    common = _widest(*dtypes)
    lower, upper = lower.astype(common), upper.astype(common)
    if need_y:
        y = y.astype(common)
    if values_checkable(y, lower, upper):
        # One fused pass on the device; the offending element is located only on failure.
        finite, any_crossed = jax.device_get(_interval_summary(y if need_y else None, lower, upper))
        for name, x, ok in zip(("y", "lower", "upper"), (y, lower, upper), finite, strict=True):
            if not ok:
                check_finite(name, x)
        if any_crossed and crossed == "reject":
            lo, up = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
            idx = _first_index(lo > up)
            raise ValueError(
                f"`lower` must not exceed `upper` (crossed interval at index {idx}: "
                f"lower={lo[idx]:.6g} > upper={up[idx]:.6g}). Reorder with "
                "jnp.minimum/jnp.maximum if crossing quantiles are expected."
            )
    weights = check_weights(weights, n)
    if weights is not None:
        dtypes.append(weights.dtype)
    dtype = _widest(*dtypes)
    cast = lambda a: None if a is None else a.astype(dtype)  # noqa: E731
    return cast(y), cast(lower), cast(upper), cast(weights), dtype


def check_sets(labels: Any, sets: Any, weights: Any, *, need_labels: bool = True):
    """Validate a boolean set mask ``(N, K)`` / ``(N, K, L)``, labels and weights."""
    try:
        arr = jnp.asarray(sets)
    except TypeError as err:
        raise ValueError(f"`sets` must be a boolean array; got {type(sets).__name__}.") from err
    if arr.ndim not in (2, 3):
        raise ValueError(
            "`sets` must be a boolean mask (N, K) or (N, K, L) for L confidence levels; "
            f"got shape {arr.shape}."
        )
    n, k = arr.shape[:2]
    if n == 0 or k == 0 or (arr.ndim == 3 and arr.shape[2] == 0):
        raise ValueError(f"`sets` must not be empty; got shape {arr.shape}.")
    if arr.dtype != jnp.bool_:
        if not (jnp.issubdtype(arr.dtype, jnp.integer) or jnp.issubdtype(arr.dtype, jnp.floating)):
            raise ValueError(f"`sets` must be a boolean mask; got dtype {arr.dtype}.")
        if values_checkable(arr) and bool(jnp.any((arr != 0) & (arr != 1))):
            values = np.asarray(arr)
            bad = (values != 0) & (values != 1)
            if bad.any():
                idx = _first_index(bad)
                raise ValueError(
                    f"`sets` must be a boolean mask (or 0/1); got {values[idx]} at index {idx}."
                )
        arr = arr != 0
    if need_labels:
        labels = check_labels(labels, n, k)
    weights = check_weights(weights, n)
    dtype = compute_dtype(jnp.int32 if weights is None else weights.dtype)
    if weights is not None:
        weights = weights.astype(dtype)
    return labels, arr, weights, dtype


def check_confidence_level(value: Any, lower: jax.Array, *, open_interval: bool):
    """``confidence_level`` for bounds ``lower``: a number, or one per level column.

    Values must lie in [0, 1], or in (0, 1) with ``open_interval``. Returned broadcast to
    ``(L,)`` (``(1,)`` when ``lower`` has no level axis): a JAX array when given one (maybe
    traced), else a NumPy array (no device round trip for a Python number).
    """
    name = "confidence_level"
    n_levels = lower.shape[1] if lower.ndim == 2 else None
    arr = value if isinstance(value, jax.Array) else np.asarray(value)
    if not (jnp.issubdtype(arr.dtype, jnp.floating) or jnp.issubdtype(arr.dtype, jnp.integer)):
        raise ValueError(f"`{name}` must be a number; got {value!r}.")
    expected = "a number" if n_levels is None else f"a number or shape ({n_levels},)"
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape != (n_levels,)):
        raise ValueError(f"`{name}` must be {expected}; got shape {arr.shape}.")
    if values_checkable(arr):
        values = np.asarray(arr, np.float64).reshape(-1)
        if open_interval:
            allowed, bad = "(0, 1)", (values <= 0) | (values >= 1)
        else:
            allowed, bad = "[0, 1]", (values < 0) | (values > 1)
        if (~np.isfinite(values)).any() or bad.any():
            raise ValueError(f"`{name}` must lie in {allowed}; got {value!r}.")
    xp = jnp if isinstance(arr, jax.Array) else np
    return xp.broadcast_to(arr, (1 if n_levels is None else n_levels,))


def check_eta(eta: Any) -> Any:
    """CWC's ``eta``: a finite real number (any sign), kept traced when it is a tracer."""
    arr = eta if isinstance(eta, jax.Array) else np.asarray(eta)
    if arr.ndim != 0 or not (
        jnp.issubdtype(arr.dtype, jnp.floating) or jnp.issubdtype(arr.dtype, jnp.integer)
    ):
        raise ValueError(f"`eta` must be a real number; got {eta!r}.")
    if values_checkable(arr) and not np.isfinite(float(arr)):
        raise ValueError(f"`eta` must be finite; got {float(arr)}.")
    return arr


def check_set_bins(num_bins: int | None, num_classes: int) -> int | None:
    """``num_bins`` of the set-size groups: None, or an integer in ``[1, K + 1]``."""
    if num_bins is None:
        return None
    num_bins = check_positive_int("num_bins", num_bins)
    if num_bins > num_classes + 1:
        raise ValueError(
            f"`num_bins` must be at most K + 1 = {num_classes + 1} (one group per possible "
            f"set size 0..{num_classes}); got {num_bins}."
        )
    return num_bins
