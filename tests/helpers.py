"""Shared test helpers: the one tolerance helper, float64 switching, multi-device runs."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np

# Default tolerances by the dtype of the value under test. Override only with a comment.
_RTOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 2e-5}
_ATOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 2e-6}


def assert_close(
    actual, expected, *, rtol: float | None = None, atol: float | None = None, err_msg: str = ""
):
    """``np.testing.assert_allclose`` with tolerances set by the less precise operand."""
    actual = np.asarray(actual)
    precise = all(np.asarray(x).dtype == np.float64 for x in (actual, expected))
    dtype = np.dtype(np.float64) if precise else np.dtype(np.float32)
    np.testing.assert_allclose(
        actual,
        np.asarray(expected),
        rtol=_RTOL[dtype] if rtol is None else rtol,
        atol=_ATOL[dtype] if atol is None else atol,
        err_msg=err_msg,
    )


@contextlib.contextmanager
def x64():
    """Run the block with ``jax_enable_x64`` (float64 results)."""
    with jax.enable_x64(True):
        yield


class _BackendCompiles:
    """Counts XLA compilations (jax.monitoring events) while active."""

    count = 0
    active = False

    @classmethod
    def listen(cls, event, duration, **_):
        if cls.active and event == "/jax/core/compile/backend_compile_duration":
            cls.count += 1


jax.monitoring.register_event_duration_secs_listener(_BackendCompiles.listen)


def compiles_of(call) -> int:
    """How many XLA compilations ``call()`` (its results waited for) makes."""
    _BackendCompiles.count, _BackendCompiles.active = 0, True
    try:
        jax.block_until_ready(call())
    finally:
        _BackendCompiles.active = False
    return _BackendCompiles.count


def count_compiles(fn):
    """Wrap a jitted ``fn``; ``wrapper.compiles()`` tells how many times it was traced."""
    traces = []

    def traced(*args, **kwargs):
        traces.append(1)
        return fn(*args, **kwargs)

    jitted = jax.jit(traced)
    jitted.compiles = lambda: len(traces)
    return jitted


def run_on_cpu_devices(script: Path, *args: str, devices: int = 4):
    """Run ``script`` in a fresh Python on ``devices`` CPU devices (warnings are errors,
    this checkout of jaxcal first on the path); the JSON of its last stdout line."""
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={devices}"
    env.update(XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    root = str(Path(__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-W", "error", str(script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_with_cache_folder(script: str, arg: object, folder, **env: str) -> dict:
    """Run ``script`` in a fresh Python with ``JAXCAL_CACHE_DIR=folder`` (and ``env``), no
    JAX compilation cache of the test session; the JSON of its last stdout line."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION")}
    environ.update(JAXCAL_CACHE_DIR=str(folder), **env)
    out = subprocess.run(
        [sys.executable, "-c", script, str(arg)],
        env=environ,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
