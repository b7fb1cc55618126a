"""Input validation, in three tiers (see STYLE.md).

1. Static checks (rank, shapes agree, option strings, ``n_bins >= 1``) always run: they
   need only shapes and Python values, so they are free under ``jit`` and raise at trace
   time, before anything compiles.
2. Value checks (finite, in range, on the simplex, labels in range) run only on concrete
   arrays *outside any JAX transformation*. Inside ``jit``, ``vmap``, ``grad``, ``scan``
   or ``shard_map`` they are skipped, even for concrete arrays closed over by the traced
   function (a test set captured by an evaluation step): the kernels then trust their
   input, and nothing ever calls ``bool()`` on a traced value. Call the public function
   outside any transformation once to validate.
   The metrics compute their value checks *inside* their kernel, in the pass that computes
   the metric (``jaxcal/_core/validity.py``), and raise from that summary; the functions below
   are the stand-alone checks, and the diagnosis that names the offending element when a
   summary reports a problem.
3. Results are finite by construction in the kernels (guarded divisions, safe logs).

Every error is a ``ValueError`` naming the argument, what was expected and what was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.numerics import compute_dtype

#: Rows of ``probs`` may miss the simplex by this much (absolute, on the row sum) before
#: they are rejected: softmax outputs in float32 sum to 1 within a few ulps, and
#: probabilities written to CSV with 6 digits within ~1e-5. See ``simplex_tolerance()``
#: for low-precision inputs.
SIMPLEX_ATOL = 1e-3

#: Values outside [0, 1] by at most this much are accepted (float round-off of a softmax).
RANGE_ATOL = 1e-6


def simplex_tolerance(dtype: Any) -> float:
    """How far a row sum of ``dtype`` probabilities may be from 1: ``max(1e-3, 4u)``.

    ``u`` is the unit round-off of the input dtype (2**-8 for bfloat16, 2**-11 for
    float16). Rounding each entry of a row to the dtype moves the row sum by at most
    ``u * sum(p) = u``, *whatever the number of classes*; 4u also covers a softmax
    computed in that precision. So bfloat16 rows may be off by 0.0156, float16 by 0.002,
    float32 and float64 by 1e-3: rows that sum to 2 are rejected at any K.
    """
    unit_roundoff = float(jnp.finfo(dtype).eps) / 2
    return max(SIMPLEX_ATOL, 4 * unit_roundoff)


def is_tracing() -> bool:
    """True inside a JAX transformation (``jit``, ``vmap``, ``grad``, ``scan`` ...)."""
    try:
        from jax._src import core  # the one reliable signal; public API has none

        return not core.trace_state_clean()
    except (ImportError, AttributeError):  # pragma: no cover - a future JAX
        return isinstance(jnp.zeros(()) + 0, jax.core.Tracer)


def is_concrete(*arrays: Any) -> bool:
    """True when no argument is a JAX tracer."""
    return not any(isinstance(a, jax.core.Tracer) for a in arrays)


def values_checkable(*arrays: Any) -> bool:
    """Value checks run: every array is concrete and no transformation is being traced."""
    return is_concrete(*arrays) and not is_tracing()


@jax.jit
def _float_summary(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(total, min, max, largest |row sum - 1|) of ``x`` in flat passes on the device.

    The stand-alone checks pull these four scalars to the host instead of the whole
    array, and locate the offending element (on the host) only when a check fails. A
    non-finite total flags NaN/inf (a finite overflow is re-checked exactly on the host);
    it is made NaN explicitly from ``isfinite`` rather than trusted to the sum, and the
    min, max and row deviation are read only once the total is finite: no check relies on
    a reduction carrying NaN (``jnp.max`` of 4096 or more float32 values drops it on
    XLA:CPU, jax 0.10.2). Row sums use a matrix-vector product: masked minor-axis
    reductions are slow on XLA:CPU.
    """
    xf = x.astype(compute_dtype(x.dtype))
    flat = xf.reshape(-1)
    if x.ndim == 2:
        row_dev = jnp.max(jnp.abs(xf @ jnp.ones(x.shape[1], xf.dtype) - 1))
    else:
        row_dev = jnp.zeros((), xf.dtype)
    total = jnp.where(jnp.all(jnp.isfinite(flat)), jnp.sum(flat), jnp.nan)
    return total, jnp.min(flat), jnp.max(flat), row_dev


