"""The one place jaxcal sorts: NumPy's SIMD sort on CPU, XLA's sort elsewhere.

XLA:CPU sorts by scalar comparisons: a stable argsort of 1e6 float32 keys as a (keys,
positions) pair takes about 5x a NumPy ``np.sort`` of the same keys packed with their
positions into uint64; XLA's sort of the packed uint64 (``_xla_argsort()``) is within
1.2x of NumPy's. On CPU the large sorts below therefore leave XLA through
:func:`jax.pure_callback` and run in NumPy, chosen by :func:`jax.lax.platform_dependent`
(GPU and TPU keep ``lax.sort``; only the branch of the platform compiled for is
lowered). A callback has a fixed cost (a Python call and a copy each way, ~0.1 ms), so
short rows are sorted by XLA on every backend: below ``HOST_ARGSORT_MIN_SIZE`` keys for
an argsort (``HOST_ARGSORT_64_MIN_SIZE`` for 64-bit keys), ``HOST_SORT_MIN_SIZE`` for a
sort of values, where XLA's one-operand sort is nearly as fast as NumPy's, and
``HOST_SEGMENT_SORT_MIN_SIZE`` for a sort within segments (thresholds measured by
``benchmarks/bench_sort.py``; a static choice by shape).

* **Keys.** Floats become unsigned integers that order like them (``monotone_bits()``):
  -0.0 is made +0.0 and every NaN the positive quiet NaN, then the usual bit flip (sign
  bit set for non-negative values, every bit flipped for negative ones). So the order is
  NumPy's and ``jnp.sort``'s: -0.0 ties with 0.0; NaNs come after +inf and tie with each
  other. bf16/f16 are widened to float32 first (exactly).
* **Stable argsort** (``argsort()``), NumPy's ``kind="stable"`` tie rule. Keys of up
  to 32 bits are packed with their position into one uint64 (key in the high word,
  position in the low word) and sorted by ``np.sort``: the packed values are distinct,
  so any sort is stable by construction, and the order is the low words. 64-bit keys
  (float64 under x64) leave no room for a position: ``np.argsort(kind="stable")``.
* **Sort of values** (``sort()``): ``np.sort`` of integers, or of the float keys' bits
  mapped back to floats. Equal integers are indistinguishable, so the result does not
  depend on the sort's stability; float results are canonical (+0.0 for -0.0, one NaN).
* **Sorts within segments** (``segment_argsort()``, ``segment_sort()``): by
  (segment id, key), ``np.lexsort((keys, ids))``, in one sort. On the host, one O(N)
  partition by id (NumPy's radix sort of 16-bit keys), then each segment's keys (with
  their positions packed in, for the order) sorted alone; a float32 key and its id need
  more than 32 bits, and a packed uint64 sort of all N costs about twice as much. Very
  many short segments (a Python loop over them would cost more) take ``np.lexsort``.

Both work along the last axis and keep ``jit`` and ``vmap`` (the callback sorts a batch
along its last axis in one call) and run per shard inside ``shard_map``. An order has no
derivative (the keys' tangents are cut) and gathers by it stay differentiable; a sort of
float values is differentiable as ``jnp.sort`` is. Programs that contain a host callback
are not written to JAX's persistent compilation cache.
"""

from __future__ import annotations

import contextlib
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

#: From this many keys (of up to 32 bits) along the sorted axis, an argsort runs in NumPy
#: on CPU. Below it XLA's packed one-operand sort (``_xla_argsort()``) costs less than the
#: callback (0.07 against 0.25 ms at 1,024 keys, 0.16 against 0.32 at 4,096; 0.79 against
#: 0.65 at 16,384, and within 1.2x above), and programs without a callback can be stored.
HOST_ARGSORT_MIN_SIZE = 16384
#: The same for 64-bit keys (float64 under x64), which XLA sorts as a (keys, positions)
#: pair, 5x slower: the callback wins from here.
HOST_ARGSORT_64_MIN_SIZE = 1024

#: From this many keys, a sort of values runs in NumPy on CPU: XLA's one-operand sort is
#: within ~1.3x of ``np.sort`` and wins below this size.
HOST_SORT_MIN_SIZE = 32768

