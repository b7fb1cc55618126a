"""Input validation, in three tiers (see STYLE.md).

1. Static checks (rank, shapes agree, option strings, ``n_bins >= 1``) always run: they
   need only shapes, so they are free under ``jit`` and raise at trace time.
2. Value checks (finite, in range, on the simplex, labels in range) run only when the
   arrays are concrete. Under ``jit``/``vmap``/``grad`` the inputs are tracers and these
   checks are skipped: the kernels then trust their input. Validate eagerly once, or call
   the public function outside ``jit``, to get the errors.
3. Results are finite by construction in the kernels (guarded divisions, safe logs).

Every error is a ``ValueError`` naming the argument, what was expected and what was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._numerics import compute_dtype

#: Rows of ``probs`` may miss the simplex by this much (absolute, on the row sum) before
#: they are rejected: softmax outputs in float32 sum to 1 within a few ulps, and
#: probabilities written to CSV with 6 digits within ~1e-5. For low-precision inputs the
#: tolerance grows to ``K * eps`` of the input dtype (bfloat16 rounds each entry by 2**-9).
SIMPLEX_ATOL = 1e-3

#: Values outside [0, 1] by at most this much are accepted (float round-off of a softmax).
RANGE_ATOL = 1e-6


@jax.jit
def _float_summary(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(total, min, max, largest |row sum - 1|) of ``x`` in flat passes on the device.

    Eager validation pulls these four scalars to the host instead of the whole array, and
    locates the offending element (on the host) only when a check fails. A non-finite
    total flags NaN/inf (a finite overflow is re-checked exactly on the host). Row sums use
    a matrix-vector product: masked minor-axis reductions are slow on XLA:CPU.
    """
    xf = x.astype(compute_dtype(x.dtype))
    flat = xf.reshape(-1)
    if x.ndim == 2:
        row_dev = jnp.max(jnp.abs(xf @ jnp.ones(x.shape[1], xf.dtype) - 1))
    else:
        row_dev = jnp.zeros((), xf.dtype)
    return jnp.sum(flat), jnp.min(flat), jnp.max(flat), row_dev


def _host_summary(x: jax.Array) -> tuple[float, float, float, float]:
    # Concrete arrays captured inside an outer trace (a constant under jit, scan): evaluate
    # now rather than stage the summary into the trace.
    with jax.ensure_compile_time_eval():
        return tuple(float(v) for v in jax.device_get(_float_summary(x)))


@jax.jit
def _int_range(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    return jnp.min(x), jnp.max(x)


def is_concrete(*arrays: Any) -> bool:
    """True when no argument is a JAX tracer, i.e. value checks can run."""
    return not any(isinstance(a, jax.core.Tracer) for a in arrays)


def as_float(x: Any, name: str) -> jax.Array:
    """``x`` as a JAX float array; ints and bools become the default float dtype."""
    try:
        arr = jnp.asarray(x)
    except TypeError as err:
        raise ValueError(f"`{name}` must be an array of numbers; got {type(x).__name__}.") from err
    if not (
        jnp.issubdtype(arr.dtype, jnp.floating)
        or jnp.issubdtype(arr.dtype, jnp.integer)
        or arr.dtype == jnp.bool_
    ):
        raise ValueError(f"`{name}` must hold real numbers; got dtype {arr.dtype}.")
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(compute_dtype(arr.dtype))
    return arr


def check_option(name: str, value: Any, allowed: Sequence[Any]) -> None:
    """Raise unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"`{name}` must be one of {choices}; got {value!r}.")


def check_positive_int(name: str, value: Any, minimum: int = 1) -> int:
    """Raise unless ``value`` is a Python/NumPy integer ``>= minimum``; return it as int."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value}.")
    return int(value)