def _in_host_memory(x: Any) -> bool:
    """NumPy arrays and JAX CPU arrays: checked in NumPy, which compiles nothing (the jitted
    summaries compiled per input shape, 1.4 s and 0.7 s at N = 1e4: issue 33)."""
    if isinstance(x, np.ndarray):
        return True
    try:
        return isinstance(x, jax.Array) and all(d.platform == "cpu" for d in x.devices())
    except Exception:  # a deleted or foreign array: the device path decides
        return False


def _host_summary(x: jax.Array) -> tuple[float, float, float, float]:
    if not _in_host_memory(x):
        return tuple(float(v) for v in jax.device_get(_float_summary(x)))
    xf = np.asarray(x).astype(np.dtype(compute_dtype(x.dtype)), copy=False)
    if not xf.size:
        return 0.0, np.inf, -np.inf, 0.0
    total = float(np.sum(xf, dtype=np.float64)) if np.isfinite(xf).all() else np.nan
    row_dev = (
        float(np.max(np.abs(xf @ np.ones(xf.shape[1], xf.dtype) - 1))) if xf.ndim == 2 else 0.0
    )
    return total, float(np.min(xf)), float(np.max(xf)), row_dev


@jax.jit
def _device_int_range(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    return jnp.min(x), jnp.max(x)


def _int_range(x: jax.Array) -> tuple[Any, Any]:
    host = np.asarray(x) if _in_host_memory(x) else None
    return _device_int_range(x) if host is None else (host.min(), host.max())


def subnormal_mask(x: jax.Array) -> jax.Array:
    """True where ``x`` (float32 or float64) is a nonzero subnormal, read from its bits.

    XLA:CPU flushes subnormal operands to zero in arithmetic and comparisons, so
    ``0 < x < tiny`` cannot find them; the bit pattern of ``|x|`` can.
    """
    itype = jnp.int32 if x.dtype.itemsize == 4 else jnp.int64
    bits = jax.lax.bitcast_convert_type(jnp.abs(x), itype)
    tiny = int(np.asarray(np.finfo(x.dtype).tiny, x.dtype).view(np.dtype(itype)))
    return (bits > 0) & (bits < tiny)


@jax.jit
def _any_subnormal(x: jax.Array) -> jax.Array:
    return jnp.any(subnormal_mask(x))


def _has_subnormal(x: jax.Array) -> bool:
    if not _in_host_memory(x):
        return bool(_any_subnormal(x))
    host = np.asarray(x)
    return bool(np.any((host != 0) & (np.abs(host) < np.finfo(host.dtype).tiny)))


def first_index(bad: np.ndarray) -> int | tuple[int, ...]:
    """Index of the first True of a host bool array: an int for 1-D, else a tuple."""
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return idx[0] if len(idx) == 1 else idx


def host_array(x: Any, name: str) -> np.ndarray | jax.Array:
    """``x`` as a NumPy array, or a ``ValueError`` naming ``name`` and what to do (D21).

    JAX arrays and tracers pass as they are. Foreign types JAX cannot read get a message
    with the fix: a torch tensor that requires grad (``.detach()``), a torch bfloat16
    tensor (``.float()``: NumPy has no bfloat16), a NumPy float128 array (JAX has no
    float128), a masked array (fill or weight out the masked entries), a ragged or
    ``None``-holding list. Lists, pandas, NumPy (ml_dtypes bfloat16 included), torch
    tensors of other dtypes and memmaps convert as before.
    """
    if isinstance(x, (jax.Array, jax.core.Tracer)):
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise ValueError(
            f"`{name}` is a NumPy masked array; fill the masked entries ({name}.filled(...)) "
            f"and give them weight 0, or drop them."
        )
    if type(x).__module__.split(".")[0] == "torch":
        if getattr(x, "requires_grad", False):
            raise ValueError(
                f"`{name}` is a torch tensor that requires grad; pass {name}.detach()."
            )
        if str(getattr(x, "dtype", "")) == "torch.bfloat16":
            raise ValueError(
                f"`{name}` is a torch bfloat16 tensor, which NumPy cannot read; pass "
                f"{name}.float() (or jax.dlpack.from_dlpack({name}))."
            )
    try:
        host = np.asarray(x)
    except ValueError as err:  # NumPy's "inhomogeneous shape"
        raise ValueError(
            f"`{name}` must be a rectangular array; got a ragged {type(x).__name__} "
            f"(rows of different lengths)."
        ) from err
    except Exception as err:  # a foreign library's own error
        raise ValueError(f"`{name}` must be an array of numbers; got {type(x).__name__}.") from err
    if host.dtype.kind == "f" and host.dtype.itemsize > 8:
        raise ValueError(
            f"`{name}` has dtype {host.dtype}, which JAX does not support; convert it to "
            f"float64 or float32 first ({name}.astype(numpy.float64))."
        )
    if host.dtype == object and host.size:  # Python objects: numbers, None, strings ...
        if any(v is None for v in host.flat):
            raise ValueError(f"`{name}` must hold numbers only; got None entries.")
        host = np.array(host.tolist())
        if host.dtype == object:
            kind = type(host.flat[0]).__name__
            raise ValueError(f"`{name}` must hold numbers only; got values of type {kind}.")
    if host.dtype.kind in "US":
        raise ValueError(f"`{name}` must hold real numbers; got dtype {host.dtype}.")
    return host


def to_array(x: Any, name: str) -> jax.Array:
    """``x`` as a JAX array (``host_array()`` first for anything else than JAX's own)."""
    host = host_array(x, name)
    if not isinstance(host, np.ndarray):
        return host
    try:
        # On the host, then one transfer: jnp.asarray would convert the dtype with a
        # program compiled for every new shape (0.1 s a new N, issue 33).
        canonical = jax.dtypes.canonicalize_dtype(host.dtype)
        return jax.device_put(host.astype(canonical, copy=False))
    except (TypeError, ValueError) as err:
        raise ValueError(f"`{name}` must hold numbers only; got dtype {host.dtype}.") from err


def as_float(x: Any, name: str) -> jax.Array:
    """``x`` as a JAX float array; ints and bools become the default float dtype."""
    arr = to_array(x, name)
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
    if isinstance(value, jax.core.Tracer):
        raise ValueError(
            f"`{name}` must be a Python integer (a static option), not a traced value; under "
            f"jax.jit pass it as a static argument (static_argnames=('{name}',)) or bind it "
            f"with functools.partial before jitting."
        )
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value}.")
    return int(value)


