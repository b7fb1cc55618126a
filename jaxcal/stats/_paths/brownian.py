"""Laws of the maximum absolute value and of the range of a Brownian motion on [0, 1].

Under the null hypothesis of calibration the Kolmogorov-Smirnov statistic of the
cumulative differences tends to ``M = max_{0<=t<=1} |B(t)|`` and the Kuiper statistic to
the range ``R = max B - min B`` of a standard Brownian motion B on [0, 1]. Each law has two
classical series, and each converges fast in its own regime:

* small x, the theta series (Darling & Siegert 1953; Feller 1951):

  .. math::
     P(M \\le x) = \\frac{2}{\\pi} \\sum_{k\\ge 0} \\frac{(-1)^k}{k + 1/2}
        e^{-(k+1/2)^2 \\pi^2 / (2x^2)},\\qquad
     P(R \\le x) = \\sum_{k\\ge 0} \\Big(\\frac{8}{x^2} + \\frac{2}{(k+1/2)^2\\pi^2}\\Big)
        e^{-2(k+1/2)^2 \\pi^2 / x^2};

* large x, the Gaussian-tail (reflection) series, with Q the standard normal survival
  function:

  .. math::
     P(M \\ge x) = 4 \\sum_{k\\ge1} (-1)^{k-1} Q((2k-1)x),\\qquad
     P(R \\ge x) = 8 \\sum_{k\\ge1} (-1)^{k-1} k\\, Q(kx).

Here the theta series is used below a switch point (1.2 for M, 2.0 for R) and the
Gaussian series above it, each with a fixed number of terms (5), so every function is a
branch-free composition of elementwise operations: it works under ``jit``, ``vmap`` and
``grad`` (the branch not taken is evaluated at the switch point, so its gradient is finite).
With these term counts the first omitted term is below 1e-25 relative in both regimes.

The survival functions are never formed as ``1 - CDF`` where that cancels: above the
switch point they are ``4 Q(x) (1 - Q(3x)/Q(x) + ...)``, accurate to relative round-off
until they underflow (x about 37.5 in float64, about 13 in float32; XLA flushes
subnormals to zero), and the ``log_`` variants stay finite and accurate far beyond
(``log_brownian_max_sf(40.0)`` is about -803.2).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtr

from jaxcal._core.checks import as_float, values_checkable
from jaxcal._core.numerics import upcast

# Switch points between the theta and the Gaussian-tail series, and the term counts.
_MAX_SWITCH = 1.2
_RANGE_SWITCH = 2.0
_N_TERMS = 5
# Below this the CDFs are exactly 0 in any float format (exp(-pi^2 / (2 x^2)) < 1e-800):
# the theta series is evaluated at the switch point instead, so gradients stay finite.
_TINY_X = 0.04


def _check_x(x: Any, name: str = "x") -> jax.Array:
    arr = as_float(x, name)
    if values_checkable(arr) and arr.size and bool(np.isnan(np.asarray(arr, np.float64)).any()):
        raise ValueError(f"`{name}` must not contain NaN.")
    return upcast(arr)  # the series need float32 at least (erfc has no 16-bit kernel)


@jax.custom_jvp
def _log_q(z: jax.Array) -> jax.Array:
    """log Q(z) = log P(N(0,1) > z), accurate to relative round-off of Q for z >= 0.

    ``log(ndtr(-z))`` while Q is a normal float (``log_ndtr``'s asymptotic branch loses
    digits near z = 20); ``log_ndtr`` beyond, where Q underflows. The derivative
    ``-phi(z) / Q(z) = -exp(-z^2/2 - log(2 pi)/2 - log Q(z))`` is formed in logs, so
    derivatives of every order stay finite where Q and phi underflow.
    """
    q = ndtr(-z)
    ok = q > jnp.finfo(z.dtype).tiny * 1e3
    return jnp.where(ok, jnp.log(jnp.where(ok, q, 1)), log_ndtr(-z))


@_log_q.defjvp
def _log_q_jvp(primals, tangents):
    (z,), (dz,) = primals, tangents
    lq = _log_q(z)
    slope = -jnp.exp(-0.5 * z * z - jnp.asarray(0.5 * math.log(2 * math.pi), z.dtype) - lq)
    return lq, slope * dz


def _q_and_ratios(x: jax.Array):
    """Q(x), log Q(x) and ``m -> Q(m x) / Q(x)`` for x >= 1 and integers m >= 2.

    The ratios only correct the leading term (each is below 0.03 past x = 1.2, below
    e^{-1.5 x^2} for m = 2), so they are formed as plain quotients of ``ndtr`` at
    ``min(x, cap)``: past the cap they are below 1e-94 in float64 (1e-53 in float32), and
    the cap keeps ``Q(x)^2``, which the quotient's derivative divides by, a normal float.
    """
    cap = 20.0 if x.dtype == jnp.float64 else 9.0
    xc = jnp.minimum(x, cap)
    qc = ndtr(-xc)

    def ratio(m: int) -> jax.Array:
        return jnp.where(x < cap, ndtr(-m * xc) / qc, 0)

    return ndtr(-x), _log_q(x), ratio


def _split(x: jax.Array, switch: float):
    """Branch-safe arguments: (small, large, is_small, is_zero_cdf, is_huge).

    Each series sees only arguments where it is finite: the other branch's slots hold the
    switch point. So do the huge x (from ``sqrt(finfo.max) / 16``, where ``((2K-1) x)^2``
    overflows) and +inf, whose values ``_tail_limits()`` sets.
    """
    at_switch = jnp.asarray(switch, x.dtype)
    is_small = x < switch
    is_zero = x <= _TINY_X
    is_huge = x >= math.sqrt(float(jnp.finfo(x.dtype).max)) / 16
    small = jnp.where(is_small & ~is_zero, x, at_switch)
    large = jnp.where(is_small | is_huge, at_switch, x)
    return small, large, is_small, is_zero, is_huge


def _tail_limits(x, is_huge, sf, log_sf, log_factor):
    """SF 0 and ``log SF ~ log(factor) + log Q(x)`` (Mills' ratio) for huge x, -inf at +inf."""
    xh = jnp.where(is_huge & (x < jnp.inf), x, jnp.ones_like(x))
    log_q = -0.5 * xh * xh - jnp.log(xh) - jnp.asarray(0.5 * math.log(2 * math.pi), x.dtype)
    asymptotic = jnp.where(x < jnp.inf, log_factor + log_q, -jnp.inf)
    return jnp.where(is_huge, 0, sf), jnp.where(is_huge, asymptotic, log_sf)


# ---------------------------------------------------------------- maximum of |B|


def _law_parts(x, switch, theta_cdf, tail, factor):
    """Both series of one law, each where it converges fast, and the limits at 0 and inf.

    Returns ``(is_small, cdf from the theta series, SF and log SF from the tail series)``;
    ``factor`` is the tail series' leading constant (4 for max|B|, 8 for the range).
    """
    small, large, is_small, is_zero, is_huge = _split(x, switch)
    cdf_small = jnp.where(is_zero, 0, theta_cdf(small))
    sf_large, log_sf_large = tail(large)
    log_factor = jnp.log(jnp.asarray(factor, x.dtype))
    sf_large, log_sf_large = _tail_limits(x, is_huge, sf_large, log_sf_large, log_factor)
    return is_small, cdf_small, sf_large, log_sf_large


def _law_kernels(parts, name):
    """The unchecked ``(cdf, sf, log_sf)`` kernels of a law given its ``parts`` function.

    The CDF is read from the theta series and the SF from the tail series, each on its own
    side of the switch; the other side is 1 minus the other series, which is accurate there.
    """

    def cdf(x: jax.Array) -> jax.Array:
        is_small, cdf_small, sf_large, _ = parts(x)
        return jnp.where(is_small, cdf_small, 1 - sf_large)

    def sf(x: jax.Array) -> jax.Array:
        is_small, cdf_small, sf_large, _ = parts(x)
        return jnp.where(is_small, 1 - cdf_small, sf_large)

    def log_sf(x: jax.Array) -> jax.Array:
        is_small, cdf_small, _, log_sf_large = parts(x)
        return jnp.where(is_small, jnp.log1p(-cdf_small), log_sf_large)

    for kernel, public in (
        (cdf, f"brownian_{name}_cdf"),
        (sf, f"brownian_{name}_sf"),
        (log_sf, f"log_brownian_{name}_sf"),
    ):
        kernel.__doc__ = f"Unchecked kernel of :func:`{public}` (float array in)."
    return jax.jit(cdf), jax.jit(sf), jax.jit(log_sf)


def _max_theta_cdf(x: jax.Array) -> jax.Array:
    dtype = x.dtype
    c = jnp.asarray(math.pi**2 / 2, dtype) / (x * x)
    total = jnp.zeros_like(x)
    for k in range(_N_TERMS):
        h = k + 0.5
        total = total + ((-1) ** k / h) * jnp.exp(-(h * h) * c)
    return jnp.asarray(2 / math.pi, dtype) * total


def _max_tail(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(SF, log SF) of max|B| from the Gaussian-tail series, for x >= the switch point.

    ``4 Q(x) (1 + corr)`` with ``corr = sum_{k>=2} (-1)^(k-1) Q((2k-1)x) / Q(x)``.
    """
    q, lq, ratio = _q_and_ratios(x)
    corr = sum((-1) ** (k - 1) * ratio(2 * k - 1) for k in range(2, _N_TERMS + 1))
    return 4 * q * (1 + corr), jnp.log(jnp.asarray(4.0, x.dtype)) + lq + jnp.log1p(corr)


def _max_parts(x):
    return _law_parts(x, _MAX_SWITCH, _max_theta_cdf, _max_tail, 4.0)


max_cdf, max_sf, log_max_sf = _law_kernels(_max_parts, "max")


def brownian_max_cdf(x: Any) -> jax.Array:
    """CDF of the maximum absolute value of a standard Brownian motion on [0, 1].

    ``P(max_{0<=t<=1} |B(t)| <= x)``: the null law of the Kolmogorov-Smirnov statistic of
    the cumulative differences (:func:`jaxcal.ks_test`). Theta series below x = 1.2,
    ``1 -`` the Gaussian-tail series above (see the module docstring); accurate to 1e-15
    absolute in float64.

    Args:
      x: array of any shape (float; ints are promoted). NaN is rejected on concrete input.

    Returns:
      Array of the shape of ``x``: 0 for x <= 0, 1 at +inf.

    Example:
      >>> round(float(brownian_max_cdf(1.0)), 6)
      0.370777

    References:
      Darling & Siegert (1953), "The first passage problem for a continuous Markov
      process", Ann. Math. Statist. 24(4); Tygert (2022), arXiv:2202.00100.
    """
    return max_cdf(_check_x(x))


def brownian_max_sf(x: Any) -> jax.Array:
    """Survival function ``P(max_{0<=t<=1} |B(t)| >= x)``: the Kolmogorov-Smirnov p-value.

    Gaussian-tail series ``4 sum_k (-1)^(k-1) Q((2k-1)x)`` above x = 1.2, ``1 -`` the
    theta series below, where the SF is above 0.46 and nothing cancels. Relative accuracy
    ~1e-13 in float64 down to the smallest normal float (x about 37.5); beyond that the
    value underflows to 0: use :func:`~jaxcal.stats.log_brownian_max_sf`.

    Args:
      x: array of any shape. NaN is rejected on concrete input.

    Returns:
      Array of the shape of ``x``: 1 for x <= 0, 0 at +inf, never negative.

    Example:
      >>> import jax.numpy as jnp
      >>> p = brownian_max_sf(jnp.array([1.0, 5.0]))
      >>> [f"{v:.6g}" for v in p.tolist()]
      ['0.629223', '1.14661e-06']

    References:
      Darling & Siegert (1953); Tygert (2022), arXiv:2202.00100.
    """
    return max_sf(_check_x(x))


def log_brownian_max_sf(x: Any) -> jax.Array:
    """``log P(max_{0<=t<=1} |B(t)| >= x)``, finite for every finite x.

    ``log 4 + log Q(x) + log1p(-Q(3x)/Q(x) + ...)`` above x = 1.2, ``log1p(-CDF)`` below.
    For x = 40 it is about -803.2, far below the smallest float64.

    Args:
      x: array of any shape. NaN is rejected on concrete input.

    Returns:
      Array of the shape of ``x``: 0 for x <= 0, -inf only at x = +inf.

    Example:
      >>> round(float(log_brownian_max_sf(40.0)), 2)
      -803.22

    References:
      Darling & Siegert (1953); Tygert (2022), arXiv:2202.00100.
    """
    return log_max_sf(_check_x(x))


# ---------------------------------------------------------------- range of B


def _range_theta_cdf(x: jax.Array) -> jax.Array:
    dtype = x.dtype
    inv_x2 = 1 / (x * x)
    c = jnp.asarray(2 * math.pi**2, dtype) * inv_x2
    total = jnp.zeros_like(x)
    for k in range(_N_TERMS):
        h = k + 0.5
        coef = 8 * inv_x2 + jnp.asarray(2 / (h * h * math.pi**2), dtype)
        total = total + coef * jnp.exp(-(h * h) * c)
    return total


def _range_tail(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(SF, log SF) of the range from the Gaussian-tail series, for x >= the switch point.

    ``8 Q(x) (1 + corr)`` with ``corr = sum_{k>=2} (-1)^(k-1) k Q(kx) / Q(x)``.
    """
    q, lq, ratio = _q_and_ratios(x)
    corr = sum((-1) ** (k - 1) * k * ratio(k) for k in range(2, _N_TERMS + 1))
    return 8 * q * (1 + corr), jnp.log(jnp.asarray(8.0, x.dtype)) + lq + jnp.log1p(corr)


def _range_parts(x):
    return _law_parts(x, _RANGE_SWITCH, _range_theta_cdf, _range_tail, 8.0)


range_cdf, range_sf, log_range_sf = _law_kernels(_range_parts, "range")


def brownian_range_cdf(x: Any) -> jax.Array:
    """CDF of the range ``max B - min B`` of a standard Brownian motion on [0, 1].

    The null law of the Kuiper statistic (:func:`jaxcal.kuiper_test`). Theta series
    ``sum_k (8/x^2 + 2/((k+1/2)^2 pi^2)) exp(-2 (k+1/2)^2 pi^2 / x^2)`` below x = 2,
    ``1 -`` the Gaussian-tail series above; accurate to 1e-15 absolute in float64.

    Args:
      x: array of any shape. NaN is rejected on concrete input.

    Returns:
      Array of the shape of ``x``: 0 for x <= 0, 1 at +inf.

    Example:
      >>> round(float(brownian_range_cdf(1.0)), 6)
      0.063365

    References:
      Feller (1951), "The asymptotic distribution of the range of sums of independent
      random variables", Ann. Math. Statist. 22(3); Tygert (2022), arXiv:2202.00100.
    """
    return range_cdf(_check_x(x))


def brownian_range_sf(x: Any) -> jax.Array:
    """Survival function ``P(max B - min B >= x)`` on [0, 1]: the Kuiper p-value.

    Gaussian-tail series ``8 sum_k (-1)^(k-1) k Q(kx)`` above x = 2, ``1 -`` the theta
    series below (where the SF is above 0.18). Relative accuracy ~1e-13 in float64 down
    to the smallest normal float; beyond, use :func:`~jaxcal.stats.log_brownian_range_sf`.

    Args:
      x: array of any shape. NaN is rejected on concrete input.

    Returns:
      Array of the shape of ``x``: 1 for x <= 0, 0 at +inf, never negative.

    Example:
      >>> import jax.numpy as jnp
      >>> p = brownian_range_sf(jnp.array([1.0, 5.0]))
      >>> [f"{v:.6g}" for v in p.tolist()]
      ['0.936635', '2.29321e-06']

    References:
      Feller (1951); Tygert (2022), arXiv:2202.00100.
    """
    return range_sf(_check_x(x))


def log_brownian_range_sf(x: Any) -> jax.Array:
    """``log P(max B - min B >= x)`` on [0, 1], finite for every finite x.

    Args:
      x: array of any shape. NaN is rejected on concrete input.

    Returns:
      Array of the shape of ``x``: 0 for x <= 0, -inf only at x = +inf.

    Example:
      >>> round(float(log_brownian_range_sf(40.0)), 2)
      -802.53

    References:
      Feller (1951); Tygert (2022), arXiv:2202.00100.
    """
    return log_range_sf(_check_x(x))
