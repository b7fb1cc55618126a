"""Parametric binary calibrators on (N,) scores: Platt scaling and beta calibration."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxcal._core.cache import cached_factory
from jaxcal._core.checks import check_option
from jaxcal.calibrators._base import (
    Calibrator,
    FitInfo,
    check_solver_options,
    from_kernels,
    minimize,
    weighted_mean,
)
from jaxcal.calibrators._implicit import implicit_argmin
from jaxcal.calibrators._inputs import (
    BINARY_INPUTS,
    log_odds_of,
    log_probs_pair_of,
)
from jaxcal.calibrators._params import ParamsSpec


class PlattParams(NamedTuple):
    """Parameters of Platt scaling: ``p = sigmoid(a * f + b)``, f the input's log-odds.

    Attributes:
      a: 0-d slope.
      b: 0-d intercept.
      info: :class:`~jaxcal.calibrators.FitInfo` of the fit.
    """

    a: jax.Array
    b: jax.Array
    info: FitInfo


class BetaParams(NamedTuple):
    """Parameters of beta calibration: ``p = sigmoid(a log s - b log(1 - s) + c)``.

    Attributes:
      a: 0-d coefficient of ``log s`` (>= 0 unless the reduced fit went negative).
      b: 0-d coefficient of ``-log(1 - s)``.
      c: 0-d intercept.
      info: :class:`~jaxcal.calibrators.FitInfo` of the fit that was kept.
    """

    a: jax.Array
    b: jax.Array
    c: jax.Array
    info: FitInfo


def _feature_scale(x: jax.Array, weights: jax.Array | None) -> jax.Array:
    """Per-column max |x| over samples with weight (at least 1), to condition the fit.

    Like scikit-learn's ``_sigmoid_calibration``: a logistic regression without penalty
    is equivariant under feature scaling, so the optimum maps back exactly.
    """
    absx = jnp.abs(x)
    if weights is not None:
        absx = jnp.where((weights > 0)[:, None], absx, 0)
    return jnp.maximum(jnp.max(absx, axis=0), 1)


def _cross_entropy(theta, x, targets, weights, mask):
    """Weighted mean binary cross-entropy of sigmoid(x @ (mask * theta[:-1]) + theta[-1])."""
    z = x @ (mask * theta[:-1]) + theta[-1]
    return weighted_mean(jax.nn.softplus(z) - targets * z, weights)


def _logistic(x, targets, weights, theta0, mask, optimizer, max_iter, tol):
    """Minimise ``_cross_entropy()`` over theta from ``theta0``."""
    loss = lambda theta: _cross_entropy(theta, x, targets, weights, mask)  # noqa: E731
    return minimize(loss, theta0, optimizer=optimizer, max_iter=max_iter, tol=tol)


def _smoothed_targets(y: jax.Array, weights: jax.Array | None) -> jax.Array:
    """Platt's targets (N+ + 1)/(N+ + 2) and 1/(N- + 2), N+- the (weighted) class counts."""
    w = jnp.ones_like(y) if weights is None else weights.astype(y.dtype)
    n_pos = jnp.sum(w * y)
    n_neg = jnp.sum(w * (1 - y))
    return jnp.where(y > 0, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))