def check_positive_float(name: str, value: Any) -> float:
    """Raise unless ``value`` is a finite Python number > 0 (a static option)."""
    if isinstance(value, jax.core.Tracer):
        raise ValueError(
            f"`{name}` must be a Python number (a static option), not a traced value; under "
            f"jax.jit pass it as a static argument (static_argnames=('{name}',)) or bind it "
            f"with functools.partial before jitting."
        )
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"`{name}` must be a positive number; got {value!r}.")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"`{name}` must be a positive finite number; got {value}.")
    return float(value)


def check_finite(name: str, x: jax.Array, summary: tuple | None = None) -> None:
    """Raise if ``x`` holds NaN or inf (concrete, outside any transformation)."""
    if values_checkable(x) and jnp.issubdtype(x.dtype, jnp.floating) and x.size:
        summary = _host_summary(x) if summary is None else summary
        if np.isfinite(summary[0]):
            return
        bad = ~np.isfinite(np.asarray(x, dtype=np.float64))
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"`{name}` must be finite; got {np.asarray(x)[idx]} at index {idx}.")


def _host_labels(labels: Any, name: str) -> np.ndarray | None:
    """The labels as a NumPy array when they are host data (NumPy, lists), else None."""
    if isinstance(labels, (jax.Array, jax.core.Tracer)):
        return None
    return host_array(labels, name)  # foreign types: an error naming `name`


def _check_int32_range(values: np.ndarray, name: str, num_classes: int | None) -> None:
    """Host integer labels must fit in int32 before JAX (without x64) narrows them."""
    if values.size == 0 or jax.config.jax_enable_x64:
        return
    lo, hi = int(values.min()), int(values.max())
    bound = num_classes if num_classes is not None else 2**31
    if lo < 0 or hi >= bound:
        bad = lo if lo < 0 else hi
        expected = f"[0, {num_classes}) for {num_classes} classes" if num_classes else "int32"
        raise ValueError(f"`{name}` must lie in {expected}; got {bad}.")


