"""ECE-KDE (Popordanoska, Sayer & Blaschko 2022) and the proper calibration errors
(Popordanoska, Gruber, Tiulpin, Buettner & Blaschko 2024) from leave-one-out Dirichlet
kernel density estimates (``jaxcal/metrics/_kde.py``)."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_option, check_probs, check_probs_labels, check_weights
from jaxcal._core.numerics import safe_divide, upcast
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._kde import (
    ECE_KDE_GRID,
    PROPER_CE_GRID,
    log_points,
    loo_ratio,
    select_bandwidth,
    simplex_rows,
)
from jaxcal.metrics._objectives import check_hyperparameter, float_scores_targets, sample_weights

ECE_KDE_KINDS = ("canonical", "marginal", "top_label")
PROPER_KINDS = ("canonical", "classwise")
DIVERGENCES = ("kl", "l2")
SELECTIONS = ("ece_kde", "proper_ce")


def _rows(probs):
    """The predictions as simplex rows: ``(N, K)``, or ``(s, 1 - s)`` for 1-D scores."""
    p = upcast(probs)
    return simplex_rows(p) if p.ndim == 1 else p


def bandwidth_of(bandwidth, f, w, selection):
    """``bandwidth`` as an array, or the references' leave-one-out choice on ``f``."""
    if bandwidth is not None:
        return jnp.asarray(bandwidth).astype(f.dtype)
    if selection == "ece_kde":
        return select_bandwidth(f, w, ECE_KDE_GRID, penalise_bandwidth=True)
    return select_bandwidth(f, w, PROPER_CE_GRID, penalise_bandwidth=False)


def _mean(values, w):
    return safe_divide(jnp.sum(w * values), jnp.sum(w))


def ece_kde_value(probs, labels, weights, bandwidth, p, kind, rows=None):
    """ECE-KDE of ``(probs, labels)`` (traceable; shared with the training loss)."""
    f = _rows(probs)
    w = sample_weights(weights, f[:, 0])
    b = bandwidth_of(bandwidth, f, w, "ece_kde")
    if probs.ndim == 1:
        y = (labels == 1).astype(f.dtype)
        r = loo_ratio(f, y[:, None], w, b)[:, 0]
        return 2 * _mean(jnp.abs(r - f[:, 0]) ** p, w)
    if kind == "top_label":
        conf, correct = float_scores_targets(probs, labels, rows)
        r = loo_ratio(simplex_rows(conf), correct[:, None], w, b)[:, 0]
        return _mean(jnp.abs(r - conf) ** p, w)
    onehot = jax.nn.one_hot(labels, f.shape[1], dtype=f.dtype)
    if kind == "canonical":
        r = loo_ratio(f, onehot, w, b)
        return _mean(jnp.sum(jnp.abs(r - f) ** p, axis=1), w)

    def one_class(args):  # marginal: class c's Beta kernel on f[:, c], target 1[y = c]
        fc, yc = args
        r = loo_ratio(simplex_rows(fc), yc[:, None], w, b)[:, 0]
        return _mean(jnp.abs(r - fc) ** p, w)

    return jnp.sum(jax.lax.map(one_class, (f.T, onehot.T)))


@partial(jax.jit, static_argnames=("p", "kind"))
def _ece_kde_kernel(probs, labels, weights, bandwidth, p, kind):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights, rows=kind == "top_label")
    return ece_kde_value(probs, labels, weights, bandwidth, p, kind, rows), summary


def check_ece_kde_options(bandwidth, p, kind):
    """Static checks of :func:`~jaxcal.metrics.ece_kde` (shared with its loss)."""
    check_option("kind", kind, ECE_KDE_KINDS)
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise ValueError(f"`p` must be a number >= 1 (1 or 2 usually); got {p!r}.")
    if not np.isfinite(p) or p < 1:
        raise ValueError(f"`p` must be a finite number >= 1 (1 or 2 usually); got {p}.")
    if bandwidth is not None:
        bandwidth = check_hyperparameter("bandwidth", bandwidth)
    return bandwidth, float(p)