#: From this many keys, a sort within segments (``segment_argsort()``,
#: ``segment_sort()``) runs in NumPy on CPU: XLA's sort with two keys wins below it.
HOST_SEGMENT_SORT_MIN_SIZE = 4096

#: From this many uint32 keys, the host argsort sorts within buckets of the key
#: (``_bucketed_argsort_row()``): below it, one sort of all the packed pairs is as fast.
HOST_BUCKET_ARGSORT_MIN_SIZE = 32768

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


def float_from_bits(bits: jax.Array, dtype) -> jax.Array:
    """Inverse of ``monotone_bits()`` for float keys (canonical zeros and NaNs)."""
    top = _sign_bit(bits.dtype)
    return lax.bitcast_convert_type(jnp.where(bits >= top, bits ^ top, ~bits), dtype)


# ------------------------------------------------------------------ host sorts (NumPy)


def _host_argsort(bits: np.ndarray) -> np.ndarray:
    """Stable ascending order of unsigned ``bits`` along the last axis, as int32."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint32:
        return np.argsort(bits, axis=-1, kind="stable").astype(np.int32)
    if bits.shape[-1] >= HOST_BUCKET_ARGSORT_MIN_SIZE:
        rows = [_bucketed_argsort_row(row) for row in bits.reshape(-1, bits.shape[-1])]
        return np.stack(rows).reshape(bits.shape)
    return _packed_argsort(bits)


def _packed_argsort(bits: np.ndarray) -> np.ndarray:
    """Stable order of uint32 ``bits`` along the last axis: one sort of (key, position)
    packed into uint64."""
    pairs = np.empty((*bits.shape, 2), np.uint32)
    pairs[..., _LOW] = np.arange(bits.shape[-1], dtype=np.uint32)
    pairs[..., 1 - _LOW] = bits
    pairs.view(np.uint64).reshape(bits.shape).sort(axis=-1)
    return pairs[..., _LOW].astype(np.int32)


def _bucketed_argsort_row(bits: np.ndarray) -> np.ndarray:
    """``_host_argsort()`` of one long row of uint32: a sort within buckets of the key.

    The bucket ``(bits - min) >> shift`` is monotone in the key, so the stable order by
    (bucket, key) is the stable order by key; about ``N / 64`` buckets (at most 2**16,
    which NumPy's O(N) radix sort partitions) leave short runs whose sorts stay in cache:
    faster than one sort of all N packed pairs at 1e5-3e6 keys (1.4-2x for float32
    scores in [0, 1], 1.15x for normal ones, 2.5x for sorted keys). When a sample of
    every 64th key puts a sixteenth of the keys in one bucket (few distinct values, one
    dominant value), the partition would only add its cost (up to 1.4x): one sort of
    all the pairs then.
    """
    low, high = bits.min(), bits.max()
    buckets = max(1, min(bits.size // 64, 2**16))
    shift = np.uint32(max(0, int(high - low).bit_length() - (buckets.bit_length() - 1)))
    sample = np.bincount((bits[::64] - low) >> shift)
    if 16 * sample.max() > sample.sum():
        return _packed_argsort(bits)
    ids = ((bits - low) >> shift).astype(np.int32)
    return _host_segment_argsort_row(ids, bits)


def _host_sort(keys: np.ndarray) -> np.ndarray:
    return np.sort(np.asarray(keys), axis=-1)


def _segments(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable order of non-negative ``ids`` (1-D) and the end of each id's run in it.

    Ids below 2**16 go through NumPy's radix sort (its stable sort of 16-bit keys): one
    O(N) partition.
    """
    counts = np.bincount(ids)
    small = ids.astype(np.uint16) if counts.size <= 2**16 else ids
    return np.argsort(small, kind="stable"), np.cumsum(counts)


def _runs(ends: np.ndarray, n: int):
    """(start, stop) of the runs of ``ends`` with two keys or more; None when there are so
    many short runs that a Python loop over them would cost more than one whole sort."""
    starts = np.concatenate([[0], ends[:-1]])
    long = np.flatnonzero(ends - starts > 1)
    if long.size > max(n // 64, 64):
        return None
    return zip(starts[long].tolist(), ends[long].tolist(), strict=True)


def _host_segment_argsort_row(ids: np.ndarray, bits: np.ndarray) -> np.ndarray:
    order, ends = _segments(ids)
    runs = _runs(ends, ids.size)
    if runs is None:
        return np.lexsort((bits, ids)).astype(np.int32)
    keys = bits[order]
    if keys.dtype == np.uint32:
        # Key in the high word, position in the low word: distinct, so stable by construction.
        pairs = np.empty((ids.size, 2), np.uint32)
        pairs[:, _LOW] = order
        pairs[:, 1 - _LOW] = keys
        packed = pairs.view(np.uint64).reshape(ids.size)
        for lo, hi in runs:
            packed[lo:hi].sort()
        return pairs[:, _LOW].astype(np.int32)
    for lo, hi in runs:
        order[lo:hi] = order[lo:hi][np.argsort(keys[lo:hi], kind="stable")]
    return order.astype(np.int32)


def _host_segment_sort_row(ids: np.ndarray, bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order, ends = _segments(ids)
    runs = _runs(ends, ids.size)
    if runs is None:
        order = np.lexsort((bits, ids))
        return ids[order], bits[order]
    keys = bits[order]
    for lo, hi in runs:
        keys[lo:hi].sort()
    return np.repeat(np.arange(ends.size, dtype=ids.dtype), np.diff(ends, prepend=0)), keys


def _by_row(fn, ids: np.ndarray, bits: np.ndarray, outputs: int) -> tuple[np.ndarray, ...]:
    """``fn`` of each row of ``ids`` and ``bits`` (broadcast against each other)."""
    ids, bits = np.broadcast_arrays(np.asarray(ids), np.asarray(bits))
    n = ids.shape[-1]
    rows = [fn(i, b) for i, b in zip(ids.reshape(-1, n), bits.reshape(-1, n), strict=True)]
    rows = [r if outputs > 1 else (r,) for r in rows]
    return tuple(np.stack([r[k] for r in rows]).reshape(ids.shape) for k in range(outputs))


def _host_segment_argsort(ids, bits):
    return _by_row(_host_segment_argsort_row, ids, bits, 1)


def _host_segment_sort(ids, bits):
    return _by_row(_host_segment_sort_row, ids, bits, 2)


def _callback(fn, x: jax.Array, dtype) -> jax.Array:
    """``fn`` (NumPy, last axis) of ``x`` on the host, one result of ``dtype`` and x's shape."""
    return _callbacks(lambda a: (fn(a),), (x,), (dtype,))[0]


def _callbacks(fn, xs: tuple[jax.Array, ...], dtypes: tuple) -> tuple[jax.Array, ...]:
    """``fn(*xs)`` (NumPy, last axis) on the host; 64-bit arrays cross as pairs of uint32.

    Every result has the shape of ``xs[0]`` (the arrays of ``xs`` share it; under ``vmap``
    one may arrive with a leading axis of 1, which ``fn`` broadcasts).

    The callback may run on a thread where ``jax.enable_x64()`` (a thread-local context) is
    off, and JAX then converts a uint64 argument or result to 32 bits by value, truncating
    it (an x64 argsort of float64 keys came back wrong in 14 of 20 calls). Pairs of uint32
    words survive any setting; the host reassembles them with a view, which copies nothing.
    """
    wide_in = tuple(x.dtype.itemsize == 8 for x in xs)
    wide_out = tuple(np.dtype(d).itemsize == 8 for d in dtypes)
    in_dtypes = tuple(np.dtype(x.dtype) for x in xs)
    shape = xs[0].shape

    def host(*arrays):
        arrays = [
            np.ascontiguousarray(a).view(d)[..., 0] if wide else np.asarray(a)
            for a, d, wide in zip(arrays, in_dtypes, wide_in, strict=True)
        ]
        outs = [np.asarray(o) for o in fn(*arrays)]
        return tuple(
            np.ascontiguousarray(o).view(np.uint32).reshape(*o.shape, 2) if wide else o
            for o, wide in zip(outs, wide_out, strict=True)
        )

    args = tuple(
        lax.bitcast_convert_type(x, jnp.uint32) if wide else x
        for x, wide in zip(xs, wide_in, strict=True)
    )
    results = tuple(
        jax.ShapeDtypeStruct((*shape, 2), jnp.uint32) if wide else jax.ShapeDtypeStruct(shape, d)
        for d, wide in zip(dtypes, wide_out, strict=True)
    )
    outs = jax.pure_callback(host, results, *args, vmap_method="expand_dims")
    outs = tuple(
        lax.bitcast_convert_type(o, d) if wide else o
        for o, d, wide in zip(outs, dtypes, wide_out, strict=True)
    )
    # Inside shard_map the result varies over the mesh axes the keys vary over (the
    # callback sorts each shard's keys); pure_callback's result type does not say so.
    varying = set()
    for x in xs:
        mat = getattr(jax.typeof(x), "manual_axis_type", None)
        varying |= set(mat.varying) if mat is not None else set()
    axes = tuple(sorted(varying))
    return tuple(lax.pcast(o, axes, to="varying") for o in outs) if axes else outs


def _xla_argsort(bits: jax.Array) -> jax.Array:
    """Stable argsort in XLA. Keys of up to 32 bits are packed with their positions into
    uint64 (as the host sort does) and sorted as one operand: XLA:CPU sorts one operand
    without its comparator call per pair, 5x faster than the (keys, positions) pair
    (0.11 s against 0.56 s for 200 rows of 12,288; the stored report kernels sort in
    XLA, ``device_sorts()``). The uint64 values are made under a local x64 scope: they
    never leave this function."""
    axis = bits.ndim - 1
    if jnp.dtype(bits.dtype).itemsize <= 4:
        with jax.enable_x64(True):
            packed = bits.astype(jnp.uint64) << np.uint64(32)
            packed = packed | lax.broadcasted_iota(jnp.uint64, bits.shape, axis)
            ranked = lax.sort(packed, dimension=axis)
            return (ranked & np.uint64(0xFFFFFFFF)).astype(jnp.int32)
    iota = lax.broadcasted_iota(jnp.int32, bits.shape, axis)
    return lax.sort((bits, iota), dimension=axis, is_stable=True, num_keys=1)[1]


def _xla_sort(keys: jax.Array) -> jax.Array:
    return lax.sort(keys, dimension=keys.ndim - 1)


_DEVICE_ONLY = threading.local()  # .active: sorts traced now stay in XLA (device_sorts())


@contextlib.contextmanager
def device_sorts():
    """Sorts traced in this block (this thread) stay in XLA, on every backend.

    For programs that must not call back into Python: an executable with a host callback
    cannot be serialised and loaded in another process, so ``jaxcal report``'s stored
    kernels are traced in this block (``jaxcal/_core/store.py``), at the price of XLA's
    slower sorts on CPU (at most 5x NumPy's; the command line does it for inputs of up
    to ``STORED_SORT_MAX_ROWS`` rows, where compiling costs more than sorting).
    """
    before = getattr(_DEVICE_ONLY, "active", False)
    _DEVICE_ONLY.active = True
    try:
        yield
    finally:
        _DEVICE_ONLY.active = before


def _on_host(n: int, threshold: int) -> bool:
    if n >= 2**31:
        raise ValueError(f"jaxcal sorts fewer than 2**31 keys per row; got {n}.")
    return n >= threshold and not getattr(_DEVICE_ONLY, "active", False)


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
    wide = jnp.dtype(bits.dtype).itemsize > 4
    if not _on_host(bits.shape[-1], HOST_ARGSORT_64_MIN_SIZE if wide else HOST_ARGSORT_MIN_SIZE):
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
    return float_from_bits(_sort_bits(monotone_bits(keys)), keys.dtype)


@_sort_floats.defjvp
def _sort_floats_jvp(primals, tangents):
    # Only when differentiating: the order that gathers the tangents (ties in input
    # order, as jnp.sort's gradient), and the canonical gathered keys as the primal.
    (keys,), (dkeys,) = primals, tangents
    order = argsort(keys)
    ranked = jnp.take_along_axis(keys, order, axis=-1)
    return float_from_bits(monotone_bits(ranked), keys.dtype), jnp.take_along_axis(
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


# ------------------------------------------------------------------ sorts within segments


def _segment_operands(ids: jax.Array, keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    ids = jnp.asarray(ids)
    if not jnp.issubdtype(ids.dtype, jnp.integer):
        raise ValueError(f"segment ids must be integers; got dtype {ids.dtype}.")
    ids = lax.stop_gradient(ids).astype(jnp.int32)
    return ids, monotone_bits(lax.stop_gradient(jnp.asarray(keys)))


def _xla_segment_sort(ids: jax.Array, bits: jax.Array, *more: jax.Array) -> tuple:
    return lax.sort((ids, bits, *more), dimension=ids.ndim - 1, is_stable=True, num_keys=2)


def segment_argsort(ids: jax.Array, keys: jax.Array) -> jax.Array:
    """Stable order by (``ids``, ``keys``) along the last axis, as int32.

    ``np.lexsort((keys, ids))`` with ``keys`` ordered as in ``argsort()``: one sort for
    segments of samples. ``ids`` are non-negative integers (each a segment). On CPU the
    host partitions by id in O(N) (NumPy's radix sort of 16-bit keys) and then sorts each
    segment's (key, position) pairs packed into uint64 (positions make the packed values
    distinct, so the order is stable by construction); this costs less than one sort of
    all N pairs, and about a third of two stable argsorts (a key, then the id). Elsewhere,
    and for rows shorter than ``HOST_SEGMENT_SORT_MIN_SIZE``, XLA's sort with two keys.

    Example:
      >>> import jax.numpy as jnp
      >>> segment_argsort(jnp.array([1, 0, 1, 0]), jnp.array([0.5, 0.7, 0.2, -0.0])).tolist()
      [3, 1, 2, 0]
    """
    ids, bits = _segment_operands(ids, keys)

    def xla(i, b):
        return _xla_segment_sort(i, b, lax.broadcasted_iota(jnp.int32, i.shape, i.ndim - 1))[2]

    if not _on_host(ids.shape[-1], HOST_SEGMENT_SORT_MIN_SIZE):
        return xla(ids, bits)

    def host(i, b):
        return _callbacks(_host_segment_argsort, (i, b), (jnp.int32,))[0]

    return lax.platform_dependent(ids, bits, cpu=host, default=xla)


def segment_sort(ids: jax.Array, keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(``ids``, ``keys``) sorted by id, then key, along the last axis.

    The values of ``jnp.take_along_axis(a, segment_argsort(ids, keys), -1)`` for ``a`` in
    (``ids`` as int32, ``keys``), without the order: on CPU each segment's keys alone are
    sorted after the O(N) partition by id, about half the cost of
    ``segment_argsort()``. Integer keys only (float keys have no canonical value for
    their ties: -0.0 and 0.0, NaNs); no derivative.

    Example:
      >>> import jax.numpy as jnp
      >>> ids, keys = segment_sort(jnp.array([1, 0, 1, 0]), jnp.array([5, 7, 2, -3]))
      >>> ids.tolist(), keys.tolist()
      ([0, 0, 1, 1], [-3, 7, 2, 5])
    """
    keys = _widened(jnp.asarray(keys))
    if not jnp.issubdtype(keys.dtype, jnp.integer):
        raise ValueError(f"segment_sort sorts integer keys; got dtype {keys.dtype}.")
    ids, bits = _segment_operands(ids, keys)
    if not _on_host(ids.shape[-1], HOST_SEGMENT_SORT_MIN_SIZE):
        ids_s, bits_s = _xla_segment_sort(ids, bits)
    else:
        ids_s, bits_s = lax.platform_dependent(
            ids,
            bits,
            cpu=lambda i, b: _callbacks(_host_segment_sort, (i, b), (jnp.int32, b.dtype)),
            default=_xla_segment_sort,
        )
    if jnp.issubdtype(keys.dtype, jnp.signedinteger):
        bits_s = bits_s ^ _sign_bit(bits_s.dtype)
    return ids_s, lax.bitcast_convert_type(bits_s, keys.dtype)


def sort_by_first(*operands: jax.Array) -> tuple[jax.Array, ...]:
    """Sort ``operands`` by the first (stable): one ``argsort()`` (NumPy's
    SIMD sort on CPU, XLA's elsewhere), then one gather per operand."""
    perm = argsort(operands[0])
    return tuple(op[perm] for op in operands)
