"""Temperature scaling: one T > 0 fitted by a safeguarded Newton iteration on 1/T.

How the default solver is built, and what to keep when changing it:

* **Newton on beta = 1/T.** The weighted mean NLL
  f(beta) = sum_i w_i [logsumexp(beta z_i) - beta z_iy] is convex in beta (a log-partition
  function plus a linear term; f'' is the mean variance of the logits under the model),
  and the pass over the logits that gives f gives f' and f'' too (three row sums of
  exp(beta zc) instead of one). So each Newton step costs one pass and converges
  quadratically, 3-7 passes in all, where L-BFGS on log T spends several passes per
  iteration in its line search (2.2x slower in the README's benchmark). Newton alone is
  not safe: f'' vanishes for separable data as T -> 0, the optimum may lie beyond
  ``bounds``, and a step from far away overshoots. Convexity makes the sign of f' a
  bracket ([a, b] with f' < 0 at a, f' > 0 at b); a step that leaves it, or that fails to
  halve the step before last, is replaced by bisection in log beta (Numerical Recipes'
  ``rtsafe``). The worst case is the bisection's: about 20 passes for the default bounds
  in float32.
* **Cache-sized row blocks** (``_sweep()``). A pass is memory-bound: over all of (N, K)
  at once, XLA:CPU writes exp(beta zc) to memory and reads it back for each row sum.
  ``lax.map`` over blocks of ``_BLOCK_BYTES`` = 256 KiB of logits keeps a block and its
  exponentials in cache while they are reduced. Commit 870d4eb measured passes 3-8x
  faster; re-measured on one core of XLA:CPU (CPU time, N = 1e5, K = 100), one pass takes
  14 ms in blocks against 65 ms in one piece. The last block is shifted back to end at
  row N (its rows already counted get weight 0), so nothing is padded or copied.
* **custom_vmap** (``_nll_derivatives()``). ``jax.vmap`` of a ``lax.map`` batches its
  body: each block would hold the rows of all B problems at once (B x 256 KiB, 256 MiB
  for 1000 bootstrap fits), and the memory traffic the blocks avoid comes back. The
  batching rule instead runs one ``lax.map`` over the B x n_blocks blocks, each of the
  unbatched size, reading a problem's rows in place with ``dynamic_slice`` (shared
  inputs such as the logits of a bootstrap are not broadcast). Measured the same way at
  N = 1e4, K = 10 with B bootstrap weight vectors, a pass takes 49 against 77 ms at
  B = 100 and 0.44 against 0.83 s at B = 1000 (1.6x and 1.9x).

Before changing any of this, run ``tests/calibrators/test_scaling.py`` (against SciPy's
bounded Brent; vmapped fits equal separate ones) and time both cases of
``benchmarks/bench_calibrators.py`` (one fit at N = 1e5, K = 100; 1000 fits at N = 1e4,
K = 10 in one ``jax.jit(jax.vmap(cal.fit))`` call) before and after.
``_BLOCK_BYTES`` was tuned on CPU caches only.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxcal._core.cache import cached_factory
from jaxcal._core.checks import check_option
from jaxcal._core.numerics import compute_dtype, safe_divide, scale_free, vary_like
from jaxcal.calibrators._base import (
    Calibrator,
    FitInfo,
    check_solver_options,
    from_kernels,
    minimize,
)
from jaxcal.calibrators._implicit import implicit_argmin
from jaxcal.calibrators._inputs import MULTICLASS_INPUTS, log_probs_of
from jaxcal.calibrators._params import ParamsSpec


class TemperatureParams(NamedTuple):
    """Parameters of temperature scaling.

    Attributes:
      temperature: 0-d T > 0; the calibrated probabilities are ``softmax(z / T)``.
      info: :class:`~jaxcal.calibrators.FitInfo` of the fit.
    """

    temperature: jax.Array
    info: FitInfo


def _check_bounds(bounds: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError) as err:
        raise ValueError(f"`bounds` must be a pair (T_min, T_max); got {bounds!r}.") from err
    if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi):
        raise ValueError(f"`bounds` must satisfy 0 < T_min < T_max < inf; got {bounds!r}.")
    return lo, hi


def _center(z: jax.Array, labels: jax.Array | None) -> tuple[jax.Array, jax.Array | None]:
    """Rows shifted so their max is 0, and the shifted logit of the label (None without)."""
    zc = z - jnp.max(z, axis=1, keepdims=True)
    if labels is None:
        return zc, None
    zy = jnp.take_along_axis(zc, labels[:, None], axis=1)[:, 0]
    return zc, zy


def _normalised_weights(weights: jax.Array | None, n: int, dtype: Any) -> jax.Array:
    if weights is None:
        return jnp.full((n,), 1 / n, dtype)
    w = scale_free(weights.astype(dtype))  # sum w overflows for weights of 1e37
    return safe_divide(w, jnp.sum(w))


# Bytes of logits per block of rows in the temperature kernel: a block and its
# exponentials (256 KiB in float32) stay in cache while the row maximum, the three row
# sums and their weighted totals are taken. One pass over all of (N, K) at once writes
# exp(beta z) to memory and reads it back three times: 3-8x slower on CPU (module
# docstring).
_BLOCK_BYTES = 1 << 18


def _block_terms(beta, z, zy, wn):
    """Weighted sums (f, f', f'') over a block of rows (see ``_nll_derivatives()``)."""
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
    """Under vmap the batch multiplies the number of blocks, not their size (cache).

    Without this rule ``vmap`` would batch the body of ``_sweep()``'s ``lax.map``, so
    every block would hold the rows of all B problems (see the module docstring).
    """
    beta = beta if in_batched[0] else jnp.broadcast_to(beta, (axis_size,))
    out = _sweep(beta, z, zy, wn, tuple(in_batched[1:]))
    return (out[:, 0], out[:, 1], out[:, 2]), (True, True, True)


def temperature_newton(z, labels, weights, bounds, max_iter, tol):
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
    init = vary_like(init, f0)  # f0 reads all the data: the carry varies as the body's

    def cond(state):
        return (state[-2] < max_iter) & ~state[-1]

    def body(state):
        beta, _, g, h, a, b, a_known, b_known, (last_step, older_step), k, _ = state
        curved = h > 0
        newton = beta - safe_divide(g, h)  # h >= 0; beta itself where f is flat
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
    # Converged only with a finite loss and gradient: logits near float32's range
    # overflow them, and the bracket then collapses on a meaningless beta.
    return beta, FitInfo(f, jnp.abs(beta * g), k, done & jnp.isfinite(f) & jnp.isfinite(g))


def _nll(beta, z, labels, weights):
    """The weighted mean NLL of ``softmax(beta z)``: the objective both solvers minimise."""
    zc, zy = _center(z, labels)
    wn = _normalised_weights(weights, z.shape[0], z.dtype)
    return jnp.sum(wn * (jax.nn.logsumexp(beta * zc, axis=1) - beta * zy))


def _temperature_optax(z, labels, weights, optimizer, max_iter, tol):
    """log T minimised with an optax optimiser (the caller clips T to ``bounds``)."""
    init = jnp.zeros((), z.dtype)
    loss = lambda log_t: _nll(jnp.exp(-log_t), z, labels, weights)  # noqa: E731
    return minimize(loss, init, optimizer=optimizer, max_iter=max_iter, tol=tol)


@cached_factory
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
    With an optax ``optimizer`` log T is minimised by :func:`~jaxcal.calibrators.minimize` instead (``tol``
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

    # The fit solves for beta = 1 / T (Newton) or log T (optax); derivatives of the fit
    # come from its optimality condition (jaxcal.calibrators._implicit).
    def solve(data):
        z, labels, weights = features(data[0]), data[1], data[2]
        if optimizer is None:
            return temperature_newton(z, labels, weights, bounds, max_iter, tol)
        return _temperature_optax(z, labels, weights, optimizer, max_iter, tol)

    def objective(theta, info, data):
        beta = theta if optimizer is None else jnp.exp(-theta)
        return _nll(beta, features(data[0]), data[1], data[2])

    def interior(beta, info):  # an optimum at a bound of T does not move with the data
        return (beta > 1 / bounds[1]) & (beta < 1 / bounds[0])

    @jax.jit
    def _fit(x, labels, weights):
        newton = optimizer is None
        theta, info = implicit_argmin(
            solve, objective, interior if newton else None, (x, labels, weights)
        )
        t = 1 / theta if newton else jnp.clip(jnp.exp(theta), bounds[0], bounds[1])
        return TemperatureParams(t.astype(theta.dtype), info)

    @jax.jit
    def _apply(params, x):
        # Centre the rows before dividing by T: every z - max <= 0 and the row maximum is
        # exactly 0 however XLA computes (z - max) / T. softmax(z / T) fused recomputes
        # z / T differently for its max and its exponent, and logits of 1e10 gave
        # exp(> 0) = inf, NaN rows (D11).
        # The max is already 0: exp and normalise (one row maximum, as softmax takes).
        z, _ = _center(features(x), None)
        e = jnp.exp(z / params.temperature.astype(z.dtype))
        return e / jnp.sum(e, axis=1, keepdims=True)

    spec = ParamsSpec(TemperatureParams, lambda shape: {"temperature": ()}, "temperature_scaling()")
    return from_kernels(_fit, _apply, inputs, binary=False, params=spec)
