"""Metrics after recalibration: K-fold cross-fitted calibrators, all folds in one vmap.

``cross_fit`` assigns the N samples to K folds of sizes differing by at most one (a
permutation drawn from ``key``), fits the calibrator K times, each time on the other
K - 1 folds (the held-out rows get weight 0: one fixed shape, so ``jax.vmap`` fits the K
calibrators in one call), and predicts each sample with the calibrator that did not see
it. ``recalibrated`` is any metric of those predictions ("Platt-ECE", "temperature-tuned
Brier" without the in-sample optimism); ``calibration_refinement`` splits a proper score
into the part recalibration removes and the rest. The calibrator is an argument (any
``Calibrator(fit, apply)`` of :mod:`jaxcal.calibrators`, or a user's pair of functions
with the same signatures): this floor imports no calibrator.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import (
    as_float,
    check_finite,
    check_labels,
    check_option,
    check_positive_int,
    check_probs,
    check_weights,
)
from jaxcal.metrics import brier_score, log_loss
from jaxcal.stats._resampling.consistency import check_key, check_metric, evaluate


class _CalibratorKey:
    """A ``Calibrator`` as a static argument of ``jax.jit``: two calibrators built with
    equal options (the same cached kernels inside) share compiled code."""

    def __init__(self, calibrator):
        self.fit, self.apply = calibrator.fit, calibrator.apply
        self.key = tuple(
            (getattr(f, "kernel", f), getattr(f, "inputs", None), getattr(f, "binary", None))
            for f in (self.fit, self.apply)
        )

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _CalibratorKey) and self.key == other.key


def _check_calibrator(calibrator: Any) -> _CalibratorKey:
    fit, apply = getattr(calibrator, "fit", None), getattr(calibrator, "apply", None)
    if not (callable(fit) and callable(apply)):
        raise ValueError(
            "`calibrator` must have `fit(x, labels, *, weights=None) -> params` and "
            "`apply(params, x) -> probs` (a jaxcal.calibrators.Calibrator, e.g. "
            f"jaxcal.calibrators.platt_scaling()); got {calibrator!r}."
        )
    return _CalibratorKey(calibrator)


def _check_inputs(cal: _CalibratorKey, x: Any, labels: Any, weights: Any, name: str):
    """``x`` in the calibrator's input space (probabilities checked as such), labels."""
    inputs = getattr(cal.fit, "inputs", None)
    if inputs == "probs":
        x = check_probs(x, name)
    else:
        x = as_float(x, name)
        if x.ndim not in (1, 2) or x.shape[0] == 0:
            raise ValueError(f"`{name}` must be non-empty (N,) or (N, K); got shape {x.shape}.")
        check_finite(name, x)
    binary = getattr(cal.fit, "binary", None)
    if binary is not None and binary != (x.ndim == 1):
        want = "(N,) positive-class scores" if binary else "(N, K) rows"
        raise ValueError(
            f"`{name}` must be {want} for this calibrator (a "
            f"{'binary' if binary else 'multiclass'} one); got shape {x.shape}."
        )
    num_classes = 2 if x.ndim == 1 else x.shape[1]
    labels = check_labels(labels, x.shape[0], num_classes)
    return x, labels, check_weights(weights, x.shape[0])


def check_folds(n_folds: Any, n: int) -> int:
    n_folds = check_positive_int("n_folds", n_folds, minimum=2)
    if n_folds > n:
        raise ValueError(
            f"`n_folds` must be at most the number of samples {n}; got {n_folds}. Lower it."
        )
    return n_folds


def fold_ids(key: jax.Array, n: int, n_folds: int) -> jax.Array:
    """int32 fold of each sample: a random permutation dealt out in turn (balanced)."""
    perm = jax.random.permutation(key, n).astype(jnp.int32)
    return jnp.zeros(n, jnp.int32).at[perm].set(jnp.arange(n, dtype=jnp.int32) % n_folds)


def _cross_fitted(cal, x, labels, weights, key, n_folds):
    n = x.shape[0]
    fold = fold_ids(key, n, n_folds)
    w = jnp.ones(n, x.dtype) if weights is None else weights
    held_out = fold[None, :] == jnp.arange(n_folds, dtype=jnp.int32)[:, None]
    train = jnp.where(held_out, 0, w[None, :].astype(x.dtype))
    params = jax.vmap(lambda tw: cal.fit(x, labels, weights=tw))(train)
    preds = jax.vmap(lambda p: cal.apply(p, x))(params)  # (K, N, ...): every fold's model
    return preds[fold, jnp.arange(n, dtype=jnp.int32)]


