"""Derivatives of fitted parameters: implicit differentiation of an optimum, or a clear no.

A fit is an optimiser loop (``lax.while_loop``), which reverse-mode autodiff cannot go
through, and forward-mode would differentiate the iterations rather than the answer. For
the smooth parametric calibrators the answer has a derivative of its own: at the optimum
``theta*(x)`` of a smooth objective ``L(theta, x)`` the gradient vanishes,
``grad_theta L(theta*(x), x) = 0``, so by the implicit function theorem

.. math::
   \\frac{d\\theta^*}{dx} = -H^{-1} \\, \\partial_x \\nabla_\\theta L, \\qquad
   H = \\nabla^2_\\theta L(\\theta^*, x).

``implicit_argmin()`` attaches that derivative to any solver with a ``custom_jvp``: the
tangent solves ``H v = -(d/dx grad_theta L) dx`` by conjugate gradients on
Hessian-vector products (``jax.lax.custom_linear_solve``, so reverse mode transposes the
solve instead of differentiating it). H is positive semi-definite at a minimum; where it
is singular (matrix scaling without a penalty: the softmax ignores a common shift of the
logits; a coordinate a fit holds at 0) conjugate gradients stay in its range, which gives
the minimum-norm derivative, and the calibrated probabilities' derivative is exact. The
derivative is that of the exact optimum: a fit stopped at its tolerance is off by about
that tolerance.

The non-parametric fits (histogram binning, isotonic regression, scaling-binning) are
piecewise constant in the scores and sort them: ``not_differentiable()`` makes a
derivative through them raise a ValueError that says so, instead of JAX's internal errors.

References:
  Krantz & Parks (2002), "The Implicit Function Theorem"; Blondel et al. (2022),
  "Efficient and Modular Implicit Differentiation", NeurIPS (jaxopt's formulation).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def _zero_tangent(x: jax.Array) -> Any:
    """A zero tangent for ``x``: float0 for integer and bool arrays."""
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.zeros_like(x)
    return np.zeros(np.shape(x), dtype=jax.dtypes.float0)


def _conjugate_gradients(matvec: Callable[[Any], Any], b: Any) -> Any:
    leaves = jax.tree.leaves(b)
    tol = 1e-10 if leaves and leaves[0].dtype == jnp.float64 else 1e-6
    return jax.scipy.sparse.linalg.cg(matvec, b, tol=tol)[0]


@partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def implicit_argmin(
    solve: Callable[[Any], tuple[Any, Any]],
    objective: Callable[[Any, Any, Any], jax.Array],
    interior: Callable[[Any, Any], Any] | None,
    data: Any,
) -> tuple[Any, Any]:
    """``solve(data) -> (theta, aux)``, differentiable in ``data`` through its optimum.

    Args:
      solve: the solver (not differentiated): the minimiser ``theta`` of
        ``objective(theta, aux, data)`` and ``aux`` (information such as a
        :class:`~jaxcal.calibrators.FitInfo`, or the choice among several fits), which gets a zero tangent.
      objective: the smooth objective, a scalar function of ``theta`` and ``data`` (and of
        ``aux``, held fixed).
      interior: None, or ``interior(theta, aux)``, a bool pytree of ``theta``'s shape that
        is false where the optimum sits at a bound (there the derivative is 0).
      data: a pytree of arrays (integer leaves, such as labels, have no derivative).

    Returns:
      ``(theta, aux)``.
    """
    return solve(data)


@implicit_argmin.defjvp
def _implicit_argmin_jvp(solve, objective, interior, primals, tangents):
    (data,), (ddata,) = primals, tangents
    theta, aux = solve(data)

    def grad_theta(t, d):
        return jax.grad(objective)(t, aux, d)

    _, mixed = jax.jvp(lambda d: grad_theta(theta, d), (data,), (ddata,))

    def hvp(v):
        return jax.jvp(lambda t: grad_theta(t, data), (theta,), (v,))[1]

    rhs = jax.tree.map(jnp.negative, mixed)
    dtheta = jax.lax.custom_linear_solve(hvp, rhs, _conjugate_gradients, symmetric=True)
    if interior is not None:
        free = interior(theta, aux)
        dtheta = jax.tree.map(lambda d, f: jnp.where(f, d, 0), dtheta, free)
    return (theta, aux), (dtheta, jax.tree.map(_zero_tangent, aux))


def not_differentiable(kernel: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``kernel(x, labels, weights)``, raising a ValueError when it is differentiated."""

    @jax.custom_jvp
    def fit(x, labels, weights):
        return kernel(x, labels, weights)

    @partial(fit.defjvp, symbolic_zeros=True)
    def _fit_jvp(primals, tangents):
        zero = jax.custom_derivatives.SymbolicZero
        leaves = jax.tree.leaves(tangents, is_leaf=lambda t: isinstance(t, zero))
        if any(not isinstance(t, zero) for t in leaves):
            raise ValueError(
                f"`{name}.fit` is not differentiable: the fitted map is piecewise constant "
                "in the scores and the fit sorts them. Differentiate `apply` with respect "
                "to its params instead, use a parametric calibrator (temperature_scaling, "
                "platt_scaling, beta_calibration, ...) whose fit differentiates implicitly, "
                "or stop the gradient of the fit's inputs (jax.lax.stop_gradient)."
            )
        out = fit(*primals)
        return out, jax.tree.map(_zero_tangent, out)

    return fit
