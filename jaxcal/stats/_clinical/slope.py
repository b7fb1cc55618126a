"""Logistic recalibration: the calibration slope and intercept, calibration-in-the-large.

The weak and mean calibration levels of Van Calster et al. (2016): regress the outcome on
the model's log-odds, ``logit P(y = 1) = a + b logit(p)``. A calibrated model has b = 1
(the slope; b < 1 means predictions too extreme, overfitting) and a = 0; the
calibration-in-the-large (CITL) is a with b fixed at 1 (``logit(p)`` as an offset), which
compares the mean predicted risk with the event rate. Each comes with a Wald interval from
the Fisher information.

The fits are Newton-Raphson (IRLS) iterations in one ``lax.while_loop`` with a
step-halving line search, so they jit, vmap (per class of ``(N, K)`` probabilities) and
run inside other jitted code; ``jax.grad`` differentiates the estimates implicitly
(``logistic_newton()``).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

from jaxcal._core.checks import check_probs_labels
from jaxcal._core.numerics import compute_dtype, normalize_weights, pow2, vary_like
from jaxcal._core.validity import mask_padding

#: Ridge toward the calibrated values (a, b) = (0, 1), per unit of total weight: it keeps
#: the estimate finite when the likelihood has no maximiser (separable data, one class
#: only, one distinct score). Where the maximiser exists an unpenalised Newton phase
#: removes it (it moved the estimate by up to ~1e-5 relative where the information per
#: unit weight is small: confident, well-separated classes).
RIDGE = 1e-8

#: Newton iterations at most (quadratic convergence needs under 10 on well-posed data;
#: separable data converge to the ridge's finite optimum in a few dozen).
MAX_ITER = 100

#: Newton iterations at most of the unpenalised fit that follows the ridged one: where
#: the maximum-likelihood estimate exists the ridged estimate is within ~RIDGE /
#: information of it and quadratic convergence needs 2-4; where it does not (separable
#: data) the steps stay of order 1 / margin and the stopping test cannot hold.
POLISH_ITER = 30

#: Step sizes 1, 1/2, ..., 2**-(HALVINGS - 1) tried at once by the line search.
HALVINGS = 12

#: The longest Newton step in any coordinate (log-odds units): far from the optimum the
#: information can be tiny (every score 0 with one event: sigma(logit(eps)) = 1e-7), and
#: the full step of 4e6 with 12 halvings still overshot, so the fit diverged to -22043
#: with an infinite standard error. A step of 20 log-odds is beyond any useful change.
MAX_STEP = 20.0


class WaldEstimate(NamedTuple):
    """An estimate with its standard error and Wald interval (arrays of one shape).

    Attributes:
      estimate: the maximum-likelihood estimate.
      std_error: sqrt of the diagonal of the inverse Fisher information at the estimate
        (huge but finite where the information is singular).
      low, high: ``estimate -/+ z std_error``, z the normal quantile of the confidence.
    """

    estimate: jax.Array
    std_error: jax.Array
    low: jax.Array
    high: jax.Array


class CalibrationSlopeIntercept(NamedTuple):
    """Logistic recalibration of a model (:func:`~jaxcal.stats.calibration_slope_intercept`).

    Attributes:
      slope: b in ``logit P(y = 1) = a + b logit(p)`` (1 when calibrated).
      intercept: a of the same fit (0 when calibrated).
      citl: calibration-in-the-large, a with b fixed at 1 (0 when calibrated; > 0 when
        the model under-predicts the event rate).
      converged: bool, both Newton fits met their stopping test within ``MAX_ITER``.

    Each field is 0-d for 1-D probs, ``(K,)`` per class for ``(N, K)`` probs.
    """

    slope: WaldEstimate
    intercept: WaldEstimate
    citl: WaldEstimate
    converged: jax.Array


def logistic_newton(
    features: jax.Array,
    offset: jax.Array,
    y: jax.Array,
    w: jax.Array,
    prior: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Weighted logistic regression ``logit P = features @ theta + offset`` by Newton.

    Two phases, each a ``while_loop`` of capped, line-searched Newton steps (each step at
    most ``MAX_STEP`` in every coordinate, then halved until the loss does not grow),
    stopped when the Newton step is below sqrt(eps) (1 + |theta|) (the next one, by
    quadratic convergence, would be below eps):

    1. the ridged fit: minimises sum w [softplus(eta) - y eta] + RIDGE W / 2
       |theta - prior|^2 (W the total weight), which exists on any data, in at most
       ``MAX_ITER`` iterations;
    2. the maximum-likelihood fit: the same without the ridge, from the ridged estimate,
       in at most ``POLISH_ITER`` iterations. Where the MLE exists it converges in a few
       (quadratically: the ridged estimate is within ~RIDGE / information of it) and is
       the answer; where it does not (separable data, one class, one distinct score) the
       unpenalised steps keep growing (or the information is singular) and the ridged
       estimate is kept.

    Differentiable in every input by the implicit function theorem: the iterations run on
    stopped gradients (reverse mode cannot cross a ``while_loop``), and the estimate
    carries the derivative of one Newton step taken at it, ``-H^{-1} dg`` (g the gradient
    of the objective that was minimised, 0 at the optimum; the step's value is subtracted
    back, so the estimate is the loop's, bit for bit).

    Returns:
      ``(theta (d,), covariance (d, d), converged)``: the estimate, the inverse of the
      Fisher information (without the ridge), and whether a stopping test held (the
      maximum-likelihood fit's, or else the ridged fit's).
    """
    dtype = features.dtype
    d = features.shape[1]
    tol = jnp.sqrt(jnp.finfo(dtype).eps)
    steps = 0.5 ** jnp.arange(HALVINGS, dtype=dtype)

    def loss(data, theta, ridge):  # theta (T, d): T candidates at once
        features, offset, y, w = data
        eta = features @ theta.T + offset[:, None]
        nll = jnp.sum(w[:, None] * (jax.nn.softplus(eta) - y[:, None] * eta), axis=0)
        lam = ridge * jnp.sum(w)
        return nll + lam / 2 * jnp.sum((theta - prior[None, :]) ** 2, axis=-1)

    def hessian(data, theta, ridge):
        features, offset, y, w = data
        lam = ridge * jnp.sum(w)
        mu = jax.nn.sigmoid(features @ theta + offset)
        grad = features.T @ (w * (mu - y)) + lam * (theta - prior)
        info = (features * (w * mu * (1 - mu))[:, None]).T @ features
        return grad, info + lam * jnp.eye(d, dtype=dtype)

    data = (features, offset, y, w)
    fixed = jax.lax.stop_gradient(data)

    def newton(max_iter):
        def step(carry):
            theta, _, _, it, ridge = carry
            grad, info = hessian(fixed, theta, ridge)
            delta = jnp.linalg.solve(info, grad)
            finite = jnp.all(jnp.isfinite(delta))
            delta = jnp.where(finite, delta, 0)
            size = jnp.max(jnp.abs(delta))
            delta = delta * jnp.where(size > MAX_STEP, MAX_STEP / jnp.where(size > 0, size, 1), 1)
            trials = theta[None, :] - steps[:, None] * delta[None, :]
            values = loss(fixed, trials, ridge)
            current = loss(fixed, theta[None, :], ridge)[0]
            # Accept a step that raises the loss by rounding only (at the optimum in
            # float32 the full Newton step can look worse by an ulp, and halving it would
            # stall).
            ok = values <= current + 8 * jnp.finfo(dtype).eps * jnp.abs(current)
            # The largest step that does not increase the loss (the smallest otherwise).
            pick = jnp.where(jnp.any(ok), jnp.argmax(ok), HALVINGS - 1)
            new = trials[pick]
            done = finite & (jnp.max(jnp.abs(delta)) <= tol * (1 + jnp.max(jnp.abs(theta))))
            return new, done, ~finite, it + 1, ridge

        def cond(carry):
            _, done, failed, it, _ = carry
            return ~done & ~failed & (it < max_iter)

        return cond, step

    prior = jax.lax.stop_gradient(prior)
    start = loss(fixed, prior[None, :], RIDGE)
    no = jnp.asarray(False)
    # the ridge factor is carried as data (both phases run the same loop body)
    init = vary_like((prior, no, no, jnp.int32(0), jnp.asarray(RIDGE, dtype)), start)
    ridged, done, _, _, _ = jax.lax.while_loop(*newton(MAX_ITER), init)
    init = vary_like((ridged, no, no, jnp.int32(0), jnp.zeros((), dtype)), start)
    mle, mle_done, _, _, _ = jax.lax.while_loop(*newton(POLISH_ITER), init)
    use_mle = mle_done & jnp.all(jnp.isfinite(mle))
    theta = jnp.where(use_mle, mle, ridged)
    ridge = jnp.where(use_mle, 0.0, RIDGE).astype(dtype)
    grad, info = hessian(data, theta, ridge)
    newton_step = jnp.linalg.solve(info, grad)
    newton_step = jnp.where(jnp.isfinite(newton_step), newton_step, 0)  # no information
    theta = theta - (newton_step - jax.lax.stop_gradient(newton_step))
    # The covariance is the inverse of the Fisher information without the ridge (as
    # statsmodels'), regularised only at round-off level so that a singular information
    # (one distinct score) still gives a finite, huge variance.
    _, info = hessian(data, theta, 0.0)
    jitter = jnp.finfo(dtype).eps * jnp.trace(info) + jnp.finfo(dtype).tiny
    return theta, jnp.linalg.inv(info + jitter * jnp.eye(d, dtype=dtype)), use_mle | done


