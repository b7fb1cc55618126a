"""Recalibrators of regression predictions, ``RegressionCalibrator(fit, apply)`` pairs of
pure functions in the style of ``jaxcal.calibrators``: isotonic recalibration of the PIT
(Kuleshov et al. 2018), std scaling (Laves et al. 2020) and conformalized quantile
regression (Romano et al. 2019)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

from jaxcal._core.cache import cached_factory
from jaxcal._core.checks import values_checkable
from jaxcal._core.isotonic import isotonic_fit
from jaxcal._core.numerics import safe_sqrt
from jaxcal.regression._inputs import (
    Gaussian,
    Quantiles,
    check_levels,
    check_prediction,
    check_rows,
    check_target,
    check_weights_for,
    common_dtype,
    live_weights,
    sanitize,
)
from jaxcal.regression._pit import pit_kernel


class RegressionCalibrator(NamedTuple):
    """A post-hoc recalibrator of regression predictions as two pure functions.

    Attributes:
      fit: ``fit(pred, y, *, weights=None) -> params`` on held-out predictions and targets
        (for the conformal adjustment ``fit(lower, upper, y, *, weights=None)``); params
        are a NamedTuple of arrays, so ``jax.vmap(fit)`` fits many at once.
      apply: maps params and new predictions to recalibrated ones (see each factory).

    Both validate concrete inputs eagerly (``ValueError`` naming the argument) and skip
    the value checks under ``jit``/``vmap``; a factory called again with equal options
    returns the same object (its compiled programs are shared).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, std_scaling
      >>> cal = std_scaling()
      >>> g = Gaussian(jnp.zeros(4), jnp.ones(4))
      >>> params = cal.fit(g, jnp.array([2.0, -2.0, 2.0, -2.0]))
      >>> cal.apply(params, g).std.tolist()
      [2.0, 2.0, 2.0, 2.0]
    """

    fit: Callable[..., Any]
    apply: Callable[..., Any]


class IsotonicRecalibrationParams(NamedTuple):
    """The fitted recalibration map R of the PIT (piecewise linear, non-decreasing).

    Attributes:
      x: ``(N,)`` distinct PIT values of the calibration rows, increasing (first ``size``).
      y: ``(N,)`` fitted ``R(x)``: the isotonic regression of the empirical CDF of the PIT.
      size: int32 number of knots (0: no calibration row, R the identity).
    """

    x: jax.Array
    y: jax.Array
    size: jax.Array


class StdScalingParams(NamedTuple):
    """Attributes:
    scale: 0-d factor s of the standard deviations (``std' = s std``)."""

    scale: jax.Array


class ConformalParams(NamedTuple):
    """Attributes:
    margin: 0-d conformal correction Q added on both sides (``[lo - Q, hi + Q]``)."""

    margin: jax.Array


def quantile_function(pred: Any, p: jax.Array) -> jax.Array:
    """``(N, L)`` quantiles of each row's predictive distribution at the levels ``p``:
    Gaussian exactly, quantiles by linear interpolation between the predicted levels
    (flat beyond them), samples by linear interpolation of the order statistics (NumPy's
    default ``quantile`` method)."""
    tiny = jnp.finfo(p.dtype).eps
    if isinstance(pred, Gaussian):
        z = ndtri(jnp.clip(p, tiny, 1 - tiny))
        return pred.mean[:, None] + pred.std[:, None] * z[None, :]
    if isinstance(pred, Quantiles):
        q = jnp.sort(pred.values, axis=1)
        return jax.vmap(lambda row: jnp.interp(p, pred.levels, row))(q)
    return jnp.quantile(pred.values, p, axis=1).T


@jax.jit
def _isotonic_fit_kernel(pred, y, weights):
    n = y.shape[0]
    w, live = live_weights(weights, n, y.dtype)
    pred, y = sanitize(pred, y, live)
    u = jnp.where(live, pit_kernel(pred, y), 2)  # padding sorts last, weight 0
    order = jnp.argsort(u)
    cw = jnp.concatenate([jnp.zeros((1,), y.dtype), jnp.cumsum(w[order])])
    ecdf = cw[jnp.searchsorted(u[order], u, side="right")]
    fitted = isotonic_fit(u, ecdf, jnp.where(live, w, 0))
    return IsotonicRecalibrationParams(fitted.x, fitted.y, fitted.size)


@jax.jit
def _isotonic_apply_kernel(params, pred, levels):
    dtype = levels.dtype
    x, r, size = params.x.astype(dtype), params.y.astype(dtype), params.size
    n = x.shape[0]
    size = size.astype(jnp.int32)
    live = jnp.arange(n, dtype=jnp.int32) < size
    last = jnp.maximum(size - 1, 0)
    x = jnp.where(live, x, x[last])
    r = jnp.where(live, r, r[last])
    # R as a CDF on [0, 1]: (0, 0) and (1, 1) appended; its inverse by interpolation.
    xp = jnp.concatenate([jnp.zeros((1,), dtype), r, jnp.ones((1,), dtype)])
    fp = jnp.concatenate([jnp.zeros((1,), dtype), x, jnp.ones((1,), dtype)])
    base = jnp.where(size > 0, jnp.interp(levels, xp, fp), levels)
    return Quantiles(quantile_function(pred, base), levels)


def _check_new(pred: Any) -> Any:
    """Validate predictions without targets (the rows of ``apply``)."""
    n = (pred.mean if isinstance(pred, Gaussian) else pred.values).shape[0]
    pred, _, _ = check_prediction(pred, jnp.zeros((n,), jnp.float32))
    return pred


@cached_factory
def isotonic_recalibration() -> RegressionCalibrator:
    """Isotonic recalibration of the PIT (Kuleshov, Fenner & Ermon 2018).

    ``fit(pred, y, *, weights=None)``: the PIT values ``u_i = F_i(y_i)`` of the
    calibration rows and their (weighted) empirical CDF ``P(u_i) = sum_{j: u_j <= u_i} w_j``;
    R is the isotonic regression of ``P`` on ``u`` (the pool-adjacent-violators fit of
    ``jaxcal.calibrators.isotonic``), linear between knots. The recalibrated forecast is
    ``R o F``, calibrated on the calibration distribution by construction.

    ``apply(params, pred, levels) -> Quantiles``: the recalibrated quantiles at the
    ``(L,)`` levels tau, ``F^-1(R^-1(tau))`` (R extended by R(0) = 0, R(1) = 1 and inverted
    by interpolation; ``F^-1`` exact for a Gaussian, interpolated for quantiles and
    samples). Accepts any of the three prediction forms.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, isotonic_recalibration
      >>> cal = isotonic_recalibration()
      >>> g = Gaussian(jnp.zeros(6), jnp.ones(6))
      >>> params = cal.fit(g, jnp.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0]))
      >>> q = cal.apply(params, g, jnp.array([0.5]))
      >>> q.values.shape
      (6, 1)

    References:
      Kuleshov, Fenner & Ermon (2018), "Accurate uncertainties for deep learning using
      calibrated regression", ICML.
    """

    def fit(pred: Any, y: Any, *, weights: Any = None) -> IsotonicRecalibrationParams:
        pred, y, weights = check_prediction(pred, y, weights)
        return _isotonic_fit_kernel(pred, y, weights)

    def apply(params: IsotonicRecalibrationParams, pred: Any, levels: Any) -> Quantiles:
        pred = _check_new(pred)
        levels = check_levels(levels).astype(common_dtype(*jax.tree.leaves(pred)))
        return _isotonic_apply_kernel(params, pred, levels)

    return RegressionCalibrator(fit, apply)


@jax.jit
def _std_fit_kernel(pred, y, weights):
    w, live = live_weights(weights, y.shape[0], y.dtype)
    pred, y = sanitize(pred, y, live)
    z = (y - pred.mean) / pred.std
    second = jnp.sum(jnp.where(live, w * z * z, 0))
    scale = jnp.where(jnp.sum(w) > 0, safe_sqrt(second), 1)
    return StdScalingParams(jnp.where(scale > 0, scale, 1))


@jax.jit
def _std_apply_kernel(params, pred):
    return Gaussian(pred.mean, pred.std * params.scale.astype(pred.std.dtype))


@cached_factory
def std_scaling() -> RegressionCalibrator:
    """Std scaling (sigma scaling; Laves et al. 2020): ``std' = s std``, one factor s.

    ``fit(pred: Gaussian, y, *, weights=None)`` minimises the (weighted) Gaussian negative
    log-likelihood ``sum_i w_i [log(s std_i) + z_i^2 / (2 s^2)]``, ``z_i = (y_i - mean_i) /
    std_i``, over s > 0. Its minimiser is closed-form, ``s^2 = sum_i w_i z_i^2 / sum_i w_i``
    (Laves et al. fit it by gradient descent; the closed form is that optimum, exact and
    differentiable; zero total weight or all-zero residuals give s = 1).
    ``apply(params, pred) -> Gaussian(mean, s std)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, std_scaling
      >>> g = Gaussian(jnp.zeros(2), jnp.ones(2))
      >>> float(std_scaling().fit(g, jnp.array([3.0, -3.0])).scale)
      3.0

    References:
      Laves, Ihler, Fast, Kahrs & Ortmaier (2020), "Well-calibrated regression uncertainty
      in medical imaging with deep learning", MIDL; Levi et al. (2022), Sensors 22.
    """

    def fit(pred: Gaussian, y: Any, *, weights: Any = None) -> StdScalingParams:
        if not isinstance(pred, Gaussian):
            raise ValueError(f"`pred` must be a Gaussian(mean, std); got {type(pred).__name__}.")
        pred, y, weights = check_prediction(pred, y, weights)
        return _std_fit_kernel(pred, y, weights)

    def apply(params: StdScalingParams, pred: Gaussian) -> Gaussian:
        if not isinstance(pred, Gaussian):
            raise ValueError(f"`pred` must be a Gaussian(mean, std); got {type(pred).__name__}.")
        return _std_apply_kernel(params, _check_new(pred))

    return RegressionCalibrator(fit, apply)


@partial(jax.jit, static_argnames=("alpha",))
def _cqr_fit_kernel(lower, upper, y, weights, alpha):
    dtype = y.dtype
    n = y.shape[0]
    w = jnp.ones((n,), dtype) if weights is None else weights.astype(dtype)
    live = w > 0
    score = jnp.where(live, jnp.maximum(lower - y, y - upper), jnp.inf)
    w = jnp.where(live, w, 0)
    order = jnp.argsort(score)
    cw = jnp.cumsum(w[order])
    need = (1 - alpha) * (jnp.sum(w) + 1)
    k = jnp.searchsorted(cw, need, side="left")  # first index with cumulative >= need
    margin = jnp.where(k < n, score[order][jnp.minimum(k, n - 1)], jnp.inf)
    return ConformalParams(jnp.where(jnp.isnan(margin), jnp.inf, margin))


@jax.jit
def _cqr_apply_kernel(params, lower, upper):
    m = params.margin.astype(lower.dtype)
    return lower - m, upper + m


def _intervals(lower, upper, y=None):
    if y is None:
        lo = check_target(lower, "lower")
    else:
        y = check_target(y)
        lo = check_rows(lower, "lower", y.shape[0])
    hi = check_rows(upper, "upper", lo.shape[0])
    arrays = [lo, hi] + ([y] if y is not None else [])
    dtype = common_dtype(*arrays)
    if values_checkable(lo, hi):
        bad = np.asarray(lo) > np.asarray(hi)
        if bad.any():
            i = int(np.argwhere(bad)[0][0])
            raise ValueError(
                f"`lower` must be <= `upper`; got lower[{i}] = {float(lo[i])} > upper[{i}] = "
                f"{float(hi[i])}. Sort the predicted quantiles."
            )
    return [a.astype(dtype) for a in arrays]


@cached_factory
def conformal_quantile_regression(alpha: float = 0.1) -> RegressionCalibrator:
    """Conformalized quantile regression (CQR; Romano, Patterson & Candès 2019).

    ``fit(lower, upper, y, *, weights=None)`` on a calibration set: conformity scores
    ``E_i = max(lower_i - y_i, y_i - upper_i)`` and the margin
    ``Q = E_(k)``, ``k = ceil((1 - alpha)(n + 1))`` (the k-th smallest; ``+inf`` when
    ``k > n``, as the finite-sample guarantee requires). Weights are frequency weights: Q
    is the smallest score whose cumulative weight reaches ``(1 - alpha)(sum w + 1)`` (0
    masks a row; unit weights give the k-th smallest).
    ``apply(params, lower, upper) -> (lower - Q, upper + Q)``: on exchangeable new rows the
    intervals cover with probability >= 1 - alpha (check it with
    ``jaxcal.coverage.regression_coverage_score``).

    Args:
      alpha: miscoverage in (0, 1) (static).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import conformal_quantile_regression
      >>> cal = conformal_quantile_regression(alpha=0.5)
      >>> lo, up = jnp.zeros(3), jnp.ones(3)
      >>> params = cal.fit(lo, up, jnp.array([0.5, 1.5, 3.0]))
      >>> float(params.margin)
      0.5

    References:
      Romano, Patterson & Candès (2019), "Conformalized quantile regression", NeurIPS.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)):
        raise ValueError(f"`alpha` must be a float in (0, 1); got {alpha!r}.")
    if not 0 < float(alpha) < 1:
        raise ValueError(f"`alpha` must be in (0, 1); got {alpha}.")
    alpha = float(alpha)

    def fit(lower: Any, upper: Any, y: Any, *, weights: Any = None) -> ConformalParams:
        lo, hi, y = _intervals(lower, upper, y)
        weights = check_weights_for(weights, y.shape[0])
        if weights is not None:
            weights = weights.astype(y.dtype)
        return _cqr_fit_kernel(lo, hi, y, weights, alpha)

    def apply(params: ConformalParams, lower: Any, upper: Any) -> tuple[jax.Array, jax.Array]:
        lo, hi = _intervals(lower, upper)
        return _cqr_apply_kernel(params, lo, hi)

    return RegressionCalibrator(fit, apply)
