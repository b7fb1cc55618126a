"""Unnormalised calibration mean embedding (Widmann, Lindsten & Zachariah 2021).

``ucme_parts()`` (the (N, m) deviations at the test locations) is shared with the
CME test (``jaxcal/stats/_kernel/cme_test.py``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_labels, check_option, check_probs, check_probs_labels
from jaxcal._core.numerics import safe_divide, upcast
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._kernels import KERNELS, kernel_matrix, resolve_bandwidth
from jaxcal.metrics._objectives import check_hyperparameter, sample_weights


def ucme_residuals(probs, labels, test_probs, test_labels):
    """``(x, tx, r)``: the rows the kernel compares, data ``(N, D)`` and test locations
    ``(m, D)``, and the target residuals ``r`` ``(N, m)``, so that the deviations are
    ``dev_jt = k(x_j, tx_t) r_jt`` with ``r_jt = 1[y_j = z_t] - p_j[z_t]``
    (CalibrationErrors.jl's ``unsafe_ucme_eval`` with the white kernel on targets); for
    scalar probabilities ``r_jt = s_t (y_j - p_j)``, ``s_t = +1`` for a test label 1 and
    -1 for 0.
    """
    p = upcast(probs)
    q = test_probs.astype(p.dtype)
    if p.ndim == 1:
        x, tx = p[:, None], q[:, None]
        sign = jnp.where(test_labels == 1, 1, -1).astype(p.dtype)
        resid = ((labels == 1).astype(p.dtype) - p)[:, None] * sign[None, :]
    else:
        x, tx = p, q
        hit = (labels[:, None] == test_labels[None, :]).astype(p.dtype)
        resid = hit - p[:, test_labels]
    return x, tx, resid


def ucme_parts(probs, labels, weights, test_probs, test_labels, bandwidth, kernel):
    """``(dev, w, h)``: deviations ``(N, m)``, weights, bandwidth (traceable)."""
    x, tx, resid = ucme_residuals(probs, labels, test_probs, test_labels)
    w = sample_weights(weights, x[:, 0])
    h = resolve_bandwidth(bandwidth, x, w)
    return kernel_matrix(x, tx, h, kernel) * resid, w, h


@partial(jax.jit, static_argnames=("kernel",))
def _ucme_kernel(probs, labels, weights, test_probs, test_labels, bandwidth, kernel):
    probs, labels, _, summary = kernel_inputs(probs, labels, weights, rows=False)
    dev, w, _ = ucme_parts(probs, labels, weights, test_probs, test_labels, bandwidth, kernel)
    mean = safe_divide(w @ dev, jnp.sum(w))
    return jnp.mean(mean * mean), summary


def check_test_locations(probs: jax.Array, test_probs: Any, test_labels: Any):
    """``test_probs`` ``(m,)``/``(m, K)`` like ``probs`` and ``test_labels`` ``(m,)``."""
    values = not isinstance(test_probs, jax.core.Tracer)
    test_probs = check_probs(test_probs, "test_probs", values=values)
    if test_probs.ndim != probs.ndim or test_probs.shape[1:] != probs.shape[1:]:
        expected = "(m,)" if probs.ndim == 1 else f"(m, {probs.shape[1]})"
        raise ValueError(
            f"`test_probs` must have shape {expected} to match `probs` {probs.shape}; got "
            f"{test_probs.shape}."
        )
    k = 2 if probs.ndim == 1 else probs.shape[1]
    test_labels = check_labels(test_labels, test_probs.shape[0], k, "test_labels", values=values)
    return test_probs, test_labels


def check_ucme_options(probs, test_probs, test_labels, kernel, bandwidth):
    check_option("kernel", kernel, KERNELS)
    if bandwidth is not None:
        bandwidth = check_hyperparameter("bandwidth", bandwidth)
    test_probs, test_labels = check_test_locations(probs, test_probs, test_labels)
    return test_probs, test_labels, bandwidth


def ucme(
    probs: Any,
    labels: Any,
    *,
    test_probs: Any,
    test_labels: Any,
    kernel: str = "laplacian",
    bandwidth: Any = None,
    weights: Any = None,
) -> jax.Array:
    """Squared unnormalised calibration mean embedding (UCME) at m test locations.

    Widmann, Lindsten & Zachariah (2021): the calibration mean embedding, a function of
    (prediction, target), evaluated at test locations ``(q_t, z_t)``, t = 1..m, and
    averaged in square (CalibrationErrors.jl's ``UCME(k ⊗ WhiteKernel(), testpredictions,
    testtargets)``):

    .. math::
       \\mathrm{UCME}^2 = \\frac{1}{m} \\sum_{t=1}^m \\Big(\\frac{1}{W} \\sum_j w_j\\,
       k(p_j, q_t)\\big(1[y_j = z_t] - p_j[z_t]\\big)\\Big)^2 .

    For 1-D ``probs`` the binary form of the reference: ``k(p_j, q_t) s_t (y_j - p_j)``
    with ``s_t = +-1`` for a test label 1 / 0, so the test labels do not change the
    value (they are squared away) and ``k`` compares the scalars ``p`` and ``q``.
    Biased (a V-statistic), >= 0, zero in expectation only as N -> inf under
    calibration; O(N m K). The test locations are the user's (the reference's tests draw
    them uniformly from the simplex; Widmann et al. also choose them to maximise the
    test's power on held-out data).

    Kernels and ``bandwidth=None`` (the median heuristic: the lower weighted median of
    the data's pairwise distances, not the mean of the two middle values) as
    :func:`~jaxcal.metrics.skce`.

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int labels.
      test_probs: ``(m,)`` or ``(m, K)`` test predictions, shaped like ``probs``' rows.
      test_labels: ``(m,)`` test targets (0/1, or in ``[0, K)``).
      kernel: ``"laplacian"`` or ``"gaussian"``.
      bandwidth: ``h > 0`` (traced), or None for the median heuristic (lower median).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding.

    Returns:
      0-d array >= 0; zero total weight gives 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value
    checks are skipped.

    Example (CalibrationErrors.jl ``test/ucme.jl``, "Binary examples"):
      >>> import jax.numpy as jnp
      >>> p, y = jnp.array([[1.0, 0.0], [0.0, 1.0]]), jnp.array([0, 0])
      >>> q, z = jnp.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]), jnp.array([0, 0, 1])
      >>> v = ucme(p, y, test_probs=q, test_labels=z, kernel="gaussian", bandwidth=1.0)
      >>> round(float(v), 5)  # (exp(-2) + exp(-0.5) + 1) / 12 = 0.1451555
      0.14516

    References:
      Widmann, Lindsten & Zachariah (2021), "Calibration tests beyond classification",
      ICLR; CalibrationErrors.jl (``src/ucme.jl``).
    """
    # Values checked on every call, before the kernel: its work is O(N^2) (or a
    # resampled O(N^2)), so the O(N) check costs nothing beside it, and bad input never
    # waits for the computation it would spoil (the in-kernel summary stays as a guard).
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    test_probs, test_labels, bandwidth = check_ucme_options(
        probs, test_probs, test_labels, kernel, bandwidth
    )
    return run_validated(
        _ucme_kernel, probs, labels, weights, test_probs, test_labels, bandwidth, kernel, pad=False
    )
