"""What a NumPy caller pays: ``jaxcal.ece`` on NumPy arrays against device arrays.

    python benchmarks/bench_inputs.py              # N = 1e6, K = 10
    python benchmarks/bench_inputs.py --sizes 100000 1000000 --clock cpu

A NumPy array given to a JAX function is first put on the device. On CPU,
``jax.device_put`` takes a NumPy array without a copy when its data are 64-byte aligned
(XLA:CPU's alignment) and copies it into fresh pages otherwise; NumPy's allocator aligns
large arrays to 16 bytes only, so ordinary arrays are copied. ``jnp.asarray`` of a NumPy
array (what jaxcal's validation calls today) goes through a jitted ``lax.stage`` and
copies even an aligned array. Cases, at each N (float32 ``(N, K)`` probabilities, int32
labels, 15 bins):

* ``jaxcal.ece`` (eager, validated) on device arrays, on NumPy arrays, and on 64-byte
  aligned NumPy arrays (:func:`aligned`);
* ``jax.jit(jaxcal.ece)`` on the same three;
* the transfer alone: ``jax.device_put`` and ``jnp.asarray`` of the NumPy pair, plain and
  aligned;
* floor: a jitted read of the device arrays.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from _timing import Table, environment, fmt_ms, read_floor, row, time_interleaved, write_tables

import jaxcal

NUM_CLASSES = 10
REFERENCE = "jaxcal.ece, device arrays (eager, validated)"
FLOOR = "floor: jax.jit read of the device arrays"


def aligned(a: np.ndarray, alignment: int = 64) -> np.ndarray:
    """A copy of ``a`` whose data start on an ``alignment``-byte boundary."""
    buf = np.empty(a.nbytes + alignment, np.uint8)
    start = -buf.ctypes.data % alignment
    out = buf[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def make_data(n: int, k: int = NUM_CLASSES, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k), dtype=np.float32) * np.float32(2.5)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p, rng.integers(0, k, n).astype(np.int32)


def run_size(n: int, args: argparse.Namespace) -> list[dict]:
    p, y = make_data(n)
    pa, ya = aligned(p), aligned(y)
    pd, yd = jax.device_put(p), jax.device_put(y)
    eager = partial(jaxcal.ece, n_bins=15)
    jitted = jax.jit(eager)
    cases = {
        REFERENCE: lambda: eager(pd, yd),
        "jaxcal.ece, NumPy arrays": lambda: eager(p, y),
        "jaxcal.ece, 64-byte aligned NumPy arrays": lambda: eager(pa, ya),
        "jax.jit(jaxcal.ece), device arrays": lambda: jitted(pd, yd),
        "jax.jit(jaxcal.ece), NumPy arrays": lambda: jitted(p, y),
        "jax.jit(jaxcal.ece), 64-byte aligned NumPy arrays": lambda: jitted(pa, ya),
        "jax.device_put of the NumPy pair": lambda: jax.device_put((p, y)),
        "jax.device_put of the aligned pair (no copy)": lambda: jax.device_put((pa, ya)),
        "jnp.asarray of the NumPy pair": lambda: (jnp.asarray(p), jnp.asarray(y)),
        "jnp.asarray of the aligned pair": lambda: (jnp.asarray(pa), jnp.asarray(ya)),
        FLOOR: read_floor(pd, yd),
    }
    outputs: dict = {}
    times = time_interleaved(cases, args.repeats, args.budget_s, outputs, clock=args.clock)
    aliased = jax.device_put(pa).unsafe_buffer_pointer() == pa.ctypes.data
    rows = []
    for name, t in times.items():
        out = outputs[name]
        value = f"{float(out):.6f}" if name.startswith(("jaxcal", "jax.jit(")) else None
        kind = "floor" if name == FLOOR else "jaxcal" if "jaxcal" in name else "peer"
        rows.append(row(n, name, t.median, kind=kind, value=value))
        print(f"| {n:.0e} | {name} | {fmt_ms(t.median)} | {fmt_ms(t.best)} | {value or ''} |")
    print(
        f"\nN = {n:.0e}: NumPy data alignment {p.ctypes.data % 64} (mod 64); the aligned copy "
        f"{'is' if aliased else 'is NOT'} taken by jax.device_put without a copy.\n"
    )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--budget-s", type=float, default=5.0)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    args = parser.parse_args(argv)
    env = environment()
    print(f"### NumPy inputs: what they cost (K = {NUM_CLASSES}, 15 bins, float32)\n\n{env}\n")
    print("| N | case | median ms | best ms | ECE |\n|---:|---|---:|---:|---:|")
    rows = [r for n in args.sizes for r in run_size(n, args)]
    table = Table(
        key="inputs",
        title=f"NumPy inputs: `jaxcal.ece` (K = {NUM_CLASSES}, 15 bins, float32)",
        command=" ".join(["python benchmarks/bench_inputs.py", *(argv or sys.argv[1:])]),
        environment=env,
        clock=args.clock,
        reference=REFERENCE,
        floor=FLOOR,
        rows=rows,
    )
    write_tables(args.json, [table])


if __name__ == "__main__":
    main()