@partial(jax.jit, static_argnames=("cal", "n_folds"))
def _cross_fit_kernel(cal, x, labels, weights, key, n_folds):
    return _cross_fitted(cal, x, labels, weights, key, n_folds)


def cross_fit(
    calibrator: Any,
    x: Any,
    labels: Any,
    *,
    key: Any,
    n_folds: int = 5,
    weights: Any = None,
) -> jax.Array:
    """Cross-fitted recalibrated probabilities: each sample predicted by a calibrator
    fitted without it.

    The N samples are dealt into ``n_folds`` folds of sizes differing by at most one
    (a permutation drawn from ``key``); the calibrator is fitted once per fold on the
    other folds (their ``weights``; the held-out rows weigh 0), all fits in one
    ``jax.vmap``, and each sample gets the probabilities of its fold's calibrator.

    Args:
      calibrator: a ``Calibrator(fit, apply)`` (any of :mod:`jaxcal.calibrators`).
      x: its inputs, in its input space: ``(N,)`` scores for a binary calibrator,
        ``(N, K)`` logits / log-probabilities / probabilities for a multiclass one.
      labels: ``(N,)`` integer labels.
      key: a JAX PRNG key (the folds).
      n_folds: K >= 2, at most N (static).
      weights: optional ``(N,)`` sample weights (the fits' weights).

    Returns:
      ``(N,)`` or ``(N, K)`` probabilities, as ``calibrator.apply`` returns them.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxcal.calibrators import platt_scaling
      >>> s = jnp.linspace(0.05, 0.95, 40)
      >>> y = (jnp.arange(40) % 2).astype(jnp.int32)
      >>> p = cross_fit(platt_scaling(), s, y, key=jax.random.key(0))
      >>> p.shape
      (40,)

    References:
      Chernozhukov et al. (2018), "Double/debiased machine learning" (cross-fitting);
      Roelofs et al. (2022), "Mitigating bias in calibration error estimation".
    """
    cal = _check_calibrator(calibrator)
    x, labels, weights = _check_inputs(cal, x, labels, weights, "x")
    n_folds = check_folds(n_folds, x.shape[0])
    return _cross_fit_kernel(cal, x, labels, weights, check_key(key), n_folds)


@partial(jax.jit, static_argnames=("metric", "cal", "n_folds"))
def _recalibrated_kernel(metric, cal, x, labels, weights, key, n_folds):
    probs = _cross_fitted(cal, x, labels, weights, key, n_folds)
    return evaluate(metric.fn, probs, labels, weights)


def recalibrated(
    metric: Any,
    calibrator: Any,
    probs_or_logits: Any,
    labels: Any,
    *,
    key: Any,
    n_folds: int = 5,
    weights: Any = None,
) -> jax.Array:
    """Any metric of cross-fitted recalibrated predictions (K-fold, folds vmapped).

    ``metric(cross_fit(calibrator, probs_or_logits, labels), labels, weights=weights)``:
    "Platt-ECE" is ``recalibrated(jaxcal.ece, platt_scaling(), p, y, key=k)``, the
    temperature-tuned Brier score ``recalibrated(jaxcal.brier_score,
    temperature_scaling(), logits, y, key=k)``. Unlike tuning on the evaluated data
    itself (HELM's ``platt_ece``, lm-eval's requested temperature-tuned metrics, see
    :mod:`jaxcal.presets`), no sample is scored by a calibrator fitted on it.

    Args:
      metric: ``metric(probs, labels, *, weights=None) -> 0-d`` (any jaxcal metric,
        or a ``functools.partial`` of one).
      calibrator: a ``Calibrator(fit, apply)`` of :mod:`jaxcal.calibrators` (build it
        once: each factory call makes new kernels, so a new compilation).
      probs_or_logits: the calibrator's inputs, in its input space.
      labels: ``(N,)`` integer labels.
      key: a JAX PRNG key (the folds).
      n_folds: K >= 2, at most N (static).
      weights: optional ``(N,)`` sample weights, for the fits and the metric.

    Returns:
      0-d array.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> import jaxcal
      >>> from jaxcal.calibrators import platt_scaling
      >>> s = jnp.linspace(0.05, 0.95, 60)
      >>> y = (jnp.arange(60) % 3 == 0).astype(jnp.int32)  # 1/3 positives: s is off
      >>> before = jaxcal.brier_score(s, y)
      >>> after = recalibrated(jaxcal.brier_score, platt_scaling(), s, y, key=jax.random.key(0))
      >>> bool(after < before)
      True

    References:
      Guo et al. (2017), "On calibration of modern neural networks"; Kumar, Liang & Ma
      (2019), "Verified uncertainty calibration" (Platt-ECE as HELM reports it).
    """
    static = check_metric(metric)
    cal = _check_calibrator(calibrator)
    x, labels, weights = _check_inputs(cal, probs_or_logits, labels, weights, "probs_or_logits")
    n_folds = check_folds(n_folds, x.shape[0])
    return _recalibrated_kernel(static, cal, x, labels, weights, check_key(key), n_folds)


