"""The observed/expected ratio of events, and reweighting to a deployment prevalence."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_labels, check_probs_labels, check_weights
from jaxcal._core.numerics import compute_dtype, normalize_weights, safe_divide, times_pow2
from jaxcal.stats._clinical.slope import check_open_unit, per_class


class ObservedExpected(NamedTuple):
    """Observed and expected events and their ratio (:func:`~jaxcal.stats.observed_expected_ratio`).

    Attributes:
      ratio: O / E (1 when calibrated in the large; 0 when E = 0).
      low, high: Byar's interval for O / E (E taken as fixed).
      observed: O, the (weighted) number of events.
      expected: E, the (weighted) sum of the predicted probabilities.

    Each field is 0-d for 1-D probs, ``(K,)`` per class for ``(N, K)`` probs.
    """

    ratio: jax.Array
    low: jax.Array
    high: jax.Array
    observed: jax.Array
    expected: jax.Array


def _byar(o: jax.Array, z: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Byar's approximation to the exact Poisson interval of a count o (o = 0: low 0)."""
    safe = jnp.where(o > 0, o, 1)
    low = safe * (1 - 1 / (9 * safe) - z / (3 * jnp.sqrt(safe))) ** 3
    up = o + 1
    high = up * (1 - 1 / (9 * up) + z / (3 * jnp.sqrt(up))) ** 3
    return jnp.where(o > 0, jnp.maximum(low, 0), 0), high


def _oe(p, y, w, z):
    # Weights divided by a power of two near their largest first: ``w * w`` overflowed
    # float32 at weights of 1e20 (a NaN interval) and underflowed at 1e-20 (a 0 one).
    # Everything but O and E is scale-free (n_eff, and the interval's ratio to E).
    w, exponent = normalize_weights(w)
    o = jnp.sum(w * y)
    e = jnp.sum(w * p)
    # Kish's effective count: the interval of a weighted count is Byar's on n_eff events,
    # scaled back (unit weights: n_eff = O, scale 1).
    o2 = jnp.sum(w * w * y)
    n_eff = safe_divide(o * o, o2)
    scale = jnp.where(o > 0, safe_divide(o2, o), 1)
    low, high = _byar(n_eff, z)
    return ObservedExpected(
        safe_divide(o, e),
        safe_divide(scale * low, e),
        safe_divide(scale * high, e),
        times_pow2(o, exponent),
        times_pow2(e, exponent),
    )


_oe_kernel = jax.jit(partial(per_class, _oe), static_argnames=("confidence",))


@jax.jit
def _prevalence_kernel(labels, weights, prevalence):
    dtype = compute_dtype(prevalence.dtype)
    w = jnp.ones(labels.shape, dtype) if weights is None else weights.astype(dtype)
    y = labels == 1
    scaled, _ = normalize_weights(w)  # the class totals of weights of 1e37 would overflow
    pos = jnp.sum(jnp.where(y, scaled, 0))
    neg = jnp.sum(jnp.where(y, 0, scaled))
    total = pos + neg
    # Each class keeps its total if it has none (no weight to move).
    up = jnp.where(pos > 0, safe_divide(prevalence * total, pos), 1)
    down = jnp.where(neg > 0, safe_divide((1 - prevalence) * total, neg), 1)
    return w * jnp.where(y, up, down)


