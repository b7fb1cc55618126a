"""Benchmark: calibration within segments, jaxcal against mcgrad's MulticalibrationError.

Run:  python benchmarks/bench_segments.py [--n 1e6] [--segments 1000] [--disjoint 100]
      [--mcgrad-python /path/to/venv-with-bench-torch/bin/python] [--clock cpu]
      [--binned-only]

1. **Overlapping segments.** Five categorical columns of 10 values; mcgrad's
   ``MulticalibrationError`` (mcgrad's defaults: float32, chunks of 50 segments; depth 2,
   10 values per feature, capped at ``--segments``) builds its segment masks and computes
   the per-segment ECCE, sigma and p-values. It runs in its own environment (mcgrad pulls
   PyTorch; ``pip install .[bench-torch]``) through ``benchmarks/_mcgrad_peer.py``, one
   call each of: the whole metric, and the per-segment part alone (masks cached). jaxcal's
   ``stats.multicalibration_error`` gets mcgrad's masks as a boolean ``(N, G)`` matrix
   (float32, steady state after a warm-up, compile time apart); the ratio is against
   mcgrad's per-segment part (mask building excluded on both sides), and the largest
   difference of the per-segment statistics is printed.
2. **Disjoint segments.** ``calibration_tests(groups=ids, n_groups=G)`` and
   ``multicalibration_error(probs, labels, ids, n_groups=G)`` against one ungrouped
   ``calibration_tests`` call on the same N, interleaved in one process.
3. **Binned metrics per segment.** ``ece(groups=ids, n_groups=G)`` (one ``bin_sums`` call
   with segment id ``group * M + bin``), ``ece`` with ten overlapping ``(N, 10)`` masks
   (one ``bin_sums`` pass per column) and ``brier_score(groups=ids, n_groups=G)`` against their
   ungrouped calls, jitted, interleaved, compile time apart.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import compile_seconds, environment, fmt_ms, time_interleaved

import jaxcal
from jaxcal import stats


def _data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, n)
    cats = {f"c{j}": rng.integers(0, 10, n) for j in range(5)}
    planted = (cats["c0"] == 1) & (cats["c1"] == 2)
    y = (rng.random(n) < np.where(planted, np.clip(s + 0.05, 0, 1), s)).astype(np.int32)
    return s, y, cats


def overlapping(n: int, segments: int, python: str, clock: str) -> None:
    s, y, cats = _data(n)
    with tempfile.TemporaryDirectory() as tmp:
        data_path, out_path = os.path.join(tmp, "data.npz"), os.path.join(tmp, "out.npz")
        np.savez(data_path, s=s, y=y, n_segments=segments, **cats)
        peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_mcgrad_peer.py")
        subprocess.run([python, peer, data_path, out_path], check=True)
        out = dict(np.load(out_path))
    masks = np.unpackbits(out["masks"], axis=1, count=int(out["n"])).astype(bool).T
    g = masks.shape[1]
    sj = jnp.asarray(out["s"], jnp.float32)
    yj = jnp.asarray(out["y"], jnp.int32)
    mj = jnp.asarray(masks)
    del masks
    # mcgrad's segments passed its own minimum size; no skewness condition: its mce_sigma
    # is the max over every segment it returns.
    result = stats.multicalibration_error(sj, yj, mj, min_segment_size=1, max_skewness=None)
    trace, comp = compile_seconds(lambda s, y, m: stats.multicalibration_error(s, y, m), sj, yj, mj)
    times = time_interleaved(
        {"jaxcal": lambda: stats.multicalibration_error(sj, yj, mj)},
        repeats=3,
        budget_s=60,
        clock=clock,
    )
    t = times["jaxcal"].median
    diff = np.max(np.abs(np.asarray(result.statistic, np.float64) - out["statistic"]))
    print(f"\n## {g} overlapping segments, N = {n:.0e} (mcgrad {out['version']})\n")
    print("| contender | ms | vs jaxcal |\n|---|---:|---:|")
    print(
        f"| mcgrad MulticalibrationError, whole metric | {fmt_ms(out['full_s'])} |"
        f" {out['full_s'] / t:.1f}x |"
    )
    print(
        f"| mcgrad, per-segment part (masks cached) | {fmt_ms(out['metric_s'])} |"
        f" {out['metric_s'] / t:.1f}x |"
    )
    print(f"| jaxcal multicalibration_error | {fmt_ms(t)} | 1 |")
    print(
        f"\njaxcal compile: trace {trace:.1f} s + XLA {comp:.1f} s. Largest difference of the"
        f" per-segment statistic from mcgrad's: {diff:.2e} (mcgrad float32, no tie"
        f" aggregation). mce_sigma: jaxcal {float(result.mce_sigma):.4f}, mcgrad"
        f" {out['statistic'].max():.4f}."
    )


def disjoint(n: int, groups: int, clock: str) -> None:
    s, y, _ = _data(n, seed=1)
    ids = jnp.asarray(np.random.default_rng(2).integers(0, groups, n), jnp.int32)
    sj, yj = jnp.asarray(s, jnp.float32), jnp.asarray(y)
    cases = {
        "calibration_tests (ungrouped)": lambda: stats.calibration_tests(sj, yj),
        f"calibration_tests(groups=, n_groups={groups})": lambda: stats.calibration_tests(
            sj, yj, groups=ids, n_groups=groups
        ),
        f"multicalibration_error (ids, n_groups={groups})": lambda: stats.multicalibration_error(
            sj, yj, ids, n_groups=groups
        ),
    }
    times = time_interleaved(cases, repeats=7, budget_s=30, clock=clock)
    base = times["calibration_tests (ungrouped)"].median
    print(f"\n## {groups} disjoint segments, N = {n:.0e}\n")
    print("| case | ms | / ungrouped |\n|---|---:|---:|")
    for name, timing in times.items():
        print(f"| {name} | {fmt_ms(timing.median)} | {timing.median / base:.2f} |")


def binned(n: int, groups: int, clock: str) -> None:
    """``ece`` / ``brier_score`` per disjoint segment against one ungrouped call, jitted."""
    s, y, _ = _data(n, seed=3)
    rng = np.random.default_rng(4)
    ids = jnp.asarray(rng.integers(0, groups, n), jnp.int32)
    sj, yj = jnp.asarray(s, jnp.float32), jnp.asarray(y)
    masks = jnp.asarray(rng.random((n, 10)) < 0.3)
    # Segments passed as arguments: closed over, XLA would fold them as constants.
    fns = {
        "ece (ungrouped)": (jax.jit(lambda s, y, g: jaxcal.ece(s, y)), ids),
        f"ece(groups=ids, n_groups={groups})": (
            jax.jit(lambda s, y, g: jaxcal.ece(s, y, groups=g, n_groups=groups)),
            ids,
        ),
        "ece(groups=(N, 10) masks)": (jax.jit(lambda s, y, g: jaxcal.ece(s, y, groups=g)), masks),
        "brier_score (ungrouped)": (jax.jit(lambda s, y, g: jaxcal.brier_score(s, y)), ids),
        f"brier_score(groups=ids, n_groups={groups})": (
            jax.jit(lambda s, y, g: jaxcal.brier_score(s, y, groups=g, n_groups=groups)),
            ids,
        ),
    }
    compiles = {name: compile_seconds(fn, sj, yj, g) for name, (fn, g) in fns.items()}
    cases = {name: (lambda fn=fn, g=g: fn(sj, yj, g)) for name, (fn, g) in fns.items()}
    times = time_interleaved(cases, repeats=9, budget_s=60, clock=clock)
    print(f"\n## binned metrics, {groups} disjoint segments, N = {n:.0e}\n")
    print("| case | ms | / ungrouped | compile s (trace + XLA) |\n|---|---:|---:|---:|")
    for name, timing in times.items():
        base = times[("brier_score" if name.startswith("brier") else "ece") + " (ungrouped)"]
        trace, comp = compiles[name]
        print(
            f"| {name} | {fmt_ms(timing.median)} | {timing.median / base.median:.2f} |"
            f" {trace:.1f} + {comp:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e6)
    parser.add_argument("--segments", type=int, default=1000)
    parser.add_argument("--disjoint", type=int, default=100)
    parser.add_argument("--mcgrad-python", default=None)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--binned-only", action="store_true", help="only part 3")
    args = parser.parse_args()
    print(environment())
    n = int(args.n)
    if args.mcgrad_python and not args.binned_only:
        overlapping(n, args.segments, args.mcgrad_python, args.clock)
    if not args.binned_only:
        disjoint(n, args.disjoint, args.clock)
    binned(n, args.disjoint, args.clock)


if __name__ == "__main__":
    main()
