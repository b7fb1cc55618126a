"""``jaxcal report``'s cache folder: compiled kernels kept on disk between runs.

Almost all of a first ``jaxcal report`` is XLA compiling its kernels, and almost all of a
second one would be tracing and lowering them again. The command line keeps the
compiled executables themselves (``jaxcal/_core/store.py``: each input shape's report,
and with ``--fit`` the uncalibrated scores and each calibrator's cross-fit) in
``kernels/`` of:

1. ``$JAXCAL_CACHE_DIR`` if set;
2. else ``$XDG_CACHE_HOME/jaxcal`` if ``XDG_CACHE_HOME`` is set;
3. else ``~/.cache/jaxcal``.

On by default; ``--no-cache``, ``JAXCAL_NO_COMPILATION_CACHE=1`` or ``JAXCAL_KERNEL_STORE=0``
turn it off. (It was opt-in while a binary model's stored report crashed the process that
loaded it, SIGSEGV: jaxlib fills its LAPACK custom-call targets only when JAX first lowers
a linalg op, which a process that only loads executables never does. ``_kernels._load``
now fills them first; only executables whose custom calls are all on an allow-list, those
LAPACK targets, are stored (``storable_targets()``; a Python host callback
cannot be, so inputs of up to 2**16 rows are traced with XLA's sorts instead of NumPy's,
``STORED_SORT_MAX_ROWS``, and only larger ones compile again in each run); and every
kernel kind round-trips through a fresh process: tests/core/test_store.py.) The streamed
report (Parquet, ``--stream``) and ``--by``, ``--plot`` compile with plain ``jax.jit``
and store nothing. Entries are keyed by the program, the compiler options, the versions
and the machine, so deleting the folder is always safe (the next run compiles again).
Like JAX's own cache, the entries are native code that the command loads and runs: the
folder must be writable by its user only (``~/.cache`` is; the command creates
``kernels/`` with mode 0700).

JAX's own persistent compilation cache is not turned on for the kernels: it skips only the
XLA compilation (its key is the lowered program), and an executable it has read back
cannot be written out again on XLA:CPU (the copy fails at run time with "Function ... not
found"), so the two do not combine. When the user turns it on
(``JAX_COMPILATION_CACHE_DIR``), kernels that come from it are used but not stored.
``--plot`` is different: the plotting functions compile with plain ``jax.jit`` once every
kernel is done, 21 programs and ~5 s of XLA compilation for the demo's three panels, so
``plot_cache()`` turns JAX's cache on (in ``jax/`` beside ``kernels/``) just for them: a
second ``--plot`` traces its programs and reads their compilations back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: Environment variable that turns the cache off when set to anything but "", "0", "no".
NO_CACHE_ENV = "JAXCAL_NO_COMPILATION_CACHE"
#: Environment variable naming the cache folder.
CACHE_DIR_ENV = "JAXCAL_CACHE_DIR"
#: Environment variable that turns the on-disk kernel store off ("0", "false", "no", "off").
STORE_ENV = "JAXCAL_KERNEL_STORE"


def store_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the on-disk kernel store is on: unless ``JAXCAL_KERNEL_STORE`` says no."""
    return environ.get(STORE_ENV, "").strip().lower() not in ("0", "false", "no", "off")


def cache_disabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``JAXCAL_NO_COMPILATION_CACHE`` asks for no cache."""
    return environ.get(NO_CACHE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def default_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The command line's cache folder (see the module docstring)."""
    if environ.get(CACHE_DIR_ENV):
        return Path(environ[CACHE_DIR_ENV]).expanduser()
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "jaxcal"


def kernel_folder(*, no_cache: bool = False) -> Path | None:
    """Where this run keeps compiled kernels (created), or None for no cache."""
    if no_cache or cache_disabled() or not store_enabled():
        return None
    folder = default_cache_dir() / "kernels"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:  # a read-only home: run without the cache
        return None
    return folder


def plot_cache(kernels: Path | None) -> None:
    """Turn JAX's persistent compilation cache on in ``kernels/../jax`` (None: nothing).

    Called before ``--plot`` draws, after every stored kernel has been compiled (an
    executable read back from JAX's cache cannot be stored by ``jaxcal/_core/store.py``).
    A user's own ``JAX_COMPILATION_CACHE_DIR`` is left as it is. Every program is kept
    (no minimum compile time or size: the plots' programs are many and small).
    """
    import jax

    if kernels is None or jax.config.jax_compilation_cache_dir:
        return
    folder = kernels.parent / "jax"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        from jax._src import compilation_cache  # private: forget that no cache was set

        jax.config.update("jax_compilation_cache_dir", str(folder))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        compilation_cache.reset_cache()
    except (OSError, ImportError, AttributeError):  # no cache: the plot compiles as before
        return
