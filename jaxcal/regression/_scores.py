"""Proper scoring rules of regression predictions: CRPS (Gaussian, ensemble, quantiles),
the pinball loss, the interval score and the Gaussian log score.

Each returns the weighted mean over the rows (0-d; ``reduction="none"`` gives the
``(N,)`` per-row scores, the weights then only validated) and is differentiable in the
prediction (``grad`` of the mean is finite, padding rows contribute 0).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr

from jaxcal._core.checks import check_option, values_checkable
from jaxcal.regression._inputs import (
    Gaussian,
    Quantiles,
    Samples,
    check_prediction,
    check_rows,
    check_target,
    check_weights_for,
    common_dtype,
    live_weights,
    sanitize,
    wsum,
)

REDUCTIONS = ("mean", "none")
_INV_SQRT_PI = float(1 / np.sqrt(np.pi))
_INV_SQRT_2PI = float(1 / np.sqrt(2 * np.pi))
_HALF_LOG_2PI = float(0.5 * np.log(2 * np.pi))


def _reduce(per_row, weights, live, reduction):
    if reduction == "none":
        return per_row
    w, live = live_weights(weights, per_row.shape[0], per_row.dtype)
    return wsum(per_row, w, live)


def _live(weights, n, dtype):
    return live_weights(weights, n, dtype)[1]


@partial(jax.jit, static_argnames=("reduction",))
def _crps_gaussian_kernel(mean, std, y, weights, reduction):
    live = _live(weights, y.shape[0], y.dtype)
    pred, y = sanitize(Gaussian(mean, std), y, live)
    z = (y - pred.mean) / pred.std
    pdf = jnp.exp(-0.5 * z * z) * _INV_SQRT_2PI
    crps = pred.std * (z * (2 * ndtr(z) - 1) + 2 * pdf - _INV_SQRT_PI)
    return _reduce(crps, weights, live, reduction)


def _gaussian_args(mean, std, y, weights, reduction):
    check_option("reduction", reduction, REDUCTIONS)
    pred, y, weights = check_prediction(Gaussian(mean, std), y, weights)
    return pred.mean, pred.std, y, weights


def crps_gaussian(
    mean: Any, std: Any, y: Any, *, weights: Any = None, reduction: str = "mean"
) -> jax.Array:
    """Continuous ranked probability score of a Gaussian, in closed form.

    ``CRPS(N(mu, s^2), y) = s [z (2 Phi(z) - 1) + 2 phi(z) - 1/sqrt(pi)]``, ``z = (y - mu)/s``
    (Gneiting, Raftery, Westveld & Goldman 2005); equals scoringrules' ``crps_normal`` and
    properscoring's ``crps_gaussian``. Lower is better; differentiable in ``mean``, ``std``.

    Args:
      mean: ``(N,)`` predicted means.
      std: ``(N,)`` predicted standard deviations, > 0.
      y: ``(N,)`` targets.
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).
      reduction: ``"mean"`` (weighted mean, 0-d) or ``"none"`` (``(N,)`` per row).

    Returns:
      0-d array (or ``(N,)``). Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import crps_gaussian
      >>> round(float(crps_gaussian(jnp.zeros(1), jnp.ones(1), jnp.zeros(1))), 4)
      0.2337

    References:
      Gneiting et al. (2005), "Calibrated probabilistic forecasting using ensemble model
      output statistics and minimum CRPS estimation", Monthly Weather Review 133.
    """
    return _crps_gaussian_kernel(*_gaussian_args(mean, std, y, weights, reduction), reduction)


@partial(jax.jit, static_argnames=("reduction",))
def _log_score_kernel(mean, std, y, weights, reduction):
    live = _live(weights, y.shape[0], y.dtype)
    pred, y = sanitize(Gaussian(mean, std), y, live)
    z = (y - pred.mean) / pred.std
    nll = _HALF_LOG_2PI + jnp.log(pred.std) + 0.5 * z * z
    return _reduce(nll, weights, live, reduction)


def log_score_gaussian(
    mean: Any, std: Any, y: Any, *, weights: Any = None, reduction: str = "mean"
) -> jax.Array:
    """Logarithmic score (negative log-likelihood) of a Gaussian.

    ``LogS(N(mu, s^2), y) = log(2 pi)/2 + log s + (y - mu)^2 / (2 s^2)``; equals
    scoringrules' ``logs_normal`` and netcal's ``NLL`` (univariate, per row). Lower is
    better; differentiable in ``mean`` and ``std``.

    Args:
      mean: ``(N,)`` predicted means.
      std: ``(N,)`` predicted standard deviations, > 0.
      y: ``(N,)`` targets.
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).
      reduction: ``"mean"`` (weighted mean, 0-d) or ``"none"`` (``(N,)`` per row).

    Returns:
      0-d array (or ``(N,)``). Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import log_score_gaussian
      >>> round(float(log_score_gaussian(jnp.zeros(1), jnp.ones(1), jnp.zeros(1))), 4)
      0.9189

    References:
      Good (1952), "Rational decisions"; Gneiting & Raftery (2007), "Strictly proper
      scoring rules, prediction, and estimation", JASA 102.
    """
    return _log_score_kernel(*_gaussian_args(mean, std, y, weights, reduction), reduction)


ESTIMATORS = ("fair", "plugin")


@partial(jax.jit, static_argnames=("estimator", "reduction"))
def _crps_ensemble_kernel(samples, y, weights, estimator, reduction):
    live = _live(weights, y.shape[0], y.dtype)
    pred, y = sanitize(Samples(samples), y, live)
    x = jnp.sort(pred.values, axis=1)
    s = x.shape[1]
    spread_to_obs = jnp.mean(jnp.abs(x - y[:, None]), axis=1)
    # sum_{s,t} |x_s - x_t| = 2 sum_i (2 i - S - 1) x_(i), i = 1..S (sorted ascending)
    coef = (2 * jnp.arange(1, s + 1) - s - 1).astype(x.dtype)
    pair_sum = 2 * jnp.sum(x * coef[None, :], axis=1)
    if estimator == "fair":
        pairs = pair_sum / (2 * s * (s - 1)) if s > 1 else jnp.zeros_like(pair_sum)
    else:
        pairs = pair_sum / (2 * s * s)
    return _reduce(spread_to_obs - pairs, weights, live, reduction)


def crps_ensemble(
    samples: Any,
    y: Any,
    *,
    estimator: str = "fair",
    weights: Any = None,
    reduction: str = "mean",
) -> jax.Array:
    """CRPS of an ensemble (or of samples of the predictive distribution).

    ``CRPS = (1/S) sum_s |x_s - y| - c sum_{s,t} |x_s - x_t|`` with
    ``c = 1 / (2 S (S - 1))`` for ``estimator="fair"`` (the unbiased estimator of the CRPS
    of the distribution the members are drawn from; Ferro, Richardson & Weigel 2008;
    scoringrules' ``crps_ensemble(..., estimator="fair")``) or ``c = 1 / (2 S^2)`` for
    ``"plugin"`` (the CRPS of the empirical distribution; properscoring's ``crps_ensemble``,
    scoringrules' ``estimator="nrg"``). The pair sum is computed after one sort per row,
    ``sum_{s,t} |x_s - x_t| = 2 sum_i (2i - S - 1) x_(i)``: O(S log S), not O(S^2). With one
    member the fair estimator has no pair term. Differentiable in ``samples``.

    Args:
      samples: ``(N, S)`` ensemble members or samples.
      y: ``(N,)`` targets.
      estimator: ``"fair"`` or ``"plugin"``.
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).
      reduction: ``"mean"`` (weighted mean, 0-d) or ``"none"`` (``(N,)`` per row).

    Returns:
      0-d array (or ``(N,)``). Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import crps_ensemble
      >>> x, y = jnp.array([[0.0, 1.0, 2.0]]), jnp.array([0.5])
      >>> round(float(crps_ensemble(x, y, estimator="plugin")), 4)
      0.3889

    References:
      Gneiting & Raftery (2007), JASA 102, eq. (21); Ferro, Richardson & Weigel (2008),
      "On the effect of ensemble size on the discrete and continuous ranked probability
      scores", Meteorological Applications 15.
    """
    check_option("estimator", estimator, ESTIMATORS)
    check_option("reduction", reduction, REDUCTIONS)
    pred, y, weights = check_prediction(Samples(samples), y, weights)
    return _crps_ensemble_kernel(pred.values, y, weights, estimator, reduction)


def _pinball(q, levels, y):
    """``(N, Q)`` pinball losses ``rho_tau(y - q) = (1(y < q) - tau) (q - y)``."""
    diff = q - y[:, None]
    return (jnp.where(diff > 0, 1.0, 0.0).astype(q.dtype) - levels[None, :]) * diff


@partial(jax.jit, static_argnames=("kind", "reduction"))
def _quantile_score_kernel(values, levels, y, weights, kind, reduction):
    live = _live(weights, y.shape[0], y.dtype)
    pred, y = sanitize(Quantiles(values, levels), y, live)
    loss = _pinball(pred.values, pred.levels, y)
    per_row = jnp.mean(loss, axis=1) * (2 if kind == "crps" else 1)
    return _reduce(per_row, weights, live, reduction)


def _quantile_args(quantiles, levels, y, weights, reduction):
    check_option("reduction", reduction, REDUCTIONS)
    pred, y, weights = check_prediction(Quantiles(quantiles, levels), y, weights)
    return pred.values, pred.levels, y, weights


def pinball_loss(
    quantiles: Any, levels: Any, y: Any, *, weights: Any = None, reduction: str = "mean"
) -> jax.Array:
    """Pinball (quantile) loss averaged over the levels.

    ``(1/Q) sum_j rho_{tau_j}(y - q_j)``, ``rho_tau(u) = max(tau u, (tau - 1) u)``
    (Koenker & Bassett 1978): for one level equals scikit-learn's
    ``mean_pinball_loss(y, q, alpha=tau)``; over levels netcal's ``PinballLoss`` (mean over
    quantiles). Differentiable in ``quantiles`` (subgradient 0 at ``y = q``).

    Args:
      quantiles: ``(N, Q)`` predicted quantiles.
      levels: ``(Q,)`` their levels, strictly increasing in (0, 1).
      y: ``(N,)`` targets.
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).
      reduction: ``"mean"`` (weighted mean, 0-d) or ``"none"`` (``(N,)`` per row).

    Returns:
      0-d array (or ``(N,)``). Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import pinball_loss
      >>> q, tau = jnp.array([[1.0, 3.0]]), jnp.array([0.1, 0.9])
      >>> round(float(pinball_loss(q, tau, jnp.array([2.0]))), 4)
      0.1

    References:
      Koenker & Bassett (1978), "Regression quantiles", Econometrica 46.
    """
    args = _quantile_args(quantiles, levels, y, weights, reduction)
    return _quantile_score_kernel(*args, "pinball", reduction)


def crps_quantile(
    quantiles: Any, levels: Any, y: Any, *, weights: Any = None, reduction: str = "mean"
) -> jax.Array:
    """CRPS approximated from predicted quantiles: twice the mean pinball loss.

    ``CRPS ~ (2/Q) sum_j rho_{tau_j}(y - q_j)`` (Laio & Tamea 2007; Gneiting & Ranjan 2011,
    the CRPS is the integral of twice the quantile score over the levels); equals
    scoringrules' ``crps_quantile(obs, fct, alpha)``. Differentiable in ``quantiles``.

    Args:
      quantiles: ``(N, Q)`` predicted quantiles.
      levels: ``(Q,)`` their levels, strictly increasing in (0, 1).
      y: ``(N,)`` targets.
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).
      reduction: ``"mean"`` (weighted mean, 0-d) or ``"none"`` (``(N,)`` per row).

    Returns:
      0-d array (or ``(N,)``). Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import crps_quantile
      >>> q, tau = jnp.array([[1.0, 3.0]]), jnp.array([0.1, 0.9])
      >>> round(float(crps_quantile(q, tau, jnp.array([2.0]))), 4)
      0.2

    References:
      Laio & Tamea (2007), "Verification tools for probabilistic forecasts of continuous
      hydrological variables", HESS 11; Gneiting & Ranjan (2011), JBES 29.
    """
    args = _quantile_args(quantiles, levels, y, weights, reduction)
    return _quantile_score_kernel(*args, "crps", reduction)


@partial(jax.jit, static_argnames=("reduction",))
def _interval_kernel(lower, upper, y, weights, alpha, reduction):
    live = _live(weights, y.shape[0], y.dtype)
    y = jnp.where(live, y, 0)
    lower, upper = jnp.where(live, lower, 0), jnp.where(live, upper, 0)
    a = jnp.asarray(alpha, y.dtype)
    below = jnp.maximum(lower - y, 0)
    above = jnp.maximum(y - upper, 0)
    score = (upper - lower) + (2 / a) * (below + above)
    return _reduce(score, weights, live, reduction)


def interval_score(
    lower: Any,
    upper: Any,
    y: Any,
    *,
    alpha: float = 0.1,
    weights: Any = None,
    reduction: str = "mean",
) -> jax.Array:
    """Interval score of central (1 - alpha) prediction intervals.

    ``IS_alpha = (u - l) + (2/alpha)(l - y) 1(y < l) + (2/alpha)(y - u) 1(y > u)``
    (Gneiting & Raftery 2007, eq. 43; Winkler 1972); equals scoringrules'
    ``interval_score(obs, lower, upper, alpha)``. Differentiable in ``lower``, ``upper``.

    Args:
      lower: ``(N,)`` lower bounds.
      upper: ``(N,)`` upper bounds (``lower <= upper``; crossed bounds are rejected).
      y: ``(N,)`` targets.
      alpha: nominal miscoverage in (0, 1) (a static option): the intervals are the
        central ``1 - alpha`` intervals.
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).
      reduction: ``"mean"`` (weighted mean, 0-d) or ``"none"`` (``(N,)`` per row).

    Returns:
      0-d array (or ``(N,)``). Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import interval_score
      >>> lo, up = jnp.array([0.0, 0.0]), jnp.array([1.0, 1.0])
      >>> float(interval_score(lo, up, jnp.array([0.5, 2.0]), alpha=0.5))
      3.0

    References:
      Gneiting & Raftery (2007), "Strictly proper scoring rules, prediction, and
      estimation", JASA 102; Winkler (1972), JASA 67.
    """
    check_option("reduction", reduction, REDUCTIONS)
    if isinstance(alpha, jax.core.Tracer) or isinstance(alpha, bool):
        raise ValueError(f"`alpha` must be a Python float in (0, 1) (static); got {alpha!r}.")
    if not isinstance(alpha, (int, float, np.floating)) or not 0 < float(alpha) < 1:
        raise ValueError(f"`alpha` must be a float in (0, 1); got {alpha!r}.")
    y = check_target(y)
    n = y.shape[0]
    lower = check_rows(lower, "lower", n)
    upper = check_rows(upper, "upper", n)
    weights = check_weights_for(weights, n)
    dtype = common_dtype(y, lower, upper)
    y, lower, upper = y.astype(dtype), lower.astype(dtype), upper.astype(dtype)
    if weights is not None:
        weights = weights.astype(dtype)
    if values_checkable(lower, upper):
        bad = np.asarray(lower) > np.asarray(upper)
        if bad.any():
            i = int(np.argwhere(bad)[0][0])
            raise ValueError(
                f"`lower` must be <= `upper`; got lower[{i}] = {float(lower[i])} > upper[{i}] = "
                f"{float(upper[i])}. Swap or sort the bounds."
            )
    return _interval_kernel(lower, upper, y, weights, float(alpha), reduction)
