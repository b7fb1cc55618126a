"""CORP reliability of a mean forecast and the decomposition of its squared error
(Gneiting & Resin 2023; Dimitriadis, Gneiting & Jordan 2021), as model-diagnostics."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.isotonic import isotonic_apply, isotonic_fit
from jaxcal.regression._inputs import (
    check_rows,
    check_target,
    check_weights_for,
    common_dtype,
    live_weights,
    wsum,
)


class MeanReliability(NamedTuple):
    """The CORP reliability curve of a mean forecast: the isotonic regression of the
    target on the forecast, in buffers of the input size N.

    Attributes:
      forecast: ``(N,)`` distinct forecast values in increasing order (the first ``size``).
      recalibrated: ``(N,)`` the fitted conditional mean of the target at each.
      size: int32 number of distinct forecasts of positive weight.
    """

    forecast: jax.Array
    recalibrated: jax.Array
    size: jax.Array


class MeanScoreDecomposition(NamedTuple):
    """``score = miscalibration - discrimination + uncertainty`` (0-d arrays).

    Attributes:
      score: mean score of the forecasts.
      miscalibration: MCB, score minus the score of the recalibrated forecasts (>= 0).
      discrimination: DSC, the score of the marginal mean minus that of the recalibrated
        forecasts (>= 0).
      uncertainty: UNC, the score of the marginal (weighted) mean of the target.
    """

    score: jax.Array
    miscalibration: jax.Array
    discrimination: jax.Array
    uncertainty: jax.Array


def _args(mean: Any, y: Any, weights: Any):
    y = check_target(y)
    mean = check_rows(mean, "mean", y.shape[0])
    weights = check_weights_for(weights, y.shape[0])
    dtype = common_dtype(mean, y)
    if weights is not None:
        weights = weights.astype(dtype)
    return mean.astype(dtype), y.astype(dtype), weights


def _fit(mean, y, weights):
    w, live = live_weights(weights, y.shape[0], y.dtype)
    mean, y = jnp.where(live, mean, 0), jnp.where(live, y, 0)
    params = isotonic_fit(mean, y, jnp.where(live, w, 0))
    return params, mean, y, w, live


@jax.jit
def _reliability_kernel(mean, y, weights):
    params, *_ = _fit(mean, y, weights)
    return MeanReliability(params.x, params.y, params.size)


def mean_reliability(mean: Any, y: Any, *, weights: Any = None) -> MeanReliability:
    """CORP reliability curve of a mean forecast (Gneiting & Resin 2023).

    The isotonic (pool-adjacent-violators) regression of ``y`` on the forecast ``mean``,
    ties in the forecast averaged first (scikit-learn's ``IsotonicRegression``, which
    model-diagnostics' ``plot_reliability_diagram`` and ``decompose`` use for the mean):
    the recalibrated forecast E[Y | forecast] under the constraint that it is
    non-decreasing. A calibrated forecast lies on the diagonal.

    Args:
      mean: ``(N,)`` forecasts of the conditional mean.
      y: ``(N,)`` targets.
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).

    Returns:
      :class:`~jaxcal.regression.MeanReliability` (buffers of N; the first ``size`` used).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import mean_reliability
      >>> r = mean_reliability(jnp.array([1.0, 2.0, 3.0]), jnp.array([2.0, 1.0, 4.0]))
      >>> r.recalibrated.tolist()
      [1.5, 1.5, 4.0]

    References:
      Gneiting & Resin (2023), "Regression diagnostics meets forecast evaluation:
      conditional calibration, reliability diagrams, and coefficient of determination",
      EJS 17; model-diagnostics 1.5, ``model_diagnostics.calibration``.
    """
    return _reliability_kernel(*_args(mean, y, weights))


@jax.jit
def _decomposition_kernel(mean, y, weights):
    params, mean, y, w, live = _fit(mean, y, weights)
    recal = isotonic_apply(params, mean, mean)
    marginal = wsum(y, w, live)
    score = wsum((mean - y) ** 2, w, live)
    rec = wsum((recal - y) ** 2, w, live)
    unc = wsum((marginal - y) ** 2, w, live)
    return MeanScoreDecomposition(score, score - rec, unc - rec, unc)


def mean_score_decomposition(mean: Any, y: Any, *, weights: Any = None) -> MeanScoreDecomposition:
    """Squared-error decomposition ``S = MCB - DSC + UNC`` of a mean forecast by CORP.

    With S the (weighted) mean squared error, ``c_i`` the CORP recalibrated forecast
    (:func:`~jaxcal.regression.mean_reliability` at ``mean_i``) and ``ybar`` the weighted
    mean target: ``MCB = S(mean) - S(c)``, ``DSC = S(ybar) - S(c)``, ``UNC = S(ybar)``
    (Dimitriadis, Gneiting & Jordan 2021; Gneiting & Resin 2023). Equals model-diagnostics'
    ``decompose(y_obs, y_pred, scoring_function=SquaredError())`` (its ``score``,
    ``miscalibration``, ``discrimination``, ``uncertainty``).

    Args:
      mean: ``(N,)`` forecasts of the conditional mean.
      y: ``(N,)`` targets.
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).

    Returns:
      :class:`~jaxcal.regression.MeanScoreDecomposition`. Zero total weight gives zeros.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import mean_score_decomposition
      >>> d = mean_score_decomposition(jnp.array([1.0, 2.0, 3.0]), jnp.array([2.0, 1.0, 4.0]))
      >>> [round(float(v), 4) for v in d]
      [1.0, 0.8333, 1.3889, 1.5556]

    References:
      Dimitriadis, Gneiting & Jordan (2021), "Stable reliability diagrams for probabilistic
      classifiers", PNAS 118; Gneiting & Resin (2023), EJS 17; model-diagnostics 1.5,
      ``model_diagnostics.scoring.decompose``.
    """
    return _decomposition_kernel(*_args(mean, y, weights))
