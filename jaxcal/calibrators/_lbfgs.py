"""L-BFGS with a Wolfe line search that reads derivatives, written as two ``lax`` loops.

The default solver of :func:`jaxcal.calibrators.minimize` (the Platt, beta, vector, matrix
and Dirichlet fits). It replaces ``optax.lbfgs()`` for two measured reasons:

* **Round-off.** A line search that accepts a step by comparing loss values (Armijo's
  sufficient decrease) stops resolving decreases once they fall under the loss's rounding
  error, ``eps |f|``, which in float32 happens long before the gradient vanishes: the
  registry's 24-row Dirichlet fit stalled at ``max |grad| = 3.6e-5`` with probabilities
  3e-4 from the float64 optimum, and a jitted closure of the same fit, rounded
  differently by XLA, stalled elsewhere. Here a step is also accepted by Hager & Zhang's
  (2005) *approximate Wolfe* conditions, which judge it by the directional derivative
  where the loss values are within round-off of each other (for a quadratic they are
  Armijo's test without the cancellation), so the fit goes on until the gradient meets
  the tolerance or no step decreases the loss by either test.
* **shard_map.** optax's zoom line search starts its inner loops from device-invariant
  constants, which ``jax.shard_map`` with ``check_vma=True`` refuses; every carry here is
  typed from the data (``vary_like()``).

The direction is the two-loop recursion of Nocedal & Wright (2006), Alg. 7.4, with the
ten most recent pairs and the initial scaling ``s.y / y.y`` (Eq. 7.20); without pairs
(the first step, after a failed search) the step is steepest descent of length
``min(|g|, 1)``. A pair is kept only when ``s.y > eps |s| |y|`` (the curvature condition
at working precision). The line search brackets a step satisfying the strong Wolfe
conditions (c1 = 1e-4, c2 = 0.9) or the approximate ones, as in N&W Alg. 3.5-3.6, with
secant steps on the directional derivative (quadratic steps on the loss where the upper
end's slope is still negative) kept inside the middle 80 % of the bracket, and
extrapolation by 2-10x while unbracketed. A trial that is not finite counts as too long.

References:
  Nocedal & Wright (2006), "Numerical Optimization", 2nd ed., Alg. 3.5, 3.6 and 7.4.
  Hager & Zhang (2005), "A new conjugate gradient method with guaranteed descent and an
  efficient line search", SIAM J. Optim. 16(1), Sec. 4 (approximate Wolfe conditions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxcal._core.numerics import vary_like

#: Curvature pairs kept (optax's and scipy's default).
MEMORY = 10
#: Strong Wolfe constants: sufficient decrease and curvature.
C1, C2 = 1e-4, 0.9
#: Loss evaluations per line search at most.
MAX_TRIALS = 30
#: Loss values within NOISE * eps * |f| of each other count as equal (round-off).
NOISE = 4.0
#: Iterations in a row without an acceptable step before ``lbfgs()`` stops: one with
#: the stored pairs, one of steepest descent after forgetting them.
MAX_FAILURES = 2
#: Iterations in a row that reach neither a new smallest loss nor a new smallest gradient
#: before ``lbfgs()`` stops (at the gradient's round-off floor the approximate Wolfe
#: test keeps accepting steps that change nothing). L-BFGS's gradient is not monotone:
#: 10 stopped the digits vector-scaling fit at max|grad| 6e-6, on its way to 8e-7.
STALL_PATIENCE = 30


class LbfgsResult(NamedTuple):
    """What ``lbfgs()`` returns.

    Attributes:
      params: the last iterate (a pytree like ``init``).
      value: the loss there (scalar).
      grad_norm: ``max |grad|`` there (scalar).
      n_iter: iterations run (int32 scalar).
      converged: the gradient met ``tol``, or the loss is minimal at working precision
        (no acceptable step, or no progress for ``STALL_PATIENCE`` iterations); False for
        a non-finite start or after ``max_iter`` iterations.
    """

    params: Any
    value: jax.Array
    grad_norm: jax.Array
    n_iter: jax.Array
    converged: jax.Array


class _State(NamedTuple):
    """The outer loop's carry: iterate, loss, gradient, curvature pairs, counters."""

    x: jax.Array
    f: jax.Array
    grad: jax.Array
    s_mem: jax.Array  # (MEMORY, P) steps, oldest first; rows with rho = 0 are empty
    y_mem: jax.Array  # (MEMORY, P) gradient changes
    rho: jax.Array  # (MEMORY,) 1 / (s . y)
    k: jax.Array
    failures: jax.Array
    best_f: jax.Array
    best_grad: jax.Array
    stalls: jax.Array