def _wald(estimate, variance, z, exponent):
    """Wald interval of an estimate whose ``variance`` was computed with the weights
    divided by ``2**exponent``: frequency weights divide the variance by that factor,
    and ``sqrt(v 2**-e) = sqrt(v 2**-r) 2**-h`` (e = 2h + r) never leaves the float range
    where ``v 2**-e`` would (an SE of 1e-20 has a variance below float32's smallest)."""
    h = exponent // 2
    se = jnp.sqrt(jnp.maximum(variance, 0) * pow2(2 * h - exponent, variance.dtype))
    se = se * pow2(-h, se.dtype)
    return WaldEstimate(estimate, se, estimate - z * se, estimate + z * se)


def _binary_fit(p, y, w, z):
    # The fits run on weights divided by a power of two near their largest (the same
    # estimate, exactly: every term of the objective scales alike), so that weights of
    # 1e37 do not overflow the information nor 1e-30 underflow it; the variances are
    # scaled back (frequency weights: weights 1e30 give standard errors 1e15 times smaller).
    w, exponent = normalize_weights(w)
    dtype = p.dtype
    eps = jnp.finfo(dtype).eps
    pc = jnp.clip(p, eps, 1 - eps)
    lp = jnp.log(pc) - jnp.log1p(-pc)
    ones = jnp.ones_like(lp)
    total = jnp.sum(w)
    empty = ~(total > 0)
    # Zero total weight: no information. The fits run on unit weights (finite, unused) and
    # the documented answer is selected at the end, so no NaN reaches a derivative either.
    w = jnp.where(empty, 1, w)
    # The slope is fitted on centred log-odds, a + b z = a' + b (z - m) with m the
    # weighted mean of z: with (near-)constant scores the columns (1, z) are collinear and
    # a float32 inverse of their information lost every digit (a standard error of 0, or
    # NaN, issues A4 and B1); centred, the information is diagonal there, the slope's
    # direction has only the ridge (toward the calibrated b = 1, a = 0, as before) and
    # the round-off jitter of ``logistic_newton()``: a large, finite standard error.
    m = jax.lax.stop_gradient(jnp.sum(w * lp) / jnp.sum(w))
    centred, cov, ok2 = logistic_newton(
        jnp.stack([ones, lp - m], axis=1),
        jnp.zeros_like(lp),
        y,
        w,
        jnp.stack([m, jnp.ones((), dtype)]),
    )
    slope = centred[1]
    intercept = centred[0] - slope * m
    var_intercept = cov[0, 0] - 2 * m * cov[0, 1] + m * m * cov[1, 1]
    citl, cov1, ok1 = logistic_newton(ones[:, None], lp, y, w, jnp.zeros((1,), dtype))

    def wald(estimate, variance, calibrated):
        est = _wald(estimate, variance, z, exponent)
        inf = jnp.asarray(jnp.inf, dtype)
        return WaldEstimate(
            jnp.where(empty, calibrated, est.estimate),
            jnp.where(empty, inf, est.std_error),
            jnp.where(empty, -inf, est.low),
            jnp.where(empty, inf, est.high),
        )

    return CalibrationSlopeIntercept(
        slope=wald(slope, cov[1, 1], 1),
        intercept=wald(intercept, var_intercept, 0),
        citl=wald(citl[0], cov1[0, 0], 0),
        converged=(ok1 & ok2) | empty,
    )


