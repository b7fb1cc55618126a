"""Variance calibration: the binned RMV-vs-RMSE curve, ENCE (Levi et al. 2019) and UCE
(Laves et al. 2020), with netcal's binning, and netcal's conditional QCE."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

from jaxcal._core.checks import check_positive_int
from jaxcal._core.numerics import safe_divide, safe_sqrt
from jaxcal.regression._calibration import NETCAL_LEVELS, check_levels_option
from jaxcal.regression._inputs import Gaussian, check_prediction, live_weights, sanitize


class VarianceCurve(NamedTuple):
    """Binned root mean variance against root mean squared error.

    Attributes:
      edges: ``(B + 1,)`` equal-width bin edges over [min, max] of the binned quantity.
      weights: ``(B,)`` share of the total weight in each bin (sums to 1; 0 when empty).
      rmv: ``(B,)`` root mean predicted variance ``sqrt(mean std^2)`` per bin (0 if empty).
      rmse: ``(B,)`` root mean squared error ``sqrt(mean (y - mean)^2)`` per bin (0 if empty).
    """

    edges: jax.Array
    weights: jax.Array
    rmv: jax.Array
    rmse: jax.Array


def _check_gaussian(pred: Any, y: Any, weights: Any, n_bins: Any):
    if not isinstance(pred, Gaussian):
        raise ValueError(
            "`pred` must be a jaxcal.regression.Gaussian(mean, std) (variance calibration "
            f"compares predicted variances with squared errors); got {type(pred).__name__}."
        )
    n_bins = check_positive_int("n_bins", n_bins)
    pred, y, weights = check_prediction(pred, y, weights)
    return pred, y, weights, n_bins


def equal_width_bins(s: jax.Array, live: jax.Array, n_bins: int):
    """netcal's (NumPy histogram) bins: ``n_bins`` equal-width bins over [min, max] of the
    live ``s``, ``[e_k, e_{k+1})`` with the last closed; a constant ``s`` is one bin."""
    lo = jnp.min(jnp.where(live, s, jnp.inf))
    hi = jnp.max(jnp.where(live, s, -jnp.inf))
    lo = jnp.where(jnp.isfinite(lo), lo, 0)
    hi = jnp.where(jnp.isfinite(hi), hi, 0)
    edges = jnp.linspace(lo, hi, n_bins + 1)
    idx = jnp.clip(jnp.searchsorted(edges, s, side="right") - 1, 0, n_bins - 1)
    return edges, idx


def _bin_means(idx, live, w, n_bins, *values):
    """Per-bin weight shares and weighted means of ``values`` (0 for empty bins)."""
    wl = jnp.where(live, w, 0)
    share = jax.ops.segment_sum(wl, idx, n_bins)
    means = [
        safe_divide(jax.ops.segment_sum(jnp.where(live, wl * v, 0), idx, n_bins), share)
        for v in values
    ]
    return share, means


@partial(jax.jit, static_argnames=("n_bins", "by"))
def _variance_kernel(pred, y, weights, n_bins, by):
    w, live = live_weights(weights, y.shape[0], y.dtype)
    pred, y = sanitize(pred, y, live)
    var = pred.std * pred.std
    err = (y - pred.mean) ** 2
    edges, idx = equal_width_bins(pred.std if by == "std" else var, live, n_bins)
    share, (mv, mse) = _bin_means(idx, live, w, n_bins, var, err)
    return edges, share, mv, mse


def variance_curve(
    pred: Gaussian, y: Any, *, n_bins: int = 10, weights: Any = None
) -> VarianceCurve:
    """Binned RMV against RMSE: the reliability diagram of predicted variances.

    Rows are binned by the predicted ``std`` into ``n_bins`` equal-width bins over its
    range (netcal's binning: NumPy histogram edges, ``[e_k, e_{k+1})``, the last closed);
    per bin ``RMV_b = sqrt(mean_b std^2)`` and ``RMSE_b = sqrt(mean_b (y - mean)^2)``
    (weighted means). A variance-calibrated model has ``RMV_b = RMSE_b`` (Levi et al. 2019).

    Args:
      pred: a :class:`~jaxcal.regression.Gaussian` of N rows.
      y: ``(N,)`` targets.
      n_bins: number of bins (>= 1).
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).

    Returns:
      :class:`~jaxcal.regression.VarianceCurve`. Empty bins hold 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, variance_curve
      >>> g = Gaussian(jnp.zeros(4), jnp.array([1.0, 1.0, 2.0, 2.0]))
      >>> c = variance_curve(g, jnp.array([1.0, -1.0, 1.0, -1.0]), n_bins=2)
      >>> c.rmv.tolist(), c.rmse.tolist()
      ([1.0, 2.0], [1.0, 1.0])

    References:
      Levi, Gispan, Giladi & Fetaya (2019/2022), "Evaluating and calibrating uncertainty
      prediction in regression tasks", Sensors 22; netcal 1.3,
      ``netcal.presentation.ReliabilityRegression``.
    """
    pred, y, weights, n_bins = _check_gaussian(pred, y, weights, n_bins)
    edges, share, mv, mse = _variance_kernel(pred, y, weights, n_bins, "std")
    return VarianceCurve(edges, share, safe_sqrt(mv), safe_sqrt(mse))


@partial(jax.jit, static_argnames=("n_bins",))
def _ence_kernel(pred, y, weights, n_bins):
    _, share, mv, mse = _variance_kernel(pred, y, weights, n_bins, "std")
    rmv, rmse = safe_sqrt(mv), safe_sqrt(mse)
    used = (share > 0) & (rmv > 0)
    terms = jnp.where(used, safe_divide(jnp.abs(rmv - rmse), rmv), 0)
    return safe_divide(jnp.sum(terms), jnp.sum(used).astype(terms.dtype))


def ence(pred: Gaussian, y: Any, *, n_bins: int = 10, weights: Any = None) -> jax.Array:
    """Expected normalized calibration error (Levi et al. 2019), as netcal computes it.

    ``ENCE = (1/B') sum_b |RMV_b - RMSE_b| / RMV_b`` over the B' non-empty bins of
    :func:`~jaxcal.regression.variance_curve` (equal-width bins of the predicted ``std``):
    an unweighted mean over bins, as in the paper and netcal's ``ENCE(bins).measure``.

    Args:
      pred: a :class:`~jaxcal.regression.Gaussian` of N rows.
      y: ``(N,)`` targets.
      n_bins: number of bins (>= 1; netcal's default 10).
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).

    Returns:
      0-d array >= 0. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, ence
      >>> g = Gaussian(jnp.zeros(4), jnp.array([1.0, 1.0, 2.0, 2.0]))
      >>> float(ence(g, jnp.array([1.0, -1.0, 1.0, -1.0]), n_bins=2))
      0.25

    References:
      Levi, Gispan, Giladi & Fetaya (2022), "Evaluating and calibrating uncertainty
      prediction in regression tasks", Sensors 22 (arXiv 2019); netcal 1.3,
      ``netcal.metrics.regression.ENCE``.
    """
    pred, y, weights, n_bins = _check_gaussian(pred, y, weights, n_bins)
    return _ence_kernel(pred, y, weights, n_bins)


@partial(jax.jit, static_argnames=("n_bins",))
def _uce_kernel(pred, y, weights, n_bins):
    _, share, mv, mse = _variance_kernel(pred, y, weights, n_bins, "var")
    return jnp.sum(share * jnp.abs(mse - mv))


def uce(pred: Gaussian, y: Any, *, n_bins: int = 10, weights: Any = None) -> jax.Array:
    """Uncertainty calibration error (Laves et al. 2020), as netcal computes it.

    ``UCE = sum_b (N_b / N) |MSE_b - MV_b|`` over ``n_bins`` equal-width bins of the
    predicted *variance* ``std^2`` (netcal's ``UCE(bins).measure``), with ``MV_b`` the mean
    predicted variance and ``MSE_b`` the mean squared error in the bin (weighted).

    Args:
      pred: a :class:`~jaxcal.regression.Gaussian` of N rows.
      y: ``(N,)`` targets.
      n_bins: number of bins (>= 1; netcal's default 10).
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).

    Returns:
      0-d array >= 0, in the units of a variance. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, uce
      >>> g = Gaussian(jnp.zeros(4), jnp.array([1.0, 1.0, 2.0, 2.0]))
      >>> float(uce(g, jnp.array([1.0, -1.0, 1.0, -1.0]), n_bins=2))
      1.5

    References:
      Laves, Ihler, Fast, Kahrs & Ortmaier (2020), "Well-calibrated regression uncertainty
      in medical imaging with deep learning", MIDL; netcal 1.3,
      ``netcal.metrics.regression.UCE``.
    """
    pred, y, weights, n_bins = _check_gaussian(pred, y, weights, n_bins)
    return _uce_kernel(pred, y, weights, n_bins)


@partial(jax.jit, static_argnames=("levels", "n_bins"))
def _cqce_kernel(pred, y, weights, levels, n_bins):
    w, live = live_weights(weights, y.shape[0], y.dtype)
    pred, y = sanitize(pred, y, live)
    z = jnp.abs(y - pred.mean) / pred.std
    tau = jnp.asarray(levels, y.dtype)
    inside = (z[:, None] <= ndtri(0.5 + tau / 2)[None, :]).astype(y.dtype)  # (N, T)
    _, idx = equal_width_bins(pred.std, live, n_bins)
    wl = jnp.where(live, w, 0)
    share = jax.ops.segment_sum(wl, idx, n_bins)
    hits = jax.ops.segment_sum(wl[:, None] * inside, idx, n_bins)  # (B, T)
    freq = safe_divide(hits, share[:, None])
    gaps = jnp.where(share[:, None] > 0, jnp.abs(freq - tau[None, :]), 0)
    return jnp.mean(jnp.sum(share[:, None] * gaps, axis=0))


def conditional_qce(
    pred: Gaussian,
    y: Any,
    *,
    levels: Sequence[float] = NETCAL_LEVELS,
    n_bins: int = 10,
    weights: Any = None,
) -> jax.Array:
    """Conditional quantile calibration error (C-QCE) of netcal, univariate.

    ``C-QCE = (1/|T|) sum_tau sum_b (N_b / N) |freq_b(tau) - tau|`` with ``freq_b(tau)``
    the fraction of rows of bin b inside their central tau-interval
    (``|y - mean| / std <= Phi^-1(1/2 + tau/2)``), the rows binned by the predicted std
    into ``n_bins`` equal-width bins over its range (netcal's
    ``QCE(bins, marginal=False).measure(X, y, q=levels)``).

    Args:
      pred: a :class:`~jaxcal.regression.Gaussian` of N rows.
      y: ``(N,)`` targets.
      levels: the levels tau (a static sequence in [0, 1]); default 0.05, ..., 0.95.
      n_bins: number of bins (>= 1).
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).

    Returns:
      0-d array in [0, 1]. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, conditional_qce
      >>> g = Gaussian(jnp.zeros(4), jnp.array([1.0, 1.0, 2.0, 2.0]))
      >>> y = jnp.array([0.1, -3.0, 0.5, -0.2])
      >>> float(conditional_qce(g, y, levels=(0.5,), n_bins=2))
      0.25

    References:
      Küppers, Schneider & Haselhoff (2022), ECCV workshops; netcal 1.3,
      ``netcal.metrics.regression.QCE``.
    """
    levels = check_levels_option(2, levels)
    pred, y, weights, n_bins = _check_gaussian(pred, y, weights, n_bins)
    return _cqce_kernel(pred, y, weights, levels, n_bins)