def _max_abs(v: jax.Array) -> jax.Array:
    # NaN read as +inf: a max over 4096 or more float32 values may drop a NaN on XLA:CPU
    # (jax 0.10.2), and a NaN gradient must fail the convergence test, not pass it.
    a = jnp.abs(v)
    return jnp.max(jnp.where(jnp.isnan(a), jnp.inf, a), initial=0)


def _noise(f: jax.Array) -> jax.Array:
    """Loss values this close count as equal: NOISE ulps of max(|f|, 1).

    Relative to at least 1 because a loss near 0 is often a cancellation of O(1) terms
    (a penalised or centred objective), whose round-off is that of the terms.
    """
    return NOISE * jnp.finfo(f.dtype).eps * jnp.maximum(jnp.abs(f), 1)


class _Search(NamedTuple):
    """The line search's bracket: lo is the longest acceptable step so far, hi too long."""

    trial: jax.Array
    lo: jax.Array
    f_lo: jax.Array
    slope_lo: jax.Array
    grad_lo: jax.Array
    hi: jax.Array
    f_hi: jax.Array
    slope_hi: jax.Array
    found: jax.Array
    n: jax.Array


def _first_step(grad):
    """The scale of a steepest-descent step without curvature pairs: length min(|g|, 1)."""
    return jnp.minimum(1, 1 / jnp.maximum(jnp.linalg.norm(grad), jnp.finfo(grad.dtype).tiny))


def _direction(grad, s_mem, y_mem, rho):
    """-H grad by the two-loop recursion; rows with rho = 0 are empty and drop out."""
    q, alphas = grad, []
    for i in reversed(range(MEMORY)):
        a = rho[i] * jnp.dot(s_mem[i], q)
        q = q - a * y_mem[i]
        alphas.append(a)
    sy, yy = jnp.dot(s_mem[-1], y_mem[-1]), jnp.dot(y_mem[-1], y_mem[-1])
    gamma = jnp.where(rho[-1] > 0, sy / jnp.where(rho[-1] > 0, yy, 1), _first_step(grad))
    r = gamma * q
    for i, a in zip(range(MEMORY), reversed(alphas), strict=True):
        b = rho[i] * jnp.dot(y_mem[i], r)
        r = r + (a - b) * s_mem[i]
    return -r


