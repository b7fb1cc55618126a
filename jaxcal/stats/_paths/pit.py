"""Uniformity of probability integral transform (PIT) values: one-sample Kolmogorov-Smirnov
and Kuiper tests against U(0, 1), with tail-accurate p-values.

A forecaster is probabilistically calibrated when its PIT values ``F_i(y_i)`` are uniform
(Dawid 1984; Gneiting, Balabdaoui & Raftery 2007); ``jaxcal.regression.pit`` computes them
for Gaussian, quantile and sample predictions.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import as_float, check_unit_interval, check_weights
from jaxcal._core.numerics import compute_dtype, safe_divide
from jaxcal.stats._result import TestResult, make_result

#: Terms of the series (exp(-2 k^2 x^2) < 1e-300 for k = 40 once x >= 0.45).
_TERMS = 40
_SQRT_2PI = float(np.sqrt(2 * np.pi))
_PI2 = float(np.pi**2)


class PITTestResult(NamedTuple):
    """Kolmogorov-Smirnov and Kuiper tests of the uniformity of PIT values.

    Attributes:
      ks: ``TestResult(D, p)``, ``D = sup_u |F_n(u) - u|``.
      kuiper: ``TestResult(V, p)``, ``V = sup_u (F_n(u) - u) + sup_u (u - F_n(u))``.
      n_effective: Kish's effective sample size ``(sum w)^2 / sum w^2`` (N unweighted), the
        n of the laws.
    """

    ks: TestResult
    kuiper: TestResult
    n_effective: jax.Array


def kolmogorov_sf(x: jax.Array) -> jax.Array:
    """``P(sup |bridge| > x) = 2 sum_{k>=1} (-1)^(k-1) exp(-2 k^2 x^2)`` for ``x >= 1``;
    below, ``1 - (sqrt(2 pi)/x) sum_{k>=1} exp(-(2k-1)^2 pi^2 / (8 x^2))`` (the theta form,
    no cancellation there since the CDF is small). Relative accuracy in the upper tail:
    never ``1 - CDF``."""
    k = jnp.arange(1, _TERMS + 1, dtype=x.dtype)
    big = jnp.maximum(x, 1)[..., None]
    sign = jnp.where(k % 2 == 1, 1.0, -1.0).astype(x.dtype)
    tail = 2 * jnp.sum(sign * jnp.exp(-2 * k * k * big * big), axis=-1)
    small = jnp.clip(x, 0.05, 1)[..., None]
    odd = 2 * k - 1
    cdf = (_SQRT_2PI / small[..., 0]) * jnp.sum(
        jnp.exp(-(odd * odd) * _PI2 / (8 * small * small)), axis=-1
    )
    p = jnp.where(x >= 1, tail, 1 - cdf)
    return jnp.clip(jnp.where(x <= 0.05, 1.0, p), 0, 1)


def kuiper_sf(x: jax.Array) -> jax.Array:
    """``P(V > x) = 2 sum_{k>=1} (4 k^2 x^2 - 1) exp(-2 k^2 x^2)`` (Kuiper 1960), 1 below
    ``x = 0.4`` where the series cancels and the law's CDF is under 1e-7."""
    k = jnp.arange(1, _TERMS + 1, dtype=x.dtype)
    xs = jnp.maximum(x, 0.4)[..., None]
    kx2 = k * k * xs * xs
    p = 2 * jnp.sum((4 * kx2 - 1) * jnp.exp(-2 * kx2), axis=-1)
    return jnp.clip(jnp.where(x < 0.4, 1.0, p), 0, 1)


