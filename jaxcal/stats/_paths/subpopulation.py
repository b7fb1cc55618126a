"""Cumulative deviation of a subpopulation from the full population (Tygert's cdeets).

Tygert (2021) compares the outcomes of a subpopulation with those of the full population
at the same scores, without binning. With the subpopulation's distinct scores
``u_1 < ... < u_m`` (tied members aggregated: weighted mean outcome ``R_j``, weight
``W_j``, and ``f_j = sum w^2 / W_j^2`` over the tie), the full population's weighted mean
outcome ``Rt_j`` near ``u_j`` is taken over the full-population samples whose score lies
in ``((u_{j-1} + u_j) / 2, (u_j + u_{j+1}) / 2]`` (the nearest subpopulation score; the
ends are open). The cumulative deviation and its null scale are

.. math::
   B_k = \\sum_{j \\le k} \\frac{W_j}{W} (R_j - \\tilde R_j),\\qquad
   \\sigma^2 = \\sum_j \\Big(\\frac{W_j}{W}\\Big)^2 \\tilde R_j (1 - \\tilde R_j) f_j,

``W = sum_j W_j``, with ``B_0 = 0``; the Kolmogorov-Smirnov statistic is
``max_k |B_k| / sigma`` and the Kuiper statistic ``(max_k B_k - min_k B_k) / sigma``,
with the p-values of ``jaxcal/stats/_paths/brownian.py`` (Tygert 2022). Ties are exact equality
(cdeets uses ``math.isclose(rel_tol=1e-14)``). One sort of the scores; the bins and every
sum are segment sums, ``O(N)`` after the sort.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxcal._core.checks import check_probs_labels, values_checkable
from jaxcal._core.numerics import safe_divide
from jaxcal._core.sort import sort_by_first
from jaxcal._core.validity import run_validated
from jaxcal.stats._paths.pvalues import ks_result, kuiper_result, scores_targets
from jaxcal.stats._result import TestResult


class SubpopulationTest(NamedTuple):
    """Deviation of a subpopulation from the full population (:func:`~jaxcal.stats.subpopulation_test`).

    Attributes:
      ks: Kolmogorov-Smirnov statistic ``max_k |B_k| / sigma`` and its p-value.
      kuiper: Kuiper statistic ``(max_k B_k - min_k B_k) / sigma`` and its p-value.
      sigma: 0-d, the null scale of the path (cdeets' ``lenscale``).
    """

    __test__ = False  # not a pytest test class

    ks: TestResult
    kuiper: TestResult
    sigma: jax.Array


def _bins(bits_s: jax.Array, s_s: jax.Array, member: jax.Array) -> jax.Array:
    """Index of the nearest distinct subpopulation score for each sorted sample.

    Samples at or below the midpoint of two neighbouring subpopulation scores go to the
    lower one, as cdeets' ``s[k] > t[j + 1]``.
    """
    n = bits_s.shape[0]
    neg = jnp.full_like(bits_s, -1)
    last = lax.cummax(jnp.where(member, bits_s, neg))  # last member score <= here
    before = jnp.concatenate([neg[:1], last[:-1]])
    new = member & (bits_s != before)
    index = jnp.cumsum(new.astype(jnp.int32)) - 1  # distinct member scores <= here, - 1
    big = jnp.full_like(s_s, 2)
    lower = lax.cummax(jnp.where(member, s_s, -big))
    upper = lax.cummin(jnp.where(member, s_s, big), reverse=True)
    has_lower, has_upper = index >= 0, upper <= 1
    take_upper = has_upper & (~has_lower | ((s_s > (lower + upper) / 2) & (s_s != lower)))
    return jnp.clip(index + take_upper.astype(jnp.int32), 0, n - 1)


@jax.jit
def _kernel(scores, labels, weights, member):
    (s, y, w), summary = scores_targets(scores, labels, weights)
    n, dtype = s.shape[0], s.dtype
    itype = jnp.int32 if dtype == jnp.float32 else jnp.int64
    bits = lax.bitcast_convert_type(lax.stop_gradient(s), itype)
    bits_s, perm = sort_by_first(bits, jnp.arange(n, dtype=jnp.int32))
    s_s, y_s = s[perm], y[perm]
    w_s = jnp.ones_like(s) if w is None else w[perm]
    # A row of weight 0 is in no population: padding marked as a member would otherwise
    # add a subpopulation score, and move the bins of the rows around it.
    m_s = member[perm] if w is None else member[perm] & (w_s > 0)
    bins = _bins(bits_s, lax.stop_gradient(s_s), m_s)
    zero = jnp.zeros_like(w_s)
    ws_sub = jnp.where(m_s, w_s, zero)

    def per_bin(x):
        return jax.ops.segment_sum(x, bins, n)

    full_w, full_wy = per_bin(w_s), per_bin(w_s * y_s)
    sub_w, sub_wy, sub_w2 = per_bin(ws_sub), per_bin(ws_sub * y_s), per_bin(ws_sub * w_s)
    rt = safe_divide(full_wy, full_w)
    total = jnp.sum(sub_w)
    inv = safe_divide(jnp.ones((), dtype), total)
    path = jnp.cumsum(sub_wy - sub_w * rt) * inv
    top = jnp.maximum(jnp.max(path), 0)
    bottom = jnp.minimum(jnp.min(path), 0)
    variance = jnp.sum(sub_w2 * rt * (1 - rt)) * inv * inv
    sigma = jnp.sqrt(jnp.maximum(variance, 0))
    ks, kuiper = ks_result(top, bottom, variance), kuiper_result(top, bottom, variance)
    result = SubpopulationTest(ks, kuiper, sigma)
    return result, summary


def subpopulation_test(
    probs: Any, labels: Any, in_subpopulation: Any, *, weights: Any = None
) -> SubpopulationTest:
    """Tygert's test of the deviation of a subpopulation from the full population.

    Compares the subpopulation's outcomes with the full population's at the same scores
    (see the module docstring for the formula): a calibration test of the subpopulation
    *relative to the full population*, which needs no calibrated model (the full
    population's outcomes are the reference, not the scores). Kolmogorov-Smirnov and
    Kuiper statistics of the cumulative deviation, ties aggregated, weighted, with the
    exact tails of :func:`jaxcal.stats.brownian_max_sf` and
    :func:`jaxcal.stats.brownian_range_sf` (for p-values below the smallest float use the
    ``log_`` variants on the statistics).

    Args:
      probs: ``(N,)`` scores of the positive class with 0/1 labels, or ``(N, K)`` rows on
        the simplex (then the top-label confidence against correctness).
      labels: ``(N,)`` integer or bool labels.
      in_subpopulation: ``(N,)`` bool, membership of the subpopulation.
      weights: optional ``(N,)`` non-negative sample weights of the full population.

    Returns:
      :class:`~jaxcal.stats.SubpopulationTest` ``(ks, kuiper, sigma)``. An empty subpopulation gives
      statistics 0 and p-values 1; sigma = 0 follows :func:`jaxcal.ks_test`'s rule.

    Validation runs only on concrete inputs; under ``jit``/``vmap`` it is skipped.

    The p-values are asymptotic (Brownian laws): for a small subpopulation, or one of rare
    events, they are too small; the validity condition of the cumulative tests (a
    skewness ``|gamma| <= 0.15`` of the subpopulation's sum of steps, about 45 expected
    events and non-events) is stated in :func:`jaxcal.stats.multicalibration_error`.

    Example:
      >>> import jax.numpy as jnp
      >>> s = jnp.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
      >>> y = jnp.array([0, 0, 1, 0, 1, 1, 1, 1])
      >>> sub = jnp.array([True, False, True, False, True, False, True, False])
      >>> r = subpopulation_test(s, y, sub)
      >>> round(float(r.kuiper.statistic), 3), round(float(r.kuiper.p_value), 3)
      (1.0, 0.937)

    References:
      Tygert (2021), "Cumulative deviation of a subpopulation from the full population",
      J. Big Data 8(117); code: github.com/facebookresearch/cdeets; Tygert (2022),
      arXiv:2202.00100 (the p-values).
    """
    probs, labels, weights = check_probs_labels(probs, labels, weights, values=False)
    member = jnp.asarray(in_subpopulation)
    if member.shape != (probs.shape[0],):
        raise ValueError(
            f"`in_subpopulation` must have shape ({probs.shape[0]},) to match `probs`; "
            f"got {member.shape}."
        )
    if member.dtype != bool:
        if values_checkable(member) and not np.isin(np.asarray(member), (0, 1)).all():
            raise ValueError("`in_subpopulation` must be bool or 0/1; got other values.")
        member = member != 0
    return run_validated(_kernel, probs, labels, weights, member)
