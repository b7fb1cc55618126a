"""The asymptotic CME test (Widmann, Lindsten & Zachariah 2021; CalibrationTests.jl
``src/cme.jl``): Hotelling's T^2 of the UCME deviations at the test locations."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_probs_labels
from jaxcal._core.numerics import safe_divide
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._ucme import check_ucme_options, ucme_parts
from jaxcal.stats._clinical.hosmer_lemeshow import log_chi2_sf


class CMETestResult(NamedTuple):
    """Result of :func:`~jaxcal.stats.cme_test`.

    Attributes:
      statistic: 0-d, ``n x^T S^+ x`` (Hotelling's T^2 of the mean deviations x).
      p_value: 0-d, the chi-square survival function at the statistic with ``dof``
        degrees of freedom; 1 when ``dof`` is 0.
      estimate: 0-d, the UCME (the mean of ``x^2``).
      dof: 0-d int32, the rank of the deviations' covariance (m when it is invertible).
      bandwidth: 0-d, the kernel bandwidth used.
    """

    __test__ = False

    statistic: jax.Array
    p_value: jax.Array
    estimate: jax.Array
    dof: jax.Array
    bandwidth: jax.Array


@partial(jax.jit, static_argnames=("kernel",))
def _cme_kernel(probs, labels, weights, test_probs, test_labels, bandwidth, kernel):
    probs, labels, _, summary = kernel_inputs(probs, labels, weights, rows=False)
    dev, w, h = ucme_parts(probs, labels, weights, test_probs, test_labels, bandwidth, kernel)
    total = jnp.sum(w)
    mean = safe_divide(w @ dev, total)
    centred = dev - mean[None, :]
    # unbiased weighted covariance (reliability weights; divisor n - 1 for equal weights)
    ww = jnp.sum(w * w)
    cov = safe_divide((w[:, None] * centred).T @ centred, total - safe_divide(ww, total))
    n = safe_divide(total * total, ww)  # Kish's effective size: N for equal weights
    lam, vec = jnp.linalg.eigh(cov)
    m = dev.shape[1]
    keep = lam > m * jnp.finfo(lam.dtype).eps * jnp.maximum(jnp.max(lam), 0)
    proj = vec.T @ mean
    statistic = n * jnp.sum(jnp.where(keep, proj * proj / jnp.where(keep, lam, 1), 0))
    dof = jnp.sum(keep).astype(jnp.int32)
    log_p = log_chi2_sf(statistic, jnp.maximum(dof, 1).astype(statistic.dtype))
    p_value = jnp.where(dof > 0, jnp.exp(log_p), 1)
    statistic = jnp.where(dof > 0, statistic, 0)
    return CMETestResult(statistic, p_value, jnp.mean(mean * mean), dof, h), summary


def cme_test(
    probs: Any,
    labels: Any,
    *,
    test_probs: Any,
    test_labels: Any,
    kernel: str = "laplacian",
    bandwidth: Any = None,
    weights: Any = None,
) -> CMETestResult:
    """Asymptotic test of calibration by the calibration mean embedding (CME test).

    CalibrationTests.jl's ``AsymptoticCMETest``: with the UCME deviations
    ``dev_jt = k(p_j, q_t)(1[y_j = z_t] - p_j[z_t])`` at m test locations (see
    :func:`~jaxcal.metrics.ucme`), their mean x ``(m,)`` and sample covariance S
    (divisor n - 1),

    .. math:: T = n\\, x^\\top S^{-1} x \\;\\sim\\; \\chi^2_m \\text{ under calibration,
              asymptotically}

    and p = P(chi^2_m >= T) (from the log survival function: tiny p-values stay
    positive). Valid as n -> inf with m fixed, and the approximation is slow to settle:
    with 5 test locations drawn uniformly and calibrated Dirichlet(1) predictions it
    rejected 12-19 % of 800 data sets at alpha = 0.05 for n = 100 (K = 2 and 10; the
    reference's own test tolerates alpha + 0.15 there), 5.5 % at n = 1000 (K = 10) and
    4.9 % at n = 3000. Prefer n in the thousands, or the SKCE tests for small samples. Where S is singular (a test location far from every prediction, a
    degenerate data set) the reference's solve fails; here S^+ over the eigenvalues above
    ``m eps max(eig)`` and the chi-square with that rank (``dof``), and 0 deviations give
    T = 0, p = 1. O(N m (K + m)).

    Weights: weighted mean and reliability-weighted covariance, n = Kish's effective size
    ``W^2 / sum w^2`` (exact for 0/1 weights; the reference has none).

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int labels.
      test_probs: ``(m,)`` or ``(m, K)`` test predictions; test_labels: ``(m,)``.
      kernel, bandwidth: as :func:`~jaxcal.metrics.ucme`.
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      ``CMETestResult(statistic, p_value, estimate, dof, bandwidth)``.

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.array([0.1, 0.3, 0.5, 0.7, 0.9, 0.2, 0.6, 0.8, 0.4, 0.35])
      >>> y = jnp.array([0, 0, 1, 1, 1, 0, 0, 1, 1, 0])
      >>> res = cme_test(p, y, test_probs=jnp.array([0.25, 0.75]), test_labels=jnp.array([1, 1]))
      >>> int(res.dof), bool(0 < res.p_value <= 1)
      (2, True)

    References:
      Widmann, Lindsten & Zachariah (2021), "Calibration tests beyond classification",
      ICLR (Section 4); CalibrationTests.jl (``src/cme.jl``).
    """
    # Values checked on every call, before the kernel: its work is O(N^2) (or a
    # resampled O(N^2)), so the O(N) check costs nothing beside it, and bad input never
    # waits for the computation it would spoil (the in-kernel summary stays as a guard).
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    test_probs, test_labels, bandwidth = check_ucme_options(
        probs, test_probs, test_labels, kernel, bandwidth
    )
    return run_validated(
        _cme_kernel, probs, labels, weights, test_probs, test_labels, bandwidth, kernel, pad=False
    )
