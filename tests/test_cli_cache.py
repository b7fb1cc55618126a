"""``jaxcal report``'s caches (jaxcal/cli/_cache.py, jaxcal/cli/_kernels.py)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal.cli import _cache, _kernels, main


def test_cache_folder_and_opt_out_follow_the_environment(monkeypatch):
    env = {"XDG_CACHE_HOME": "/xdg"}
    assert _cache.default_cache_dir(env) == Path("/xdg/jaxcal")
    assert _cache.default_cache_dir({**env, "JAXCAL_CACHE_DIR": "/mine"}) == Path("/mine")
    assert _cache.default_cache_dir({}) == Path.home() / ".cache" / "jaxcal"
    for value, disabled in (("1", True), ("yes", True), ("", False), ("0", False)):
        assert _cache.cache_disabled({"JAXCAL_NO_COMPILATION_CACHE": value}) is disabled
    assert not _cache.cache_disabled({})
    # The store is opt-in (a stored binary report kernel crashed a second process).
    monkeypatch.delenv("JAXCAL_KERNEL_STORE", raising=False)
    assert _cache.kernel_folder() is None
    monkeypatch.setenv("JAXCAL_KERNEL_STORE", "1")
    assert _cache.kernel_folder() == _cache.default_cache_dir() / "kernels"
    monkeypatch.setenv("JAXCAL_NO_COMPILATION_CACHE", "1")
    assert _cache.kernel_folder() is None
    monkeypatch.delenv("JAXCAL_NO_COMPILATION_CACHE")
    assert _cache.kernel_folder(no_cache=True) is None


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


@pytest.mark.slow  # two fresh processes that compile the binary report
def test_a_stored_binary_report_runs_in_a_fresh_process(tmp_path):
    # The stored executable calls LAPACK (calibration_slope_intercept's solve); a process
    # that only loads it never lowered a linalg op, and jaxlib's LAPACK targets were unset:
    # the second run died of SIGSEGV until _kernels._load initialised them.
    rng = np.random.default_rng(5)
    p = rng.uniform(0.02, 0.98, 200).astype(np.float32)
    y = (rng.uniform(size=200) < p).astype(np.int32)
    np.savez(tmp_path / "small.npz", probs=p, labels=y)
    env = {**os.environ, "JAXCAL_KERNEL_STORE": "1", "JAXCAL_CACHE_DIR": str(tmp_path / "c")}
    argv = [sys.executable, "-m", "jaxcal.cli", "report", str(tmp_path / "small.npz")]
    runs = [subprocess.run(argv, capture_output=True, text=True, env=env) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[1].stderr[-2000:]
    assert runs[1].stdout == runs[0].stdout
    assert any((tmp_path / "c" / "kernels").glob("report-*.bin"))
