"""Eager calls of the public functions: rows padded to size classes, executables stored.

Most evaluation is a few calls per process on a new N each time, and there ``jax.jit``
would trace, lower and compile a kernel for every new number of rows, and again in every
new process. An eager (concrete, untransformed) call of a public function instead runs
:func:`call_padded`:

1. **Size classes.** The rows are padded up to :func:`size_class` ``(N)``: at least
   ``MIN_ROWS``, then the geometric ladder ``2**k`` and ``1.5 * 2**k`` (two classes per
   octave). A new N inside a class compiles nothing. At worst the padded size is 1.5 N
   (N = 2**k + 1 pads to 1.5 * 2**k): an O(N) kernel does at most 50 % more work, and a
   decade of N costs at most 7 compilations (2 log2(10) ~ 6.6). Padding rows repeat the
   first row (so no new value, tie or extreme enters a sort or a range) with weight 0,
   which every kernel masks (``tests/test_api.py`` checks weight-0 rows change nothing,
   and eager, padded, equals ``jit`` of the unpadded call for every registry entry).
   Kernels whose cost is quadratic in N, or whose options are resolved from all rows
   regardless of weight, are called unpadded (``pad=False`` at their call), and so are
   inputs of more than ``PAD_MAX_ROWS`` rows (padding copies the rows through the host;
   at that size a compilation costs no more than a few calls).
2. **Executables reused across processes.** The compiled program of each (kernel,
   static options, padded shapes and dtypes) is kept in memory for the process and, when
   the store is on (``jaxcal/_core/store.py``; on by default, in ``kernels/`` of the
   cache folder of ``jaxcal/_core/cache_dir.py``), on disk, so a second process loads it
   in milliseconds instead of compiling it. Programs of up to ``STORED_SORT_MAX_ROWS``
   padded rows are traced with XLA's sorts so they can be stored; larger ones keep
   NumPy's faster host sorts and compile once per process.

Inside a user's ``jit``, ``vmap`` or ``grad`` none of this happens: the kernel is traced
into the user's program as it is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import numpy as np

from jaxcal._core import store
from jaxcal._core.cache import option_key
from jaxcal._core.checks import values_checkable
from jaxcal._core.sort import device_sorts

#: Inputs of up to this many rows are padded to it (a few microseconds of work).
MIN_ROWS = 128
#: Inputs of more rows are not padded: the copy through the host that padding costs
#: (a few ms per call at 2**16 rows, tens at 1e6, more on a loaded machine) would weigh on
#: every call, while one compilation is worth only a few calls of a kernel that size.
PAD_MAX_ROWS = 2**16

#: Executables kept in this process per (kernel, options, shapes); oldest dropped beyond.
MEMORY_ENTRIES = 512

_EXECUTABLES: dict[tuple, Any] = {}
_LOCK = threading.Lock()


def on_one_device(*arrays: Any) -> bool:
    """Every JAX array among ``arrays`` lives on a single device (padding gathers rows on
    the host, and the stored programs are single-device: an array sharded over a mesh is
    called as it is)."""
    for x in arrays:
        sharding = getattr(x, "sharding", None)
        if sharding is not None and len(sharding.device_set) != 1:
            return False
    return True


def size_class(n: int) -> int:
    """The padded number of rows for ``n`` rows: ``MIN_ROWS``, then ``2**k`` or ``1.5 * 2**k``.

    Example:
      >>> [size_class(n) for n in (1, 128, 129, 192, 193, 10_000, 12_288, 12_289)]
      [128, 128, 192, 192, 256, 12288, 12288, 16384]
    """
    if n <= MIN_ROWS:
        return MIN_ROWS
    low = 1 << ((n - 1).bit_length() - 1)  # low < n <= 2 * low
    middle = low + low // 2
    return middle if n <= middle else 2 * low


def _is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray))


def pad_rows(x: Any, n: int, m: int) -> np.ndarray:
    """``x`` ``(n, ...)`` with ``m - n`` copies of its first row appended (host side)."""
    x = np.asarray(x)
    return np.concatenate([x, np.broadcast_to(x[:1], (m - n, *x.shape[1:]))])


def _abstract(x: Any) -> tuple:
    return (tuple(x.shape), str(jax.dtypes.canonicalize_dtype(x.dtype)))


def _placement(arrays: Any) -> tuple:
    """The device of each committed JAX array (a program is compiled for its devices)."""
    return tuple(
        next(iter(a.sharding.device_set)).id if getattr(a, "committed", False) else None
        for a in jax.tree.leaves(arrays)
    )


def call_padded(
    kernel: Callable, probs: Any, labels: Any, weights: Any, static: tuple, carry: Any = None
) -> Any:
    """``kernel(probs, labels, weights, *static)`` on rows padded to ``size_class(N)``
    (``kernel(carry, probs, labels, weights, *static)`` when ``carry`` is given).

    Arrays of ``static`` whose first axis has N rows (segment ids, membership matrices)
    are padded with the data; other arrays (a key, a traced bandwidth) pass as they are;
    everything else is a static option of the compiled program. ``carry``: a pytree of
    arrays passed as they are, never padded whatever their shapes (a streaming state,
    whose K or R may equal N); its tree structure is part of the program's key.
    ``weights`` None becomes ones, then zeros on the padding. Eager callers only
    (concrete arrays, no tracing).
    """
    n = probs.shape[0]
    m = size_class(n)
    if weights is None:
        weights = np.ones(n, jax.dtypes.canonicalize_dtype(np.result_type(probs.dtype, np.float32)))
    arrays = [probs, labels, weights]
    slots: list[Any] = []  # for each static value: an index into arrays, or the value
    for value in static:
        if _is_array(value):
            slots.append(len(arrays))
            arrays.append(value)
        else:
            slots.append(_Static(value))
    if m != n:
        rows = [i for i, a in enumerate(arrays) if i < 3 or (a.ndim and a.shape[0] == n)]
        arrays = [pad_rows(a, n, m) if i in rows else a for i, a in enumerate(arrays)]
        weights_padded = np.asarray(arrays[2]).copy()
        weights_padded[n:] = 0
        arrays[2] = weights_padded
    if carry is not None:
        leaves, treedef = jax.tree.flatten(carry)
        slots.append(_Carry(treedef, len(arrays)))
        arrays.extend(leaves)
    executable = _executable(kernel, tuple(slots), arrays)
    return executable(*arrays)


class _Static:
    """A static option in the slots of ``call_padded`` (compared by value)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


