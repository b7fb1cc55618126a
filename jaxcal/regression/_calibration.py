"""Average (probabilistic) calibration: the calibration curve of observed against expected
coverage, and the summaries of its gap to the diagonal (uncertainty-toolbox, netcal)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

from jaxcal._core.checks import check_option, check_positive_int
from jaxcal._core.isotonic import float_keys
from jaxcal._core.numerics import safe_divide, safe_sqrt
from jaxcal.regression._inputs import Gaussian, check_prediction, live_weights, sanitize
from jaxcal.regression._pit import pit_kernel, standardized

PROP_TYPES = ("interval", "quantile")


class CalibrationCurve(NamedTuple):
    """Observed against expected coverage at L levels (0-d arrays per level).

    Attributes:
      expected: ``(L,)`` the levels p.
      observed: ``(L,)`` the weighted fraction of targets inside the central p-interval
        (``prop_type="interval"``) or below the p-quantile (``"quantile"``).
    """

    expected: jax.Array
    observed: jax.Array


def check_levels_option(n_levels: Any, levels: Any) -> tuple[float, ...]:
    """The static levels: ``levels`` (a sequence in [0, 1]) or ``linspace(0, 1, n_levels)``."""
    if levels is None:
        n = check_positive_int("n_levels", n_levels, 2)
        return tuple(float(v) for v in np.linspace(0.0, 1.0, n))
    if isinstance(levels, jax.core.Tracer) or not isinstance(levels, (Sequence, np.ndarray)):
        raise ValueError(
            f"`levels` must be a Python sequence of floats in [0, 1] (a static option); got "
            f"{type(levels).__name__}."
        )
    out = tuple(float(v) for v in np.asarray(levels, np.float64).reshape(-1))
    if not out or not all(0.0 <= v <= 1.0 for v in out):
        raise ValueError(f"`levels` must be a non-empty sequence in [0, 1]; got {list(out)}.")
    return out


def _statistic(pred: Any, y: jax.Array, prop_type: str) -> tuple[jax.Array, str]:
    """The per-row statistic whose weighted CDF at the thresholds is the observed coverage,
    and the scale the thresholds live on (``"z"`` for a Gaussian, ``"pit"`` otherwise)."""
    if isinstance(pred, Gaussian):
        z = standardized(pred, y)
        return (jnp.abs(z) if prop_type == "interval" else z), "z"
    u = pit_kernel(pred, y)
    return (jnp.abs(u - 0.5) if prop_type == "interval" else u), "pit"


def _thresholds(p: jax.Array, prop_type: str, scale: str) -> jax.Array:
    if scale == "z":
        return ndtri(0.5 + p / 2) if prop_type == "interval" else ndtri(p)
    return p / 2 if prop_type == "interval" else p


@partial(jax.jit, static_argnames=("levels", "prop_type"))
def curve_kernel(pred, y, weights, levels, prop_type):
    dtype = y.dtype
    n = y.shape[0]
    w, live = live_weights(weights, n, dtype)
    pred, y = sanitize(pred, y, live)
    stat, scale = _statistic(pred, y, prop_type)
    stat = jnp.where(live, stat, jnp.inf)
    # Integer keys that order like the floats: XLA:CPU sorts them an order of magnitude
    # faster than floats; the weights ride along as a second operand.
    keys, w_sorted = jax.lax.sort((float_keys(stat), w), num_keys=1)
    cw = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(w_sorted)])
    p = jnp.asarray(levels, dtype)
    t = _thresholds(p, prop_type, scale).astype(dtype)
    idx = jnp.searchsorted(keys, float_keys(t), side="right")
    observed = jnp.clip(cw[idx], 0, 1)
    return CalibrationCurve(p, observed)


def _curve(pred, y, weights, n_levels, levels, prop_type):
    check_option("prop_type", prop_type, PROP_TYPES)
    levels = check_levels_option(n_levels, levels)
    pred, y, weights = check_prediction(pred, y, weights)
    return curve_kernel(pred, y, weights, levels, prop_type)


def calibration_curve(
    pred: Any,
    y: Any,
    *,
    n_levels: int = 100,
    levels: Sequence[float] | None = None,
    prop_type: str = "interval",
    weights: Any = None,
) -> CalibrationCurve:
    """Observed against expected coverage over levels p (a regression reliability diagram).

    ``expected = p`` on ``linspace(0, 1, n_levels)`` (uncertainty-toolbox's grid, its
    ``num_bins``) or the given ``levels``, and

    * ``prop_type="interval"``: ``observed(p) = sum_i w_i 1(y_i in the central p-interval)``,
      for a Gaussian ``|y - mean| / std <= Phi^-1(1/2 + p/2)`` (uncertainty-toolbox's
      ``get_proportion_lists_vectorized``), else ``|PIT - 1/2| <= p/2``;
    * ``prop_type="quantile"``: ``observed(p) = sum_i w_i 1(y_i <= q_i(p))``, for a Gaussian
      ``(y - mean) / std <= Phi^-1(p)``, else ``PIT <= p``. (uncertainty-toolbox's
      ``"quantile"`` takes residuals as prediction minus target and so counts
      ``y >= q(1 - p)`` instead; the two agree for a calibrated forecaster.)

    Weights are normalised over the rows; zero-weight rows are padding. The curve is a
    step function of the data (no gradient); one sort, O(N log N + L log N).

    Args:
      pred: a :class:`~jaxcal.regression.Gaussian`, :class:`~jaxcal.regression.Quantiles`
        or :class:`~jaxcal.regression.Samples` of N rows.
      y: ``(N,)`` targets.
      n_levels: number of levels on ``linspace(0, 1, n_levels)`` (>= 2).
      levels: a static sequence of levels in [0, 1] instead of the grid.
      prop_type: ``"interval"`` (central intervals) or ``"quantile"`` (lower quantiles).
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      :class:`~jaxcal.regression.CalibrationCurve` of ``(L,)`` arrays. Zero total weight
      gives observed 0.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, calibration_curve
      >>> y = jnp.array([-1.5, -0.3, 0.2, 0.9, 2.5])
      >>> c = calibration_curve(Gaussian(jnp.zeros(5), jnp.ones(5)), y, n_levels=3)
      >>> c.expected.tolist(), c.observed.tolist()
      ([0.0, 0.5, 1.0], [0.0, 0.4000000059604645, 1.0])

    References:
      Kuleshov, Fenner & Ermon (2018), "Accurate uncertainties for deep learning using
      calibrated regression"; Chung et al. (2021), uncertainty-toolbox,
      ``uncertainty_toolbox.metrics_calibration``.
    """
    return _curve(pred, y, weights, n_levels, levels, prop_type)


def trapezoid_gap_area(x: jax.Array, d: jax.Array) -> jax.Array:
    """``integral |d(x)| dx`` of the piecewise-linear ``d`` through ``(x, d)``, each segment
    split exactly where ``d`` changes sign (uncertainty-toolbox's ``trapezoid_area``)."""
    h = x[1:] - x[:-1]
    dl, dr = d[:-1], d[1:]
    cross = (dl * dr) < 0
    straight = h * jnp.abs(dl + dr) / 2
    hourglass = h * safe_divide(dl * dl + dr * dr, jnp.abs(dl) + jnp.abs(dr)) / 2
    return jnp.sum(jnp.where(cross, hourglass, straight))


@partial(jax.jit, static_argnames=("levels", "prop_type", "kind"))
def _summary_kernel(pred, y, weights, levels, prop_type, kind):
    c = curve_kernel(pred, y, weights, levels, prop_type)
    d = c.observed - c.expected
    if kind == "area":
        return trapezoid_gap_area(c.expected, d)
    if kind == "rms":
        return safe_sqrt(jnp.mean(d * d))
    return jnp.mean(jnp.abs(d))


def _summary(pred, y, weights, n_levels, levels, prop_type, kind):
    check_option("prop_type", prop_type, PROP_TYPES)
    levels = check_levels_option(n_levels, levels)
    if kind == "area" and (len(levels) < 2 or list(levels) != sorted(levels)):
        raise ValueError(f"`levels` must be increasing, at least two, for an area; got {levels}.")
    pred, y, weights = check_prediction(pred, y, weights)
    return _summary_kernel(pred, y, weights, levels, prop_type, kind)


_SUMMARY_ARGS = """
    Args:
      pred: a :class:`~jaxcal.regression.Gaussian`, :class:`~jaxcal.regression.Quantiles`
        or :class:`~jaxcal.regression.Samples` of N rows.
      y: ``(N,)`` targets.
      n_levels: number of levels on ``linspace(0, 1, n_levels)`` (uncertainty-toolbox's
        ``num_bins``, default 100).
      levels: a static sequence of levels instead of the grid.
      prop_type: ``"interval"`` (uncertainty-toolbox's default) or ``"quantile"`` (see
        :func:`~jaxcal.regression.calibration_curve`).
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array in [0, 1]."""


def mean_absolute_calibration_error(
    pred: Any,
    y: Any,
    *,
    n_levels: int = 100,
    levels: Sequence[float] | None = None,
    prop_type: str = "interval",
    weights: Any = None,
) -> jax.Array:
    """Mean absolute gap of the calibration curve, ``(1/L) sum_l |observed_l - p_l|``.

    Equals uncertainty-toolbox's ``mean_absolute_calibration_error(y_pred, y_std, y_true,
    num_bins=n_levels)`` for a Gaussian (same levels, same interval test).
    {args}

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, mean_absolute_calibration_error
      >>> y = jnp.array([-1.5, -0.3, 0.2, 0.9, 2.5])
      >>> g = Gaussian(jnp.zeros(5), jnp.ones(5))
      >>> round(float(mean_absolute_calibration_error(g, y, n_levels=3)), 4)
      0.0333

    References:
      Chung et al. (2021), uncertainty-toolbox, ``metrics_calibration``.
    """
    return _summary(pred, y, weights, n_levels, levels, prop_type, "mean")


def root_mean_squared_calibration_error(
    pred: Any,
    y: Any,
    *,
    n_levels: int = 100,
    levels: Sequence[float] | None = None,
    prop_type: str = "interval",
    weights: Any = None,
) -> jax.Array:
    """Root mean squared gap, ``sqrt((1/L) sum_l (observed_l - p_l)^2)``.

    Equals uncertainty-toolbox's ``root_mean_squared_calibration_error`` for a Gaussian.
    {args}

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, root_mean_squared_calibration_error
      >>> y = jnp.array([-1.5, -0.3, 0.2, 0.9, 2.5])
      >>> g = Gaussian(jnp.zeros(5), jnp.ones(5))
      >>> round(float(root_mean_squared_calibration_error(g, y, n_levels=3)), 4)
      0.0577

    References:
      Chung et al. (2021), uncertainty-toolbox, ``metrics_calibration``.
    """
    return _summary(pred, y, weights, n_levels, levels, prop_type, "rms")


def miscalibration_area(
    pred: Any,
    y: Any,
    *,
    n_levels: int = 100,
    levels: Sequence[float] | None = None,
    prop_type: str = "interval",
    weights: Any = None,
) -> jax.Array:
    """Area between the piecewise-linear calibration curve and the diagonal.

    ``sum_l integral_{p_l}^{p_{l+1}} |d(p)| dp`` with ``d`` linear between the gaps
    ``observed_l - p_l``, each segment split exactly where the gap changes sign: equals
    uncertainty-toolbox's ``miscalibration_area`` (its ``trapezoid_area`` with
    ``absolute=True``) for a Gaussian.
    {args}

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, miscalibration_area
      >>> y = jnp.array([-1.5, -0.3, 0.2, 0.9, 2.5])
      >>> g = Gaussian(jnp.zeros(5), jnp.ones(5))
      >>> round(float(miscalibration_area(g, y, n_levels=3)), 4)
      0.05

    References:
      Chung et al. (2021), uncertainty-toolbox, ``metrics_calibration``.
    """
    return _summary(pred, y, weights, n_levels, levels, prop_type, "area")


#: netcal's levels of its examples: 0.05, 0.10, ..., 0.95.
NETCAL_LEVELS = tuple(round(0.05 * k, 2) for k in range(1, 20))


def qce(
    pred: Any,
    y: Any,
    *,
    levels: Sequence[float] = NETCAL_LEVELS,
    weights: Any = None,
) -> jax.Array:
    """Marginal quantile calibration error (M-QCE) of netcal, univariate.

    ``M-QCE = (1/|T|) sum_tau |P(eps <= chi2_1^-1(tau)) - tau|`` with the normalised
    estimation error ``eps = ((y - mean) / std)^2``: for one dimension
    ``eps <= chi2_1^-1(tau)`` is ``|y - mean| / std <= Phi^-1(1/2 + tau/2)``, the central
    tau-interval, so this is the mean absolute gap of the interval calibration curve at the
    levels tau (netcal's ``QCE(marginal=True).measure(X, y, q=levels)``, its default).
    Quantile and sample predictions use their PIT (``|PIT - 1/2| <= tau/2``).

    Args:
      pred: a :class:`~jaxcal.regression.Gaussian`, :class:`~jaxcal.regression.Quantiles`
        or :class:`~jaxcal.regression.Samples` of N rows.
      y: ``(N,)`` targets.
      levels: the quantile levels tau (a static sequence in [0, 1]); default
        0.05, 0.10, ..., 0.95.
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array in [0, 1].

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, qce
      >>> y = jnp.array([-1.5, -0.3, 0.2, 0.9, 2.5])
      >>> round(float(qce(Gaussian(jnp.zeros(5), jnp.ones(5)), y, levels=(0.5, 0.9))), 4)
      0.1

    References:
      Küppers, Schneider & Haselhoff (2022), "Parametric and multivariate uncertainty
      calibration for regression and object detection" (ECCV workshops); netcal 1.3,
      ``netcal.metrics.regression.QCE``.
    """
    return _summary(pred, y, weights, 2, levels, "interval", "mean")


for _f in (
    mean_absolute_calibration_error,
    root_mean_squared_calibration_error,
    miscalibration_area,
):
    _f.__doc__ = _f.__doc__.replace("{args}", _SUMMARY_ARGS)


@partial(jax.jit, static_argnames=("levels", "prop_type"))
def _soft_area_kernel(pred, y, weights, temperature, levels, prop_type):
    dtype = y.dtype
    w, live = live_weights(weights, y.shape[0], dtype)
    pred, y = sanitize(pred, y, live)
    u = pit_kernel(pred, y)
    p = jnp.asarray(levels, dtype)
    if prop_type == "interval":
        margin = p[None, :] / 2 - jnp.abs(u - 0.5)[:, None]
    else:
        margin = p[None, :] - u[:, None]
    inside = jax.nn.sigmoid(margin / jnp.asarray(temperature, dtype))  # (N, L)
    observed = jnp.sum(jnp.where(live[:, None], w[:, None] * inside, 0), axis=0)
    return trapezoid_gap_area(p, observed - p)


def soft_miscalibration_area(
    pred: Any,
    y: Any,
    *,
    temperature: float = 0.01,
    n_levels: int = 100,
    levels: Sequence[float] | None = None,
    prop_type: str = "interval",
    weights: Any = None,
) -> jax.Array:
    """Differentiable miscalibration area, for use as a training term.

    :func:`~jaxcal.regression.miscalibration_area` with each indicator of the calibration
    curve replaced by a sigmoid of its margin on the PIT scale: ``observed(p) = sum_i w_i
    sigmoid((p/2 - |u_i - 1/2|) / temperature)`` (``"interval"``) or
    ``sigmoid((p - u_i) / temperature)`` (``"quantile"``), ``u_i`` the PIT; the area is the
    same exact piecewise-linear integral. Tends to the hard area as ``temperature -> 0``
    (the soft-binning idea of Karandikar et al. 2021 applied to coverage). Gradients flow
    through the PIT: a Gaussian's mean and std, quantile values (interpolation); an
    ensemble's PIT is a rank, with zero gradient.

    Args:
      pred: a :class:`~jaxcal.regression.Gaussian`, :class:`~jaxcal.regression.Quantiles`
        or :class:`~jaxcal.regression.Samples` of N rows.
      y: ``(N,)`` targets.
      temperature: width of the sigmoid on the probability scale (> 0, static).
      n_levels: number of levels on ``linspace(0, 1, n_levels)``.
      levels: a static increasing sequence of levels instead of the grid.
      prop_type: ``"interval"`` or ``"quantile"``.
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).

    Returns:
      0-d array >= 0. Zero total weight gives the area of the diagonal's gap to 0 (1/2).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxcal.regression import Gaussian, soft_miscalibration_area
      >>> y = jnp.array([-1.5, -0.3, 0.2, 0.9, 2.5])
      >>> loss = lambda s: soft_miscalibration_area(Gaussian(jnp.zeros(5), s), y)
      >>> bool(jnp.all(jnp.isfinite(jax.grad(loss)(jnp.ones(5)))))
      True

    References:
      Chung et al. (2021), uncertainty-toolbox; Karandikar et al. (2021), "Soft calibration
      objectives for neural networks", NeurIPS.
    """
    check_option("prop_type", prop_type, PROP_TYPES)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.floating)):
        raise ValueError(f"`temperature` must be a positive float (static); got {temperature!r}.")
    if not (np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"`temperature` must be a positive finite float; got {temperature}.")
    levels = check_levels_option(n_levels, levels)
    if len(levels) < 2 or list(levels) != sorted(levels):
        raise ValueError(f"`levels` must be increasing, at least two, for an area; got {levels}.")
    pred, y, weights = check_prediction(pred, y, weights)
    return _soft_area_kernel(pred, y, weights, float(temperature), levels, prop_type)