@cached_factory
def platt_scaling(
    target_smoothing: bool = False,
    *,
    inputs: str = "probs",
    optimizer: optax.GradientTransformation | None = None,
    max_iter: int = 500,
    tol: float | None = None,
) -> Calibrator:
    """Platt scaling (Platt 1999): ``p = sigmoid(a f + b)`` on the log-odds f of a score.

    A one-feature logistic regression without penalty, fitted by :func:`~jaxcal.calibrators.minimize`
    (L-BFGS by default) from the identity (a = 1, b = 0). The feature f is the score's
    log-odds: ``log(s / (1 - s))`` with s clipped to [eps, 1 - eps] for ``inputs="probs"``
    (so that a = 1, b = 0 is the identity), the score itself for ``inputs="logits"`` (an
    SVM margin or a log-odds). Features are rescaled by their largest magnitude while
    fitting (as scikit-learn does), which leaves the optimum unchanged.

    ``target_smoothing=True`` replaces the 0/1 targets by Platt's (N+ + 1)/(N+ + 2) for
    positives and 1/(N- + 2) for negatives (weighted counts), which keeps the optimum
    finite on separable data and is what scikit-learn's ``CalibratedClassifierCV(method=
    "sigmoid")`` fits. Without it, one-class or separable data have no finite optimum: the
    fit stops where the gradient falls below ``tol``, with probabilities within about
    ``tol`` of the observed frequency (finite). Zero total weight gives the identity.

    Args:
      target_smoothing: use Platt's soft targets.
      inputs: ``"probs"`` (scores in [0, 1]) or ``"logits"`` (real-valued scores).
      optimizer: an optax optimiser, or None for jaxcal's L-BFGS (see :func:`~jaxcal.calibrators.minimize`).
      max_iter: iteration limit.
      tol: gradient tolerance (None: 1e-6 in float32, 1e-10 in float64).

    Returns:
      ``Calibrator``: ``fit(scores (N,), labels (N,) 0/1, *, weights=None) ->
      PlattParams``; ``apply(params, scores (N,)) -> probs (N,)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import platt_scaling
      >>> s = jnp.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
      >>> cal = platt_scaling()
      >>> params = cal.fit(s, jnp.array([0, 1, 0, 1, 0, 1]))
      >>> [round(float(v), 2) for v in cal.apply(params, s)]  # towards the base rate 1/2
      [0.26, 0.34, 0.4, 0.6, 0.66, 0.74]

    References:
      Platt (1999), "Probabilistic Outputs for Support Vector Machines and Comparisons
      to Regularized Likelihood Methods"; Lin, Lin & Weng (2007), "A note on Platt's
      probabilistic outputs for support vector machines".
    """
    check_option("target_smoothing", target_smoothing, (False, True))
    check_option("inputs", inputs, BINARY_INPUTS)
    max_iter = check_solver_options(optimizer, max_iter, tol)

    def problem(data):  # the feature (N, 1), the targets and the weights
        x, labels, weights = data
        f = log_odds_of(x, inputs)
        y = labels.astype(f.dtype)
        targets = _smoothed_targets(y, weights) if target_smoothing else y
        return f[:, None], targets, weights

    def solve(data):
        f, targets, weights = problem(data)
        scale = _feature_scale(f, weights)
        theta0 = jnp.concatenate([scale, jnp.zeros((1,), f.dtype)])
        ones = jnp.ones((1,), f.dtype)
        theta, info = _logistic(
            f / scale[None, :], targets, weights, theta0, ones, optimizer, max_iter, tol
        )
        return theta.at[0].divide(scale[0]), info

    def objective(theta, info, data):
        f, targets, weights = problem(data)
        return _cross_entropy(theta, f, targets, weights, jnp.ones((1,), f.dtype))

    @jax.jit
    def _fit(x, labels, weights):
        # Derivatives of the fit: from its optimality condition (calibrators._implicit).
        theta, info = implicit_argmin(solve, objective, None, (x, labels, weights))
        return PlattParams(theta[0], theta[1], info)

    @jax.jit
    def _apply(params, x):
        f = log_odds_of(x, inputs)
        return jax.nn.sigmoid(params.a.astype(f.dtype) * f + params.b.astype(f.dtype))

    spec = ParamsSpec(PlattParams, lambda shape: {"a": (), "b": ()}, "platt_scaling()")
    return from_kernels(_fit, _apply, inputs, binary=True, params=spec)


# Feature masks of the three fits of beta calibration: full, a = 0, b = 0.
_BETA_MASKS = ((1.0, 1.0), (0.0, 1.0), (1.0, 0.0))


