"""Multiclass scaling calibrators on (N, K) inputs: temperature, vector, matrix, Dirichlet."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxcal._checks import check_option, compute_dtype
from jaxcal.calibrators._base import (
    Calibrator,
    FitInfo,
    check_solver_options,
    mark_inputs,
    minimize,
    weighted_mean,
)
from jaxcal.calibrators._inputs import (
    MULTICLASS_INPUTS,
    check_fit_args,
    check_multiclass_inputs,
    log_probs_of,
)


class TemperatureParams(NamedTuple):
    """Parameters of temperature scaling.

    Attributes:
      temperature: 0-d T > 0; the calibrated probabilities are ``softmax(z / T)``.
      info: :class:`FitInfo` of the fit.
    """

    temperature: jax.Array
    info: FitInfo


class AffineParams(NamedTuple):
    """Parameters of vector scaling (``weight`` (K,)) or matrix / Dirichlet (``weight`` (K, K)).

    Attributes:
      weight: ``(K,)`` per-class scales (vector scaling) or ``(K, K)`` matrix W, with
        output logit ``k = sum_j W[k, j] x_j + bias[k]``.
      bias: ``(K,)`` intercepts.
      info: :class:`FitInfo` of the fit.
    """

    weight: jax.Array
    bias: jax.Array
    info: FitInfo


def _check_bounds(bounds: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError) as err:
        raise ValueError(f"`bounds` must be a pair (T_min, T_max); got {bounds!r}.") from err
    if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi):
        raise ValueError(f"`bounds` must satisfy 0 < T_min < T_max < inf; got {bounds!r}.")
    return lo, hi


def _center(z: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Rows shifted so their max is 0, and the shifted logit of the label."""
    zc = z - jnp.max(z, axis=1, keepdims=True)
    zy = jnp.take_along_axis(zc, labels[:, None], axis=1)[:, 0]
    return zc, zy


def _normalised_weights(weights: jax.Array | None, n: int, dtype: Any) -> jax.Array:
    if weights is None:
        return jnp.full((n,), 1 / n, dtype)
    w = weights.astype(dtype)
    total = jnp.sum(w)
    return jnp.where(total > 0, w / jnp.where(total > 0, total, 1), 0)


# Bytes of logits per block of rows in the temperature kernel: a block and its
# exponentials (256 KiB in float32) stay in cache while the row maximum, the three row
# sums and their weighted totals are taken. One pass over all of (N, K) at once writes
# exp(beta z) to memory and reads it back three times: about 8x slower on CPU.
_BLOCK_BYTES = 1 << 18


def _block_terms(beta, z, zy, wn):
    """Weighted sums (f, f', f'') over a block of rows (see :func:`_nll_derivatives`)."""
    m = jnp.max(z, axis=1)
    zc = z - m[:, None]
    e = jnp.exp(beta * zc)
    s = jnp.sum(e, axis=1)
    m1 = jnp.sum(e * zc, axis=1) / s
    m2 = jnp.sum(e * (zc * zc), axis=1) / s
    zyc = zy - m
    return jnp.stack(
        [
            jnp.sum(wn * (jnp.log(s) - beta * zyc)),
            jnp.sum(wn * (m1 - zyc)),
            jnp.sum(wn * jnp.maximum(m2 - m1 * m1, 0)),
        ]
    )