def check_labels(
    labels: Any, n: int, num_classes: int | None, name: str = "labels", *, values: bool = True
) -> jax.Array:
    """Validate integer (or bool) labels of shape ``(n,)`` in ``[0, num_classes)``.

    Float arrays holding whole numbers are accepted and converted (CSV files give floats);
    other floats are rejected. NumPy int64 labels are range-checked on the host before
    conversion, so ``2**32 + 1`` cannot wrap to 1 in int32. ``values=False`` leaves the
    range check to a kernel's summary (``jaxcal/_core/validity.py``). Returns an int32 array.
    """
    host = _host_labels(labels, name)
    arr = to_array(labels, name) if host is None else host
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D of shape ({n},); got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(
            f"`{name}` must have shape ({n},) to match the predictions; got {arr.shape}."
        )
    is_float = jnp.issubdtype(arr.dtype, jnp.floating)
    if not (is_float or jnp.issubdtype(arr.dtype, jnp.integer) or arr.dtype == jnp.bool_):
        raise ValueError(f"`{name}` must have an integer or bool dtype; got {arr.dtype}.")
    if is_float:
        if not is_concrete(arr):
            raise ValueError(f"`{name}` must have an integer or bool dtype; got {arr.dtype}.")
        floats = np.asarray(arr)
        if not np.all(np.isfinite(floats)) or np.any(floats != np.round(floats)):
            raise ValueError(
                f"`{name}` must hold integers; got non-integer values of dtype {arr.dtype}."
            )
        _check_int32_range(floats, name, num_classes)
    elif host is not None and host.dtype.itemsize > 4 and host.dtype != np.bool_:
        _check_int32_range(host, name, num_classes)
    if isinstance(arr, np.ndarray):  # converted on the host: no program per shape
        arr = jax.device_put(arr.astype(np.int32, copy=False))
    else:
        arr = jnp.asarray(arr).astype(jnp.int32)
    if values and num_classes is not None and values_checkable(arr) and n > 0:
        lo, hi = (int(v) for v in _int_range(arr))
        if lo < 0 or hi >= num_classes:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"`{name}` must lie in [0, {num_classes}) for {num_classes} classes; got {bad}."
            )
    return arr


def check_weights(
    weights: Any, n: int, name: str = "weights", *, values: bool = True
) -> jax.Array | None:
    """Validate optional non-negative, finite sample weights of shape ``(n,)``.

    A total weight of zero is valid (every metric then returns its documented value for
    empty input, 0 for the calibration errors). The scale of the weights does not matter
    (the kernels rescale them, ``normalize_weights()``), but subnormal
    weights (below 1.2e-38 in float32, 2.2e-308 in float64) are rejected: XLA:CPU reads
    them as 0 in every operation, so they would silently count as zero.
    """
    if weights is None:
        return None
    arr = as_float(weights, name)
    if arr.shape != (n,):
        raise ValueError(
            f"`{name}` must have shape ({n},) to match the predictions; got {arr.shape}."
        )
    if values and values_checkable(arr) and n > 0:
        summary = _host_summary(arr)
        check_finite(name, arr, summary)
        if summary[1] < 0:
            raise ValueError(f"`{name}` must be non-negative; got {summary[1]}.")
        if arr.dtype.itemsize >= 4 and _has_subnormal(arr):
            bad = np.asarray(arr)
            idx = first_index((bad != 0) & (np.abs(bad) < np.finfo(bad.dtype).tiny))
            raise ValueError(
                f"`{name}` must be 0 or at least {np.finfo(bad.dtype).tiny:.3g} (the smallest "
                f"normal {bad.dtype}; XLA reads smaller values as 0); got {bad[idx]:.3g} at "
                f"index {idx}. Rescale the weights: only their ratios matter."
            )
    return arr


def check_unit_interval(name: str, x: jax.Array, summary: tuple | None = None) -> None:
    """Raise if ``x`` has values outside [0, 1] (beyond ``RANGE_ATOL``; concrete only)."""
    if values_checkable(x) and x.size:
        summary = _host_summary(x) if summary is None else summary
        check_finite(name, x, summary)
        _, lo, hi, _ = summary
        if lo < -RANGE_ATOL or hi > 1 + RANGE_ATOL:
            bad = lo if lo < -RANGE_ATOL else hi
            raise ValueError(f"`{name}` must lie in [0, 1]; got {bad}.")