def _line_search(value_and_grad, x, f0, g0, d):
    """A step along ``d`` meeting the (approximate) strong Wolfe conditions.

    Returns ``(found, step, f, grad)``; ``found`` is False when no trial decreased the
    loss (then step is 0 and f, grad are the start's).
    """
    slope0 = jnp.dot(g0, d)
    noise = _noise(f0)

    def evaluate(step):
        f, g = value_and_grad(x + step * d)
        slope = jnp.dot(g, d)
        finite = jnp.isfinite(f) & jnp.isfinite(slope)
        return jnp.where(finite, f, jnp.inf), g, jnp.where(finite, slope, jnp.inf)

    def next_trial(lo, f_lo, slope_lo, hi, f_hi, slope_hi, old_lo, old_slope):
        # Unbracketed: the secant of the slope between the last two acceptable steps,
        # 2-10x the current one.
        rising = slope_lo > old_slope
        secant = lo - slope_lo * (lo - old_lo) / jnp.where(rising, slope_lo - old_slope, 1)
        grow = jnp.where(rising, jnp.clip(secant, 2 * lo, 10 * lo), 4 * lo)
        # Bracketed: secant of the slope where it changes sign, else the quadratic through
        # (lo, f_lo, slope_lo) and (hi, f_hi); inside the middle 80 % of the bracket.
        width = hi - lo
        sign_change = (slope_hi >= 0) & (slope_hi > slope_lo)
        root = lo - slope_lo * width / jnp.where(sign_change, slope_hi - slope_lo, 1)
        curve = 2 * (f_hi - f_lo - slope_lo * width)
        quad_ok = jnp.isfinite(curve) & (curve > 0)
        quad = lo - slope_lo * width * width / jnp.where(quad_ok, curve, 1)
        inner = jnp.where(sign_change, root, jnp.where(quad_ok, quad, lo + width / 2))
        inner = jnp.clip(inner, lo + 0.1 * width, hi - 0.1 * width)
        return jnp.where(jnp.isfinite(hi), inner, grow)

    def body(c):
        f, g, slope = evaluate(c.trial)
        armijo = f <= f0 + C1 * c.trial * slope0
        approximate = (f <= f0 + noise) & (slope <= (2 * C1 - 1) * slope0)
        sufficient = armijo | approximate
        accept = sufficient & (jnp.abs(slope) <= -C2 * slope0)
        to_lo = accept | (sufficient & (slope < 0))
        lo = jnp.where(to_lo, c.trial, c.lo)
        f_lo = jnp.where(to_lo, f, c.f_lo)
        slope_lo = jnp.where(to_lo, slope, c.slope_lo)
        grad_lo = jnp.where(to_lo, g, c.grad_lo)
        to_hi = ~to_lo
        hi = jnp.where(to_hi, c.trial, c.hi)
        f_hi = jnp.where(to_hi, f, c.f_hi)
        slope_hi = jnp.where(to_hi, slope, c.slope_hi)
        trial = next_trial(lo, f_lo, slope_lo, hi, f_hi, slope_hi, c.lo, c.slope_lo)
        return _Search(trial, lo, f_lo, slope_lo, grad_lo, hi, f_hi, slope_hi, accept, c.n + 1)

    def cond(c):
        collapsed = jnp.isfinite(c.hi) & (c.hi - c.lo <= jnp.finfo(f0.dtype).eps * c.hi)
        return ~c.found & (c.n < MAX_TRIALS) & ~collapsed

    zero, inf = jnp.zeros((), f0.dtype), jnp.full((), jnp.inf, f0.dtype)
    start = _Search(
        jnp.ones((), f0.dtype), zero, f0, slope0, g0, inf, inf, inf,
        jnp.zeros((), bool), jnp.zeros((), jnp.int32),
    )  # fmt: skip
    end = jax.lax.while_loop(cond, body, vary_like(start, f0))
    return end.lo > 0, end.lo, end.f_lo, end.grad_lo