def check_positive_float(name: str, value: Any) -> float:
    """Raise unless ``value`` is a finite Python number > 0 (a static option)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"`{name}` must be a positive number; got {value!r}.")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"`{name}` must be a positive finite number; got {value}.")
    return float(value)


def check_finite(name: str, x: jax.Array, summary: tuple | None = None) -> None:
    """Raise if a concrete ``x`` holds NaN or inf."""
    if is_concrete(x) and jnp.issubdtype(x.dtype, jnp.floating) and x.size:
        summary = _host_summary(x) if summary is None else summary
        if np.isfinite(summary[0]):
            return
        bad = ~np.isfinite(np.asarray(x, dtype=np.float64))
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"`{name}` must be finite; got {np.asarray(x)[idx]} at index {idx}.")


def check_labels(labels: Any, n: int, num_classes: int | None, name: str = "labels") -> jax.Array:
    """Validate integer (or bool) labels of shape ``(n,)`` in ``[0, num_classes)``.

    Float arrays holding whole numbers are accepted and converted (CSV files give floats);
    other floats are rejected. Returns an int32 array.
    """
    try:
        arr = jnp.asarray(labels)
    except TypeError as err:
        raise ValueError(
            f"`{name}` must be an array of integers; got {type(labels).__name__}."
        ) from err
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D of shape ({n},); got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(
            f"`{name}` must have shape ({n},) to match the predictions; got {arr.shape}."
        )
    if jnp.issubdtype(arr.dtype, jnp.floating):
        if not is_concrete(arr):
            raise ValueError(f"`{name}` must have an integer or bool dtype; got {arr.dtype}.")
        values = np.asarray(arr)
        if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
            raise ValueError(
                f"`{name}` must hold integers; got non-integer values of dtype {arr.dtype}."
            )
        arr = arr.astype(jnp.int32)
    elif not (jnp.issubdtype(arr.dtype, jnp.integer) or arr.dtype == jnp.bool_):
        raise ValueError(f"`{name}` must have an integer or bool dtype; got {arr.dtype}.")
    arr = arr.astype(jnp.int32)
    if num_classes is not None and is_concrete(arr) and n > 0:
        with jax.ensure_compile_time_eval():
            lo, hi = (int(v) for v in _int_range(arr))
        if lo < 0 or hi >= num_classes:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"`{name}` must lie in [0, {num_classes}) for {num_classes} classes; got {bad}."
            )
    return arr


def check_weights(weights: Any, n: int, name: str = "weights") -> jax.Array | None:
    """Validate optional non-negative, finite sample weights of shape ``(n,)``.

    A total weight of zero is valid (every metric then returns its documented value for
    empty input, 0 for the calibration errors).
    """
    if weights is None:
        return None
    arr = as_float(weights, name)
    if arr.shape != (n,):
        raise ValueError(
            f"`{name}` must have shape ({n},) to match the predictions; got {arr.shape}."
        )
    check_finite(name, arr)
    if is_concrete(arr) and n > 0:
        lowest = _host_summary(arr)[1]
        if lowest < 0:
            raise ValueError(f"`{name}` must be non-negative; got {lowest}.")
    return arr


def check_unit_interval(name: str, x: jax.Array, summary: tuple | None = None) -> None:
    """Raise if a concrete ``x`` has values outside [0, 1] (beyond ``RANGE_ATOL``)."""
    if is_concrete(x) and x.size:
        summary = _host_summary(x) if summary is None else summary
        check_finite(name, x, summary)
        _, lo, hi, _ = summary
        if lo < -RANGE_ATOL or hi > 1 + RANGE_ATOL:
            bad = lo if lo < -RANGE_ATOL else hi
            raise ValueError(f"`{name}` must lie in [0, 1]; got {bad}.")


def check_probs(probs: Any, name: str = "probs") -> jax.Array:
    """Validate ``(N,)`` probabilities of the positive class or ``(N, K)`` rows on the simplex.

    Rows must sum to 1 within ``SIMPLEX_ATOL``. bf16/f16 inputs are kept in their dtype
    (the kernels upcast), so that bin edges are compared in the input's own precision.
    """
    arr = as_float(probs, name)
    if arr.ndim not in (1, 2):
        raise ValueError(
            f"`{name}` must be 1-D (N,) or 2-D (N, K); got {arr.ndim}-D shape {arr.shape}."
        )
    if arr.shape[0] == 0:
        raise ValueError(f"`{name}` must not be empty; got shape {arr.shape}.")
    if arr.ndim == 2 and arr.shape[1] < 1:
        raise ValueError(f"`{name}` must have at least one class column; got shape {arr.shape}.")
    if not is_concrete(arr):
        return arr
    summary = _host_summary(arr)
    check_unit_interval(name, arr, summary)
    tol = max(SIMPLEX_ATOL, arr.shape[-1] * float(jnp.finfo(arr.dtype).eps))
    if arr.ndim == 2 and summary[3] > tol:
        sums = np.asarray(arr, dtype=np.float64).sum(axis=1)
        worst = int(np.argmax(np.abs(sums - 1)))
        if abs(sums[worst] - 1) > tol:
            raise ValueError(
                f"`{name}` rows must sum to 1 (within {tol:.3g}); row {worst} sums to "
                f"{sums[worst]:.6g}. Pass probabilities, not logits (see jax.nn.softmax)."
            )
    return arr


def check_probs_labels(
    probs: Any,
    labels: Any,
    weights: Any = None,
    *,
    binary_only: bool = False,
    probs_name: str = "probs",
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """Validate the ``(probs, labels, weights)`` triple every metric takes.

    ``probs`` ``(N,)``: labels must be 0/1 (or bool). ``probs`` ``(N, K)``: labels in
    ``[0, K)``. With ``binary_only`` a 2-D ``probs`` is rejected.
    """
    probs = check_probs(probs, probs_name)
    if binary_only and probs.ndim != 1:
        raise ValueError(
            f"`{probs_name}` must be 1-D (N,) scores of the positive class; got shape {probs.shape}."
        )
    n = probs.shape[0]
    num_classes = 2 if probs.ndim == 1 else probs.shape[1]
    labels = check_labels(labels, n, num_classes)
    weights = check_weights(weights, n)
    return probs, labels, weights
