"""The interval of Sun, Chaudhari, Barnett & Dobriban (2024) for the squared l2 ECE, from
per-bin sums: shared by :func:`~jaxcal.stats.l2_ece_interval` (one-shot) and
:func:`~jaxcal.streaming.l2_ece_interval` (a streamed state)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

from jaxcal._core.numerics import safe_divide


class L2ECEInterval(NamedTuple):
    """Estimate and interval of the squared l2 ECE (Sun et al. 2024).

    Attributes:
      estimate: 0-d, the debiased estimate T of the binned squared l2 ECE (it can be
        negative: an unbiased estimate of a quantity near 0).
      lower: 0-d, the interval's lower end (>= 0).
      upper: 0-d, the interval's upper end.
      std_error: 0-d, ``sqrt(max(sigma^2, 0) / n)``, the standard error of T away from
        a perfectly calibrated model.
    """

    estimate: jax.Array
    lower: jax.Array
    upper: jax.Array
    std_error: jax.Array


def check_level(confidence: Any) -> float:
    """``confidence``: a number strictly between 0 and 1 (booleans refused)."""
    if isinstance(confidence, bool) or not isinstance(
        confidence, (int, float, np.integer, np.floating)
    ):
        raise ValueError(f"`confidence` must be a number in (0, 1); got {confidence!r}.")
    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must lie strictly between 0 and 1; got {confidence}.")
    return float(confidence)


def interval_from_sums(
    count: jax.Array, sum_u: jax.Array, sum_u2: jax.Array, confidence: float
) -> L2ECEInterval:
    """The interval from per-bin ``n_b``, ``sum U`` and ``sum U^2`` (``U = Y - Z``), ``(M,)``.

    The reference's ``T_mn_estimator`` (``sylydya/CI-ECE``, top-1) and its "adjusted"
    interval (``plot.ipynb``), for ``alpha = 1 - confidence``:

    * per bin ``((sum U)^2 - sum U^2) / (n_b - 1)`` (0 for ``n_b <= 1``), T their sum / n;
    * ``sigma^2 = sum_b (n_b/n) (4 m_b^2 s_b - 3 m_b^4) - (sum_b (n_b/n) m_b^2)^2`` with
      ``m_b``, ``s_b`` the bin means of U and U^2;
    * ``T+ = max(T, 0)``, ``s = sqrt(sigma^2 / n)``: upper ``T+ + z_{alpha/2} s``; lower
      ``T+ - z_{alpha/2} s`` if ``T+ >= 2 z_{alpha/2} s``, else ``T+ / 2`` if
      ``T+ >= 2 z_alpha s``, else ``max(T+ - z_alpha s, 0)``.
    """
    dtype = sum_u.dtype
    n = jnp.sum(count)
    bin_term = safe_divide(sum_u * sum_u - sum_u2, count - 1)
    estimate = safe_divide(jnp.sum(jnp.where(count > 1, bin_term, 0)), n)
    share = safe_divide(count, n)
    mean = safe_divide(sum_u, count)
    mean2 = safe_divide(sum_u2, count)
    first = jnp.sum(share * (4 * mean * mean * mean2 - 3 * mean**4))
    second = jnp.sum(share * mean * mean) ** 2
    var = first - second
    se = jnp.sqrt(safe_divide(jnp.maximum(var, 0), n))
    alpha = 1 - confidence
    z_half = ndtri(jnp.asarray(1 - alpha / 2, dtype))
    z_one = ndtri(jnp.asarray(1 - alpha, dtype))
    t_plus = jnp.maximum(estimate, 0)
    upper = t_plus + z_half * se
    lower = jnp.where(
        t_plus >= 2 * z_half * se,
        t_plus - z_half * se,
        jnp.where(t_plus >= 2 * z_one * se, t_plus / 2, jnp.maximum(t_plus - z_one * se, 0)),
    )
    return L2ECEInterval(estimate, lower, upper, se)