def per_class(binary, probs, labels, weights, confidence):
    """``binary(p, y, w, z)`` on the positive class of 1-D probs, or on each column of
    ``(N, K)`` probs one-vs-rest (vmapped; fields of shape ``(K,)``); z the normal
    quantile of ``confidence``. Rows of weight 0 may hold anything (masked first)."""
    probs, labels, _ = mask_padding(probs, labels, weights)
    dtype = compute_dtype(probs.dtype)
    p = probs.astype(dtype)
    w = jnp.ones(p.shape[:1], dtype) if weights is None else weights.astype(dtype)
    z = ndtri(jnp.asarray(0.5 + confidence / 2, dtype))
    if p.ndim == 1:
        return binary(p, (labels == 1).astype(dtype), w, z)
    classes = jnp.arange(p.shape[1], dtype=jnp.int32)
    targets = (labels[:, None] == classes[None, :]).astype(dtype)
    return jax.vmap(binary, in_axes=(1, 1, None, None))(p, targets, w, z)


_slope_kernel = jax.jit(partial(per_class, _binary_fit), static_argnames=("confidence",))


def check_open_unit(name: str, value: Any) -> float:
    """Raise unless ``value`` is a number in (0, 1) (a static option)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{name}` must be a number in (0, 1); got {value!r}.")
    if not 0 < value < 1:
        raise ValueError(f"`{name}` must lie in (0, 1); got {value}.")
    return float(value)


def calibration_slope_intercept(
    probs: Any, labels: Any, *, weights: Any = None, confidence: float = 0.95
) -> CalibrationSlopeIntercept:
    """Calibration slope, intercept and calibration-in-the-large, with Wald intervals.

    Two logistic regressions of the outcome on the model's log-odds
    ``z = logit(p)`` (p clipped to [eps, 1 - eps] of the dtype, so 0 and 1 stay finite):

    * ``logit P(y = 1) = a + b z``: the calibration **slope** b (1 when calibrated; < 1:
      predictions too extreme, as after overfitting; > 1: too moderate) and the
      **intercept** a (Van Calster et al. 2016's "weak calibration");
    * ``logit P(y = 1) = a + z`` (z as an offset, b fixed at 1): the
      **calibration-in-the-large** a ("mean calibration": 0 when the mean predicted risk
      matches the event rate, > 0 when the model under-predicts).

    Maximum likelihood by Newton-Raphson (IRLS) with a step-halving line search, in a
    ``lax.while_loop``; the intervals are Wald intervals ``estimate -/+ z_(1+c)/2 SE``
    with SE from the inverse Fisher information at the estimate (statsmodels' ``Logit``
    ``conf_int()``). ``weights`` are frequency weights of the likelihood: the estimates do
    not depend on their scale, the standard errors shrink as ``1 / sqrt(scale)`` (finite
    from 1e-37 to 1e37 in float32; below float32's smallest normal they read 0).

    Wherever the maximum-likelihood estimate exists it is the answer (to round-off:
    Newton runs until its step is below sqrt(eps) relative, so the estimate is within
    ~eps of the optimum; statsmodels' ``Logit`` reaches the same). Degenerate data have a
    documented finite answer: where the likelihood has no maximiser (separable data, a
    single class, a single distinct score), a ridge of ``RIDGE`` (1e-8) per unit weight
    toward the calibrated values (a, b) = (0, 1) makes the estimate exist, so the
    estimates and intervals there are finite (large, and wide). Every Newton step is
    capped (``MAX_STEP`` log-odds) and line-searched, so no fit diverges. ``converged``
    reports the Newton stopping test.

    Args:
      probs: ``(N,)`` positive-class probabilities, or ``(N, K)`` rows on the simplex
        (then each class one-vs-rest: fields of shape ``(K,)``).
      labels: ``(N,)`` labels (0/1 for 1-D probs).
      weights: optional ``(N,)`` non-negative sample weights.
      confidence: level of the Wald intervals, in (0, 1).

    Returns:
      :class:`~jaxcal.stats.CalibrationSlopeIntercept` of :class:`~jaxcal.stats.WaldEstimate` fields.

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
      >>> y = jnp.array([0, 0, 1, 1, 0, 1, 1, 1])
      >>> res = calibration_slope_intercept(p, y)
      >>> round(float(res.slope.estimate), 3), round(float(res.intercept.estimate), 3)
      (1.782, 1.316)
      >>> round(float(res.citl.estimate), 3)  # events under-predicted: 5 seen, 3.6 expected
      0.909

    References:
      Cox (1958), "Two further applications of a model for binary regression",
      Biometrika; Van Calster, Nieboer, Vergouwe, De Cock, Pencina & Steyerberg (2016),
      "A calibration hierarchy for risk models was defined: from utopia to empirical
      data", J. Clin. Epidemiol. 74.
    """
    confidence = check_open_unit("confidence", confidence)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _slope_kernel(probs, labels, weights, confidence)
