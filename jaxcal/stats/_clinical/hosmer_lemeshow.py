"""The Hosmer-Lemeshow goodness-of-fit test and the chi-square tail in log space.

The statistic groups the samples by deciles of risk (equal-mass bins of the predicted
probability, :func:`~jaxcal.metrics.quantile_edges`), and compares observed and expected
events per group; its null law is approximately chi-square with g - 2 degrees of freedom.
The tail is computed as a logarithm (:func:`~jaxcal.stats.log_chi2_sf`), so that a huge statistic has a
real, tiny p-value instead of 0.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaincc, gammaln

from jaxcal._core.binning import bin_sums, edges_bin_index, quantile_edges
from jaxcal._core.checks import (
    as_float,
    check_positive_int,
    check_probs_labels,
    values_checkable,
)
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.numerics import compute_dtype, normalize_weights, safe_divide, times_pow2
from jaxcal._core.validity import mask_padding
from jaxcal.stats._result import TestResult, make_result

#: Terms of the continued fraction of the upper incomplete gamma function: for x > a + 1
#: it converges to working precision in well under this many (Numerical Recipes, 6.2).
CF_TERMS = 200


def _log_gamma_cf(a: jax.Array, x: jax.Array) -> jax.Array:
    """log Q(a, x) by the continued fraction (modified Lentz), valid for x > a + 1."""
    tiny = jnp.finfo(x.dtype).tiny / jnp.finfo(x.dtype).eps
    b = x + 1 - a
    c = jnp.full_like(x, 1 / tiny)
    d = 1 / jnp.where(jnp.abs(b) < tiny, tiny, b)
    h = d

    def term(i, carry):
        b, c, d, h = carry
        an = -i * (i - a)
        b = b + 2
        d = an * d + b
        d = 1 / jnp.where(jnp.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = jnp.where(jnp.abs(c) < tiny, tiny, c)
        return b, c, d, h * d * c

    _, _, _, h = jax.lax.fori_loop(1, CF_TERMS, term, (b, c, d, h))
    return -x + a * jnp.log(x) - gammaln(a) + jnp.log(h)


@jax.jit  # one compiled kernel: eagerly, the loop's closures would be new each call
def _log_chi2_sf(x: jax.Array, df: jax.Array) -> jax.Array:
    a = df / 2
    half = jnp.maximum(x, 0) / 2
    far = half > a + 1  # the continued fraction; near the bulk, the series of gammaincc
    direct = jnp.log(gammaincc(a, jnp.where(far, a, half)))
    cf = _log_gamma_cf(a, jnp.where(far, half, a + 2))
    # x = +inf: log P = -inf (the continued fraction would read -inf + inf).
    return jnp.where(x == jnp.inf, -jnp.inf, jnp.where(far, cf, jnp.minimum(direct, 0)))


def log_chi2_sf(x: Any, df: Any) -> jax.Array:
    """Natural log of the chi-square survival function, accurate for tiny tails.

    ``log P(X >= x)`` for X ~ chi-square(df): ``log(gammaincc(df / 2, x / 2))`` in the
    bulk, and for ``x / 2 > df / 2 + 1`` the continued fraction of the upper incomplete
    gamma function, evaluated in log space (``-x/2 + (df/2) log(x/2) - lgamma(df/2) +
    log CF``), so that ``x = 5000`` gives about -2490 instead of ``log 0``. Elementwise;
    ``x <= 0`` gives 0.

    Args:
      x: statistic(s), any shape.
      df: degrees of freedom (> 0), broadcastable with ``x``.

    Returns:
      Array of the broadcast shape, <= 0, in at least float32 (``x = +inf``: -inf).

    Raises:
      ValueError: concrete ``x`` holding NaN, or ``df`` not finite and positive
        (checked when the values are concrete; skipped under ``jit``).

    Example:
      >>> round(float(log_chi2_sf(3.84, 1.0)), 4)  # log 0.05004
      -2.9949
      >>> round(float(log_chi2_sf(2000.0, 8.0)), 2)  # the p-value 1e-426 underflows
      -981.07

    References:
      Press et al., "Numerical Recipes", section 6.2 (the continued fraction, Lentz's
      method).
    """
    x = as_float(x, "x")
    df = as_float(df, "df")
    if values_checkable(x, df):  # concrete values only; skipped under jit
        if x.size and bool(np.isnan(np.asarray(x, np.float64)).any()):
            raise ValueError("`x` must not contain NaN (+inf is allowed: log p = -inf).")
        dfs = np.asarray(df, np.float64)
        if dfs.size and not bool(np.all(np.isfinite(dfs) & (dfs > 0))):
            bad = dfs[~(np.isfinite(dfs) & (dfs > 0))].flat[0]
            raise ValueError(f"`df` must be finite and > 0; got {bad}.")
    dtype = compute_dtype(jnp.result_type(x.dtype, df.dtype))
    return _log_chi2_sf(x.astype(dtype), df.astype(dtype))


@partial(jax.jit, static_argnames=("n_groups",))
def _hl_kernel(probs, labels, weights, n_groups):
    probs, labels, _ = mask_padding(probs, labels, weights)
    s, y, _ = scores_and_targets(probs, labels)
    dtype = compute_dtype(s.dtype)
    s = jnp.clip(s.astype(dtype), 0, 1)
    # Frequency weights, scaled by a power of two near their largest (exactly undone on
    # the statistic): weights of 1e30 would overflow (O - E)^2 in float32.
    w, exponent = (None, 0) if weights is None else normalize_weights(weights.astype(dtype))
    edges = quantile_edges(s, n_groups, "right", w)
    idx = edges_bin_index(s, edges, "right")
    st = bin_sums(idx, s, y, n_groups, weights=w)
    n = st.weight
    expected, observed = st.sum_score, st.sum_target
    mean = safe_divide(expected, n)
    var = n * mean * (1 - mean)
    # A group whose expected variance is 0 predicts 0 (or 1) for every member: an event
    # there (a non-event at 1) is impossible under the model, and its term
    # (O - E)^2 / (E (1 - E / n)) is (x / 0) = +inf, as R's ResourceSelection::hoslem.test
    # gives; a group that agrees with its 0/1 predictions adds 0 (0 / 0).
    live = jnp.ones_like(s, bool) if w is None else w > 0
    wrong = live & (((s <= 0) & y) | ((s >= 1) & ~y))
    impossible = jax.ops.segment_sum(wrong.astype(jnp.int32), idx, n_groups) > 0
    flat = jnp.where(impossible, jnp.asarray(jnp.inf, dtype), jnp.zeros((), dtype))
    terms = jnp.where(var > 0, safe_divide((observed - expected) ** 2, var), flat)
    groups = jnp.sum(st.count > 0)
    df = jnp.maximum(groups - 2, 1).astype(dtype)
    stat = times_pow2(jnp.sum(terms), jnp.asarray(exponent, jnp.int32))
    log_p = _log_chi2_sf(stat, df)
    log_p = jnp.where(jnp.isinf(stat), jnp.asarray(-jnp.inf, dtype), log_p)
    return make_result(stat, jnp.exp(log_p), log_p)


def hosmer_lemeshow_test(
    probs: Any, labels: Any, *, n_groups: int = 10, weights: Any = None
) -> TestResult:
    """Hosmer-Lemeshow goodness-of-fit test over deciles of risk (Hosmer & Lemeshow 1980).

    The samples are grouped into ``n_groups`` equal-mass bins of the predicted probability
    (quantile edges, right-closed bins, equal probabilities always share a bin; see
    :func:`jaxcal.ece` with ``binning="quantile"``). With O_g observed events, E_g the sum
    of the probabilities and n_g the size of group g,

        C = sum_g (O_g - E_g)^2 / (E_g (1 - E_g / n_g)),

    summed over the non-empty groups. Under good calibration C is approximately
    chi-square with g - 2 degrees of freedom, g the number of non-empty groups (at least
    1 degree); the p-value is its survival function, computed in log space
    (:func:`~jaxcal.stats.log_chi2_sf`), so a finite C never gets a silent 0: a p-value
    below the smallest normal float of the dtype (1.2e-38 in float32, 2.2e-308 in
    float64) is returned as that float, and ``log_chi2_sf(statistic, df)`` gives its exact
    logarithm. 1-D ``probs`` test the positive class; ``(N, K)`` probs test the top-label
    confidence against correctness, like the other tests of :mod:`jaxcal.stats`.

    **Groups predicted 0 or 1.** A group whose expected variance ``E_g (1 - E_g / n_g)``
    is 0 predicts exactly 0 (or exactly 1) for each of its members. If each of them has
    the predicted outcome, its term is 0; if one event happened where 0 was predicted (or
    a non-event where 1 was), the outcome is impossible under the model: the term, and
    C, are +inf and the p-value is exactly 0, as R's ``ResourceSelection::hoslem.test``
    gives (its ``(O - E)^2 / E`` is ``x / 0``). Such a group used to be skipped, which
    read the grossest miscalibration there is as perfect calibration (and made the test
    jump from p = 1e-38 at predictions of 1e-6 to p = 0.77 at predictions of 0).

    The test depends on the grouping and has low power for small N; the calibration
    slope and intercept (:func:`~jaxcal.stats.calibration_slope_intercept`) and the ICI
    (:func:`jaxcal.ici`) describe *how* a model is miscalibrated.

    Args:
      probs: ``(N,)`` or ``(N, K)`` probabilities.
      labels: ``(N,)`` labels.
      n_groups: g >= 3 requested groups (10: deciles of risk).
      weights: optional ``(N,)`` non-negative **frequency** weights: the groups are
        equal-weight quantile bins and O, E, n are weighted sums, so a weight of 2 counts
        a sample twice and C grows with the scale of the weights (as the standard errors
        of :func:`~jaxcal.stats.calibration_slope_intercept`); 0 masks padding.

    Returns:
      :class:`~jaxcal.stats.TestResult` (statistic C, p-value).

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.linspace(0.05, 0.95, 20)
      >>> y = jnp.array([0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1])
      >>> res = hosmer_lemeshow_test(p, y, n_groups=5)
      >>> round(float(res.statistic), 3), round(float(res.p_value), 3)
      (3.046, 0.385)
      >>> res = hosmer_lemeshow_test(jnp.zeros(4), jnp.array([0, 1, 0, 0]), n_groups=3)
      >>> float(res.statistic), float(res.p_value)  # an event where 0 was predicted
      (inf, 0.0)

    References:
      Hosmer & Lemeshow (1980), "Goodness of fit tests for the multiple logistic
      regression model", Communications in Statistics - Theory and Methods 9(10); Lele,
      Keim & Solymos, R package ``ResourceSelection``, ``hoslem.test``.
    """
    n_groups = check_positive_int("n_groups", n_groups, minimum=3)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _hl_kernel(probs, labels, weights, n_groups)
