"""Probability integral transform (PIT) of the three forms of regression predictions."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr

from jaxcal._core.numerics import safe_divide
from jaxcal.regression._inputs import Gaussian, Quantiles, check_prediction


def standardized(pred: Gaussian, y: jax.Array) -> jax.Array:
    """``z = (y - mean) / std``."""
    return (y - pred.mean) / pred.std


def quantile_pit(values: jax.Array, levels: jax.Array, y: jax.Array) -> jax.Array:
    """Level at which the piecewise-linear quantile function through ``(levels, values)``
    reaches ``y``; ``levels[0] / 2`` below the lowest quantile, ``(1 + levels[-1]) / 2``
    above the highest (the middle of the uncovered tail mass). Rows are sorted first
    (crossed quantiles are rearranged, Chernozhukov et al. 2010)."""
    q = jnp.sort(values, axis=1)
    n, nq = q.shape
    k = jnp.sum(q <= y[:, None], axis=1)  # number of quantiles at or below y
    lo = jnp.clip(k - 1, 0, nq - 1)
    hi = jnp.clip(k, 0, nq - 1)
    qlo = jnp.take_along_axis(q, lo[:, None], axis=1)[:, 0]
    qhi = jnp.take_along_axis(q, hi[:, None], axis=1)[:, 0]
    tlo, thi = levels[lo], levels[hi]
    inside = tlo + safe_divide(y - qlo, qhi - qlo) * (thi - tlo)
    below = jnp.broadcast_to(levels[0] / 2, (n,))
    above = jnp.broadcast_to((1 + levels[-1]) / 2, (n,))
    return jnp.where(k == 0, below, jnp.where(k == nq, above, inside))


def sample_pit(values: jax.Array, y: jax.Array) -> jax.Array:
    """``(r + 1/2) / (S + 1)`` with ``r = #{x_s < y} + #{x_s = y} / 2``: the centre of the
    rank-histogram bin of ``y`` among the S samples (Anderson 1996; Hamill 2001)."""
    s = values.shape[1]
    yc = y[:, None]
    less = jnp.sum(values < yc, axis=1).astype(y.dtype)
    ties = jnp.sum(values == yc, axis=1).astype(y.dtype)
    return (less + ties / 2 + 0.5) / (s + 1)


def pit_kernel(pred: Any, y: jax.Array) -> jax.Array:
    """The PIT of each row (no validation)."""
    if isinstance(pred, Gaussian):
        return ndtr(standardized(pred, y))
    if isinstance(pred, Quantiles):
        return quantile_pit(pred.values, pred.levels, y)
    return sample_pit(pred.values, y)


_pit = jax.jit(pit_kernel)


def pit(pred: Any, y: Any) -> jax.Array:
    """Probability integral transform ``u_i = F_i(y_i)`` of each target under its prediction.

    Exact variant per form:

    * ``Gaussian(mean, std)``: ``u = Phi((y - mean) / std)`` (Dawid 1984).
    * ``Quantiles(values, levels)``: the level at which the piecewise-linear quantile
      function through ``(levels[j], values[:, j])`` reaches ``y``; below the lowest
      predicted quantile ``levels[0] / 2``, above the highest ``(1 + levels[-1]) / 2``
      (the middle of each tail's mass, which the quantiles do not resolve). Each row's
      quantiles are sorted first (crossed quantiles rearranged, Chernozhukov et al. 2010).
    * ``Samples(values)``: ``(r + 1/2) / (S + 1)`` with ``r = #{x_s < y} + #{x_s = y}/2``,
      the centre of the rank-histogram bin of ``y`` (Anderson 1996; Hamill 2001): uniform on
      the S + 1 bin centres when the ensemble is exchangeable with the target.

    A calibrated forecaster has uniform PIT values; test it with
    :func:`~jaxcal.stats.pit_test`.

    Args:
      pred: a :class:`~jaxcal.regression.Gaussian`, :class:`~jaxcal.regression.Quantiles`
        or :class:`~jaxcal.regression.Samples` of N rows.
      y: ``(N,)`` targets.

    Returns:
      ``(N,)`` PIT values in [0, 1].

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, pit
      >>> u = pit(Gaussian(jnp.zeros(3), jnp.ones(3)), jnp.array([-1.0, 0.0, 1.0]))
      >>> [round(v, 4) for v in u.tolist()]
      [0.1587, 0.5, 0.8413]

    References:
      Dawid (1984), "Statistical theory: the prequential approach"; Gneiting, Balabdaoui &
      Raftery (2007), "Probabilistic forecasts, calibration and sharpness".
    """
    pred, y, _ = check_prediction(pred, y)
    return _pit(pred, y)