def log_bridge_sfs(x_ks: jax.Array, x_ku: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``log kolmogorov_sf(x_ks)`` and ``log kuiper_sf(x_ku)``, finite far below the
    smallest float: in the tails the leading ``2 exp(-2 x^2)`` is factored out of both
    series (``log 2 - 2 x^2 + log sum_k c_k exp(-2 (k^2 - 1) x^2)``), elsewhere the log of
    the series itself (there the p-value is above 1e-9)."""
    k = jnp.arange(1, _TERMS + 1, dtype=x_ks.dtype)
    shift = k * k - 1

    def tail(x, coefficients):
        xs = jnp.maximum(x, 1)[..., None]
        rest = jnp.sum(coefficients(xs) * jnp.exp(-2 * shift * xs * xs), axis=-1)
        return jnp.log(2.0) - 2 * xs[..., 0] ** 2 + jnp.log(rest)

    sign = jnp.where(k % 2 == 1, 1.0, -1.0).astype(x_ks.dtype)
    log_ks = jnp.where(
        x_ks >= 3, tail(x_ks, lambda xs: sign), jnp.log(kolmogorov_sf(jnp.minimum(x_ks, 3)))
    )
    log_ku = jnp.where(
        x_ku >= 3,
        tail(x_ku, lambda xs: 4 * k * k * xs * xs - 1),
        jnp.log(kuiper_sf(jnp.minimum(x_ku, 3))),
    )
    return log_ks, log_ku


@partial(jax.jit, static_argnames=("correction",))
def _pit_test_kernel(u, weights, correction):
    n = u.shape[0]
    dtype = u.dtype
    w = jnp.ones((n,), dtype) if weights is None else weights.astype(dtype)
    live = w > 0
    w = jnp.where(live, w, 0)
    total = jnp.sum(w)
    w = safe_divide(w, total)
    u = jnp.where(live, jnp.clip(u, 0, 1), 1)
    order = jnp.argsort(u)
    us, ws, ls = u[order], w[order], live[order]
    after = jnp.cumsum(ws)
    before = after - ws
    above = jnp.max(jnp.where(ls, after - us, 0))  # sup (F_n - u), >= 0
    below = jnp.max(jnp.where(ls, us - before, 0))  # sup (u - F_n), >= 0
    d, v = jnp.maximum(above, below), above + below
    n_eff = safe_divide(jnp.ones((), dtype), jnp.sum(w * w))
    root = jnp.sqrt(n_eff)
    if correction:  # Stephens (1970)
        x_ks = d * (root + 0.12 + safe_divide(jnp.asarray(0.11, dtype), root))
        x_ku = v * (root + 0.155 + safe_divide(jnp.asarray(0.24, dtype), root))
    else:
        x_ks, x_ku = d * root, v * root
    empty = n_eff <= 0
    p_ks = jnp.where(empty, 1.0, kolmogorov_sf(x_ks)).astype(dtype)
    p_ku = jnp.where(empty, 1.0, kuiper_sf(x_ku)).astype(dtype)
    log_ks, log_ku = log_bridge_sfs(x_ks, x_ku)  # the same laws, finite beyond underflow
    log_ks = jnp.where(empty, 0.0, log_ks).astype(dtype)
    log_ku = jnp.where(empty, 0.0, log_ku).astype(dtype)
    return PITTestResult(make_result(d, p_ks, log_ks), make_result(v, p_ku, log_ku), n_eff)


def pit_test(pit_values: Any, *, correction: bool = True, weights: Any = None) -> PITTestResult:
    """Kolmogorov-Smirnov and Kuiper tests that PIT values are uniform on [0, 1].

    With ``F_n`` the (weighted) empirical CDF of the PIT values,
    ``D = sup_u |F_n(u) - u|`` and ``V = sup_u (F_n(u) - u) + sup_u (u - F_n(u))`` (both
    sides of each jump of ``F_n``; Kuiper's V is invariant to the origin of the circle,
    so it sees a shift of the forecast's centre or a wrong spread alike). The p-values are
    the asymptotic laws ``P(sup |bridge| > x)`` (Kolmogorov 1933) and
    ``2 sum (4 k^2 x^2 - 1) exp(-2 k^2 x^2)`` (Kuiper 1960) at Stephens' (1970) finite-n
    scaling ``x = D (sqrt(n) + 0.12 + 0.11/sqrt(n))`` and
    ``x = V (sqrt(n) + 0.155 + 0.24/sqrt(n))`` (``correction=False``: ``x = sqrt(n) D``,
    scipy's ``kstest(..., method="asymp")``), with n Kish's effective size for weights.
    Each series is summed in its convergent regime and the upper tail is never formed as
    ``1 - CDF``, so a huge statistic has a tiny positive p-value.

    PIT values of a discrete forecast (an ensemble's ranks) are not continuous; the test
    then is conservative or anti-conservative by O(1/S) per value: use many members.

    Args:
      pit_values: ``(N,)`` PIT values in [0, 1] (``jaxcal.regression.pit``).
      correction: apply Stephens' finite-n scaling (a static option).
      weights: optional ``(N,)`` non-negative sample weights (0 masks padding).

    Returns:
      :class:`~jaxcal.stats.PITTestResult`. Zero total weight gives D = V = 0, p = 1.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.stats import pit_test
      >>> r = pit_test(jnp.linspace(0.025, 0.975, 20))
      >>> round(float(r.ks.statistic), 4), bool(r.ks.p_value > 0.99)
      (0.025, True)

    References:
      Kolmogorov (1933); Kuiper (1960), "Tests concerning random points on a circle";
      Stephens (1970), "Use of the Kolmogorov-Smirnov, Cramér-von Mises and related
      statistics without extensive tables", JRSS B 32; Gneiting, Balabdaoui & Raftery
      (2007), "Probabilistic forecasts, calibration and sharpness", JRSS B 69.
    """
    if not isinstance(correction, bool):
        raise ValueError(f"`correction` must be True or False; got {correction!r}.")
    u = as_float(pit_values, "pit_values")
    if u.ndim != 1:
        raise ValueError(f"`pit_values` must be a 1-D array (N,); got shape {u.shape}.")
    check_unit_interval("pit_values", u)
    weights = check_weights(weights, u.shape[0])
    dtype = compute_dtype(u.dtype)
    u = u.astype(dtype)
    if weights is not None:
        weights = weights.astype(dtype)
    return _pit_test_kernel(u, weights, correction)
