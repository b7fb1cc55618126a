"""Compiled executables kept on disk: the report's kernels and every eager public call.

A first ``jaxcal report`` is almost all compilation, and a second one would be almost
all tracing and lowering the same large graphs again (JAX's persistent compilation
cache skips only the XLA compilation: its key is the lowered program). A
``Kernel`` therefore keeps each compiled executable itself on disk
(``jax.experimental.serialize_executable``), keyed by everything the program depends on
(the kernel's name, argument shapes and static options, compiler options, a digest of
jaxcal's source, the jax/jaxlib versions, the backend and the CPU's features, JAX's
configuration and ``XLA_FLAGS``), so that a later run loads it without tracing. Any
problem reading an entry falls back to compiling; entries are written atomically and
the oldest are pruned beyond ``MAX_ENTRIES``. An executable that cannot be serialised
(host callbacks, captured constants), that calls a custom-call target a loading process
might not have ready (``storable_targets()``), or that JAX read from its own persistent
cache (written out again it fails at run time on XLA:CPU: "Function ... not found"), is
simply not stored.

Compilation runs in a worker thread (:meth:`Kernel.prepare` returns a future): XLA
releases the GIL while it compiles, so the next kernel is traced, or the previous one
runs, meanwhile.

The same store serves the eager calls of the library's public functions
(``jaxcal/_core/eager.py``: ``entry_path``, ``load``, ``compile_lowered``). It is on by
default, in ``kernels/`` of the cache folder (``jaxcal/_core/cache_dir.py``), and off
with ``JAXCAL_KERNEL_STORE=0`` (or ``JAXCAL_NO_COMPILATION_CACHE=1``) or
:func:`set_executable_store` ``(None)``. Processes may share it at once: an entry is
written to a temporary file and renamed into place, so a reader sees a whole entry or
none, and a damaged one is removed and compiled again.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import platform
import re
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache, partial
from pathlib import Path
from typing import Any

import jax
import jaxlib
from jax.experimental import serialize_executable

from jaxcal._core.sort import device_sorts

try:  # jaxlib's LAPACK targets (private API): without it, no executable calling LAPACK is stored
    from jax._src.lib import lapack as _jaxlib_lapack

    _lapack = _jaxlib_lapack._lapack  # what jax._src.lax.linalg.initialize_lapack initialises
except (ImportError, AttributeError):
    _lapack = None

#: Stored executables kept at most (least recently used pruned first): the report's few
#: kernels and the eager programs of every function, size class and option a user calls.
MAX_ENTRIES = 1024
#: Bumped when the stored format changes.
_FORMAT = "jaxcal-kernel/1"

#: XLA:CPU options of the report's kernels: large graphs that run once on small data, so
#: compile time dominates. The classic (non-MLIR) fusion emitters compile 2-3x faster
#: than the default ones, and backend optimisation level 0 halves that again; the
#: numbers are those of the previous -O0 build bit for bit (at -O1 the report would run
#: 0.09 s per model instead of 0.25 s, but its sums round differently, by up to 1e-5).
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
#: For kernels whose run time matters (iterative fits): classic emitters, optimised code
#: (Platt scaling's L-BFGS loops run 1.1 s per model at -O0, 0.2 s here, and land where
#: ``jax.jit`` with default options does).
FAST_RUN = {"xla_cpu_use_fusion_emitters": False}

#: Inputs of up to this many rows are traced with XLA's sorts, so that their kernels can be
#: stored (a host callback cannot be): at N = 2**16 XLA:CPU's argsort takes ~5 ms against
#: NumPy's ~1 ms, small beside the seconds a compilation costs.
STORED_SORT_MAX_ROWS = 2**16

_UNSET = object()
_store: Any = _UNSET  # the folder, None (off), or _UNSET (the default, resolved on first use)
_pool: ThreadPoolExecutor | None = None
_compiling = threading.local()  # .from_jax_cache: the current thread's compile was a hit
_KERNELS: weakref.WeakSet[Kernel] = weakref.WeakSet()  # every Kernel, for forget_kernels()


def _on_event(event: str, **_) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _compiling.from_jax_cache = True


jax.monitoring.register_event_listener(_on_event)


def set_store(folder: str | os.PathLike | None) -> None:
    """Keep compiled executables in ``folder`` (None: in memory only)."""
    global _store
    _store = None if folder is None else Path(folder)


def set_executable_store(folder: str | os.PathLike | bool | None = True) -> None:
    """Where jaxcal keeps compiled programs between processes; ``None`` or False: nowhere.

    Every eager call of a public function (and ``jaxcal report``) compiles its program
    once per size class of its input (``jaxcal/_core/eager.py``) and keeps the
    executable in this folder, so a later process loads it instead of compiling. On by
    default, in ``kernels/`` of ``$JAXCAL_CACHE_DIR``, ``$XDG_CACHE_HOME/jaxcal`` or
    ``~/.cache/jaxcal`` (created with mode 0700: the entries are native code this user
    runs); the environment variable ``JAXCAL_KERNEL_STORE=0`` turns the default off.
    Deleting the folder is always safe.

    Args:
      folder: a folder; True for the default folder; None or False for no store (each
        process compiles again; programs are still kept for the rest of the process).

    Example:
      >>> import jaxcal
      >>> jaxcal.set_executable_store(None)   # this process stores nothing
      >>> jaxcal.set_executable_store(True)   # back to the default folder
    """
    global _store
    if folder is True:
        _store = _UNSET
    elif folder is None or folder is False:
        _store = None
    else:
        _store = Path(folder)


def store_folder() -> Path | None:
    """The folder of the store now in force (the default resolved on first use), or None."""
    global _store
    if _store is _UNSET:
        from jaxcal._core.cache_dir import kernel_folder

        _store = kernel_folder()
    return _store


def _servable() -> bool:
    """Whether this process may store and load programs: XLA:CPU, one process. Under
    ``jax.distributed`` every process would share a key, but a program compiled in one
    process targets that process's device: another process loading it ran it on a device
    it cannot address and hung in a cross-process collective."""
    return jax.default_backend() == "cpu" and jax.process_count() == 1


def entry_path(kind: str, key: str) -> Path | None:
    """The file of a stored program of ``kind`` identified by ``key`` (a string that names
    everything the program depends on besides the environment), or None (store off, or a
    backend the store does not serve)."""
    folder = store_folder()
    if folder is None or not _servable():
        return None
    digest = hashlib.sha256(repr((_environment(), key)).encode()).hexdigest()[:40]
    return folder / f"{kind}-{digest}.bin"


def load(path: Path) -> Any | None:
    """The executable stored at ``path``, or None (absent, damaged or foreign)."""
    return _load(path)


def compile_lowered(lowered, path: Path | None, options: dict | None = None):
    """Compile ``lowered`` here (with XLA:CPU ``options``) and store it at ``path`` when
    storable."""
    return _compile(lowered, path, options if jax.default_backend() == "cpu" else None)


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="jaxcal-compile")
    return _pool


@cache
def _source_digest() -> str:
    """sha256 of jaxcal's Python sources: an edited checkout never loads stale code."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _cpu_features() -> str:
    """The CPU's instruction-set flags (Linux), so a shared home never runs foreign code."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


@cache
def _environment() -> str:
    """Everything outside a kernel's own arguments that its executable depends on."""
    device = jax.devices()[0]
    config = {
        k: v
        for k, v in sorted(jax.config.values.items())
        if isinstance(v, (bool, int, float, str, type(None))) and "cache" not in k
    }
    parts = (
        _FORMAT,
        _source_digest(),
        jax.__version__,
        jaxlib.__version__,
        sys.version,
        platform.machine(),
        _cpu_features(),
        device.client.platform,
        device.client.platform_version,
        device.device_kind,
        len(jax.devices()),
        os.environ.get("XLA_FLAGS", ""),
        config,
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _abstract(x) -> tuple:
    # The dtype JAX computes in: float64 NumPy input is float32 on the device unless x64.
    return (tuple(x.shape), str(jax.dtypes.canonicalize_dtype(x.dtype)))


class Kernel:
    """A jitted function of the command line, compiled once per process and kept on disk.

    ``fn(*arrays, **static)``: the arrays are its only traced arguments (NumPy or JAX,
    no pytrees); ``static`` values must be ``str``, ``int``, ``float``, ``bool`` or None.
    """

    def __init__(self, name: str, fn: Callable, *, options: dict | None = None):
        self.name = name
        self.fn = fn
        self.options = dict(FAST_COMPILE if options is None else options)
        self._ready: dict[tuple, Future] = {}
        _KERNELS.add(self)

    def __call__(self, *arrays, **static):
        """Run the kernel (compiling or loading it first if needed); asynchronous results."""
        signature = self._signature(arrays, static)
        compiled = self.prepare(*arrays, **static).result()
        if compiled is None:  # the stored entry could not be loaded: compile it now
            self._ready[signature] = self._compile(signature, arrays, static)
            compiled = self._ready[signature].result()
        return compiled(*arrays)

    def prepare(self, *arrays, **static) -> Future:
        """A future of the executable for these shapes and static options (None: a stored
        entry that could not be loaded; ``__call__`` then compiles)."""
        signature = self._signature(arrays, static)
        if signature not in self._ready:
            path = self._path(signature)
            if path is not None and path.exists():  # loading releases the GIL: in a worker
                self._ready[signature] = _executor().submit(_load, path)
            else:
                self._ready[signature] = self._compile(signature, arrays, static)
        return self._ready[signature]

    def _signature(self, arrays, static) -> tuple:
        for value in static.values():
            if not isinstance(value, (str, int, float, bool, type(None))):
                raise TypeError(f"static option of {self.name} must be a scalar; got {value!r}")
        return (tuple(_abstract(a) for a in arrays), tuple(sorted(static.items())))

    def _path(self, signature) -> Path | None:
        # The store and the options are for XLA:CPU; other backends compile once per process.
        folder = store_folder()
        if folder is None or not _servable():
            return None
        key = repr((_environment(), self.name, signature, sorted(self.options.items())))
        return folder / f"{self.name}-{hashlib.sha256(key.encode()).hexdigest()[:40]}.bin"

    def _compile(self, signature, arrays, static) -> Future:
        """Trace and lower here (tracing holds the GIL), compile in a worker thread.

        Inputs of up to ``STORED_SORT_MAX_ROWS`` rows are traced with XLA's sorts (no host
        callback, so the executable can be stored and loaded by the next run); larger ones
        keep NumPy's sorts, faster to run, and compile in each run.
        """
        options = self.options if jax.default_backend() == "cpu" else None
        jitted = jax.jit(partial(self.fn, **static), compiler_options=options)
        rows = max((a.shape[0] for a in arrays if getattr(a, "ndim", 0)), default=0)
        if self._path(signature) is not None and rows <= STORED_SORT_MAX_ROWS:
            with device_sorts():
                lowered = jitted.lower(*arrays)
        else:
            lowered = jitted.lower(*arrays)
        return _executor().submit(_compile, lowered, self._path(signature))


def forget_kernels() -> None:
    """Drop every ``Kernel``'s executables held by this process (the next call loads or
    compiles again); ``jaxcal/_core/eager.py``'s ``clear_memory`` calls it."""
    for kernel in list(_KERNELS):
        kernel._ready.clear()


def _compile(lowered, path: Path | None, options: dict | None = None):
    _compiling.from_jax_cache = False
    try:
        compiled = lowered.compile(compiler_options=options) if options else lowered.compile()
    except jax.errors.JaxRuntimeError as err:  # an XLA without one of the options
        if "compile option" not in str(err):
            raise
        compiled = lowered.compile(compiler_options={})
    if path is not None and not _compiling.from_jax_cache:
        _save(compiled, path)
    return compiled


def _initialize_lapack() -> None:
    """Load jaxlib's LAPACK kernels, as lowering a linear-algebra op would.

    JAX fills the LAPACK custom-call targets lazily, when it first lowers a linalg op; a
    process that only loads a stored executable never does, and the executable's first
    LAPACK call (``calibration_slope_intercept``'s solve in a binary report) jumped into
    an unset pointer: SIGSEGV. One call fills every ``lapack_*`` target of jaxlib (its
    ``GetLapackKernelsFromScipy`` reads them all from SciPy's LAPACK at once).
    """
    if _lapack is not None:
        _lapack.initialize()


@cache
def storable_targets() -> frozenset[str]:
    """The custom-call targets a stored executable may call: those ``_load()`` makes ready.

    An allow-list: a fresh process that only loads executables has lowered nothing, so a
    target that JAX or jaxlib registers or fills on first use may be unset there. jaxlib
    registers its ``lapack_*`` targets when JAX is imported but fills them only when a
    linalg op is lowered; ``_load()`` fills them first, so they are allowed (where the
    private module exists). Everything else (the Python host callbacks of
    ``jaxcal/_core/sort.py`` at N >= 1024, ``jax.experimental.sparse``'s targets, registered
    when that module is imported, a target a later jaxlib adds) is compiled again in each
    process instead of stored. XLA's own runtime calls are not custom calls.
    """
    if _lapack is None:
        return frozenset()
    return frozenset(name for name in _lapack.registrations() if name.startswith("lapack_"))


_TARGET = re.compile(r'custom_call_target="([^"]*)"')


def custom_call_targets(compiled) -> frozenset[str] | None:
    """Names of the custom calls in ``compiled``'s optimised HLO (None: no text to read)."""
    try:
        text = compiled.as_text()
    except Exception:  # a backend that keeps no HLO text: nothing can be checked
        return None
    return None if not isinstance(text, str) else frozenset(_TARGET.findall(text))


def _load(path: Path) -> Any | None:
    """The stored executable at ``path``, or None (absent or unreadable: then removed)."""
    _initialize_lapack()
    try:
        with open(path, "rb") as f:
            payload, in_tree, out_tree = pickle.load(f)
        compiled = serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
    except FileNotFoundError:
        return None
    except Exception:  # a damaged or foreign entry: compile instead
        path.unlink(missing_ok=True)
        return None
    os.utime(path)  # recently used: pruned last
    return compiled


def _save(compiled, path: Path) -> None:
    """Write ``compiled`` to ``path`` atomically; never fails the report."""
    targets = custom_call_targets(compiled)
    if targets is None or not targets <= storable_targets():
        return  # a loading process might call an unset target: compile it there instead
    tmp = None
    try:
        blob = pickle.dumps(serialize_executable.serialize(compiled))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
        tmp = None
        _prune(path.parent)
    except Exception:  # not serialisable, or the disk is full: run uncached
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.bin"), key=lambda p: p.stat().st_mtime)
    for old in entries[:-MAX_ENTRIES]:
        old.unlink(missing_ok=True)
