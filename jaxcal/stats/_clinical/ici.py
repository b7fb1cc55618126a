"""The integrated calibration index (Austin & Steyerberg 2019) and its quantiles."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import (
    check_option,
    check_positive_float,
    check_positive_int,
    check_probs_labels,
)
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.numerics import compute_dtype, scale_free, weighted_mean
from jaxcal._core.sort import sort
from jaxcal.metrics._corp import curve_of
from jaxcal.stats._clinical.loess import lowess

SMOOTHERS = ("loess", "corp")


class ICI(NamedTuple):
    """Summaries of ``|smoothed calibration curve(p) - p|`` over the samples (:func:`~jaxcal.stats.ici`).

    Attributes:
      ici: the (weighted) mean, the integrated calibration index.
      e50: its median (R's type-7 quantile).
      e90: its 90th percentile (type 7).
      emax: its maximum.
    """

    ici: jax.Array
    e50: jax.Array
    e90: jax.Array
    emax: jax.Array


def type7_quantile(values: jax.Array, valid: jax.Array, q: float) -> jax.Array:
    """R's default (type 7) quantile of the ``valid`` entries: linear between order stats.

    No valid entry (zero total weight): 0, the value of the other summaries there (the
    padding sorts last as the largest float, never as inf, so no ``inf - inf`` arises).
    """
    m = jnp.sum(valid).astype(jnp.int32)
    big = jnp.finfo(values.dtype).max
    s = sort(jnp.where(valid, values, big))
    h = (jnp.maximum(m, 1) - 1).astype(values.dtype) * q
    lo = jnp.floor(h).astype(jnp.int32)
    hi = jnp.minimum(lo + 1, jnp.maximum(m - 1, 0))
    value = s[lo] + (h - lo.astype(values.dtype)) * (s[hi] - s[lo])
    return jnp.where(m > 0, value, jnp.zeros((), values.dtype))


@partial(jax.jit, static_argnames=("smoother", "frac", "iterations"))
def _ici_kernel(probs, labels, weights, smoother, frac, iterations):
    s, y, _ = scores_and_targets(probs, labels)
    weights = scale_free(weights)  # loess's weighted sums overflowed at weights of 1e37
    dtype = compute_dtype(s.dtype)
    p = jnp.clip(s.astype(dtype), 0, 1)
    if smoother == "loess":
        curve = lowess(p, y.astype(dtype), weights, frac, iterations)
    else:
        curve = curve_of(p, y.astype(bool), weights).fitted
    gap = jnp.abs(curve - p)
    valid = jnp.ones_like(p, bool) if weights is None else weights > 0
    gap = jnp.where(valid, gap, 0)
    return ICI(
        weighted_mean(gap, weights),
        type7_quantile(gap, valid, 0.5),
        type7_quantile(gap, valid, 0.9),
        jnp.max(gap),
    )


def ici(
    probs: Any,
    labels: Any,
    *,
    smoother: str = "loess",
    frac: float = 0.75,
    iterations: int = 0,
    weights: Any = None,
) -> ICI:
    """Integrated calibration index and E50 / E90 / Emax (Austin & Steyerberg 2019).

    The calibration curve is a smooth of the outcome on the predicted probability p,
    evaluated at every sample; the summaries describe the distribution of
    ``|curve(p_i) - p_i|``: its mean (ICI, weighted by ``weights``), median (E50), 90th
    percentile (E90) and maximum (Emax). E50 and E90 are R's default (type 7) quantiles
    over the samples with positive weight.

    Smoothers:

    * ``"loess"``: LOWESS (Cleveland 1979), local linear fits with tricube weights over
      the k = floor(frac N + 1e-10) nearest neighbours, as R's
      ``lowess`` and statsmodels' ``lowess(y, p, frac=frac, it=iterations, delta=0)``
      (agreement to ~1e-13 in float64). Austin & Steyerberg use a non-robust fit, hence
      ``iterations=0``; robustness iterations (statsmodels' bisquare weights) stop early
      when the median absolute residual is 0, as R's ``lowess`` does (statsmodels would
      give every non-zero residual weight 0, which on binary outcomes discards the
      events). O(N log N) (``jaxcal/stats/_clinical/loess.py``), jit-able.
    * ``"corp"``: the isotonic regression of the outcome on p (pool-adjacent-violators,
      the CORP reliability diagram's curve of Dimitriadis, Gneiting & Jordan 2021:
      exactly equal probabilities pooled, the ``fitted`` values of
      :func:`jaxcal.corp_curve`).

    1-D ``probs`` smooth the positive class; ``(N, K)`` probs the top-label confidence
    against correctness.

    Args:
      probs: ``(N,)`` or ``(N, K)`` probabilities.
      labels: ``(N,)`` labels.
      smoother: ``"loess"`` or ``"corp"``.
      frac: the loess span, a fraction of the samples in (0, 1].
      iterations: loess robustness iterations (>= 0).
      weights: optional ``(N,)`` non-negative weights (multiply the tricube weights; a
        zero weight leaves a sample out).

    Returns:
      :class:`~jaxcal.stats.ICI` of 0-d arrays. Zero total weight: every field 0 (the
      metrics' convention for empty input).

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.linspace(0.05, 0.95, 10)
      >>> y = jnp.array([0, 0, 0, 1, 0, 1, 1, 1, 1, 1])
      >>> res = ici(p, y, smoother="corp")
      >>> round(float(res.ici), 4), round(float(res.emax), 4)
      (0.19, 0.45)

    References:
      Austin & Steyerberg (2019), "The Integrated Calibration Index (ICI) and related
      metrics for quantifying the calibration of logistic regression models", Statistics
      in Medicine 38(21); Cleveland (1979), "Robust locally weighted regression and
      smoothing scatterplots", JASA 74(368); Dimitriadis, Gneiting & Jordan (2021),
      "Stable reliability diagrams for probabilistic classifiers", PNAS 118(8).
    """
    check_option("smoother", smoother, SMOOTHERS)
    frac = check_positive_float("frac", frac)
    if frac > 1:
        raise ValueError(f"`frac` must lie in (0, 1]; got {frac}.")
    iterations = check_positive_int("iterations", iterations, minimum=0)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _ici_kernel(probs, labels, weights, smoother, frac, iterations)