def ece_kde(
    probs: Any,
    labels: Any,
    *,
    bandwidth: Any = None,
    p: float = 1,
    kind: str = "canonical",
    weights: Any = None,
) -> jax.Array:
    """ECE-KDE: the Lp calibration error from a leave-one-out Dirichlet kernel estimate.

    Popordanoska, Sayer & Blaschko (2022) estimate ``E[Y | f(X) = f_i]`` by the
    leave-one-out kernel regression with Dirichlet kernels ``k_b(z; f_j) =
    Dir(z; f_j / b + 1)`` (a Beta kernel for binary scores),

    .. math::
       \\hat r_i = \\frac{\\sum_{j \\ne i} k_b(f_i; f_j)\\, e_{y_j}}
                        {\\sum_{j \\ne i} k_b(f_i; f_j)}, \\qquad
       \\mathrm{ECE^{KDE}} = \\frac{1}{N} \\sum_i \\lVert \\hat r_i - f_i \\rVert_p^p ,

    consistent for the canonical Lp calibration error ``E ||E[Y | f] - f||_p^p`` and
    differentiable (a training objective: :func:`~jaxcal.losses.ece_kde_loss`).

    Conventions of the reference code (``tpopordanoska/ece-kde``, ``get_ece_kde``),
    followed here:

    * the **p-th power, without the root** (``p=2`` gives the squared L2 error);
    * **1-D (binary) ``probs``: twice** the error of the positive class (the reference's
      binary path multiplies by 2), so that it equals the canonical error of the rows
      ``(1 - s, s)``;
    * ``kind="canonical"`` (the whole vector; the default), ``"marginal"`` (the *sum*
      over classes of each class's one-vs-rest error with a Beta kernel on ``p_c``),
      ``"top_label"`` (top-label confidence against correctness, Beta kernel, *not*
      doubled);
    * an empty leave-one-out numerator gives ``r_i = 0`` (the reference's one-positive
      special case is this rule).

    ``bandwidth=None``: the reference's ``get_bandwidth``: of the 20 values
    ``logspace(-5, -1, 15)`` and ``linspace(0.2, 1, 5)``, the one that maximises the
    leave-one-out log likelihood ``sum_i [log sum_{j != i} k_b(f_i; f_j) - log((N - 1)
    b)]`` of the Dirichlet KDE of the predictions (the whole rows, whatever ``kind``;
    Beta for 1-D). Differences: the reference returns -1 (an invalid bandwidth) when no
    grid value has a positive likelihood, here the largest one is taken; with weights,
    a weighted likelihood. 20 kernel passes; pass a fixed ``bandwidth`` (e.g. from
    :func:`~jaxcal.metrics.kde_bandwidth`) to avoid them. The choice carries no gradient.

    Numerics: log space throughout, with a running row maximum (no density is ever
    exponentiated), as the reference's own log path (``get_ratio_canonical_log``, which
    it takes for K > 60). Its linear path for K <= 60 exponentiates the log kernel in
    float32: the kernel values of a row underflow to 0 at small bandwidths, the clamped
    denominator then gives a ratio of 0, and the result departs from the log path's (by
    4 % and 7 % for p = 1 and 2 at K = 10, b = 0.01 on 60 Dirichlet(0.7) rows, run with
    torch 2.13); this function gives the log path's value at every K. ``log`` of
    probabilities floored at the smallest
    normal float (exact zeros give finite values and gradients; the reference gives NaN).
    O(N^2 K) work in 1024 x 1024 tiles (``"marginal"``: K passes with 2 columns); the
    gradient is finite for every valid input. At bandwidths below ~1e-3 the kernel's
    exponents reach 1e5-1e6 and float32 keeps ~2 significant digits of them (so does the
    float32 reference); use float64 there.

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int labels.
      bandwidth: ``b > 0`` (traced), or None for the reference's leave-one-out choice.
      p: the exponent, >= 1 (static; 1 or 2 in the paper).
      kind: ``"canonical"``, ``"marginal"`` or ``"top_label"`` (2-D ``probs``).
      weights: optional ``(N,)`` non-negative sample weights (in the kernel sums and the
        mean); 0 masks padding.

    Returns:
      0-d array >= 0. Zero total weight gives 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value
    checks are skipped.

    Example:
      >>> import jax.numpy as jnp
      >>> f = jnp.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.1, 0.3, 0.6]])
      >>> y = jnp.array([0, 1, 1, 2])
      >>> round(float(ece_kde(f, y, bandwidth=0.1)), 4)
      1.0161

    References:
      Popordanoska, Sayer & Blaschko (2022), "A Consistent and Differentiable Lp Canonical
      Calibration Error Estimator", NeurIPS; code ``tpopordanoska/ece-kde``.
    """
    # Values checked on every call, before the kernel: its work is O(N^2) (or a
    # resampled O(N^2)), so the O(N) check costs nothing beside it, and bad input never
    # waits for the computation it would spoil (the in-kernel summary stays as a guard).
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    bandwidth, p = check_ece_kde_options(bandwidth, p, kind)
    kind = "canonical" if probs.ndim == 1 else kind
    return run_validated(_ece_kde_kernel, probs, labels, weights, bandwidth, p, kind, pad=False)


