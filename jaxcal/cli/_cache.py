"""``jaxcal report``'s cache folder: compiled kernels kept on disk between runs.

Almost all of a first ``jaxcal report`` is XLA compiling its kernels, and almost all of a
second one would be tracing and lowering them again. The command line keeps the
compiled executables themselves (:mod:`jaxcal.cli._kernels`) in ``kernels/`` of:

1. ``$JAXCAL_CACHE_DIR`` if set;
2. else ``$XDG_CACHE_HOME/jaxcal`` if ``XDG_CACHE_HOME`` is set;
3. else ``~/.cache/jaxcal``.

**Off unless ``JAXCAL_KERNEL_STORE=1``** (jax/jaxlib 0.10.2): a binary model's stored
``report`` executable crashed with SIGSEGV when a second process loaded and ran it. The
cause: jaxlib's LAPACK custom-call targets are filled lazily, when JAX first lowers a
linalg op, and a process that only loads executables never lowers one; ``_kernels._load``
now initialises them first (test: two fresh processes). The store stays opt-in until every
kernel kind is checked for such lazily registered targets.
``--no-cache`` or ``JAXCAL_NO_COMPILATION_CACHE=1`` turn it off when it is on. Entries are keyed by the
program, the compiler options, the versions and the machine, so deleting the folder is
always safe (the next run compiles again). Like JAX's own cache, the entries are native
code that the command loads and runs: the folder must be writable by its user only
(``~/.cache`` is).

JAX's own persistent compilation cache is not turned on: it skips only the XLA
compilation (its key is the lowered program), and an executable it has read back cannot
be written out again on XLA:CPU (the copy fails at run time with "Function ... not
found"), so the two do not combine. When the user turns it on
(``JAX_COMPILATION_CACHE_DIR``), kernels that come from it are used but not stored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: Environment variable that turns the cache off when set to anything but "", "0", "no".
NO_CACHE_ENV = "JAXCAL_NO_COMPILATION_CACHE"
#: Environment variable naming the cache folder.
CACHE_DIR_ENV = "JAXCAL_CACHE_DIR"
#: Environment variable that turns the on-disk kernel store on ("1", "true", "yes").
STORE_ENV = "JAXCAL_KERNEL_STORE"


def store_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``JAXCAL_KERNEL_STORE`` asks for the on-disk kernel store (off by default)."""
    return environ.get(STORE_ENV, "").strip().lower() in ("1", "true", "yes")


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
