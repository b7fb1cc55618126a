"""The asymptotic CME test (Widmann, Lindsten & Zachariah 2021; CalibrationTests.jl
``src/cme.jl``): Hotelling's T^2 of the UCME deviations at the test locations."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_option, check_probs_labels
from jaxcal._core.numerics import safe_divide
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._ucme import check_ucme_options, ucme_parts
from jaxcal.stats._clinical.hosmer_lemeshow import log_chi2_sf
from jaxcal.stats._kernel.nulls import (
    CME_MIN_ERRORS,
    CME_MIN_SAMPLES,
    NULLS,
    consistency_labels,
    expected_errors,
    reliable_flag,
    resampled_p_value,
)
from jaxcal.stats._resampling.consistency import (
    batch_plan,
    check_batch_size,
    check_key,
    check_n_resamples,
)


class CMETestResult(NamedTuple):
    """Result of :func:`~jaxcal.stats.cme_test`.

    Attributes:
      statistic: 0-d, ``n x^T S^+ x`` (Hotelling's T^2 of the mean deviations x).
      p_value: 0-d, the chi-square survival function at the statistic with ``dof``
        degrees of freedom; 1 when ``dof`` is 0.
      estimate: 0-d, the UCME (the mean of ``x^2``).
      dof: 0-d int32, the rank of the deviations' covariance (m when it is invertible).
      bandwidth: 0-d, the kernel bandwidth used.
      log_p_value: 0-d, log of the p-value, finite where the p-value underflows (the
        chi-square's log survival function).
      expected_errors: 0-d, E, the expected number of labels other than the most probable
        one under the model (``sum min(p, 1 - p)`` for scores; Kish's n with weights).
      reliable: 0-d bool, the test holds its size here: always for
        ``null="consistency"``; for the chi-square ``E >= 10`` and n >= 1000
        (``jaxcal/stats/_kernel/nulls.py``). False: do not read the p-value as evidence
        of miscalibration; rerun with ``null="consistency"``.
    """

    __test__ = False

    statistic: jax.Array
    p_value: jax.Array
    estimate: jax.Array
    dof: jax.Array
    bandwidth: jax.Array
    log_p_value: jax.Array
    expected_errors: jax.Array
    reliable: jax.Array


def _hotelling(dev, w):
    """``(T, dof, mean)``: Hotelling's ``n x^T S^+ x`` of the deviations ``(N, m)``."""
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
    return jnp.where(dof > 0, statistic, 0), dof, mean


@partial(jax.jit, static_argnames=("kernel", "null", "n_resamples", "n_batches", "batch"))
def _cme_kernel(
    probs,
    labels,
    weights,
    test_probs,
    test_labels,
    bandwidth,
    key,
    kernel,
    null,
    n_resamples,
    n_batches,
    batch,
):
    probs, labels, _, summary = kernel_inputs(probs, labels, weights, rows=False)
    dev, w, h = ucme_parts(probs, labels, weights, test_probs, test_labels, bandwidth, kernel)
    statistic, dof, mean = _hotelling(dev, w)
    errors = expected_errors(probs, weights)
    n = safe_divide(jnp.sum(w) ** 2, jnp.sum(w * w))
    if null == "consistency":

        def value(y):
            d, _, _ = ucme_parts(probs, y, weights, test_probs, test_labels, h, kernel)
            return _hotelling(d, w)[0]

        null_values = consistency_labels(probs, key, n_resamples, n_batches, batch, jax.vmap(value))
        p_value, log_p = resampled_p_value(null_values, statistic)
    else:
        log_p = log_chi2_sf(statistic, jnp.maximum(dof, 1).astype(statistic.dtype))
        log_p = jnp.where(dof > 0, log_p, 0)
        p_value = jnp.exp(log_p)
    reliable = reliable_flag(null, errors, n, CME_MIN_ERRORS, CME_MIN_SAMPLES)
    result = CMETestResult(
        statistic, p_value, jnp.mean(mean * mean), dof, h, log_p, errors, reliable
    )
    return result, summary


def cme_test(
    probs: Any,
    labels: Any,
    *,
    test_probs: Any,
    test_labels: Any,
    kernel: str = "laplacian",
    bandwidth: Any = None,
    null: str = "asymptotic",
    key: Any = None,
    n_resamples: int = 1000,
    batch_size: int | None = None,
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
    positive). Valid as n -> inf with m fixed, and the approximation is slow to settle,
    slowest for two classes: with 5 test locations drawn uniformly and calibrated
    Dirichlet(1) predictions it rejected 29 % of 400 data sets at alpha = 0.05 for K = 2
    at n = 100, 24-27 % at n = 200, 8.5 % at n = 1000 and 6.7 % at n = 3000; for K = 10,
    13.5 % at n = 100 and 5.5 % at n = 1000 (the reference's own test tolerates
    alpha + 0.15 at n = 100). Near 0 or 1 it is worse: 22-31 % at n = 50-100 with
    p in {1e-3, 1 - 1e-3}, 65 % at n = 1000 (``scripts/kernel_test_size.py``; the
    table is in the validity guide).

    **Validity.** The chi-square null is trusted (``reliable``) only with at least 10
    expected errors ``E = sum_i (1 - max_k p_ik)`` (``min(p, 1 - p)`` for scores) and
    n >= 1000; elsewhere the result says ``reliable=False`` and its p-value is not
    evidence of miscalibration. ``null="consistency"`` replaces the chi-square by the
    law of T under labels drawn from the predictions (``key``, ``n_resamples``; as
    :func:`~jaxcal.stats.consistency_test` draws them, predictions fixed): valid at any
    n, at the extremes included, O(R N m (K + m)) more work.

    Where S is singular (a test location far from every prediction, a
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
      null: ``"asymptotic"`` (the chi-square, CalibrationTests.jl's) or
        ``"consistency"`` (labels redrawn from the predictions; needs ``key``).
      key: a JAX PRNG key (``null="consistency"`` only, required there).
      n_resamples: R >= 2 label sets of the consistency null.
      batch_size: resamples per batch (consistency null; default about 2**20 / (N m)).
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      ``CMETestResult(statistic, p_value, estimate, dof, bandwidth, log_p_value,
      expected_errors, reliable)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> p = jnp.array([0.1, 0.3, 0.5, 0.7, 0.9, 0.2, 0.6, 0.8, 0.4, 0.35])
      >>> y = jnp.array([0, 0, 1, 1, 1, 0, 0, 1, 1, 0])
      >>> res = cme_test(p, y, test_probs=jnp.array([0.25, 0.75]), test_labels=jnp.array([1, 1]))
      >>> int(res.dof), bool(0 < res.p_value <= 1), bool(res.reliable)  # n = 10
      (2, True, False)
      >>> res = cme_test(p, y, test_probs=jnp.array([0.25, 0.75]),
      ...                test_labels=jnp.array([1, 1]), null="consistency",
      ...                key=jax.random.key(0), n_resamples=99)
      >>> bool(0 < res.p_value <= 1), bool(res.reliable)
      (True, True)

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
    check_option("null", null, NULLS)
    n_batches = batch = 0
    if null == "consistency":
        if key is None:
            raise ValueError("`key` is required for null='consistency' (jax.random.key(0)).")
        key = check_key(key)
        n_resamples = check_n_resamples(n_resamples)
        batch_size = check_batch_size(batch_size)
        m = test_probs.shape[0]
        n_batches, batch = batch_plan(n_resamples, batch_size, probs.shape[0] * m)
    else:
        key, n_resamples = None, 0
    static = (kernel, null, n_resamples, n_batches, batch)
    kernel_fn = partial(
        _cme_kernel,
        key=key,
        kernel=kernel,
        null=null,
        n_resamples=n_resamples,
        n_batches=n_batches,
        batch=batch,
    )
    return run_validated(
        lambda p, y, w, tp, tl, b: kernel_fn(p, y, w, tp, tl, b),
        probs,
        labels,
        weights,
        test_probs,
        test_labels,
        bandwidth,
        signature=(_cme_kernel, static),
    )