class _Carry:
    """The slot of ``call_padded``'s ``carry``: its tree structure and first leaf's index."""

    __slots__ = ("start", "treedef")

    def __init__(self, treedef: Any, start: int):
        self.treedef, self.start = treedef, start

    def key(self) -> tuple:
        return ("carry", self.treedef, self.start)


def _run(kernel: Callable, slots: tuple, *arrays: Any) -> Any:
    if slots and isinstance(slots[-1], _Carry):
        carry = slots[-1]
        state = jax.tree.unflatten(carry.treedef, arrays[carry.start :])
        static = [arrays[s] if isinstance(s, int) else s.value for s in slots[:-1]]
        return kernel(state, *arrays[:3], *static)
    static = [arrays[s] if isinstance(s, int) else s.value for s in slots]
    return kernel(*arrays[:3], *static)


def _slot_key(slot: Any) -> Any:
    if isinstance(slot, int):
        return slot
    return slot.key() if isinstance(slot, _Carry) else option_key(slot.value)


def _executable(kernel: Callable, slots: tuple, arrays: list) -> Any:
    options = tuple(_slot_key(s) for s in slots)
    signature = tuple(_abstract(a) for a in arrays)
    key = (kernel, options, signature, _placement(arrays))
    with _LOCK:
        found = _EXECUTABLES.get(key)
    if found is not None:
        return found
    path = _stored_path(kernel, slots, signature)
    compiled = store.load(path) if path is not None and path.exists() else None
    if compiled is None:
        jitted = jax.jit(partial(_run, kernel, slots))
        rows = arrays[0].shape[0]
        if path is not None and rows <= store.STORED_SORT_MAX_ROWS:
            with device_sorts():
                lowered = jitted.lower(*arrays)
        else:
            lowered = jitted.lower(*arrays)
        compiled = store.compile_lowered(lowered, path, store.FAST_RUN)
    _remember(key, compiled)
    return compiled


