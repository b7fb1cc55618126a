"""Interval metrics: coverage, mean width, the coverage width-based criterion, Winkler.

MAPIE's ``regression_coverage_score``, ``regression_mean_width_score``,
``coverage_width_based`` and ``regression_mwi_score`` on ``(N,)`` / ``(N, L)`` bounds: each
a (weighted) mean over the samples, per confidence level.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.checks import values_checkable
from jaxcal._core.numerics import safe_divide
from jaxcal.coverage._checks import check_confidence_level, check_eta, check_intervals
from jaxcal.coverage._levels import as_levels, is_covered, level_mean, squeeze_levels


@jax.jit
def _live_range(y, weights):
    """max - min of ``y`` over the samples with positive weight (0 when there are none)."""
    live = jnp.ones_like(y, bool) if weights is None else weights > 0
    spread = jnp.max(jnp.where(live, y, -jnp.inf)) - jnp.min(jnp.where(live, y, jnp.inf))
    return jnp.where(jnp.isfinite(spread), spread, 0)


@jax.jit
def _regression_coverage_kernel(y, lower, upper, weights):
    out = level_mean(is_covered(y, as_levels(lower), as_levels(upper)), weights, lower.dtype)
    return squeeze_levels(out, lower.ndim == 2)


def regression_coverage_score(y: Any, lower: Any, upper: Any, *, weights: Any = None) -> jax.Array:
    """Fraction of targets inside their prediction interval (closed on both sides).

    .. math:: \\mathrm{RCS} = \\frac{\\sum_i w_i\\,\\mathbf 1(l_i \\le y_i \\le u_i)}{\\sum_i w_i}

    Same meaning as MAPIE's ``regression_coverage_score(y_true, y_intervals)``.

    Args:
      y: ``(N,)`` targets.
      lower: ``(N,)`` lower bounds, or ``(N, L)`` for L confidence levels.
      upper: upper bounds, shape of ``lower``; ``lower <= upper`` (crossed intervals are
        rejected eagerly; traced, they never cover).
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> y = jnp.array([5.0, 7.5, 9.5, 10.5, 12.5])
      >>> lo, up = jnp.array([4.0, 6, 9, 8.5, 10.5]), jnp.array([6.0, 9, 10, 12.5, 12])
      >>> round(float(regression_coverage_score(y, lo, up)), 4)
      0.8

    References:
      MAPIE 1.6, ``mapie.metrics.regression.regression_coverage_score``; Angelopoulos &
      Bates (2021), "A gentle introduction to conformal prediction".
    """
    y, lower, upper, weights, _ = check_intervals(y, lower, upper, weights)
    return _regression_coverage_kernel(y, lower, upper, weights)


@jax.jit
def _regression_width_kernel(lower, upper, weights):
    out = level_mean(as_levels(jnp.abs(upper - lower)), weights, lower.dtype)
    return squeeze_levels(out, lower.ndim == 2)


def regression_mean_width_score(lower: Any, upper: Any, *, weights: Any = None) -> jax.Array:
    """Mean width of the prediction intervals, ``sum_i w_i |u_i - l_i| / sum_i w_i``.

    Same meaning as MAPIE's ``regression_mean_width_score(y_intervals)`` (which takes the
    absolute difference, so a crossed interval counts by its absolute width; here crossed
    intervals are rejected eagerly and traced ones count as MAPIE does).

    Args:
      lower: ``(N,)`` lower bounds, or ``(N, L)`` for L confidence levels.
      upper: upper bounds, shape of ``lower``.
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> lo = jnp.array([[4.0, 6, 8], [9, 10, 11], [8.5, 9.5, 10], [7, 8, 9], [5, 6, 7]])
      >>> up = jnp.array([[6.0, 9, 11], [10, 12, 14], [12.5, 12, 13], [8.5, 9.5, 10], [6.5, 8, 9]])
      >>> [round(v, 4) for v in regression_mean_width_score(lo, up).tolist()]
      [2.0, 2.2, 2.4]

    References:
      MAPIE 1.6, ``mapie.metrics.regression.regression_mean_width_score``.
    """
    _, lower, upper, weights, _ = check_intervals(None, lower, upper, weights, need_y=False)
    return _regression_width_kernel(lower, upper, weights)


@partial(jax.jit, static_argnames=("normalize",))
def _cwc_kernel(y, lower, upper, weights, eta, confidence_level, normalize):
    dtype = lower.dtype
    has_levels = lower.ndim == 2
    lower, upper = as_levels(lower), as_levels(upper)
    coverage = level_mean(is_covered(y, lower, upper), weights, dtype)
    width = level_mean(jnp.abs(upper - lower), weights, dtype)
    if normalize:
        width = safe_divide(width, _live_range(y, weights))
    eta = eta.astype(dtype)
    level = confidence_level.astype(dtype)
    return squeeze_levels((1 - width) * jnp.exp(-eta * (coverage - level) ** 2), has_levels)


def coverage_width_based(
    y: Any,
    lower: Any,
    upper: Any,
    *,
    eta: float,
    confidence_level: Any,
    normalize: bool = True,
    weights: Any = None,
) -> jax.Array:
    """Coverage width-based criterion (CWC), MAPIE's variant.

    .. math:: \\mathrm{CWC} = \\Big(1 - \\frac{\\mathrm{MWS}}{\\max_i y_i - \\min_i y_i}\\Big)
              \\exp\\big(-\\eta\\,(\\mathrm{RCS} - (1 - \\alpha))^2\\big)

    with MWS the mean width (:func:`~jaxcal.coverage.regression_mean_width_score`), RCS the coverage
    (:func:`~jaxcal.coverage.regression_coverage_score`) and ``1 - alpha = confidence_level``. This is
    MAPIE's ``coverage_width_based``, which normalises the mean width by the range of the
    targets (Khosravi et al.'s PINAW). The seed document writes ``1 - MWS`` without the
    normalisation; ``normalize=False`` computes that formula literally (only meaningful
    when the widths are already on a unit scale). Neither is Khosravi et al.'s (2010) own
    CWC, ``PINAW (1 + gamma(PICP) exp(-eta (PICP - mu)))``; MAPIE's form is followed.

    ``eta`` may be negative (MAPIE documents that a negative eta rewards coverage over
    width). With a level axis, each level has its own coverage and width and the same
    range of ``y``; ``confidence_level`` is one number or one per level.

    Args:
      y: ``(N,)`` targets; with ``normalize`` and weights, the range is over the samples
        with positive weight.
      lower: ``(N,)`` lower bounds, or ``(N, L)`` for L confidence levels.
      upper: upper bounds, shape of ``lower``.
      eta: finite real number (traced: sweeping it does not recompile).
      confidence_level: the target coverage ``1 - alpha`` in [0, 1], a number or ``(L,)``.
      normalize: True (MAPIE) divides the mean width by ``max y - min y``; False is the
        seed's unnormalised formula.
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, or ``(L,)`` with a level axis. A constant ``y`` (zero range) with
      ``normalize=True`` raises eagerly; traced, the normalised width is taken as 0.

    Example:
      >>> import jax.numpy as jnp
      >>> y = jnp.array([5.0, 7.5, 9.5, 10.5, 12.5])
      >>> lo, up = jnp.array([4.0, 6, 9, 8.5, 10.5]), jnp.array([6.0, 9, 10, 12.5, 12])
      >>> round(float(coverage_width_based(y, lo, up, eta=0.01, confidence_level=0.9)), 4)
      0.6933

    References:
      Khosravi, Nahavandi & Creighton (2010), "Construction of optimal prediction intervals
      for load forecasting problems", IEEE Trans. Power Systems 25(3);
      MAPIE 1.6, ``mapie.metrics.regression.coverage_width_based``.
    """
    if normalize not in (True, False):
        raise ValueError(f"`normalize` must be True or False; got {normalize!r}.")
    eta = check_eta(eta)
    y, lower, upper, weights, _ = check_intervals(y, lower, upper, weights)
    level = check_confidence_level(confidence_level, lower, open_interval=False)
    if normalize and values_checkable(y, weights) and float(_live_range(y, weights)) == 0:
        raise ValueError(
            "`y` must not be constant: MAPIE's CWC divides the mean width by "
            "max(y) - min(y) = 0 (over the samples with positive weight); "
            "pass normalize=False for the unnormalised formula."
        )
    return _cwc_kernel(y, lower, upper, weights, eta, level, bool(normalize))


@jax.jit
def _mwi_kernel(y, lower, upper, weights, confidence_level):
    dtype = lower.dtype
    has_levels = lower.ndim == 2
    lower, upper = as_levels(lower), as_levels(upper)
    lo, up = jnp.minimum(lower, upper), jnp.maximum(lower, upper)  # undo quantile crossing
    target = y[:, None]
    alpha = 1 - confidence_level.astype(dtype)
    miss = jnp.maximum(target - up, 0) + jnp.maximum(lo - target, 0)
    score = (up - lo) + (2 / alpha)[None, :] * miss
    return squeeze_levels(level_mean(score, weights, dtype), has_levels)


def regression_mwi_score(
    y: Any, lower: Any, upper: Any, *, confidence_level: Any, weights: Any = None
) -> jax.Array:
    """Mean Winkler interval score (the interval score of Gneiting & Raftery 2007).

    .. math:: \\mathrm{MWI} = \\frac{1}{n}\\sum_i \\Big[(u_i - l_i)
              + \\frac{2}{\\alpha}(y_i - u_i)_+ + \\frac{2}{\\alpha}(l_i - y_i)_+\\Big],
              \\qquad \\alpha = 1 - \\text{confidence\\_level}

    Same as MAPIE's ``regression_mwi_score``, including its handling of crossed intervals:
    they are **reordered** (``l, u = min(l, u), max(l, u)``) before scoring, never
    rejected. The seed writes the penalty sum without the 1/n; MAPIE (and Winkler's mean
    score) average both terms, as this function does. Smaller is better; it is a proper
    scoring rule for the central (1 - alpha) interval, with a useful gradient in the bounds.

    Args:
      y: ``(N,)`` targets.
      lower: ``(N,)`` lower bounds, or ``(N, L)`` for L confidence levels.
      upper: upper bounds, shape of ``lower`` (crossing allowed).
      confidence_level: ``1 - alpha`` in (0, 1): a number, or ``(L,)`` one per level.
      weights: optional ``(N,)`` non-negative sample weights (weighted mean score).

    Returns:
      0-d array, or ``(L,)`` with a level axis. Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> y = jnp.array([5.0, 7.5, 9.5, 10.5, 12.5])
      >>> lo, up = jnp.array([4.0, 6, 9, 8.5, 10.5]), jnp.array([6.0, 9, 10, 12.5, 12])
      >>> round(float(regression_mwi_score(y, lo, up, confidence_level=0.9)), 4)
      4.3

    References:
      Winkler (1972), "A decision-theoretic approach to interval estimation", JASA 67;
      Gneiting & Raftery (2007), JASA 102, section 6.2; MAPIE 1.6,
      ``mapie.metrics.regression.regression_mwi_score``.
    """
    y, lower, upper, weights, _ = check_intervals(y, lower, upper, weights, crossed="reorder")
    level = check_confidence_level(confidence_level, lower, open_interval=True)
    return _mwi_kernel(y, lower, upper, weights, level)