@cached_factory
def beta_calibration(
    *,
    inputs: str = "probs",
    optimizer: optax.GradientTransformation | None = None,
    max_iter: int = 500,
    tol: float | None = None,
) -> Calibrator:
    """Beta calibration (Kull, Silva Filho & Flach 2017), the three-parameter family.

    ``p = sigmoid(a log s - b log(1 - s) + c)``: a logistic regression without penalty on
    the features ``(log s, -log(1 - s))``, fitted from the identity (a = b = 1, c = 0).
    As in the authors' reference code (``betacal``), the map must be non-decreasing:
    if the fitted a < 0 the model is refitted with a = 0 (feature ``-log(1 - s)`` only),
    else if b < 0 with b = 0. The three fits run together (vmapped) so that ``fit`` jits.
    For ``inputs="probs"`` s is clipped to [eps, 1 - eps] (as ``betacal`` does); for
    ``inputs="logits"`` (log-odds) the features are the exact ``log_sigmoid`` values.
    One-class data have no finite optimum (see :func:`~jaxcal.calibrators.platt_scaling`); zero total weight
    gives the identity.

    Args:
      inputs: ``"probs"`` or ``"logits"``.
      optimizer: an optax optimiser, or None for jaxcal's L-BFGS (see :func:`~jaxcal.calibrators.minimize`).
      max_iter: iteration limit.
      tol: gradient tolerance (None: 1e-6 in float32, 1e-10 in float64).

    Returns:
      ``Calibrator``: ``fit(scores (N,), labels (N,) 0/1, *, weights=None) ->
      BetaParams``; ``apply(params, scores (N,)) -> probs (N,)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import beta_calibration
      >>> s = jnp.array([0.05, 0.2, 0.3, 0.6, 0.7, 0.95, 0.5, 0.4])
      >>> cal = beta_calibration()
      >>> params = cal.fit(s, jnp.array([0, 0, 1, 0, 1, 1, 1, 0]))
      >>> bool(params.a >= 0) and bool(params.b >= 0)
      True

    References:
      Kull, Silva Filho & Flach (2017), "Beta calibration: a well-founded and easily
      implemented improvement on logistic calibration for binary classifiers", AISTATS.
    """
    check_option("inputs", inputs, BINARY_INPUTS)
    max_iter = check_solver_options(optimizer, max_iter, tol)

    def features(x):
        log_s, log_1ms = log_probs_pair_of(x, inputs)
        return jnp.stack([log_s, -log_1ms], axis=1)

    def solve(data):  # theta = (a, b, c); aux: the kept fit's info and feature mask
        x, labels, weights = data
        feats = features(x)
        dtype = feats.dtype
        y = labels.astype(dtype)
        scale = _feature_scale(feats, weights)
        theta0 = jnp.concatenate([scale, jnp.zeros((1,), dtype)])
        masks = jnp.asarray(_BETA_MASKS, dtype)
        thetas, infos = jax.vmap(
            lambda m: _logistic(
                feats / scale[None, :], y, weights, theta0, m, optimizer, max_iter, tol
            )
        )(masks)
        coefs = thetas[:, :2] * masks / scale[None, :]
        full_a, full_b = coefs[0, 0], coefs[0, 1]
        pick = jnp.where(full_a < 0, 1, jnp.where(full_b < 0, 2, 0))
        info = jax.tree.map(lambda v: v[pick], infos)
        return jnp.concatenate([coefs[pick], thetas[pick, 2:]]), (info, masks[pick])

    def objective(theta, aux, data):  # the kept fit's; a coefficient it holds at 0 stays
        x, labels, weights = data
        feats = features(x)
        return _cross_entropy(theta, feats, labels.astype(feats.dtype), weights, aux[1])

    @jax.jit
    def _fit(x, labels, weights):
        # Derivatives of the fit: from its optimality condition (calibrators._implicit).
        theta, (info, _) = implicit_argmin(solve, objective, None, (x, labels, weights))
        return BetaParams(theta[0], theta[1], theta[2], info)

    @jax.jit
    def _apply(params, x):
        log_s, log_1ms = log_probs_pair_of(x, inputs)
        a, b, c = (v.astype(log_s.dtype) for v in params[:3])
        return jax.nn.sigmoid(a * log_s - b * log_1ms + c)

    shapes = lambda shape: {"a": (), "b": (), "c": ()}  # noqa: E731
    spec = ParamsSpec(BetaParams, shapes, "beta_calibration()")
    return from_kernels(_fit, _apply, inputs, binary=True, params=spec)