#: Types whose instances are named by their repr across processes.
_NAMED_BY_REPR = (type(None), bool, int, float, complex, str, bytes, np.dtype, np.generic)
#: How deep ``stable_name`` follows closures and containers before giving up.
_NAME_DEPTH = 64


def stable_name(value: Any, _path: tuple = ()) -> str | None:
    """A name of ``value`` that is the same in every process for the same program, or None.

    Plain values are named by their repr; a function of jaxcal by its module and
    qualified name; a closure (a calibrator factory's kernels) by that and the names of
    everything it closes over and its defaults, recursively, so two closures with equal
    options share a name, and any option outside these types (an optax optimizer, an
    array, a function outside jaxcal, whose code the store's digest of jaxcal's sources
    does not cover) makes the program unnameable: it is then compiled in each process,
    never loaded for other options or other code.

    Example:
      >>> stable_name((1, "right", None))
      "tuple(1, 'right', None)"
      >>> stable_name(object()) is None
      True
      >>> stable_name(lambda x: x) is None
      True
    """
    if isinstance(value, _NAMED_BY_REPR):
        return repr(value)
    if id(value) in _path:  # a closure that refers to itself: named where it is defined
        return f"<recursion {len(_path) - _path.index(id(value))}>"
    if len(_path) > _NAME_DEPTH:
        return None
    path = (*_path, id(value))
    if isinstance(value, (tuple, list)):
        names = [stable_name(v, path) for v in value]
        return None if None in names else f"{type(value).__name__}({', '.join(names)})"
    if isinstance(value, partial):
        inner = stable_name((value.func, value.args, tuple(sorted(value.keywords.items()))), path)
        return None if inner is None else f"partial{inner}"
    code = getattr(value, "__code__", None)
    wrapped = getattr(value, "__wrapped__", None)
    if code is None and wrapped is not None and callable(value):
        inner = stable_name(wrapped, path)  # jax.jit(fn), custom_jvp(fn): named by fn
        return None if inner is None else f"{type(value).__name__}({inner})"
    module = getattr(value, "__module__", None) or ""
    if code is None or "<lambda>" in value.__qualname__ or module.split(".")[0] != "jaxcal":
        return None  # only jaxcal's code is named by the store's digest of its sources
    cells = [c.cell_contents for c in value.__closure__ or ()]
    parts = (value.__defaults__, tuple(sorted((value.__kwdefaults__ or {}).items())), cells)
    inner = stable_name(parts, path)
    return None if inner is None else f"{module}.{value.__qualname__}{inner}"


def _stored_path(kernel: Callable, slots: tuple, signature: tuple):
    """The store's file for this program, or None (store off, or not nameable across
    processes: see ``stable_name``)."""
    name = stable_name(kernel)
    # A carry's tree structure is named by its repr: the class and its static metadata
    # (a streaming state's ``closed``, ``binary``, ``n_bins``), the same in every process.
    layout = tuple(
        s
        if isinstance(s, int)
        else ("carry", repr(s.treedef), s.start)
        if isinstance(s, _Carry)
        else ("static", stable_name(s.value))
        for s in slots
    )
    if name is None or any(part[1] is None for part in layout if isinstance(part, tuple)):
        return None
    return store.entry_path("eager", repr((name, layout, signature)))


def apply_padded(kernel: Callable, params: Any, x: Any) -> jax.Array:
    """``kernel(params, x)`` of a per-row map (a calibrator's ``apply``) on rows padded to
    ``size_class(N)``, the first N rows of its output returned (sliced on the host: an
    eager slice would compile a program for every N)."""
    n = x.shape[0]
    m = size_class(n)
    padded = pad_rows(x, n, m) if m != n else x
    leaves, treedef = jax.tree.flatten(params)
    key = (kernel, treedef, tuple(_abstract(v) for v in leaves), _abstract(padded))
    key += (_placement((leaves, padded)),)
    with _LOCK:
        compiled = _EXECUTABLES.get(key)
    if compiled is None:
        name, path = stable_name(kernel), None
        if name is not None:
            path = store.entry_path("apply", repr((name, repr(treedef), key[2], key[3])))
        compiled = store.load(path) if path is not None and path.exists() else None
        if compiled is None:
            lowered = jax.jit(kernel).lower(params, padded)
            compiled = store.compile_lowered(lowered, path, store.FAST_RUN)
        _remember(key, compiled)
    out = compiled(params, padded)
    return out if m == n else jax.device_put(np.asarray(out)[:n])


