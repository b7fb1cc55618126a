"""Benchmark: jaxcal's sorts (jaxcal/_core/sort.py) against XLA's sort and NumPy's, by size.

Run:  python benchmarks/bench_sort.py [--sizes 256 1024 ...] [--clock cpu]

For each N (float32 keys ~ U(0, 1), jitted, device arrays, timed side by side in one
process, round-robin; ``benchmarks/_timing.py``):

* ``argsort``: ``jnp.argsort(stable=True)`` (XLA), jaxcal's host path (NumPy ``np.sort`` of
  (key, position) packed into uint64, through ``jax.pure_callback``) and the public
  ``jaxcal._core.sort.argsort`` (which picks one of the two by ``HOST_ARGSORT_MIN_SIZE``);
* ``sort``: ``lax.sort`` of int32 keys (XLA) against the host path and the public
  ``jaxcal._core.sort.sort`` (``HOST_SORT_MIN_SIZE``);
* ``segment argsort`` / ``segment sort`` (by 100 segment ids, then the int32 keys): XLA's
  sort with two keys against the host path (``HOST_SEGMENT_SORT_MIN_SIZE``);
* the floors: ``np.sort`` of the packed uint64 keys and of the int32 keys, and
  ``np.lexsort`` of (ids, keys), on NumPy arrays (no callback, no copies).

The crossover sizes, where the host path starts to win, set the thresholds.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import environment, fmt_ms, time_interleaved

from jaxcal._core import sort as _sort


def _segment_cases(n: int, keys: np.ndarray) -> tuple[dict, dict]:
    ids = np.random.default_rng(1).integers(0, 100, n).astype(np.int32)
    idd, bits = jnp.asarray(ids), _sort.monotone_bits(jnp.asarray(keys.astype(np.int32)))
    iota = jnp.arange(n, dtype=jnp.int32)
    xla_order = jax.jit(lambda i, b: _sort._xla_segment_sort(i, b, iota)[2])
    host_order = jax.jit(
        lambda i, b: _sort._callbacks(_sort._host_segment_argsort, (i, b), (jnp.int32,))[0]
    )
    xla_values = jax.jit(lambda i, b: _sort._xla_segment_sort(i, b)[1])
    host_values = jax.jit(
        lambda i, b: _sort._callbacks(_sort._host_segment_sort, (i, b), (jnp.int32, b.dtype))[1]
    )
    cases = {
        "np.lexsort (floor)": lambda: np.lexsort((keys, ids)),
        "segment argsort XLA": lambda: xla_order(idd, bits),
        "segment argsort host": lambda: host_order(idd, bits),
        "segment sort XLA": lambda: xla_values(idd, bits),
        "segment sort host": lambda: host_values(idd, bits),
    }
    order = np.lexsort((keys, ids))
    expected = {
        "segment argsort XLA": order,
        "segment argsort host": order,
        "segment sort XLA": np.asarray(bits)[order],
        "segment sort host": np.asarray(bits)[order],
    }
    return cases, expected


def _host_only(fn, out_dtype):
    def run(x):
        bits = _sort.monotone_bits(x) if jnp.issubdtype(x.dtype, jnp.floating) else x
        return _sort._callback(fn, bits, out_dtype or bits.dtype)

    return jax.jit(run)


def bench(n: int, repeats: int, budget_s: float, clock: str):
    rng = np.random.default_rng(0)
    x = rng.random(n).astype(np.float32)
    keys = (x.view(np.int32) << 1) | (rng.random(n) < x)
    packed = (x.view(np.uint32).astype(np.uint64) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
    xd, kd = jnp.asarray(x), jnp.asarray(keys.astype(np.int32))
    xla_argsort = jax.jit(lambda a: jnp.argsort(a, stable=True))
    host_argsort = _host_only(_sort._host_argsort, jnp.int32)
    auto_argsort = jax.jit(_sort.argsort)
    xla_sort = jax.jit(lambda k: lax.sort(k))
    host_sort = _host_only(_sort._host_sort, None)
    auto_sort = jax.jit(_sort.sort)
    cases = {
        "np.sort packed uint64 (floor)": lambda: np.sort(packed),
        "argsort XLA": lambda: xla_argsort(xd),
        "argsort host": lambda: host_argsort(xd),
        "argsort jaxcal": lambda: auto_argsort(xd),
        "np.sort int32 (floor)": lambda: np.sort(keys),
        "sort XLA": lambda: xla_sort(kd),
        "sort host": lambda: host_sort(kd),
        "sort jaxcal": lambda: auto_sort(kd),
    }
    segment_cases, segment_expected = _segment_cases(n, keys)
    cases.update(segment_cases)
    outputs: dict = {}
    times = time_interleaved(cases, repeats, budget_s, outputs=outputs, clock=clock)
    expected = np.argsort(x, kind="stable")
    for name in ("argsort XLA", "argsort host", "argsort jaxcal"):
        np.testing.assert_array_equal(np.asarray(outputs[name]), expected, err_msg=name)
    for name in ("sort XLA", "sort host", "sort jaxcal"):
        np.testing.assert_array_equal(np.asarray(outputs[name]), np.sort(keys), err_msg=name)
    for name, want in segment_expected.items():
        np.testing.assert_array_equal(np.asarray(outputs[name]), want, err_msg=name)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", type=float, nargs="+", default=[256, 1024, 4096, 16384, 65536, 1e6]
    )
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--budget-s", type=float, default=3.0, help="per case and size")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = parser.parse_args()

    print(f"# Sorting float32 keys: XLA, NumPy through a callback, jaxcal ({args.clock} clock)\n")
    print(environment())
    print(
        f"\nthresholds: HOST_ARGSORT_MIN_SIZE = {_sort.HOST_ARGSORT_MIN_SIZE}, "
        f"HOST_SORT_MIN_SIZE = {_sort.HOST_SORT_MIN_SIZE}, "
        f"HOST_SEGMENT_SORT_MIN_SIZE = {_sort.HOST_SEGMENT_SORT_MIN_SIZE}\n"
    )
    names = None
    for n in [int(v) for v in args.sizes]:
        times = bench(n, args.repeats, args.budget_s, args.clock)
        if names is None:
            names = list(times)
            print("| N | " + " | ".join(f"{k} (ms)" for k in names) + " |")
            print("|---:|" + "---:|" * len(names))
        print(f"| {n} | " + " | ".join(fmt_ms(times[k].median) for k in names) + " |")


if __name__ == "__main__":
    main()
