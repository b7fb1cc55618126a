"""The one place jaxcal sorts: NumPy's SIMD sort on CPU, XLA's sort elsewhere.

XLA:CPU sorts by scalar comparisons: a stable argsort of 1e6 float32 takes about 5x a
NumPy ``np.sort`` of the same keys packed with their positions into uint64. On CPU the
sorts below therefore leave XLA through :func:`jax.pure_callback` and run in NumPy, chosen
by :func:`jax.lax.platform_dependent` (GPU and TPU keep ``lax.sort``; only the branch of
the platform compiled for is lowered). A callback has a fixed cost (a Python call and a
copy each way, ~0.1 ms), so short rows are sorted by XLA on every backend: below
``HOST_ARGSORT_MIN_SIZE`` keys for an argsort and ``HOST_SORT_MIN_SIZE`` for a sort of
values, where XLA's one-operand sort is nearly as fast as NumPy's (thresholds measured
by ``benchmarks/bench_sort.py``; a static choice by shape).

* **Keys.** Floats become unsigned integers that order like them (:func:`monotone_bits`):
  -0.0 is made +0.0 and every NaN the positive quiet NaN, then the usual bit flip (sign
  bit set for non-negative values, every bit flipped for negative ones). So the order is
  NumPy's and ``jnp.sort``'s: -0.0 ties with 0.0; NaNs come after +inf and tie with each
  other. bf16/f16 are widened to float32 first (exactly).
* **Stable argsort** (:func:`argsort`), NumPy's ``kind="stable"`` tie rule. Keys of up
  to 32 bits are packed with their position into one uint64 (key in the high word,
  position in the low word) and sorted by ``np.sort``: the packed values are distinct,
  so any sort is stable by construction, and the order is the low words. 64-bit keys
  (float64 under x64) leave no room for a position: ``np.argsort(kind="stable")``.
* **Sort of values** (:func:`sort`): ``np.sort`` of integers, or of the float keys' bits
  mapped back to floats. Equal integers are indistinguishable, so the result does not
  depend on the sort's stability; float results are canonical (+0.0 for -0.0, one NaN).

Both work along the last axis and keep ``jit`` and ``vmap`` (the callback sorts a batch
along its last axis in one call) and run per shard inside ``shard_map``. An order has no
derivative (the keys' tangents are cut) and gathers by it stay differentiable; a sort of
float values is differentiable as ``jnp.sort`` is. Programs that contain a host callback
are not written to JAX's persistent compilation cache.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

#: From this many keys along the sorted axis, an argsort runs in NumPy on CPU: below it,
#: XLA's argsort costs less than the callback's fixed cost.
HOST_ARGSORT_MIN_SIZE = 1024

#: From this many keys, a sort of values runs in NumPy on CPU: XLA's one-operand sort is
#: within ~1.3x of ``np.sort`` and wins below this size.
HOST_SORT_MIN_SIZE = 32768

# Index of the low 32-bit word of a uint64 viewed as two uint32.
_LOW = 0 if sys.byteorder == "little" else 1


def _widened(keys: jax.Array) -> jax.Array:
    """Keys of at least 32 bits (bool and small integers to int32, bf16/f16 to float32)."""
    dtype = keys.dtype
    if dtype.itemsize >= 4:
        return keys
    if jnp.issubdtype(dtype, jnp.floating):
        return keys.astype(jnp.float32)
    return keys.astype(jnp.int32)


def _sign_bit(udtype) -> np.generic:
    return np.dtype(udtype).type(1 << (8 * np.dtype(udtype).itemsize - 1))


def monotone_bits(keys: jax.Array) -> jax.Array:
    """Unsigned integers ordered like ``keys`` (NumPy's order: -0.0 == 0.0, NaN last).

    uint32 for keys of up to 32 bits, uint64 for 64-bit keys (x64).

    Example:
      >>> import jax.numpy as jnp
      >>> b = monotone_bits(jnp.array([1.0, -2.0, -0.0, 0.0, jnp.nan, jnp.inf]))
      >>> jnp.argsort(b, stable=True).tolist()
      [1, 2, 3, 0, 5, 4]
    """
    keys = _widened(jnp.asarray(keys))
    dtype = keys.dtype
    udtype = jnp.uint32 if dtype.itemsize == 4 else jnp.uint64
    top = _sign_bit(udtype)
    if jnp.issubdtype(dtype, jnp.unsignedinteger):
        return keys
    bits = lax.bitcast_convert_type(keys, udtype)
    if jnp.issubdtype(dtype, jnp.signedinteger):
        return bits ^ top
    nan = lax.bitcast_convert_type(jnp.array(np.nan, dtype), udtype)
    bits = jnp.where(keys == 0, jnp.zeros_like(bits), bits)
    bits = jnp.where(jnp.isnan(keys), nan, bits)
    return jnp.where(bits >= top, ~bits, bits | top)


def _float_from_bits(bits: jax.Array, dtype) -> jax.Array:
    """Inverse of :func:`monotone_bits` for float keys (canonical zeros and NaNs)."""
    top = _sign_bit(bits.dtype)
    return lax.bitcast_convert_type(jnp.where(bits >= top, bits ^ top, ~bits), dtype)


# ------------------------------------------------------------------ host sorts (NumPy)


def _host_argsort(bits: np.ndarray) -> np.ndarray:
    """Stable ascending order of unsigned ``bits`` along the last axis, as int32."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint32:
        return np.argsort(bits, axis=-1, kind="stable").astype(np.int32)
    pairs = np.empty((*bits.shape, 2), np.uint32)
    pairs[..., _LOW] = np.arange(bits.shape[-1], dtype=np.uint32)
    pairs[..., 1 - _LOW] = bits
    pairs.view(np.uint64).reshape(bits.shape).sort(axis=-1)
    return pairs[..., _LOW].astype(np.int32)


def _host_sort(keys: np.ndarray) -> np.ndarray:
    return np.sort(np.asarray(keys), axis=-1)


def _callback(fn, x: jax.Array, dtype) -> jax.Array:
    """``fn`` (NumPy, last axis) on the host; 64-bit arrays cross as pairs of uint32.

    The callback may run on a thread where ``jax.enable_x64()`` (a thread-local context) is
    off, and JAX then converts a uint64 argument or result to 32 bits by value, truncating
    it (an x64 argsort of float64 keys came back wrong in 14 of 20 calls). Pairs of uint32
    words survive any setting; the host reassembles them with a view, which copies nothing.
    """
    wide_in = x.dtype.itemsize == 8
    wide_out = np.dtype(dtype).itemsize == 8
    in_dtype = np.dtype(x.dtype)

    def host(a):
        a = np.asarray(a)
        if wide_in:
            a = np.ascontiguousarray(a).view(in_dtype)[..., 0]
        out = np.asarray(fn(a))
        if wide_out:
            out = np.ascontiguousarray(out).view(np.uint32).reshape(*out.shape, 2)
        return out

    arg = lax.bitcast_convert_type(x, jnp.uint32) if wide_in else x
    result = (
        jax.ShapeDtypeStruct((*x.shape, 2), jnp.uint32)
        if wide_out
        else jax.ShapeDtypeStruct(x.shape, dtype)
    )
    out = jax.pure_callback(host, result, arg, vmap_method="expand_dims")
    if wide_out:
        out = lax.bitcast_convert_type(out, dtype)
    # Inside shard_map the result varies over the mesh axes the keys vary over (the
    # callback sorts each shard's keys); pure_callback's result type does not say so.
    mat = getattr(jax.typeof(x), "manual_axis_type", None)
    axes = tuple(sorted(mat.varying)) if mat is not None else ()
    return lax.pcast(out, axes, to="varying") if axes else out


def _xla_argsort(bits: jax.Array) -> jax.Array:
    iota = lax.broadcasted_iota(jnp.int32, bits.shape, bits.ndim - 1)
    return lax.sort((bits, iota), dimension=bits.ndim - 1, is_stable=True, num_keys=1)[1]


def _xla_sort(keys: jax.Array) -> jax.Array:
    return lax.sort(keys, dimension=keys.ndim - 1)


def _on_host(n: int, threshold: int) -> bool:
    if n >= 2**31:
        raise ValueError(f"jaxcal sorts fewer than 2**31 keys per row; got {n}.")
    return n >= threshold


# ------------------------------------------------------------------ the sorts


def argsort(keys: jax.Array) -> jax.Array:
    """Stable ascending order of ``keys`` along the last axis, as int32.

    ``np.argsort(keys, axis=-1, kind="stable")`` for bool, integer and float keys: equal
    keys keep their input order, -0.0 ties with 0.0, NaNs come last.

    Example:
      >>> import jax.numpy as jnp
      >>> argsort(jnp.array([0.3, 0.1, 0.3, -0.0, 0.0])).tolist()
      [3, 4, 1, 0, 2]
    """
    bits = monotone_bits(lax.stop_gradient(jnp.asarray(keys)))
    if not _on_host(bits.shape[-1], HOST_ARGSORT_MIN_SIZE):
        return _xla_argsort(bits)
    return lax.platform_dependent(
        bits, cpu=lambda b: _callback(_host_argsort, b, jnp.int32), default=_xla_argsort
    )


def _sort_bits(bits: jax.Array) -> jax.Array:
    if not _on_host(bits.shape[-1], HOST_SORT_MIN_SIZE):
        return _xla_sort(bits)
    return lax.platform_dependent(
        bits, cpu=lambda b: _callback(_host_sort, b, b.dtype), default=_xla_sort
    )


@jax.custom_jvp
def _sort_floats(keys: jax.Array) -> jax.Array:
    return _float_from_bits(_sort_bits(monotone_bits(keys)), keys.dtype)


@_sort_floats.defjvp
def _sort_floats_jvp(primals, tangents):
    # Only when differentiating: the order that gathers the tangents (ties in input
    # order, as jnp.sort's gradient), and the canonical gathered keys as the primal.
    (keys,), (dkeys,) = primals, tangents
    order = argsort(keys)
    ranked = jnp.take_along_axis(keys, order, axis=-1)
    return _float_from_bits(monotone_bits(ranked), keys.dtype), jnp.take_along_axis(
        dkeys, order, axis=-1
    )


def sort(keys: jax.Array) -> jax.Array:
    """``keys`` sorted ascending along the last axis (``np.sort``).

    Integers come back as they are (narrower than 32 bits as int32); floats canonical
    (-0.0 as +0.0, every NaN as the positive quiet NaN, last; bf16/f16 as float32) and
    differentiable as ``jnp.sort`` is (the tangents follow a stable argsort, computed
    only under differentiation).

    Example:
      >>> import jax.numpy as jnp
      >>> sort(jnp.array([5, -1, 3])).tolist(), sort(jnp.array([0.5, -0.0, -1.0])).tolist()
      ([-1, 3, 5], [-1.0, 0.0, 0.5])
    """
    keys = _widened(jnp.asarray(keys))
    if jnp.issubdtype(keys.dtype, jnp.floating):
        return _sort_floats(keys)
    return _sort_bits(lax.stop_gradient(keys))