def prevalence_weights(labels: Any, prevalence: float, *, weights: Any = None) -> jax.Array:
    """Sample weights that move the event rate to a deployment ``prevalence``.

    Positives are scaled by ``pi / pi_hat`` and negatives by ``(1 - pi) / (1 - pi_hat)``
    (``pi_hat`` the weighted event rate of the data), so the total weight is kept and the
    weighted event rate becomes ``pi``: a label-shift (prior-shift) reweighting, under
    which the distribution of the predictions given the outcome is unchanged. The
    predictions themselves are not adjusted: metrics computed with these weights tell how
    the model, as it is, would be calibrated at the new prevalence. A class with no
    weight keeps its weights.

    Args:
      labels: ``(N,)`` 0/1 labels.
      prevalence: the target event rate, in (0, 1).
      weights: optional ``(N,)`` non-negative weights to start from.

    Returns:
      ``(N,)`` non-negative weights.

    Example:
      >>> import jax.numpy as jnp
      >>> w = prevalence_weights(jnp.array([1, 0, 0, 0]), 0.5)
      >>> w.tolist(), float((w * jnp.array([1, 0, 0, 0])).sum() / w.sum())
      ([2.0, 0.6666666865348816, 0.6666666865348816, 0.6666666865348816], 0.5)

    References:
      Saerens, Latinne & Decaestecker (2002), "Adjusting the outputs of a classifier to
      new a priori probabilities", Neural Computation 14.
    """
    prevalence = check_open_unit("prevalence", prevalence)
    n = jnp.shape(labels)[0] if jnp.ndim(labels) else 0
    labels = check_labels(labels, n, 2)
    weights = check_weights(weights, n)
    return _prevalence_kernel(labels, weights, jnp.asarray(prevalence))


def observed_expected_ratio(
    probs: Any,
    labels: Any,
    *,
    weights: Any = None,
    prevalence: float | None = None,
    confidence: float = 0.95,
) -> ObservedExpected:
    """Ratio of observed to expected events, O / E, with Byar's interval.

    O is the (weighted) number of events and E the (weighted) sum of the predicted
    probabilities: O / E = 1 means calibrated in the large (Van Calster et al. 2016's
    "mean calibration"; the calibration-in-the-large of
    :func:`~jaxcal.stats.calibration_slope_intercept` is its logistic counterpart).

    The interval treats E as fixed and O as a Poisson count, with Byar's approximation
    to the exact Poisson limits (Breslow & Day 1987), the standard interval of a
    standardised incidence ratio: ``O_L = O (1 - 1/(9 O) - z/(3 sqrt O))^3``,
    ``O_U = (O + 1)(1 - 1/(9 (O + 1)) + z/(3 sqrt(O + 1)))^3``, divided by E (O = 0 gives a
    lower limit of 0). With weights it is computed on Kish's effective number of events
    ``O^2 / sum w^2 y`` and scaled back. E = 0 gives a ratio and interval of 0.

    The weights are therefore survey-style (their scale does not matter: weights of 1e30
    or 1e-30 give the ratio and interval of weights near 1, only O and E scale, to
    ``inf`` where they exceed the dtype); to count each sample w times (frequency
    weights), repeat the rows, which raises n_eff and narrows the interval.

    Args:
      probs: ``(N,)`` positive-class probabilities, or ``(N, K)`` (per class).
      labels: ``(N,)`` labels.
      weights: optional ``(N,)`` non-negative sample weights.
      prevalence: reweight the samples to this event rate first
        (:func:`~jaxcal.stats.prevalence_weights`; 1-D probs only).
      confidence: level of the interval, in (0, 1).

    Returns:
      :class:`~jaxcal.stats.ObservedExpected`.

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9])
      >>> res = observed_expected_ratio(p, jnp.array([0, 0, 1, 0, 1, 0, 1, 1]))
      >>> round(float(res.ratio), 3), round(float(res.low), 3), round(float(res.high), 3)
      (1.0, 0.269, 2.56)

    References:
      Breslow & Day (1987), "Statistical Methods in Cancer Research, vol. II", IARC
      (Byar's approximation); Van Calster et al. (2016), J. Clin. Epidemiol. 74.
    """
    confidence = check_open_unit("confidence", confidence)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    if prevalence is not None:
        if probs.ndim != 1:
            raise ValueError(
                f"`prevalence` needs 1-D (N,) probs of the positive class; got shape {probs.shape}."
            )
        weights = prevalence_weights(labels, prevalence, weights=weights)
    return _oe_kernel(probs, labels, weights, confidence)