def _bregman(r, g, divergence):
    """``F(r) - F(g) - <grad F(g), r - g>`` per row (the reference's formula)."""
    if divergence == "l2":
        return jnp.sum((r - g) ** 2, axis=1)
    lg = log_points(g)  # grad F(g) = log g + 1, floored
    r_log_r = jnp.where(r > 0, r * jnp.log(jnp.where(r > 0, r, 1)), 0)
    g_log_g = jnp.where(g > 0, g * lg, 0)
    return jnp.sum(r_log_r - g_log_g - (lg + 1) * (r - g), axis=1)


@partial(jax.jit, static_argnames=("divergence", "kind"))
def _proper_kernel(probs, labels, weights, bandwidth, divergence, kind):
    probs, labels, _, summary = kernel_inputs(probs, labels, weights, rows=False)
    f = _rows(probs)
    w = sample_weights(weights, f[:, 0])
    b = bandwidth_of(bandwidth, f, w, "proper_ce")
    y = (labels == 1).astype(jnp.int32) if probs.ndim == 1 else labels
    # 1-D scores are the rows (s, 1 - s): class 0 of the rows is the positive class
    onehot = jax.nn.one_hot(1 - y if probs.ndim == 1 else y, f.shape[1], dtype=f.dtype)
    if kind == "canonical":
        return _mean(_bregman(loo_ratio(f, onehot, w, b), f, divergence), w), summary

    def one_class(args):
        fc, yc = args
        g = jnp.stack([1 - fc, fc], axis=1)
        targets = jnp.stack([1 - yc, yc], axis=1)
        return _mean(_bregman(loo_ratio(g, targets, w, b), g, divergence), w)

    return jnp.mean(jax.lax.map(one_class, (f.T, onehot.T))), summary


