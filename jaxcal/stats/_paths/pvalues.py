"""Statistics and p-values of the cumulative tests from the extremes of their paths.

The finishing layer shared by ``jaxcal/stats/_paths/cumulative.py`` (one path) and
``jaxcal/stats/_paths/segments.py`` (one path per segment): the result types, the inputs in the
compute dtype, and the maps from ``(max T, min T, V)`` (elementwise, any shape) to the
Kolmogorov-Smirnov and Kuiper results, and from Spiegelhalter's sums to its Z test.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr, ndtr

from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.numerics import compute_dtype, scale_free
from jaxcal._core.validity import kernel_inputs
from jaxcal.stats._paths.brownian import log_max_sf, log_range_sf, max_sf, range_sf
from jaxcal.stats._result import TestResult, make_result

ALTERNATIVES = ("two-sided", "greater", "less")


class CalibrationTests(NamedTuple):
    """The three tests of :func:`~jaxcal.stats.calibration_tests`, each a :class:`~jaxcal.stats.TestResult`.

    Attributes:
      ks: Kolmogorov-Smirnov statistic and p-value (:func:`~jaxcal.stats.ks_test`).
      kuiper: Kuiper statistic and p-value (:func:`~jaxcal.stats.kuiper_test`).
      spiegelhalter: Spiegelhalter's Z and p-value (:func:`~jaxcal.stats.spiegelhalter_test`).
    """

    ks: TestResult
    kuiper: TestResult
    spiegelhalter: TestResult


def scores_targets(scores: jax.Array, labels: jax.Array, weights: jax.Array | None):
    """(s, y, w) in the compute dtype: s clipped to [0, 1] (no -0.0), y in {0, 1}; and the
    validity summary of the inputs (from the same pass over the rows)."""
    scores, labels, rows, summary = kernel_inputs(scores, labels, weights)
    s, y, _ = scores_and_targets(scores, labels, rows=rows)
    dtype = compute_dtype(s.dtype)
    s = s.astype(dtype)
    # Validation admits round-off outside [0, 1]; the key needs non-negative floats, and
    # -0.0 (sign bit set) would sort after every positive score.
    s = jnp.clip(s, 0, 1)
    s = jnp.where(s > 0, s, jnp.zeros_like(s))
    # Scaled weights: sum w**2 of sigma neither overflows (1e20) nor underflows (1e-20).
    w = None if weights is None else scale_free(weights.astype(dtype))
    return (s, y.astype(dtype), w), summary


def ratio(num: jax.Array, variance: jax.Array) -> jax.Array:
    """num / sqrt(variance); variance 0 gives 0 for num 0 and +-inf otherwise."""
    positive = variance > 0
    safe = jnp.sqrt(jnp.where(positive, variance, jnp.ones_like(variance)))
    limit = jnp.where(num > 0, jnp.inf, jnp.where(num < 0, -jnp.inf, 0)).astype(num.dtype)
    return jnp.where(positive, num / safe, limit)


def ks_result(top, bottom, variance) -> TestResult:
    """Kolmogorov-Smirnov statistic ``max(top, -bottom) / sqrt(V)`` and its p-value."""
    stat = ratio(jnp.maximum(top, -bottom), variance)
    return make_result(stat, max_sf(stat), log_max_sf(stat))


def kuiper_result(top, bottom, variance) -> TestResult:
    """Kuiper statistic ``(top - bottom) / sqrt(V)`` and its p-value."""
    stat = ratio(top - bottom, variance)
    return make_result(stat, range_sf(stat), log_range_sf(stat))


def spiegelhalter_terms(s, y, w):
    """Per-sample numerator and variance terms of Spiegelhalter's Z."""
    a = 1 - 2 * s
    e = (y - s) * a
    v = a * a * s * (1 - s)
    if w is not None:
        e, v = w * e, w * w * v
    return e, v


def spiegelhalter_result(sum_e, sum_v, alternative) -> TestResult:
    """Spiegelhalter's Z and p-value from the summed terms (elementwise, any shape)."""
    z = ratio(sum_e, sum_v)
    if alternative == "greater":
        p, log_p = ndtr(-z), log_ndtr(-z)
    elif alternative == "less":
        p, log_p = ndtr(z), log_ndtr(z)
    else:
        p = jnp.minimum(2 * ndtr(-jnp.abs(z)), 1)
        log_p = jnp.minimum(jnp.log(2.0) + log_ndtr(-jnp.abs(z)), 0)
    return make_result(z, p, log_p)