def call_stored(kernel: Callable, *args: Any, **static: Any) -> Any:
    """``kernel(*args, **static)`` for a jitted kernel whose shapes do not follow the data
    (a streaming state's ``compute``): compiled once per process, kept in the store.

    ``args`` are pytrees of arrays, ``static`` the kernel's static options. Eager calls
    only; under a transformation (traced arrays) or for arrays on several devices the
    kernel is called as it is.
    """
    leaves, treedef = jax.tree.flatten(args)
    arrays = all(isinstance(x, (jax.Array, np.ndarray)) for x in leaves)
    if not (arrays and values_checkable(*leaves) and on_one_device(*leaves)):
        return kernel(*args, **static)
    signature = tuple(_abstract(x) for x in leaves)
    options = tuple(sorted(static.items()))
    key = (kernel, treedef, option_key(options), signature, _placement(leaves))
    with _LOCK:
        compiled = _EXECUTABLES.get(key)
    if compiled is None:
        name, path = stable_name((kernel, options)), None
        if name is not None:
            path = store.entry_path("stored", repr((name, repr(treedef), signature)))
        compiled = store.load(path) if path is not None and path.exists() else None
        if compiled is None:
            lowered = jax.jit(partial(kernel, **static)).lower(*args)
            compiled = store.compile_lowered(lowered, path, store.FAST_RUN)
        _remember(key, compiled)
    return compiled(*args)


_ROW_FREE: dict[tuple, bool] = {}


def outputs_free_of_rows(kernel: Callable, arrays: tuple, static: tuple = ()) -> bool:
    """Whether ``kernel(*arrays, *static)``'s output shapes do not depend on the number of
    rows (checked once per kernel and trailing shapes by tracing at two sizes): a fit
    whose parameters are buffers of its N rows (isotonic, Venn-Abers) cannot be padded."""
    key = (kernel, option_key(static), tuple(_abstract(a)[0][1:] for a in arrays if a is not None))
    if key not in _ROW_FREE:

        def shapes(rows):
            specs = [
                None if a is None else jax.ShapeDtypeStruct((rows, *a.shape[1:]), a.dtype)
                for a in arrays
            ]
            out = jax.eval_shape(lambda *xs: kernel(*xs, *static), *specs)
            return [v.shape for v in jax.tree.leaves(out)]

        _ROW_FREE[key] = shapes(MIN_ROWS) == shapes(MIN_ROWS + MIN_ROWS // 2)
    return _ROW_FREE[key]


def _remember(key: tuple, compiled: Any) -> None:
    with _LOCK:
        if len(_EXECUTABLES) >= MEMORY_ENTRIES:
            del _EXECUTABLES[next(iter(_EXECUTABLES))]
        _EXECUTABLES[key] = compiled


def clear_memory() -> None:
    """Forget the executables this process holds: the eager calls' and the command line's
    kernels (the next call loads or compiles again). ``jax.clear_caches()`` calls it too.

    Each executable holds its machine code: a process that compiles thousands of
    programs (the test suite) and keeps them all grows by gigabytes, and XLA:CPU has
    crashed in such a process (``conftest.py``).
    """
    with _LOCK:
        _EXECUTABLES.clear()
        _ROW_FREE.clear()
    store.forget_kernels()


class _ClearedWithJax:
    """What ``jax.clear_caches()`` clears of jaxcal: the executables of this module and of
    the store's kernels. JAX clears every cache registered with it (a private function,
    ``jax._src.util.register_cache``; without it, ``clear_memory`` still works)."""

    def cache_clear(self) -> None:
        clear_memory()

    def cache_info(self) -> str:
        return f"{len(_EXECUTABLES)} eager executables"

    def cache_keys(self) -> list:
        return list(_EXECUTABLES)


_CLEARED_WITH_JAX = _ClearedWithJax()  # JAX holds it weakly: kept alive here
try:
    from jax._src import util as _jax_util

    _jax_util.register_cache(_CLEARED_WITH_JAX, "jaxcal's executables")
except (ImportError, AttributeError):
    pass
