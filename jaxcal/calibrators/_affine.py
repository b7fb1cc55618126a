"""Affine scaling calibrators on (N, K) inputs: vector, matrix and Dirichlet scaling.

All three are ``softmax(W z + b)`` (W diagonal for vector scaling; z the log-probabilities
for Dirichlet calibration), fitted from the temperature-scaled identity (W = I / T, b = 0;
T by temperature scaling's Newton on z) by minimising the weighted mean NLL plus an
optional penalty with :func:`jaxcal.calibrators.minimize` (jaxcal's L-BFGS by default, or
an optax optimiser).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxcal._core.cache import cached_factory
from jaxcal._core.checks import check_option
from jaxcal._core.numerics import compute_dtype
from jaxcal.calibrators._base import (
    Calibrator,
    FitInfo,
    check_solver_options,
    from_kernels,
    minimize,
    weighted_mean,
)
from jaxcal.calibrators._implicit import implicit_argmin
from jaxcal.calibrators._inputs import MULTICLASS_INPUTS, log_probs_of
from jaxcal.calibrators._params import ParamsSpec
from jaxcal.calibrators._temperature import temperature_newton


class AffineParams(NamedTuple):
    """Parameters of vector scaling (``weight`` (K,)) or matrix / Dirichlet (``weight`` (K, K)).

    Attributes:
      weight: ``(K,)`` per-class scales (vector scaling) or ``(K, K)`` matrix W, with
        output logit ``k = sum_j W[k, j] x_j + bias[k]``.
      bias: ``(K,)`` intercepts.
      info: :class:`~jaxcal.calibrators.FitInfo` of the fit.
    """

    weight: jax.Array
    bias: jax.Array
    info: FitInfo


#: Bounds of T and Newton iterations of the temperature that starts the affine fits.
_START_BOUNDS, _START_ITER = (1e-30, 1e30), 50


def _column_moments(z: jax.Array, weights: jax.Array | None) -> tuple[jax.Array, jax.Array]:
    """Per-column mean and standard deviation of ``z`` over the rows of positive weight.

    Unweighted over those rows (a preconditioner, not a statistic); sd 1 for a constant
    column and mean 0, sd 1 when no row counts. Computed on ``z / max |z|`` per column:
    squares of logits near 1e20 overflow float32.
    """
    rows = jnp.ones(z.shape[:1], z.dtype) if weights is None else (weights > 0).astype(z.dtype)
    zm = jnp.where(rows[:, None] > 0, z, 0)  # masked rows may hold NaN
    scale = jnp.max(jnp.abs(zm), axis=0)
    scale = jnp.where(scale > 0, scale, 1)
    u = zm / scale[None, :]
    count = jnp.maximum(jnp.sum(rows), 1)
    mean = jnp.sum(u, axis=0) / count
    var = jnp.sum(jnp.where(rows[:, None] > 0, (u - mean[None, :]) ** 2, 0), axis=0) / count
    sd = jnp.sqrt(var) * scale
    return mean * scale, jnp.where(sd > 0, sd, 1)


def _affine(
    kind: str,
    inputs: str,
    l2: float,
    odir: Any,
    optimizer: optax.GradientTransformation | None,
    max_iter: int,
    tol: float | None,
) -> Calibrator:
    """Shared fit/apply of vector, matrix and Dirichlet scaling."""
    check_option("inputs", inputs, MULTICLASS_INPUTS)
    max_iter = check_solver_options(optimizer, max_iter, tol)
    if isinstance(l2, bool) or not isinstance(l2, (int, float)) or not (0 <= l2 < np.inf):
        raise ValueError(f"`l2` must be a finite number >= 0; got {l2!r}.")
    if odir is None:
        lam = mu = 0.0
    else:
        try:
            lam, mu = (odir, odir) if isinstance(odir, (int, float)) else odir
            lam, mu = float(lam), float(mu)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"`odir` must be None, a number or a pair (lambda, mu); got {odir!r}."
            ) from err
        if isinstance(odir, bool) or not (0 <= lam < np.inf and 0 <= mu < np.inf):
            raise ValueError(f"`odir` must hold finite numbers >= 0; got {odir!r}.")

    def features(x):
        if kind == "dirichlet" or inputs != "logits":
            return log_probs_of(x, inputs)
        return x.astype(compute_dtype(x.dtype))

    def outputs(params, z):
        if kind == "vector":
            return z * params[0][None, :] + params[1][None, :]
        return z @ params[0].T + params[1][None, :]

    def least_penalty(params):
        """(W + 1 v^T, b + c1): the same softmax, moved to the least penalty (closed form).

        Adding v to every row of W and c to every bias adds ``v . z + c`` to every output,
        which the softmax ignores: the data term is flat along those K + 1 directions and
        only the penalty curves them (2 l2 in the original coordinates, 2 l2 / sd^2 in the
        standardised ones), a valley of condition 1e4-1e6 that cost L-BFGS 150-250
        iterations at K = 10 (a float64 SciPy fit of the same objective: 88). The penalty
        is a sum of squares of the entries, so its minimum over v_j (column j) and c is
        a weighted mean; minimising over the quotient leaves the data's conditioning.
        """
        w, b = params
        k = w.shape[0]
        per_entry = l2 * jnp.ones((k, k), w.dtype)
        if lam > 0:
            per_entry = per_entry + lam / (k * (k - 1)) * (1 - jnp.eye(k, dtype=w.dtype))
        column = jnp.sum(per_entry, axis=0)
        v = -jnp.sum(per_entry * w, axis=0) / jnp.where(column > 0, column, 1)
        c = -jnp.mean(b) if l2 > 0 or mu > 0 else jnp.zeros((), b.dtype)
        return w + v[None, :], b + c

    shift_free = kind != "vector" and (l2 > 0 or lam > 0 or mu > 0)

    def penalty(params):
        w, b = params
        total = jnp.zeros((), w.dtype)
        if kind == "vector":
            return total
        k = w.shape[0]
        if l2 > 0:
            total = total + l2 * (jnp.sum(w * w) + jnp.sum(b * b))
        if lam > 0 or mu > 0:
            off = w * (1 - jnp.eye(k, dtype=w.dtype))
            total = total + lam / (k * (k - 1)) * jnp.sum(off * off) + mu / k * jnp.sum(b * b)
        return total

    def objective(params, outputs_of, labels, weights):
        """The weighted mean NLL of softmax(outputs_of(params)), plus the penalty."""
        logp = jax.nn.log_softmax(outputs_of(params), axis=1)
        onehot = labels[:, None] == jnp.arange(logp.shape[1], dtype=jnp.int32)[None, :]
        nll = -jnp.sum(jnp.where(onehot, logp, 0), axis=1)
        return weighted_mean(nll, weights) + penalty(params)

    def solve(data):
        x, labels, weights = data
        z = features(x)
        k = z.shape[1]
        # Optimise in standardised coordinates: W' = W diag(sd), b' = b + W mean on the
        # features (z - mean) / sd (per column, over rows of positive weight). The same
        # map and the same objective (the loss reads W, b), preconditioned: features O(1)
        # and centred (logits of 1e4 would stall L-BFGS; log-probabilities near -20 make
        # the bias and the weights one ill-conditioned valley). With the penalty read at
        # `least_penalty`, matrix scaling (l2 = 1e-3, N = 1e4, K = 10, bench_affine.py's
        # data) takes 22 iterations (13 from the start below); features divided by their
        # largest |z| (the former way) 187, standardised alone 170, least_penalty alone 117.
        mean, sd = _column_moments(z, weights)
        zs = (z - mean[None, :]) / sd[None, :]

        def original(scaled):
            w = scaled[0] / sd if kind == "vector" else scaled[0] / sd[None, :]
            params = w, scaled[1] - outputs((w, jnp.zeros_like(scaled[1])), mean[None, :])[0]
            return least_penalty(params) if shift_free else params

        def loss(scaled):  # the objective at W, b, whose outputs are those of W', b' on zs
            return objective(original(scaled), lambda _: outputs(scaled, zs), labels, weights)

        # Start from the temperature-scaled identity W = I / T (T by temperature scaling's
        # Newton, a few passes): the identity itself is as far from the optimum as the
        # logits are mis-scaled (logits x 1e8 stopped L-BFGS at a loss of 2.5 for 1.05).
        beta, _ = temperature_newton(z, labels, weights, _START_BOUNDS, _START_ITER, None)
        w0 = jnp.ones((k,), z.dtype) if kind == "vector" else jnp.eye(k, dtype=z.dtype)
        w0 = w0 * beta
        init = (
            w0 * sd if kind == "vector" else w0 * sd[None, :],
            outputs((w0, jnp.zeros_like(mean)), mean[None, :])[0],  # b' = b + W mean, b = 0
        )
        scaled, info = minimize(loss, init, optimizer=optimizer, max_iter=max_iter, tol=tol)
        return original(scaled), info

    def objective_at(params, info, data):
        z = features(data[0])
        return objective(params, lambda p: outputs(p, z), data[1], data[2])

    @jax.jit
    def _fit(x, labels, weights):
        # Derivatives of the fit: from its optimality condition (calibrators._implicit).
        (w, b), info = implicit_argmin(solve, objective_at, None, (x, labels, weights))
        return AffineParams(w, b, info)

    @jax.jit
    def _apply(params, x):
        z = features(x)
        p = (params.weight.astype(z.dtype), params.bias.astype(z.dtype))
        return jax.nn.softmax(outputs(p, z), axis=1)

    def shapes(x_shape):
        k = x_shape[1]
        return {"weight": (k,) if kind == "vector" else (k, k), "bias": (k,)}

    name = {"vector": "vector_scaling", "matrix": "matrix_scaling"}.get(kind, kind)
    spec = ParamsSpec(AffineParams, shapes, f"{name}()")
    return from_kernels(_fit, _apply, inputs, binary=False, params=spec)


@cached_factory
def vector_scaling(
    *,
    inputs: str = "logits",
    optimizer: optax.GradientTransformation | None = None,
    max_iter: int = 500,
    tol: float | None = None,
) -> Calibrator:
    """Vector scaling (Guo et al. 2017): ``softmax(a * z + b)`` with ``a, b`` in R^K.

    Minimises the (weighted) mean NLL with :func:`~jaxcal.calibrators.minimize` from the temperature-scaled
    identity (a = 1 / T, b = 0). Unregularised. ``z`` are the logits (``inputs="logits"``) or the
    log-probabilities (``"log_probs"``, or ``"probs"`` logged with ``log(max(p, tiny))``).

    Args:
      inputs: ``"logits"``, ``"log_probs"`` or ``"probs"``.
      optimizer: an optax optimiser, or None for jaxcal's L-BFGS (see :func:`~jaxcal.calibrators.minimize`).
      max_iter: iteration limit.
      tol: gradient tolerance (None: 1e-6 in float32, 1e-10 in float64).

    Returns:
      ``Calibrator`` whose ``fit`` returns :class:`~jaxcal.calibrators.AffineParams` with ``weight`` (K,).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import vector_scaling
      >>> z = jnp.array([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0]])
      >>> cal = vector_scaling()
      >>> params = cal.fit(z, jnp.array([0, 1, 1, 1]))
      >>> params.weight.shape, bool(params.info.converged)
      ((2,), True)

    References:
      Guo, Pleiss, Sun & Weinberger (2017), "On Calibration of Modern Neural Networks".
    """
    return _affine("vector", inputs, 0.0, None, optimizer, max_iter, tol)


@cached_factory
def matrix_scaling(
    *,
    l2: float = 0.0,
    odir: float | tuple[float, float] | None = None,
    inputs: str = "logits",
    optimizer: optax.GradientTransformation | None = None,
    max_iter: int = 500,
    tol: float | None = None,
) -> Calibrator:
    """Matrix scaling (Guo et al. 2017): ``softmax(W z + b)``, W (K, K), b (K,).

    Minimises the (weighted) mean NLL plus the penalty from the temperature-scaled
    identity (W = I / T, b = 0).
    The penalties are Kull et al.'s (2019): ``l2 * (sum W_ij^2 + sum b_j^2)`` (the plain
    L2 penalty, towards 0) and, with ``odir=(lam, mu)`` (or one number for both),
    ``lam / (K (K - 1)) * sum_{i != j} W_ij^2 + mu / K * sum_j b_j^2`` (off-diagonal and
    intercept regularisation). Without a penalty the optimum is not unique (the softmax
    ignores a common shift), but its probabilities are. ``z`` as in :func:`~jaxcal.calibrators.vector_scaling`.

    Args:
      l2: L2 penalty weight (>= 0).
      odir: None, or the ODIR weights ``(lam, mu)`` (a number sets both).
      inputs: ``"logits"``, ``"log_probs"`` or ``"probs"``.
      optimizer: an optax optimiser, or None for jaxcal's L-BFGS (see :func:`~jaxcal.calibrators.minimize`).
      max_iter: iteration limit.
      tol: gradient tolerance (None: 1e-6 in float32, 1e-10 in float64).

    Returns:
      ``Calibrator`` whose ``fit`` returns :class:`~jaxcal.calibrators.AffineParams` with ``weight`` (K, K).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import matrix_scaling
      >>> z = jnp.array([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0]])
      >>> params = matrix_scaling(l2=0.01).fit(z, jnp.array([0, 1, 1, 1]))
      >>> params.weight.shape
      (2, 2)

    References:
      Guo et al. (2017); Kull, Perello-Nieto, Kängsepp, Silva Filho, Song & Flach (2019),
      "Beyond temperature scaling: Obtaining well-calibrated multiclass probabilities with
      Dirichlet calibration", NeurIPS (the L2 and ODIR penalties).
    """
    return _affine("matrix", inputs, l2, odir, optimizer, max_iter, tol)


@cached_factory
def dirichlet(
    *,
    l2: float = 0.0,
    odir: float | tuple[float, float] | None = None,
    inputs: str = "probs",
    optimizer: optax.GradientTransformation | None = None,
    max_iter: int = 500,
    tol: float | None = None,
) -> Calibrator:
    """Dirichlet calibration (Kull et al. 2019): ``softmax(W log p + b)`` on log-probabilities.

    The same map and penalties as :func:`~jaxcal.calibrators.matrix_scaling`, applied to the log-probabilities
    ``log p`` of the input: ``log_softmax(z)`` of logits (``inputs="logits"``), the
    ``"log_probs"`` themselves, or ``log(max(p, tiny))`` of ``"probs"``. It differs from
    matrix scaling on logits unless the rows of W sum to a constant. Fitted from the
    temperature-scaled identity (W = I / T on log p, b = 0) by :func:`~jaxcal.calibrators.minimize`.

    The default is ``inputs="probs"``, the paper's input (a classifier's probabilities),
    unlike the other multiclass calibrators, whose input is logits: probabilities taken
    as logits would be silently transformed by ``log_softmax`` (D23), while logits taken
    as probabilities fail the [0, 1] check with a message naming ``inputs``. On logits,
    pass ``inputs="logits"``: ``log_softmax(z)`` are the log-probabilities of
    ``softmax(z)``, so it fits the map ``inputs="probs"`` fits on ``softmax(z)`` where no
    probability underflows (``"probs"`` reads a zero as ``log(tiny)``).

    Args:
      l2: L2 penalty weight: ``l2 * (sum W_ij^2 + sum b_j^2)`` (Dir-L2).
      odir: ``(lam, mu)`` or one number: ``lam / (K (K - 1)) sum_{i != j} W_ij^2 +
        mu / K sum_j b_j^2`` (Dir-ODIR).
      inputs: ``"probs"`` (default), ``"logits"`` or ``"log_probs"``.
      optimizer: an optax optimiser, or None for jaxcal's L-BFGS (see :func:`~jaxcal.calibrators.minimize`).
      max_iter: iteration limit.
      tol: gradient tolerance (None: 1e-6 in float32, 1e-10 in float64).

    Returns:
      ``Calibrator`` whose ``fit`` returns :class:`~jaxcal.calibrators.AffineParams` with ``weight`` (K, K).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import dirichlet
      >>> p = jnp.array([[0.8, 0.2], [0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
      >>> cal = dirichlet(odir=1e-2, inputs="probs")
      >>> q = cal.apply(cal.fit(p, jnp.array([0, 1, 1, 1])), p)
      >>> q.shape, bool(jnp.allclose(q.sum(axis=1), 1))
      ((4, 2), True)

    References:
      Kull, Perello-Nieto, Kängsepp, Silva Filho, Song & Flach (2019), "Beyond temperature
      scaling: Obtaining well-calibrated multiclass probabilities with Dirichlet
      calibration", NeurIPS.
    """
    return _affine("dirichlet", inputs, l2, odir, optimizer, max_iter, tol)