def check_simplex_rows(name: str, arr: jax.Array, row_dev: float) -> None:
    """Raise if a row of ``arr`` ``(N, K)`` misses the simplex (``row_dev`` its summary)."""
    tol = simplex_tolerance(arr.dtype)
    if row_dev > tol:
        sums = np.asarray(arr, dtype=np.float64).sum(axis=1)
        worst = int(np.argmax(np.abs(sums - 1)))
        if abs(sums[worst] - 1) > tol:
            raise ValueError(
                f"`{name}` rows must sum to 1 (within {tol:.3g}); row {worst} sums to "
                f"{sums[worst]:.6g}. For rounded probabilities (e.g. exported with 3 "
                f"decimals) pass renormalize=True to divide each row by its sum; for "
                f"logits apply jax.nn.softmax first."
            )


def renormalize_rows(arr: jax.Array, name: str = "probs") -> jax.Array:
    """``(N, K)`` rows divided by their sums (in the compute dtype, back to the input's).

    A concrete row that sums to 0 or less is an error naming the row (a division would
    make it NaN and the message would blame NaN input); ``(N,)`` input is returned as is.
    """
    if arr.ndim != 2:
        return arr
    work = arr.astype(compute_dtype(arr.dtype))
    sums = jnp.sum(work, axis=1, keepdims=True)
    if values_checkable(arr):
        host = np.asarray(jax.device_get(sums))[:, 0]
        bad = ~(host > 0) & ~np.isnan(host)  # NaN rows: the finiteness check names them
        if bad.any():
            row = int(np.argmax(bad))
            raise ValueError(
                f"`{name}` rows must have a positive sum to be renormalized "
                f"(renormalize=True); row {row} sums to {host[row]:.6g}."
            )
    return (work / sums).astype(arr.dtype)


def check_probs(
    probs: Any, name: str = "probs", *, values: bool = True, renormalize: bool = False
) -> jax.Array:
    """Validate ``(N,)`` probabilities of the positive class or ``(N, K)`` rows on the simplex.

    Rows must sum to 1 within ``simplex_tolerance()``. bf16/f16 inputs are kept in their
    dtype (the kernels upcast), so that bin edges are compared in the input's own
    precision. ``values=False``: shapes and dtypes only (a kernel's summary checks values).
    ``renormalize=True``: rows are divided by their sums first (``renormalize_rows()``);
    the checks then see the renormalized rows, which the caller gets back.
    """
    check_option("renormalize", renormalize, (False, True))
    arr = as_float(probs, name)
    if arr.ndim not in (1, 2):
        raise ValueError(
            f"`{name}` must be 1-D (N,) or 2-D (N, K); got {arr.ndim}-D shape {arr.shape}."
        )
    if arr.shape[0] == 0:
        raise ValueError(f"`{name}` must not be empty; got shape {arr.shape}.")
    if arr.ndim == 2 and arr.shape[1] < 1:
        raise ValueError(f"`{name}` must have at least one class column; got shape {arr.shape}.")
    if renormalize:
        arr = renormalize_rows(arr, name)
    if not values or not values_checkable(arr):
        return arr
    summary = _host_summary(arr)
    check_unit_interval(name, arr, summary)
    if arr.ndim == 2:
        check_simplex_rows(name, arr, summary[3])
    return arr


def check_probs_labels(
    probs: Any,
    labels: Any,
    weights: Any = None,
    *,
    binary_only: bool = False,
    probs_name: str = "probs",
    values: bool = True,
    renormalize: bool = False,
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """Validate the ``(probs, labels, weights)`` triple every metric takes.

    ``probs`` ``(N,)``: labels must be 0/1 (or bool). ``probs`` ``(N, K)``: labels in
    ``[0, K)``. With ``binary_only`` a 2-D ``probs`` is rejected. ``values=False`` runs the
    static checks and conversions only; the caller's kernel then returns a validity
    summary (``summarize()``) that ``raise_if_invalid()``
    turns into the same errors. ``renormalize``: see ``check_probs()``; the returned
    ``probs`` are the renormalized ones.
    """
    probs = check_probs(probs, probs_name, values=values, renormalize=renormalize)
    if binary_only and probs.ndim != 1:
        raise ValueError(
            f"`{probs_name}` must be 1-D (N,) scores of the positive class; got shape {probs.shape}."
        )
    n = probs.shape[0]
    num_classes = 2 if probs.ndim == 1 else probs.shape[1]
    labels = check_labels(labels, n, num_classes, values=values)
    weights = check_weights(weights, n, values=values)
    return probs, labels, weights