def lbfgs(
    fun: Callable[[Any], jax.Array],
    init: Any,
    *,
    max_iter: int,
    tol: float,
) -> LbfgsResult:
    """Minimise a smooth scalar ``fun(params)`` by L-BFGS inside one ``lax.while_loop``.

    Stops when ``max |grad| <= tol``; converged at working precision after
    ``MAX_FAILURES`` iterations in a row without an acceptable step (with the stored pairs,
    then by steepest descent) or ``STALL_PATIENCE`` in a row that reached neither a new
    smallest loss nor a new smallest gradient; not converged at a non-finite start or after ``max_iter`` iterations. The method is the module's
    docstring's.

    Args:
      fun: scalar objective of a pytree of float parameters.
      init: the starting point.
      max_iter: iterations at most (each one line search of 1 to ``MAX_TRIALS`` loss and
        gradient evaluations; usually 1).
      tol: gradient tolerance on ``max |grad|``.

    Returns:
      ``LbfgsResult``.

    Example:
      >>> import jax.numpy as jnp
      >>> def rosenbrock(t):
      ...     return (1 - t[0]) ** 2 + 100 * (t[1] - t[0] ** 2) ** 2
      >>> res = lbfgs(rosenbrock, jnp.zeros(2), max_iter=200, tol=1e-6)
      >>> [round(float(v), 4) for v in res.params], bool(res.converged)
      ([1.0, 1.0], True)
    """
    x0, unravel = ravel_pytree(init)
    value_and_grad = jax.value_and_grad(lambda v: fun(unravel(v)))
    f0, g0 = value_and_grad(x0)
    dtype = f0.dtype
    x0, g0 = x0.astype(dtype), g0.astype(dtype)

    def cond(c):
        small = _max_abs(c.grad) <= tol
        stopped = (c.failures >= MAX_FAILURES) | (c.stalls >= STALL_PATIENCE)
        return (c.k < max_iter) & ~small & ~stopped & jnp.isfinite(c.f)

    def body(c):
        d = _direction(c.grad, c.s_mem, c.y_mem, c.rho)
        descent = jnp.dot(c.grad, d) < 0  # round-off can break it: restart from steepest descent
        rho = jnp.where(descent, c.rho, 0)
        d = jnp.where(descent, d, -_first_step(c.grad) * c.grad)
        found, step, f_new, g_new = _line_search(value_and_grad, c.x, c.f, c.grad, d)
        s, y = step * d, g_new - c.grad
        sy = jnp.dot(s, y)
        keep = found & (sy > jnp.finfo(dtype).eps * jnp.linalg.norm(s) * jnp.linalg.norm(y))
        shift = lambda m, new: jnp.where(keep, jnp.concatenate([m[1:], new[None]]), m)  # noqa: E731
        f = jnp.where(found, f_new, c.f)
        grad = jnp.where(found, g_new, c.grad)
        progress = (f < c.best_f) | (_max_abs(grad) < c.best_grad)
        return _State(
            x=jnp.where(found, c.x + s, c.x),
            f=f,
            grad=grad,
            s_mem=shift(c.s_mem, s),
            y_mem=shift(c.y_mem, y),
            rho=jnp.where(found, shift(rho, 1 / jnp.where(keep, sy, 1)), 0),
            k=c.k + 1,
            failures=jnp.where(
                found, 0, c.failures + jnp.where(jnp.all(rho == 0), MAX_FAILURES, 1)
            ),
            best_f=jnp.minimum(c.best_f, f),
            best_grad=jnp.minimum(c.best_grad, _max_abs(grad)),
            stalls=jnp.where(progress, 0, c.stalls + 1),
        )

    memory = jnp.zeros((MEMORY, x0.shape[0]), dtype)
    zero = jnp.zeros((), jnp.int32)
    start = _State(x0, f0, g0, memory, memory, jnp.zeros((MEMORY,), dtype), zero, zero,
                   f0, _max_abs(g0), zero)  # fmt: skip
    # The loss at the start reads all the data `fun` closes over: inside shard_map the
    # carry then varies across devices as the body's outputs do.
    end = jax.lax.while_loop(cond, body, vary_like(start, f0))
    grad_norm = _max_abs(end.grad)
    at_precision = (end.failures >= MAX_FAILURES) | (end.stalls >= STALL_PATIENCE)
    converged = jnp.isfinite(end.f) & jnp.isfinite(grad_norm) & ((grad_norm <= tol) | at_precision)
    params = jax.tree.map(lambda new, old: new.astype(old.dtype), unravel(end.x), init)
    return LbfgsResult(params, end.f, grad_norm, end.k, converged)
