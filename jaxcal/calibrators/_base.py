"""The calibrator abstraction and the shared optax fitting loop.

``Calibrator(fit, apply)`` is a NamedTuple of two pure functions, like optax's
``GradientTransformation(init, update)``. Every factory writes two jitted kernels and
hands them to ``from_kernels()``, the one place where the public ``fit`` and ``apply``
validate their arguments. The parametric calibrators minimise a mean negative
log-likelihood with :func:`~jaxcal.calibrators.minimize`, which runs the whole optimiser loop inside
``jax.lax.while_loop`` so that ``fit`` can be jitted and vmapped.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxcal._core.cache import option_key
from jaxcal._core.checks import check_positive_int, is_tracing, values_checkable
from jaxcal._core.eager import (
    PAD_MAX_ROWS,
    apply_padded,
    call_padded,
    on_one_device,
    outputs_free_of_rows,
)
from jaxcal._core.numerics import safe_divide, scale_free, vary_like
from jaxcal.calibrators._inputs import (
    check_binary_inputs,
    check_fit_args,
    check_multiclass_inputs,
    mask_fit_padding,
)
from jaxcal.calibrators._lbfgs import lbfgs
from jaxcal.calibrators._params import ParamsSpec, check_params


class Calibrator(NamedTuple):
    """A post-hoc calibrator as two pure functions (optax style).

    Attributes:
      fit: ``fit(x, labels, *, weights=None) -> params``. ``x`` is ``(N, K)`` for the
        multiclass calibrators, ``(N,)`` (positive-class scores) for the binary ones, in
        the input space the calibrator was built for (its ``inputs=`` option). ``labels``
        are ``(N,)`` integers, ``weights`` optional ``(N,)`` non-negative sample weights
        (0 masks a sample out; bootstrap counts are weights). ``params`` is a pytree of
        arrays (a NamedTuple), so ``jax.vmap(fit)`` fits many calibrators in one call.
      apply: ``apply(params, x) -> probs``: ``(N, K)`` rows on the simplex, or ``(N,)``
        positive-class probabilities for the binary calibrators.

    Both validate concrete inputs eagerly (``ValueError`` naming the argument) and skip
    the value checks under ``jit``/``vmap`` tracing, where they trust their input. A
    factory called again with equal options returns the same ``Calibrator`` (its jitted
    kernels, and their compiled programs, are shared): ``isotonic().fit(...)`` inside a
    cross-validation loop compiles once per input shape. Options compare by value
    (numbers, strings, tuples), except objects without value equality (an optax
    optimizer, a calibrator built by hand), which compare by identity: build those once.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import temperature_scaling
      >>> cal = temperature_scaling()
      >>> logits = jnp.array([[4.0, 0.0], [0.0, 4.0], [4.0, 0.0], [0.0, 4.0]])
      >>> params = cal.fit(logits, jnp.array([0, 1, 1, 1]))
      >>> probs = cal.apply(params, logits)
      >>> probs.shape
      (4, 2)
    """

    fit: Callable[..., Any]
    apply: Callable[..., jax.Array]


class FitInfo(NamedTuple):
    """Convergence information of a fitted parametric calibrator (0-d arrays).

    Attributes:
      loss: the minimised objective at the returned parameters: the weighted mean negative
        log-likelihood, plus the penalty where the calibrator has one.
      grad_norm: the largest absolute gradient component at the returned parameters, with
        respect to the optimised variables: for temperature scaling d loss / d log T (at
        a bound of T this need not be 0); for the affine and logistic calibrators the
        coefficients of the features divided by their largest magnitude (so the figure
        does not scale with the logits).
      n_iter: int32 number of optimiser iterations.
      converged: bool, the stopping test held before ``max_iter`` (see :func:`~jaxcal.calibrators.minimize`
        and :func:`jaxcal.calibrators.temperature_scaling`).
    """

    loss: jax.Array
    grad_norm: jax.Array
    n_iter: jax.Array
    converged: jax.Array


@dataclasses.dataclass(frozen=True, eq=False)
class ValidatedFit:
    """The ``fit`` of a jaxcal calibrator: validate the arguments, then call the kernel.

    A frozen callable, not a closure: its input space is a field fixed when the calibrator
    is built, which the reductions read (``binary.fit.inputs``) to refuse a binary
    calibrator that does not take probabilities. Setting an attribute on the ``fit``
    closure after the fact would do the same by mutation. ``eq=False`` keeps a function's
    identity equality and hash, so a ``Calibrator`` stays a valid static argument of
    ``jax.jit``; ``jax.jit(cal.fit)`` and ``jax.vmap(cal.fit)`` work as on a function.

    Attributes:
      kernel: ``kernel(x, labels, weights) -> params``, the jitted fit.
      inputs: the input space of ``x`` (``"logits"``, ``"log_probs"``, ``"probs"``).
      binary: ``x`` is ``(N,)`` positive-class scores, else ``(N, K)``.
    """

    kernel: Callable[..., Any]
    inputs: str
    binary: bool

    def __call__(self, x: Any, labels: Any, *, weights: Any = None) -> Any:
        args = check_fit_args(x, labels, weights, self.inputs, binary=self.binary)
        if _pads(*args) and outputs_free_of_rows(_masked_fit, args, (self.kernel, self.inputs)):
            # eager: rows padded to a size class (jaxcal/_core/eager.py)
            return call_padded(_masked_fit, *args, (self.kernel, self.inputs))
        return self.kernel(*mask_fit_padding(*args, self.inputs))


@dataclasses.dataclass(frozen=True, eq=False)
class ValidatedApply:
    """The ``apply`` of a jaxcal calibrator: validate ``x`` and ``params``, call the kernel.

    A frozen callable like ``ValidatedFit``; the reductions read its ``params`` spec
    to check the stacked parameters of their binary calibrator.

    Attributes:
      kernel: ``kernel(params, x) -> probs``, the jitted apply.
      inputs: the input space of ``x``.
      binary: ``x`` is ``(N,)`` positive-class scores, else ``(N, K)``.
      params: the ``ParamsSpec`` of the parameters (None: unchecked).
    """

    kernel: Callable[..., jax.Array]
    inputs: str
    binary: bool
    params: ParamsSpec | None

    def __call__(self, params: Any, x: Any) -> jax.Array:
        if self.binary:
            x, name = check_binary_inputs(x, self.inputs), "scores"
        else:
            x, name = check_multiclass_inputs(x, self.inputs), "logits"
        check_params(params, self.params, x, name)
        if _pads(x, *jax.tree.leaves(params)):  # eager: rows padded to a size class
            return apply_padded(self.kernel, params, x)
        return self.kernel(params, x)


def _pads(*arrays: Any) -> bool:
    """An eager call (concrete arrays, no transformation) of a size worth padding."""
    arrays = [a for a in arrays if a is not None]
    small = arrays[0].shape[0] <= PAD_MAX_ROWS
    return small and values_checkable(*arrays) and on_one_device(*arrays)


def _masked_fit(x, labels, weights, kernel, inputs):
    """A fit kernel behind ``mask_fit_padding`` (one program for the padded eager call)."""
    return kernel(*mask_fit_padding(x, labels, weights, inputs))


def from_kernels(
    fit_kernel: Callable[..., Any],
    apply_kernel: Callable[..., jax.Array],
    inputs: str,
    *,
    binary: bool,
    params: ParamsSpec | None = None,
) -> Calibrator:
    """The public ``Calibrator`` around a factory's two jitted kernels.

    ``fit(x, labels, *, weights=None)`` and ``apply(params, x)`` validate their arguments
    for the input space ``inputs`` (value checks only on concrete arrays, so both trace;
    ``params`` against their ``ParamsSpec``, by type and shape), then call
    ``fit_kernel(x, labels, weights)`` or ``apply_kernel(params, x)``.
    """
    return Calibrator(
        ValidatedFit(fit_kernel, inputs, binary),
        ValidatedApply(apply_kernel, inputs, binary, params),
    )


def check_solver_options(optimizer: Any, max_iter: Any, tol: Any) -> int:
    """Static checks of ``optimizer``, ``max_iter``, ``tol``; returns ``max_iter``."""
    if optimizer is not None and not isinstance(optimizer, optax.GradientTransformation):
        raise ValueError(
            "`optimizer` must be an optax.GradientTransformation (e.g. optax.lbfgs()) or "
            f"None; got {type(optimizer).__name__}."
        )
    max_iter = check_positive_int("max_iter", max_iter)
    if tol is not None and (
        isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0
    ):
        raise ValueError(f"`tol` must be None or a non-negative number; got {tol!r}.")
    return max_iter


_SHARD_MAP_LINE_SEARCH = (
    "This fit cannot run inside jax.shard_map with check_vma=True: the line search of the "
    "optax optimizer it was built with (e.g. optax.lbfgs(), whose zoom line search starts "
    "its inner loops from device-invariant constants) fails JAX's check of device-varying "
    "types (optax 0.2.x). Build the calibrator with optimizer=None (jaxcal's own L-BFGS, "
    "whose loops are typed from the data), or pass check_vma=False to jax.shard_map."
)

#: Iterations in a row without a decrease of the loss at working precision before
#: :func:`~jaxcal.calibrators.minimize` stops (float32 line searches can fail once and then recover).
STALL_PATIENCE = 3


def _max_abs(tree: Any) -> jax.Array:
    # NaN read as +inf (a max may drop a NaN on XLA:CPU), so a NaN gradient is not finite.
    def one(leaf):
        a = jnp.abs(leaf)
        return jnp.max(jnp.where(jnp.isnan(a), jnp.inf, a))

    return jnp.max(jnp.stack([one(leaf) for leaf in jax.tree.leaves(tree)]))


def minimize(
    fun: Callable[[Any], jax.Array],
    init: Any,
    *,
    optimizer: optax.GradientTransformation | None = None,
    max_iter: int = 500,
    tol: float | None = None,
) -> tuple[Any, FitInfo]:
    """Minimise a smooth scalar ``fun(params)`` entirely inside ``lax`` loops.

    The default (``optimizer=None``) is jaxcal's L-BFGS (``jaxcal/calibrators/_lbfgs.py``:
    ten curvature pairs, a strong Wolfe line search that also accepts Hager & Zhang's
    approximate Wolfe conditions, so float32 fits go on where loss values stop resolving
    decreases; every loop carry typed from the data, so it runs inside ``jax.shard_map``
    with ``check_vma=True``). It stops when the largest absolute gradient component is at
    most ``tol``, or when no step decreases the loss at working precision, first with the
    stored curvature pairs and then by steepest descent (converged: the minimum at working
    precision); a non-finite start reports ``converged=False``.

    Any ``optax.GradientTransformation`` is accepted instead (``optax.lbfgs()``, Adam,
    SGD, ...), run by one ``lax.while_loop``: the stopping test is the gradient's, or, for
    optimisers with a line search (which decrease ``fun`` monotonically),
    ``STALL_PATIENCE`` iterations in a row that decreased ``fun`` by at most
    ``2 eps max(|f|, 1)`` each (after scipy L-BFGS-B's); a non-finite value ends that loop,
    keeps the last finite iterate and reports ``converged=False``. optax's line searches
    refuse ``shard_map`` with ``check_vma=True`` (a ValueError says so).
    ``max_iter`` iterations at most in both cases. Called outside any transformation, the
    loop runs as one jitted program kept for the next call with the same ``fun`` (or an
    equal ``functools.partial`` of it), optimiser and options (32 at most): that call
    compiles nothing.

    Args:
      fun: scalar objective of a pytree of parameters (closing over the data).
      init: initial parameters (the identity map of the calibrator).
      optimizer: an optax optimiser, or None for jaxcal's L-BFGS.
      max_iter: maximum number of iterations.
      tol: gradient tolerance (on the largest absolute component); None: 1e-6 in float32, 1e-10 in float64.

    Returns:
      ``(params, FitInfo)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import minimize
      >>> x, info = minimize(lambda x: jnp.sum((x - 3.0) ** 2), jnp.zeros(2))
      >>> [round(float(v), 4) for v in x], bool(info.converged)
      ([3.0, 3.0], True)

    References:
      Nocedal & Wright (2006), "Numerical Optimization", Alg. 7.4 and 3.5-3.6;
      Hager & Zhang (2005), SIAM J. Optim. 16(1) (approximate Wolfe conditions);
      Byrd, Lu, Nocedal & Zhu (1995) for the L-BFGS-B stopping rules.
    """
    max_iter = check_solver_options(optimizer, max_iter, tol)
    if tol is None:
        tol = 1e-10 if jnp.result_type(*jax.tree.leaves(init)) == jnp.float64 else 1e-6
    if is_tracing():
        return _minimize(fun, init, optimizer, max_iter, tol)
    return _compiled_minimize(fun, optimizer, max_iter, float(tol))(init)


#: Jitted loops of :func:`~jaxcal.calibrators.minimize`, by (objective, optimiser, options).
_COMPILED: collections.OrderedDict[Any, Callable[[Any], Any]] = collections.OrderedDict()
_COMPILED_MAX = 32


def _compiled_minimize(fun, optimizer, max_iter, tol):
    """:func:`~jaxcal.calibrators.minimize` of ``fun`` as one jitted program, kept for the
    next eager call with an equal objective: the same function, or an equal
    ``functools.partial`` (``option_key()``); an unhashable part (an array bound in a
    partial) compares by identity."""
    key = option_key((fun, optimizer, max_iter, tol))
    compiled = _COMPILED.get(key)
    if compiled is None:
        compiled = jax.jit(lambda init: _minimize(fun, init, optimizer, max_iter, tol))
        _COMPILED[key] = compiled
        if len(_COMPILED) > _COMPILED_MAX:
            _COMPILED.popitem(last=False)
    else:
        _COMPILED.move_to_end(key)
    return compiled


def _minimize(fun, init, optimizer, max_iter, tol):
    """:func:`~jaxcal.calibrators.minimize` with its options checked and ``tol`` resolved."""
    if optimizer is None:
        res = lbfgs(fun, init, max_iter=max_iter, tol=tol)
        return res.params, FitInfo(res.value, res.grad_norm, res.n_iter, res.converged)
    opt = optax.with_extra_args_support(optimizer)
    # optax is not written for strict dtype promotion (Adam's bias correction mixes int32
    # counts and Python floats): its own calls run under the standard rules.
    with jax.numpy_dtype_promotion("standard"):
        state = opt.init(init)
    reuse = optax.tree.get(state, "value") is not None and optax.tree.get(state, "grad") is not None
    value, grad = jax.value_and_grad(fun)(init)
    dtype = value.dtype
    ftol = 2 * jnp.finfo(dtype).eps

    def cond(carry):
        _, _, _, grad, k, stalls, bad = carry
        done = (stalls >= STALL_PATIENCE) | bad | (_max_abs(grad) <= tol)
        return (k < max_iter) & ~done

    def body(carry):
        params, state, value, grad, k, stalls, _ = carry
        with jax.numpy_dtype_promotion("standard"):
            updates, new_state = opt.update(
                grad, state, params, value=value, grad=grad, value_fn=fun
            )
        new_params = optax.apply_updates(params, updates)
        new_params = jax.tree.map(lambda n, p: n.astype(p.dtype), new_params, params)
        if reuse:
            new_value = optax.tree.get(new_state, "value").astype(dtype)
            new_grad = optax.tree.get(new_state, "grad")
        else:
            new_value, new_grad = jax.value_and_grad(fun)(new_params)
        finite = jnp.isfinite(new_value) & jnp.isfinite(_max_abs(new_grad))
        stalled = reuse & (value - new_value <= ftol * jnp.maximum(jnp.abs(value), 1))
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)  # noqa: E731
        return (
            keep(new_params, params),
            keep(new_state, state),
            jnp.where(finite, new_value, value),
            keep(new_grad, grad),
            k + 1,
            jnp.where(stalled, stalls + 1, 0),
            ~finite,
        )

    zero = jnp.zeros((), jnp.int32)
    # The loss at the start reads all the data `fun` closes over: inside shard_map the
    # carry then varies across devices as the body's outputs do.
    carry = vary_like((init, state, value, grad, zero, zero, jnp.zeros((), bool)), value)
    try:
        params, _, value, grad, k, stalls, bad = jax.lax.while_loop(cond, body, carry)
    except TypeError as err:
        if "manual axis" not in str(err) and "{V:" not in str(err):
            raise
        raise ValueError(_SHARD_MAP_LINE_SEARCH) from err
    gnorm = _max_abs(grad)
    converged = ~bad & ((gnorm <= tol) | (stalls >= STALL_PATIENCE))
    return params, FitInfo(value, gnorm, k, converged)


def weighted_mean(losses: jax.Array, weights: jax.Array | None) -> jax.Array:
    """sum(w l) / sum(w); 0 when the total weight is 0 (then every gradient is 0 too).

    Plain sums, unlike ``weighted_mean()`` (blocked sums, accurate past
    2**24 samples): this is the objective of every optimiser step, and its round-off
    decides the fitted parameters; switching is a change of results, not a refactor.
    """
    if weights is None:
        return jnp.mean(losses)
    w = scale_free(weights.astype(losses.dtype))  # any scale of the weights, one answer
    return safe_divide(jnp.sum(w * losses), jnp.sum(w))