class CalibrationRefinement(NamedTuple):
    """A proper score split by recalibration: score = calibration + refinement.

    Attributes:
      score: 0-d, the score of the predictions as given.
      calibration: 0-d, score − refinement: what recalibration removes (cross-fitted, so
        it can be slightly negative when the predictions are calibrated already).
      refinement: 0-d, the score of the cross-fitted recalibrated predictions.
    """

    score: jax.Array
    calibration: jax.Array
    refinement: jax.Array


SCORES = {"brier": brier_score, "log": log_loss}


@partial(jax.jit, static_argnames=("score", "cal", "n_folds"))
def _split_kernel(score, cal, probs, labels, weights, key, n_folds):
    fn = SCORES[score]
    total = evaluate(fn, probs, labels, weights)
    refined = evaluate(
        fn, _cross_fitted(cal, probs, labels, weights, key, n_folds), labels, weights
    )
    return CalibrationRefinement(total, total - refined, refined)


def calibration_refinement(
    probs: Any,
    labels: Any,
    *,
    calibrator: Any,
    key: Any,
    score: str = "brier",
    n_folds: int = 5,
    weights: Any = None,
) -> CalibrationRefinement:
    """The calibration/refinement split of a proper score by cross-fitted recalibration.

    refinement = S(cross-fitted recalibrated probabilities) and calibration = S(probs) −
    refinement, for S the Brier score (``score="brier"``, summed over classes for
    ``(N, K)``: :func:`~jaxcal.metrics.brier_score`) or the log loss (``"log"``:
    :func:`~jaxcal.metrics.log_loss`). The calibration term is the part of the score a
    recalibration map fixes; the refinement term what is left (the resolution lost by
    the model, plus the uncertainty). With ``isotonic()`` on binary probabilities fitted
    in-sample this is the CORP miscalibration of :func:`~jaxcal.metrics.score_decomposition`;
    cross-fitting removes its optimism. Berta et al. (2025) split the log loss this way
    with temperature scaling to decide when to stop training.

    The calibrator reads ``probs``, so it must take probabilities
    (``inputs="probs"``), e.g. ``jaxcal.calibrators.isotonic()`` or
    ``platt_scaling()`` for ``(N,)``, ``temperature_scaling(inputs="probs")`` for
    ``(N, K)``.

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` integer labels.
      calibrator: a ``Calibrator(fit, apply)`` taking probabilities.
      key: a JAX PRNG key (the folds).
      score: ``"brier"`` or ``"log"``.
      n_folds: K >= 2, at most N (static).
      weights: optional ``(N,)`` sample weights.

    Returns:
      :class:`~jaxcal.stats.CalibrationRefinement` ``(score, calibration, refinement)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxcal.calibrators import isotonic
      >>> p = jnp.linspace(0.05, 0.95, 80)
      >>> y = (jax.random.uniform(jax.random.key(1), (80,)) < p**3).astype(jnp.int32)
      >>> s = calibration_refinement(p, y, calibrator=isotonic(), key=jax.random.key(0))
      >>> bool(s.calibration > 0), bool(abs(s.score - s.calibration - s.refinement) < 1e-6)
      (True, True)

    References:
      Murphy (1973), "A new vector partition of the probability score"; Bröcker (2009),
      "Reliability, sufficiency, and the decomposition of proper scores"; Dimitriadis,
      Gneiting & Jordan (2021), "Stable reliability diagrams"; Berta, Holzmüller,
      Jordan & Bach (2025), "Rethinking early stopping: refine, then calibrate".
    """
    check_option("score", score, tuple(SCORES))
    cal = _check_calibrator(calibrator)
    inputs = getattr(cal.fit, "inputs", "probs")
    if inputs != "probs":
        raise ValueError(
            f"`calibrator` must take probabilities (inputs='probs') to recalibrate `probs`; "
            f"it takes {inputs!r}. Build it with inputs='probs', or use "
            "jaxcal.stats.recalibrated on its own inputs."
        )
    probs = check_probs(probs, "probs")
    x, labels, weights = _check_inputs(cal, probs, labels, weights, "probs")
    n_folds = check_folds(n_folds, x.shape[0])
    return _split_kernel(score, cal, x, labels, weights, check_key(key), n_folds)