def proper_calibration_error(
    probs: Any,
    labels: Any,
    *,
    divergence: str = "kl",
    bandwidth: Any = None,
    kind: str = "canonical",
    weights: Any = None,
) -> jax.Array:
    """Proper (Bregman) calibration error from the leave-one-out Dirichlet KDE.

    Popordanoska, Gruber, Tiulpin, Buettner & Blaschko (2024): for the proper score of a
    strictly convex F, the calibration error ``E[D_F(E[Y | g(X)], g(X))]``, estimated with
    the ratio ``r_i`` of :func:`~jaxcal.metrics.ece_kde` in place of ``E[Y | g]``:

    .. math::
       \\mathrm{CE}_F = \\frac{1}{N} \\sum_i F(r_i) - F(g_i) - \\langle \\nabla F(g_i),
       r_i - g_i \\rangle .

    ``divergence="kl"`` (F the negative entropy; the calibration error of the log loss,
    ``sum_c r_c log(r_c / g_c)`` on the simplex) or ``"l2"`` (F the squared norm; the
    Brier score's, ``||r - g||^2``, equal to ``ece_kde(p=2)``). ``kind="canonical"`` (the
    whole vector) or ``"classwise"`` (the mean over classes of the error of the rows
    ``(1 - g_c, g_c)`` against ``1[y = c]``: the reference's
    ``get_classwise_bregman_ce``). The reference code (``src/calibration_error/
    bregman_ce.py``, ``get_bregman_ce``) computes in float64 and clamps r at 1e-45; here
    the input's precision, ``0 log 0 = 0``, and ``log g`` floored at the smallest normal
    float (a zero prediction where the estimate is positive is a large, finite error).

    ``bandwidth=None``: that repository's ``get_bandwidth``, which differs from ECE-KDE's:
    the 55 values ``logspace(-5, -1, 50)`` and ``linspace(0.2, 1, 5)``, criterion
    ``sum_i [log sum_{j != i} k_b - log(N - 1)]`` (no ``log b`` term).

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int labels.
      divergence: ``"kl"`` or ``"l2"``.
      bandwidth: ``b > 0`` (traced), or None for the reference's leave-one-out choice.
      kind: ``"canonical"`` or ``"classwise"``.
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding.

    Returns:
      0-d array >= 0 (up to round-off). Zero total weight gives 0.

    Example:
      >>> import jax.numpy as jnp
      >>> f = jnp.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.1, 0.3, 0.6]])
      >>> y = jnp.array([0, 1, 1, 2])
      >>> round(float(proper_calibration_error(f, y, divergence="l2", bandwidth=0.1)), 4)
      0.5637

    References:
      Popordanoska, Gruber, Tiulpin, Buettner & Blaschko (2024), "Consistent and
      Asymptotically Unbiased Estimation of Proper Calibration Errors", AISTATS; code
      ``tpopordanoska/proper-calibration-error``.
    """
    check_option("divergence", divergence, DIVERGENCES)
    check_option("kind", kind, PROPER_KINDS)
    if bandwidth is not None:
        bandwidth = check_hyperparameter("bandwidth", bandwidth)
    # Values checked on every call, before the kernel: its work is O(N^2) (or a
    # resampled O(N^2)), so the O(N) check costs nothing beside it, and bad input never
    # waits for the computation it would spoil (the in-kernel summary stays as a guard).
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return run_validated(
        _proper_kernel, probs, labels, weights, bandwidth, divergence, kind, pad=False
    )


@partial(jax.jit, static_argnames=("selection",))
def _bandwidth_kernel(probs, weights, selection):
    f = _rows(probs)
    return bandwidth_of(None, f, sample_weights(weights, f[:, 0]), selection)


def kde_bandwidth(probs: Any, *, selection: str = "ece_kde", weights: Any = None) -> jax.Array:
    """The leave-one-out maximum-likelihood bandwidth of the Dirichlet KDE of ``probs``.

    What ``bandwidth=None`` computes inside :func:`~jaxcal.metrics.ece_kde` (``selection=
    "ece_kde"``: 20 grid values, criterion with ``- log((N - 1) b)``) and
    :func:`~jaxcal.metrics.proper_calibration_error` (``"proper_ce"``: 55 values,
    ``- log(N - 1)``); see their docstrings. Select once on held-out predictions and
    pass the value, rather than paying 20-55 kernel passes in every call (a training
    step, a bootstrap).

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      selection: ``"ece_kde"`` or ``"proper_ce"``.
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      0-d array, one of the grid's values.

    Example:
      >>> import jax.numpy as jnp
      >>> f = jnp.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.1, 0.3, 0.6]])
      >>> round(float(kde_bandwidth(f)), 4)
      0.2

    References:
      ``get_bandwidth`` of ``tpopordanoska/ece-kde`` and of
      ``tpopordanoska/proper-calibration-error``.
    """
    check_option("selection", selection, SELECTIONS)
    probs = check_probs(probs, "probs")
    if probs.shape[0] < 2:
        raise ValueError(f"`probs` must hold at least 2 samples; got {probs.shape[0]}.")
    weights = check_weights(weights, probs.shape[0])
    return _bandwidth_kernel(probs, weights, selection)
