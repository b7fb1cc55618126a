"""``jaxcal report``'s caches (jaxcal/_core/cache_dir.py, jaxcal/_core/store.py)."""

import os
import subprocess
import sys
import time
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal._core import cache_dir as _cache
from jaxcal._core import store as _kernels
from jaxcal.cli import main


def test_cache_folder_and_opt_out_follow_the_environment(tmp_path, monkeypatch):
    env = {"XDG_CACHE_HOME": "/xdg"}
    assert _cache.default_cache_dir(env) == Path("/xdg/jaxcal")
    assert _cache.default_cache_dir({**env, "JAXCAL_CACHE_DIR": "/mine"}) == Path("/mine")
    assert _cache.default_cache_dir({}) == Path.home() / ".cache" / "jaxcal"
    for value, disabled in (("1", True), ("yes", True), ("", False), ("0", False)):
        assert _cache.cache_disabled({"JAXCAL_NO_COMPILATION_CACHE": value}) is disabled
    assert not _cache.cache_disabled({})
    # The store is on unless JAXCAL_KERNEL_STORE says no (every kernel kind round-trips
    # through a fresh process: the slow test below).
    for value, enabled in (("", True), ("1", True), ("0", False), ("no", False), ("false", False)):
        assert _cache.store_enabled({"JAXCAL_KERNEL_STORE": value}) is enabled
    assert _cache.store_enabled({})
    monkeypatch.setenv("JAXCAL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("JAXCAL_NO_COMPILATION_CACHE", raising=False)
    monkeypatch.delenv("JAXCAL_KERNEL_STORE", raising=False)
    assert _cache.kernel_folder() == tmp_path / "kernels" and (tmp_path / "kernels").is_dir()
    monkeypatch.setenv("JAXCAL_KERNEL_STORE", "0")
    assert _cache.kernel_folder() is None
    monkeypatch.setenv("JAXCAL_KERNEL_STORE", "1")
    assert _cache.kernel_folder() == tmp_path / "kernels"
    monkeypatch.setenv("JAXCAL_NO_COMPILATION_CACHE", "1")
    assert _cache.kernel_folder() is None
    monkeypatch.delenv("JAXCAL_NO_COMPILATION_CACHE")
    assert _cache.kernel_folder(no_cache=True) is None


def test_the_test_session_keeps_kernels_in_a_folder_of_its_worker():
    # conftest.py: two pytest-xdist workers never share a store, and none is in ~/.cache.
    worker = os.environ.get("PYTEST_XDIST_WORKER") or "main"
    assert _cache.default_cache_dir().name == f"cli-{worker}"
    assert Path.home() / ".cache" not in _cache.default_cache_dir().parents


# A program no earlier run compiled: JAX's persistent cache (conftest.py) would otherwise
# hand back an executable that the store does not keep.
_SALT = time.time_ns() % 1_000_003


def _traced_kernel(calls):
    def fn(x, y, *, scale):
        calls.append(1)  # runs only while tracing
        return {"sum": jnp.sum(x) * scale, "max": jnp.max(y) + y[0] * 0 * _SALT}

    return _kernels.Kernel("test_kernel", fn)


def test_kernels_are_loaded_from_the_store_without_tracing(tmp_path, monkeypatch):
    monkeypatch.setattr(_kernels, "_store", tmp_path)
    x, y = np.arange(6, dtype=np.float32), np.arange(4, dtype=np.int32)
    calls = []
    first = _traced_kernel(calls)
    out = first(x, y, scale=2.0)
    assert float(out["sum"]) == 30.0 and int(out["max"]) == 3 and len(calls) == 1
    first(x + 1, y, scale=2.0)  # same shapes and options: compiled once per process
    assert len(calls) == 1
    (entry,) = tmp_path.glob("test_kernel-*.bin")
    # A new process (a new Kernel) loads the executable instead of tracing.
    assert float(_traced_kernel(calls)(x, y, scale=2.0)["sum"]) == 30.0 and len(calls) == 1
    # Another static option or shape is another entry.
    assert float(_traced_kernel(calls)(x, y, scale=3.0)["sum"]) == 45.0 and len(calls) == 2
    _traced_kernel(calls)(x[:5], y, scale=3.0)
    assert len(calls) == 3 and len(list(tmp_path.glob("test_kernel-*.bin"))) == 3
    # A damaged entry is removed and the kernel compiled again (and stored again, unless
    # it came from JAX's persistent cache, which conftest.py turns on).
    entry.write_bytes(b"not an executable")
    assert float(_traced_kernel(calls)(x, y, scale=2.0)["sum"]) == 30.0 and len(calls) == 4
    assert not entry.exists() or entry.read_bytes() != b"not an executable"
    # Beyond MAX_ENTRIES the least recently used are pruned.
    monkeypatch.setattr(_kernels, "MAX_ENTRIES", 2)
    _traced_kernel(calls)(x[:4], y, scale=1.0)
    assert len(list(tmp_path.glob("test_kernel-*.bin"))) == 2
    with pytest.raises(TypeError, match="static option of test_kernel must be a scalar"):
        _traced_kernel(calls)(x, y, scale=np.float32(1.0) + jnp.zeros(()))


def test_no_cache_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("JAXCAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_kernels, "_store", None)
    try:
        assert main(["report", "--demo", "--no-fit", "--quiet", "--no-cache"]) == 0
    finally:
        _kernels.set_store(None)
    assert "top-label ECE" in capsys.readouterr().out
    assert not (tmp_path / "cache").exists()


def _solve(a, b):
    return jnp.linalg.solve(a, b)  # LAPACK: lapack_sgetrf_ffi, lapack_strsm_ffi


def _host_sum(x):  # a Python host callback: xla_ffi_python_cpu_callback
    return jax.pure_callback(
        lambda v: np.sum(v, dtype=np.float32), jax.ShapeDtypeStruct((), x.dtype), x
    )


def test_only_executables_calling_allowed_targets_are_stored(tmp_path, monkeypatch):
    allowed = _kernels.storable_targets()
    # The report's solve and inverse; every name is one of jaxlib's LAPACK targets, which
    # _load fills before it loads anything.
    assert {"lapack_sgetrf_ffi", "lapack_strsm_ffi"} <= allowed
    assert all(name.startswith("lapack_") for name in allowed)
    serialized = []
    serialize = _kernels.serialize_executable.serialize
    monkeypatch.setattr(
        _kernels.serialize_executable,
        "serialize",
        lambda c: serialized.append(1) or serialize(c),
    )
    a, b = np.eye(3, dtype=np.float32) * 2, np.ones(3, np.float32)
    solve = jax.jit(_solve).lower(a, b).compile()
    assert _kernels.custom_call_targets(solve) == {"lapack_sgetrf_ffi", "lapack_strsm_ffi"}
    _kernels._save(solve, tmp_path / "solve.bin")
    assert (tmp_path / "solve.bin").exists() and len(serialized) == 1
    # A target off the list is never serialised (a loading process may not have it ready).
    callback = jax.jit(_host_sum).lower(b).compile()
    assert _kernels.custom_call_targets(callback) == {"xla_ffi_python_cpu_callback"}
    _kernels._save(callback, tmp_path / "callback.bin")
    monkeypatch.setattr(_kernels, "storable_targets", frozenset)  # as without the private API
    _kernels._save(solve, tmp_path / "solve2.bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["solve.bin"] and len(serialized) == 1
    # An executable without HLO text cannot be checked: not stored either.
    monkeypatch.setattr(_kernels, "storable_targets", lambda: allowed)
    _kernels._save(types.SimpleNamespace(as_text=lambda: None), tmp_path / "opaque.bin")
    assert not (tmp_path / "opaque.bin").exists() and len(serialized) == 1


def _round_trip_cases(tmp_path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """(argv, extra environment) of each group of the round-trip test."""
    # The binary model whose stored report crashed the next process (N = 200, --bins 10).
    rng = np.random.default_rng(5)
    p = rng.uniform(0.02, 0.98, 200).astype(np.float32)
    y = (rng.uniform(size=200) < p).astype(np.int32)
    z = np.log(p / (1 - p))
    np.savez(tmp_path / "binary.npz", probs=p, logits=z, labels=y)
    # float16 logits reach temperature scaling as they are: five more cross-fit programs
    # (the probabilities are float32 after validation: the report is the one above).
    np.savez(
        tmp_path / "half.npz", probs=p.astype(np.float16), logits=z.astype(np.float16), labels=y
    )
    q = rng.dirichlet(np.ones(3), 20).astype(np.float32)
    np.savez(tmp_path / "multi.npz", probs=q, labels=rng.integers(0, 3, 20).astype(np.int32))
    np.savez(tmp_path / "one.npz", probs=p[:1], labels=y[:1])
    np.savez(tmp_path / "three.npz", probs=q[:3], labels=np.array([0, 2, 1], np.int32))
    big = rng.uniform(0.02, 0.98, 3000).astype(np.float32)  # sorts of >= 1024 rows
    np.savez(
        tmp_path / "large.npz", probs=big, labels=(rng.uniform(size=3000) < big).astype(np.int32)
    )
    names = ("binary", "half", "multi", "one", "three", "large")
    files = {n: str(tmp_path / f"{n}.npz") for n in names}
    return {
        # Binary (clinical block: LAPACK) and multiclass reports, the uncalibrated scores
        # and all nine calibrators: temperature scaling on logits (binary) and on
        # log-probabilities (multiclass), Platt (FAST_RUN options), isotonic, centred
        # isotonic, Venn-Abers, top-label Platt and isotonic, multiclass Venn-Abers; the
        # --harness presets (N = 200 and N = 20, below HLE's bin of 100).
        "fit": (
            [files["binary"], files["multi"], files["half"], "--fit", "--folds", "2", "--harness"],
            {},
        ),
        # The smallest inputs: N = 1 (binary) and N = 3 (three classes).
        "tiny": ([files["one"], files["three"]], {}),
        # JAX_ENABLE_X64 (a user's environment) changes the programs.
        "x64": ([files["binary"]], {"JAX_ENABLE_X64": "1"}),
        # N = 3000: traced with XLA's sorts (no host callback), so stored too (issue 30).
        "large": ([files["large"]], {}),
    }


#: Stored entries of each group, by kernel name.
_STORED = {
    "fit": {"report": 2, "report_extras": 2, "harness": 3, "uncalibrated": 2, "cross_fit": 14},
    "tiny": {"report": 2, "report_extras": 2},
    "x64": {"report": 1, "report_extras": 1},
    "large": {"report": 1, "report_extras": 1},
}


@pytest.mark.slow  # two processes per group, the first compiling every kernel: ~55 s in all
@pytest.mark.parametrize("group", list(_STORED))
def test_every_stored_kernel_kind_runs_in_a_fresh_process(tmp_path, group):
    # A process that only loads executables has lowered nothing: a custom-call target that
    # JAX fills on first use is unset there (the binary report's LAPACK solve died of
    # SIGSEGV until _kernels._load initialised LAPACK). Each group: a first process compiles
    # and stores its kernels in an empty folder, a second loads every one of them and prints
    # the same report and the same JSON. (CSV, .npy, --by, --renormalize and --json - lead
    # to these same programs; the streamed report stores nothing.)
    argv, extra = _round_trip_cases(tmp_path)[group]
    store = tmp_path / "cache" / "kernels"
    env = {**os.environ, "JAXCAL_CACHE_DIR": str(tmp_path / "cache"), **extra}
    for name in ("JAXCAL_NO_COMPILATION_CACHE", "JAXCAL_KERNEL_STORE", "JAX_COMPILATION_CACHE_DIR"):
        env.pop(name, None)  # the store is on by default; JAX's own cache stays off
    runs, entries = [], []
    for i in range(2):
        out = tmp_path / f"report{i}.json"
        command = [sys.executable, "-m", "jaxcal.cli", "report", *argv, "--bins", "10"]
        runs.append(
            subprocess.run([*command, "--json", str(out)], capture_output=True, text=True, env=env)
        )
        assert runs[-1].returncode == 0, runs[-1].stderr[-2000:]
        entries.append({p.name: p.stat().st_mtime_ns for p in store.glob("*.bin")})
    assert runs[1].stdout == runs[0].stdout
    assert (tmp_path / "report1.json").read_text() == (tmp_path / "report0.json").read_text()
    # The second process stored nothing new and loaded (touched) every entry.
    assert entries[1].keys() == entries[0].keys()
    assert all(entries[1][k] > entries[0][k] for k in entries[0])
    kinds = [name.split("-")[0] for name in entries[0]]
    assert {k: kinds.count(k) for k in set(kinds)} == _STORED[group]


@pytest.mark.slow  # two processes that compile and draw the plots: ~30 s
def test_plots_compile_once_across_runs(tmp_path):
    """``--plot``'s programs (plain jax.jit, not stored kernels) go to JAX's persistent cache
    in ``jax/`` beside ``kernels/`` (issue 30): a second run compiles none of them again."""
    rng = np.random.default_rng(3)
    p = rng.uniform(0.02, 0.98, 300).astype(np.float32)
    np.savez(tmp_path / "b.npz", probs=p, labels=(rng.uniform(size=300) < p).astype(np.int32))
    env = {**os.environ, "JAXCAL_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("JAXCAL_NO_COMPILATION_CACHE", "JAXCAL_KERNEL_STORE", "JAX_COMPILATION_CACHE_DIR"):
        env.pop(name, None)
    entries = []
    for i in range(2):
        command = [sys.executable, "-m", "jaxcal.cli", "report", str(tmp_path / "b.npz")]
        run = subprocess.run(
            [*command, "--plot", str(tmp_path / f"p{i}.png")],
            capture_output=True,
            text=True,
            env=env,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert (tmp_path / f"p{i}.png").stat().st_size > 0
        entries.append(sorted(p.name for p in (tmp_path / "cache" / "jax").iterdir()))
    assert entries[0] and entries[1] == entries[0]


def test_the_plot_cache_leaves_a_users_jax_cache_alone(tmp_path):
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "users_own"))
    try:
        _cache.plot_cache(tmp_path / "kernels")
        assert not (tmp_path / "jax").exists()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "users_own")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    _cache.plot_cache(None)  # no cache folder: nothing
    assert jax.config.jax_compilation_cache_dir == before
