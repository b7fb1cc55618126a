"""Test configuration: JAX runs strict, as in equinox's suite (STYLE.md).

``jax.config.update`` belongs here and nowhere else (the ``jaxcal`` command line, an
application, also sets the compilation cache for itself). Float64 tests use the
``jax.enable_x64()`` context manager (see ``tests/helpers.py::x64``).

Tests run with strict dtype promotion and rank promotion raising, so that a kernel that
relies on an implicit promotion fails here before a user with those settings meets it.
Doctests are the examples users copy: they run with JAX's default (standard) dtype
promotion, the setting users have.
"""

import faulthandler
import gc
import importlib.util
import os
from pathlib import Path

import jax
import pytest
from _pytest.doctest import DoctestItem
from hypothesis import settings

# The suite compiles thousands of small programs that each run for microseconds, so compile
# time is nearly all of its time. XLA:CPU's classic fusion emitters at LLVM -O0 compile them
# 2.7x faster (tests/metrics/test_ece.py: 101 -> 37 CPU-s) and the whole suite passes the same way;
# `jaxcal report` compiles its own kernels with these options too (jaxcal/_core/store.py).
# JAXCAL_TEST_DEFAULT_XLA=1 runs the suite with XLA's default (optimised) code generation.
if os.environ.get("JAXCAL_TEST_DEFAULT_XLA", "").strip().lower() in ("", "0", "false", "no"):
    _fast_compile = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_fast_compile}".strip()
# XLA:CPU aborts the process when the participants of a collective (psum over the 4 CPU
# devices of the notebooks and the shard_map scripts, which inherit this environment) do
# not all arrive within 40 s; on 2 cores shared by two test workers one device thread was
# once starved that long (training_loop.ipynb: "Termination timeout ... only 3 of them
# arrived"). A loaded CI machine is slow, not stuck: allow 10 minutes.
_collective_timeout = "--xla_cpu_collective_call_terminate_timeout_seconds=600"
if _collective_timeout not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_collective_timeout}".strip()
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