def _sweep(betas, z, zy, wn, batched):
    """(f, f', f'') for each of the B betas: (B, 3), one cache-sized block of rows at a time.

    ``z`` (N, K), ``zy`` (N,), ``wn`` (N,) are shared by the B problems, or carry a
    leading batch axis B where ``batched`` (three flags) says so. Blocks are read in place
    with ``dynamic_slice``; the last block is shifted back to end at row N and its rows
    already counted get weight 0, so nothing is padded or copied.
    """
    n_batch = betas.shape[0]
    n, k = z.shape[-2:]
    n_blocks = -(-n // max(1, _BLOCK_BYTES // (z.dtype.itemsize * k)))
    rows = -(-n // n_blocks)  # balanced blocks: the last one overlaps by < n_blocks rows
    z_b, zy_b, wn_b = batched

    zero = jnp.zeros((), jnp.int32)

    def take(x, is_batched, b, start):
        size = (rows, *x.shape[2 if is_batched else 1 :])
        if is_batched:
            starts = (b, start) + (zero,) * (x.ndim - 2)
            return jax.lax.dynamic_slice(x, starts, (1, *size))[0]
        return jax.lax.dynamic_slice(x, (start,) + (zero,) * (x.ndim - 1), size)

    def block(idx):
        b, i = idx // n_blocks, idx % n_blocks
        start = jnp.minimum(i * rows, n - rows)
        fresh = start + jnp.arange(rows, dtype=idx.dtype) >= i * rows
        w = jnp.where(fresh, take(wn, wn_b, b, start), 0)
        return _block_terms(betas[b], take(z, z_b, b, start), take(zy, zy_b, b, start), w)

    terms = jax.lax.map(block, jnp.arange(n_batch * n_blocks, dtype=jnp.int32))
    return jnp.sum(terms.reshape(n_batch, n_blocks, 3), axis=1)


@jax.custom_batching.custom_vmap
def _nll_derivatives(beta, z, zy, wn):
    """Mean NLL f(beta) of softmax(beta z), f'(beta) and f''(beta), in one pass over z.

    With zc = z - max_k z_k per row: f = sum_i w_i (logsumexp(beta zc_i) - beta zc_iy),
    f' = sum_i w_i (E_i[zc] - zc_iy), f'' = sum_i w_i Var_i[zc] >= 0 (f is convex in
    beta). The class at 0 has probability >= 1/K, so Var = E[zc^2] - E[zc]^2 >=
    E[zc^2] / K: the one-pass variance loses at most log10(K) digits. ``zy`` holds the
    label's logit z_iy and ``wn`` the normalised weights.
    """
    out = _sweep(beta[None], z, zy, wn, (False, False, False))[0]
    return out[0], out[1], out[2]


@_nll_derivatives.def_vmap
def _nll_derivatives_batched(axis_size, in_batched, beta, z, zy, wn):
    """Under vmap the batch multiplies the number of blocks, not their size (cache)."""
    beta = beta if in_batched[0] else jnp.broadcast_to(beta, (axis_size,))
    out = _sweep(beta, z, zy, wn, tuple(in_batched[1:]))
    return (out[:, 0], out[:, 1], out[:, 2]), (True, True, True)


def _temperature_newton(z, labels, weights, bounds, max_iter, tol):
    """Safeguarded Newton on the inverse temperature beta = 1/T in [1/T_max, 1/T_min]."""
    dtype = z.dtype
    zy = jnp.take_along_axis(z, labels[:, None], axis=1)[:, 0]
    wn = _normalised_weights(weights, z.shape[0], dtype)  # rows are centred in the kernel
    lo = jnp.asarray(1 / bounds[1], dtype)
    hi = jnp.asarray(1 / bounds[0], dtype)
    xtol = jnp.asarray(np.finfo(dtype).eps ** (2 / 3) if tol is None else tol, dtype)

    def bracket(beta, g, a, b, a_known, b_known):
        """The minimiser lies in [a, b]: g < 0 at a (or a is the lower bound), g > 0 at b."""
        return (
            jnp.where(g < 0, beta, a),
            jnp.where(g > 0, beta, b),
            a_known | (g < 0),
            b_known | (g > 0),
        )

    def is_done(beta, g, h, a, b):
        """The next Newton step is below tol (beta is kept), or the bracket collapsed."""
        tiny_step = (h > 0) & (jnp.abs(g) <= xtol * beta * h)
        return tiny_step | (b - a <= xtol * beta) | (g == 0)

    beta0 = jnp.clip(jnp.asarray(1, dtype), lo, hi)
    f0, g0, h0 = _nll_derivatives(beta0, z, zy, wn)
    a0, b0, ak0, bk0 = bracket(beta0, g0, lo, hi, False, False)
    init = (
        beta0,
        f0,
        g0,
        h0,
        a0,
        b0,
        ak0,
        bk0,
        (hi - lo, hi - lo),  # the last two steps (for the slow-progress test)
        jnp.zeros((), jnp.int32),
        is_done(beta0, g0, h0, a0, b0),
    )

    def cond(state):
        return (state[-2] < max_iter) & ~state[-1]

    def body(state):
        beta, _, g, h, a, b, a_known, b_known, (last_step, older_step), k, _ = state
        curved = h > 0
        newton = beta - g / jnp.where(curved, h, 1)
        # Newton inside the bracket, and once both ends are known at least halving the
        # step before last (Numerical Recipes' rtsafe); an unevaluated bound is tried once
        # when Newton points beyond it; otherwise bisect the bracket in log(beta).
        fast = (jnp.abs(newton - beta) <= 0.5 * jnp.abs(older_step)) | ~(a_known & b_known)
        inside = curved & (newton > a) & (newton < b) & fast
        to_b = curved & (newton >= b) & ~b_known
        to_a = curved & (newton <= a) & ~a_known
        cand = jnp.where(inside, newton, jnp.where(to_b, b, jnp.where(to_a, a, jnp.sqrt(a * b))))
        f, g, h = _nll_derivatives(cand, z, zy, wn)
        a, b, a_known, b_known = bracket(cand, g, a, b, a_known, b_known)
        steps = (cand - beta, last_step)
        return (cand, f, g, h, a, b, a_known, b_known, steps, k + 1, is_done(cand, g, h, a, b))

    beta, f, g, _, _, _, _, _, _, k, done = jax.lax.while_loop(cond, body, init)
    info = FitInfo(f, jnp.abs(beta * g), k, done)
    return TemperatureParams(1 / beta, info)


def _temperature_optax(z, labels, weights, bounds, optimizer, max_iter, tol):
    """log T minimised with an optax optimiser, T clipped to ``bounds`` at the end."""
    dtype = z.dtype
    zc, zy = _center(z, labels)
    wn = _normalised_weights(weights, z.shape[0], dtype)

    def loss(log_t):
        beta = jnp.exp(-log_t)
        return jnp.sum(wn * (jax.nn.logsumexp(beta * zc, axis=1) - beta * zy))

    log_t, info = minimize(
        loss,
        jnp.zeros((), dtype),
        optimizer=optimizer,
        max_iter=max_iter,
        tol=tol,
    )
    t = jnp.clip(jnp.exp(log_t), bounds[0], bounds[1]).astype(dtype)
    return TemperatureParams(t, info)


def temperature_scaling(
    *,
    inputs: str = "logits",
    bounds: tuple[float, float] = (1e-4, 1e4),
    optimizer: optax.GradientTransformation | None = None,
    max_iter: int = 100,
    tol: float | None = None,
) -> Calibrator:
    """Temperature scaling (Guo et al. 2017): ``softmax(z / T)`` with T minimising the NLL.

    One scalar T > 0 is fitted by minimising the (weighted) mean negative log-likelihood
    f = mean_i [logsumexp(z_i / T) - z_iy / T]. T > 1 softens over-confident predictions;
    the argmax is unchanged. ``z`` are the logits (``inputs="logits"``), or the
    log-probabilities (``"log_probs"``, or ``"probs"`` which are logged first; a zero
    probability becomes ``log(finfo.tiny)``), which give the same softmax.

    Default solver (``optimizer=None``): f is convex in beta = 1/T (its second derivative
    is the mean variance of the logits under the model), so beta is found by Newton's
    method from beta = 1 (the identity), safeguarded by a bracket: steps that leave the
    bracket or fail to halve the previous step bisect it in log(beta) (Numerical Recipes'
    ``rtsafe``). T stays in ``bounds``; an optimum beyond a bound returns the bound with
    ``info.converged`` true (the NLL of separable data decreases forever as T -> 0).
    Each iteration is one pass over the logits, in cache-sized blocks of rows (also under
    ``vmap``, through a custom batching rule); 3-7 iterations are typical. It stops
    when the next Newton step would move beta by at most ``tol`` relative (default
    eps^(2/3): 2.4e-5 in float32, 3.7e-11 in float64), keeping the last evaluated beta,
    whose loss and gradient ``info`` reports; its NLL is within about
    ``f''(beta) (tol beta)^2 / 2`` of the minimum.
    With an optax ``optimizer`` log T is minimised by :func:`minimize` instead (``tol``
    then a gradient tolerance, default 1e-6 in float32 and 1e-10 in float64) and T is
    clipped to ``bounds``.

    Degenerate data: zero total weight gives T = 1 (the identity); one-class labels
    have an interior optimum unless the class is always ranked first (then T_min).

    Args:
      inputs: ``"logits"``, ``"log_probs"`` or ``"probs"`` (never guessed from values).
      bounds: ``(T_min, T_max)``.
      optimizer: None (safeguarded Newton) or an optax optimiser on log T.
      max_iter: iteration limit.
      tol: stopping tolerance (see above).

    Returns:
      ``Calibrator``: ``fit(logits (N, K), labels (N,), *, weights=None) ->
      TemperatureParams``; ``apply(params, logits (N, K)) -> probs (N, K)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import temperature_scaling
      >>> z = jnp.array([[3.0, 0.0], [0.0, 3.0], [3.0, 0.0], [3.0, 0.0]])
      >>> cal = temperature_scaling()
      >>> params = cal.fit(z, jnp.array([0, 1, 1, 0]))  # 3 of 4 right: T > 1
      >>> round(float(params.temperature), 3), bool(params.info.converged)
      (2.731, True)
      >>> cal.apply(params, z)[0].round(2).tolist()
      [0.75, 0.25]

    References:
      Guo, Pleiss, Sun & Weinberger (2017), "On Calibration of Modern Neural Networks";
      Press et al., "Numerical Recipes" (3rd ed., 2007), sec. 9.4 (``rtsafe``).
    """
    check_option("inputs", inputs, MULTICLASS_INPUTS)
    bounds = _check_bounds(bounds)
    max_iter = check_solver_options(optimizer, max_iter, tol)

    def features(x):
        return x.astype(compute_dtype(x.dtype)) if inputs == "logits" else log_probs_of(x, inputs)

    @jax.jit
    def _fit(x, labels, weights):
        z = features(x)
        if optimizer is None:
            return _temperature_newton(z, labels, weights, bounds, max_iter, tol)
        return _temperature_optax(z, labels, weights, bounds, optimizer, max_iter, tol)

    @jax.jit
    def _apply(params, x):
        z = features(x)
        return jax.nn.softmax(z / params.temperature.astype(z.dtype), axis=1)

    def fit(logits: Any, labels: Any, *, weights: Any = None) -> TemperatureParams:
        return _fit(*check_fit_args(logits, labels, weights, inputs, binary=False))

    def apply(params: TemperatureParams, logits: Any) -> jax.Array:
        return _apply(params, check_multiclass_inputs(logits, inputs))

    return mark_inputs(Calibrator(fit, apply), inputs)


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

    @jax.jit
    def _fit(x, labels, weights):
        z = features(x)
        k = z.shape[1]
        dtype = z.dtype
        onehot = labels[:, None] == jnp.arange(k, dtype=jnp.int32)[None, :]

        # Optimise W' = c W on features z / c, c their largest magnitude: the same map,
        # conditioned as if the features were O(1) (logits of 1e4 would stall L-BFGS).
        absz = jnp.abs(z) if weights is None else jnp.where((weights > 0)[:, None], jnp.abs(z), 0)
        scale = jnp.maximum(jnp.max(absz), 1)
        zs = z / scale

        def loss(scaled):
            params = (scaled[0] / scale, scaled[1])
            logp = jax.nn.log_softmax(outputs(scaled, zs), axis=1)
            nll = -jnp.sum(jnp.where(onehot, logp, 0), axis=1)
            return weighted_mean(nll, weights) + penalty(params)

        w0 = jnp.ones((k,), dtype) if kind == "vector" else jnp.eye(k, dtype=dtype)
        init = (w0 * scale, jnp.zeros((k,), dtype))
        (w, b), info = minimize(loss, init, optimizer=optimizer, max_iter=max_iter, tol=tol)
        return AffineParams(w / scale, b, info)

    @jax.jit
    def _apply(params, x):
        z = features(x)
        p = (params.weight.astype(z.dtype), params.bias.astype(z.dtype))
        return jax.nn.softmax(outputs(p, z), axis=1)

    def fit(logits: Any, labels: Any, *, weights: Any = None) -> AffineParams:
        return _fit(*check_fit_args(logits, labels, weights, inputs, binary=False))

    def apply(params: AffineParams, logits: Any) -> jax.Array:
        return _apply(params, check_multiclass_inputs(logits, inputs))

    return mark_inputs(Calibrator(fit, apply), inputs)


def vector_scaling(
    *,
    inputs: str = "logits",
    optimizer: optax.GradientTransformation | None = None,
    max_iter: int = 500,
    tol: float | None = None,
) -> Calibrator:
    """Vector scaling (Guo et al. 2017): ``softmax(a * z + b)`` with ``a, b`` in R^K.

    Minimises the (weighted) mean NLL with :func:`minimize` from the identity (a = 1,
    b = 0). Unregularised. ``z`` are the logits (``inputs="logits"``) or the
    log-probabilities (``"log_probs"``, or ``"probs"`` logged with ``log(max(p, tiny))``).

    Args:
      inputs: ``"logits"``, ``"log_probs"`` or ``"probs"``.
      optimizer: an optax optimiser, or None for ``optax.lbfgs()``.
      max_iter: iteration limit.
      tol: gradient tolerance (None: 1e-6 in float32, 1e-10 in float64).

    Returns:
      ``Calibrator`` whose ``fit`` returns :class:`AffineParams` with ``weight`` (K,).

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

    Minimises the (weighted) mean NLL plus the penalty from the identity (W = I, b = 0).
    The penalties are Kull et al.'s (2019): ``l2 * (sum W_ij^2 + sum b_j^2)`` (the plain
    L2 penalty, towards 0) and, with ``odir=(lam, mu)`` (or one number for both),
    ``lam / (K (K - 1)) * sum_{i != j} W_ij^2 + mu / K * sum_j b_j^2`` (off-diagonal and
    intercept regularisation). Without a penalty the optimum is not unique (the softmax
    ignores a common shift), but its probabilities are. ``z`` as in :func:`vector_scaling`.

    Args:
      l2: L2 penalty weight (>= 0).
      odir: None, or the ODIR weights ``(lam, mu)`` (a number sets both).
      inputs: ``"logits"``, ``"log_probs"`` or ``"probs"``.
      optimizer: an optax optimiser, or None for ``optax.lbfgs()``.
      max_iter: iteration limit.
      tol: gradient tolerance (None: 1e-6 in float32, 1e-10 in float64).

    Returns:
      ``Calibrator`` whose ``fit`` returns :class:`AffineParams` with ``weight`` (K, K).

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


def dirichlet(
    *,
    l2: float = 0.0,
    odir: float | tuple[float, float] | None = None,
    inputs: str = "logits",
    optimizer: optax.GradientTransformation | None = None,
    max_iter: int = 500,
    tol: float | None = None,
) -> Calibrator:
    """Dirichlet calibration (Kull et al. 2019): ``softmax(W log p + b)`` on log-probabilities.

    The same map and penalties as :func:`matrix_scaling`, applied to the log-probabilities
    ``log p`` of the input: ``log_softmax(z)`` of logits (``inputs="logits"``), the
    ``"log_probs"`` themselves, or ``log(max(p, tiny))`` of ``"probs"``. It differs from
    matrix scaling on logits unless the rows of W sum to a constant. Fitted from the
    identity (W = I, b = 0) by :func:`minimize`.

    Args:
      l2: L2 penalty weight: ``l2 * (sum W_ij^2 + sum b_j^2)`` (Dir-L2).
      odir: ``(lam, mu)`` or one number: ``lam / (K (K - 1)) sum_{i != j} W_ij^2 +
        mu / K sum_j b_j^2`` (Dir-ODIR).
      inputs: ``"logits"``, ``"log_probs"`` or ``"probs"``.
      optimizer: an optax optimiser, or None for ``optax.lbfgs()``.
      max_iter: iteration limit.
      tol: gradient tolerance (None: 1e-6 in float32, 1e-10 in float64).

    Returns:
      ``Calibrator`` whose ``fit`` returns :class:`AffineParams` with ``weight`` (K, K).

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
