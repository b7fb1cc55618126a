"""The three forms of regression predictions and their validation.

A prediction is a pytree (a NamedTuple of arrays), so it passes through ``jit`` and
``vmap`` like any array:

* :class:`~jaxcal.regression.Gaussian` ``(mean, std)``: ``(N,)`` each, ``std > 0``;
* :class:`~jaxcal.regression.Quantiles` ``(values, levels)``: ``(N, Q)`` predicted
  quantiles at the ``(Q,)`` levels, strictly increasing in (0, 1);
* :class:`~jaxcal.regression.Samples` ``(values,)``: ``(N, S)`` draws or ensemble members.

Validation runs on concrete inputs only (skipped under ``jit``/``vmap``/``grad``, where
the kernels trust their input): shapes, NaN/inf, ``std > 0``, levels in (0, 1) and
increasing, weights finite and non-negative. Padding rows masked by weight 0 may hold
anything under tracing: every kernel zeroes their terms before it sums.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import as_float, check_finite, check_weights, values_checkable
from jaxcal._core.numerics import compute_dtype


class Gaussian(NamedTuple):
    """A Gaussian predictive distribution per row.

    Attributes:
      mean: ``(N,)`` predicted means.
      std: ``(N,)`` predicted standard deviations, ``> 0``.
    """

    mean: Any
    std: Any


class Quantiles(NamedTuple):
    """Predicted quantiles per row at common levels.

    Attributes:
      values: ``(N, Q)`` predicted quantiles, column j at level ``levels[j]``.
      levels: ``(Q,)`` quantile levels, strictly increasing in (0, 1).
    """

    values: Any
    levels: Any


class Samples(NamedTuple):
    """Draws from the predictive distribution (or ensemble members) per row.

    Attributes:
      values: ``(N, S)`` samples, S >= 1.
    """

    values: Any


def common_dtype(*arrays: jax.Array) -> Any:
    """The float dtype the kernels compute in: the widest of the arrays' compute dtypes
    (float32 at least, float64 under x64 when any input is float64); explicit, so that
    mixed float32 / float64 inputs work under strict dtype promotion too."""
    return max((compute_dtype(a.dtype) for a in arrays), key=lambda d: d.itemsize)


def check_target(y: Any, name: str = "y") -> jax.Array:
    """``y`` as a finite ``(N,)`` float array."""
    y = as_float(y, name)
    if y.ndim != 1:
        raise ValueError(f"`{name}` must be a 1-D array of targets (N,); got shape {y.shape}.")
    check_finite(name, y)
    return y


def check_rows(x: Any, name: str, n: int, ndim: int = 1) -> jax.Array:
    """``x`` as a finite float array of rank ``ndim`` with ``n`` rows."""
    x = as_float(x, name)
    if x.ndim != ndim or x.shape[0] != n:
        want = f"({n},)" if ndim == 1 else f"({n}, ...) with {ndim} axes"
        raise ValueError(f"`{name}` must have shape {want} to match `y` ({n},); got {x.shape}.")
    if ndim == 2 and x.shape[1] < 1:
        raise ValueError(f"`{name}` must have at least one column; got shape {x.shape}.")
    check_finite(name, x)
    return x


def check_positive(x: jax.Array, name: str) -> None:
    """Raise if a concrete ``x`` holds a value <= 0."""
    if values_checkable(x) and x.size:
        host = np.asarray(x)
        if not (host > 0).all():
            idx = int(np.argwhere(~(host > 0))[0][0])
            raise ValueError(
                f"`{name}` must be > 0 (a standard deviation); got {host.flat[idx]} at index "
                f"{idx}. Floor it (e.g. jnp.maximum({name}, 1e-6)) or drop the row."
            )


def check_levels(levels: Any, name: str = "levels", q: int | None = None) -> jax.Array:
    """``levels`` as a ``(Q,)`` float array, strictly increasing in (0, 1)."""
    levels = as_float(levels, name)
    if levels.ndim != 1 or levels.shape[0] < 1:
        raise ValueError(f"`{name}` must be a non-empty 1-D array of levels; got {levels.shape}.")
    if q is not None and levels.shape[0] != q:
        raise ValueError(
            f"`{name}` must have shape ({q},), one level per column of the quantiles; got "
            f"{levels.shape}."
        )
    check_finite(name, levels)
    if values_checkable(levels):
        host = np.asarray(levels, np.float64)
        if (host <= 0).any() or (host >= 1).any():
            raise ValueError(f"`{name}` must lie in the open interval (0, 1); got {host.tolist()}.")
        if (np.diff(host) <= 0).any():
            raise ValueError(f"`{name}` must be strictly increasing; got {host.tolist()}.")
    return levels


def check_weights_for(weights: Any, n: int) -> jax.Array | None:
    """Optional ``(N,)`` finite non-negative weights (0 masks padding)."""
    return check_weights(weights, n)


def check_prediction(pred: Any, y: Any, weights: Any = None):
    """Validate a prediction of one of the three forms against ``y`` and ``weights``.

    Returns ``(pred, y, weights)`` with every float array in one compute dtype.
    """
    if not isinstance(pred, (Gaussian, Quantiles, Samples)):
        raise ValueError(
            "`pred` must be a jaxcal.regression.Gaussian(mean, std), Quantiles(values, "
            f"levels) or Samples(values); got {type(pred).__name__}."
        )
    y = check_target(y)
    n = y.shape[0]
    if isinstance(pred, Gaussian):
        mean = check_rows(pred.mean, "mean", n)
        std = check_rows(pred.std, "std", n)
        check_positive(std, "std")
        arrays = [y, mean, std]
    elif isinstance(pred, Quantiles):
        values = check_rows(pred.values, "quantiles", n, 2)
        levels = check_levels(pred.levels, "levels", values.shape[1])
        arrays = [y, values, levels]
    else:
        values = check_rows(pred.values, "samples", n, 2)
        arrays = [y, values]
    weights = check_weights_for(weights, n)
    dtype = common_dtype(*arrays)
    arrays = [a.astype(dtype) for a in arrays]
    y = arrays[0]
    pred = type(pred)(*arrays[1:])
    if weights is not None:
        weights = weights.astype(dtype)
    return pred, y, weights


def live_weights(weights: jax.Array | None, n: int, dtype: Any) -> tuple[jax.Array, jax.Array]:
    """``(w, live)``: the weights normalised to sum 1 over the live rows (0 for zero total)
    and the mask of rows with positive weight."""
    if weights is None:
        w = jnp.ones((n,), dtype)
    else:
        w = weights.astype(dtype)
    live = w > 0
    w = jnp.where(live, w, 0)
    total = jnp.sum(w)
    w = jnp.where(total > 0, w / jnp.where(total > 0, total, 1), 0)
    return w, live


def wsum(values: jax.Array, w: jax.Array, live: jax.Array) -> jax.Array:
    """``sum_i w_i values_i`` over axis 0, padding rows (``live`` false) contributing 0."""
    mask = live.reshape((-1,) + (1,) * (values.ndim - 1))
    wb = w.reshape(mask.shape)
    return jnp.sum(jnp.where(mask, wb * values, 0), axis=0)


def sanitize(pred: Any, y: jax.Array, live: jax.Array):
    """Padding rows (``live`` false) replaced by a harmless prediction (mean 0, std 1,
    quantiles and samples 0) and target 0, so that neither values nor gradients of the
    live rows can meet their NaN."""
    y = jnp.where(live, y, 0)
    col = live[:, None]
    if isinstance(pred, Gaussian):
        return Gaussian(jnp.where(live, pred.mean, 0), jnp.where(live, pred.std, 1)), y
    if isinstance(pred, Quantiles):
        return Quantiles(jnp.where(col, pred.values, 0), pred.levels), y
    return Samples(jnp.where(col, pred.values, 0)), y