# Property tests draw the same examples on every run ("derandomize"): CI must not fail on
# a case no earlier run saw (it once did: hypothesis found weights whose partial mass
# reached a quantile exactly, a real defect, but in a run that was judging other work).
# `--hypothesis-profile=explore` draws new examples each run, to look for such cases.
settings.register_profile("ci", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile("ci")

# Modules whose doctests need an optional extra (tests/ skip with importorskip instead).
collect_ignore = [] if importlib.util.find_spec("flax") else ["jaxcal/streaming/_nnx.py"]
# A script that test_api.py runs in a process of its own (it sets XLA_FLAGS for 4 devices
# and builds meshes at import): never imported by the test session's doctest collection.
collect_ignore += ["tests/api_shard_map.py"]
if not importlib.util.find_spec("pyarrow"):  # the parquet extra
    collect_ignore += [f"jaxcal/streaming/_{m}.py" for m in ("arrow", "parquet", "dask")]
    collect_ignore += ["jaxcal/cli/_parquet.py"]
elif not importlib.util.find_spec("dask"):  # the dask extra
    collect_ignore += ["jaxcal/streaming/_dask.py"]

# Compiled code is kept between test runs: most of the suite's time is XLA compiling, and
# CI runs it in three processes (fast tests, slow tests, the demo). JAX's persistent
# compilation cache goes to $JAXCAL_CACHE_DIR/jax-WORKER, by default .cache/jaxcal/jax-main in the
# checkout (git-ignored; deleting it is always safe); every compilation is written, however
# short (JAX's default threshold, 1 s, would leave out most of the suite's). The
# `jaxcal report` runs of the CLI tests (in this process and in subprocesses) keep their
# kernels in $JAXCAL_CACHE_DIR/cli-WORKER/kernels (the fixture below), never in ~/.cache.
# JAXCAL_NO_COMPILATION_CACHE=1 runs without either.
_CACHE_ROOT = Path(
    os.environ.get("JAXCAL_CACHE_DIR") or Path(__file__).parent / ".cache" / "jaxcal"
)
# One folder per pytest-xdist worker: JAX's unbounded cache writes an entry in place,
# without a lock (jax/_src/lru_cache.py, `put`), so a worker could load the other's
# half-written executable; a CI rehearsal with -n 2 died of SIGSEGV running one.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER") or "main"
if os.environ.get("JAXCAL_NO_COMPILATION_CACHE", "").strip().lower() in ("", "0", "false", "no"):
    jax.config.update("jax_compilation_cache_dir", str(_CACHE_ROOT / f"jax-{_WORKER}"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


# The library's eager calls keep their executables on disk by default (jaxcal/_core/store.py);
# the test session relies on JAX's cache above instead (an executable read back from it
# cannot be stored anyway), and the tests of the store turn it on for themselves.
from jaxcal._core.eager import clear_memory  # noqa: E402
from jaxcal._core.store import set_executable_store  # noqa: E402

set_executable_store(None)


@pytest.fixture(autouse=True, scope="session")
def _cli_cache_per_worker():
    """Point ``jaxcal report``'s cache folder at this worker's own, for the whole session.

    The command line stores its compiled kernels by default (jaxcal/_core/cache_dir.py), in
    ``$JAXCAL_CACHE_DIR/kernels``: each worker gets ``$JAXCAL_CACHE_DIR/cli-WORKER``, so two
    workers never share a store, and no test writes into the user's ``~/.cache``. Set
    here, not at import, because the xdist controller imports this file too and its
    workers inherit its environment.
    """
    saved = os.environ.get("JAXCAL_CACHE_DIR")
    os.environ["JAXCAL_CACHE_DIR"] = str(_CACHE_ROOT / f"cli-{_WORKER}")
    yield
    if saved is None:
        del os.environ["JAXCAL_CACHE_DIR"]
    else:
        os.environ["JAXCAL_CACHE_DIR"] = saved


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Run doctests under the default ("standard") dtype promotion users have."""
    if not isinstance(item, DoctestItem):
        return (yield)
    with jax.numpy_dtype_promotion("standard"):
        return (yield)


# The settings above, which every test must leave as it found them: a global
# ``jax.config.update("jax_enable_x64", True)`` in one test (a benchmark helper once did)
# turned every later doctest of that worker float64, far from the cause.
_GLOBAL_JAX_CONFIG = ("jax_enable_x64", "jax_numpy_dtype_promotion", "jax_numpy_rank_promotion")


@pytest.fixture(autouse=True)
def _global_jax_config_unchanged(request):
    """Fail the test that changes JAX's global configuration, and put it back."""
    before = {name: getattr(jax.config, name) for name in _GLOBAL_JAX_CONFIG}
    yield
    changed = {
        name: (value, getattr(jax.config, name))
        for name, value in before.items()
        if getattr(jax.config, name) != value
    }
    for name, (value, _) in changed.items():
        jax.config.update(name, value)
    if changed:
        pytest.fail(
            f"{request.node.nodeid} changed JAX's global configuration {changed} "
            "(before, after); use a context manager (jax.enable_x64, "
            "jax.numpy_dtype_promotion) local to the test instead",
            pytrace=False,
        )


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_code():
    """Free every compiled executable after each test module.

    One process compiles the whole suite (thousands of executables). Kept alive, their
    machine code grew the process past 5.5 GB, and XLA:CPU then crashed inside a
    compilation (SIGSEGV in CI, SIGABRT at -O0), at a point that depends only on how much
    was compiled before it, never in a module run alone. Modules share few programs, so
    clearing JAX's caches here costs little: what a later module compiles again is read
    back from the persistent cache above. jaxcal's own executables (the eager calls' and
    the command line's kernels, ``jaxcal/_core/eager.py``) go too: they were kept for the
    whole session, and a worker grew by ~100 MB per CLI test module until one died of
    SIGSEGV in CI (tests/cli/test_clinical.py, after 96 % of the fast suite).
    """
    yield
    jax.clear_caches()
    clear_memory()  # also done by jax.clear_caches() through a private JAX hook
    gc.collect()


# A worker that dies of a signal is reported by xdist as "node down", and Python's fault
# handler writes every thread's stack to its stderr, of which CI shows only the tail (the
# crashing thread, printed first, was cut off). Each worker writes its fault report to a
# file instead, and the controller prints the reports of this run at the end.
_FAULT_LOGS = _CACHE_ROOT / "faults"
_FAULT_LOG_KEY = pytest.StashKey()


@pytest.hookimpl(trylast=True)  # after pytest's faulthandler plugin has set stderr
def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        for old in _FAULT_LOGS.glob("*.log"):
            old.unlink(missing_ok=True)
        return
    _FAULT_LOGS.mkdir(parents=True, exist_ok=True)
    log = open(_FAULT_LOGS / f"{_WORKER}.log", "w")  # open while the worker lives
    config.stash[_FAULT_LOG_KEY] = log
    faulthandler.enable(file=log, all_threads=True)


def pytest_terminal_summary(terminalreporter):
    if hasattr(terminalreporter.config, "workerinput"):
        return
    for log in sorted(_FAULT_LOGS.glob("*.log")):
        text = log.read_text(errors="replace").strip()
        if not text:
            continue
        # Blocks: the fatal error's line, then one stack per thread; the crashing thread's
        # ("Current thread") first, each cut to its innermost frames, no list of modules.
        blocks = [b.splitlines() for b in text.split("\n\n") if b.strip()]
        blocks = [b for b in blocks if not b[0].startswith("Extension modules")]
        blocks.sort(key=lambda b: not any(line.startswith("Current thread") for line in b))
        terminalreporter.section(f"fatal error in worker {log.stem} (Python's fault handler)")
        for block in blocks:
            for line in block[:25]:
                terminalreporter.write_line(line[:200])
            terminalreporter.write_line("")
