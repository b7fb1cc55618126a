"""Benchmark: KS + Kuiper + Spiegelhalter tests of calibration, jaxcal against MAPIE and NumPy.

Run:  python benchmarks/bench_tests.py [--quick] [--sizes 1e5 1e6 1e7] [--clock cpu]

Task: the three binning-free tests of calibration (statistic and p-value each) on N binary
predictions, scores ~ Beta(2, 2), labels ~ Bernoulli(score). Contenders, timed side by
side in one process, round-robin (``benchmarks/_timing.py``):

* ``MAPIE KS``: ``mapie.metrics.calibration.kolmogorov_smirnov_p_value`` (float64 NumPy:
  jitter, ``np.argsort``, two gathers, ``cumsum``): the reference for ``jaxcal.ks_test``.
* ``MAPIE all three``: its ``kolmogorov_smirnov_p_value``, ``kuiper_p_value`` and
  ``spiegelhalter_p_value``, one call each (each of the first two sorts again).
* ``NumPy argsort, all three``: a float64 NumPy implementation of the same definitions as
  jaxcal (one ``np.argsort``, ties aggregated, origin included), the fastest plain-NumPy
  way to get all three.
* ``jaxcal ks_test`` and ``jaxcal calibration_tests`` (all three from one sort), on float32
  device arrays (JAX's default), and ``calibration_tests`` under ``jax_enable_x64`` on
  float64 arrays, like MAPIE. Public functions, validation included. The weighted row
  (weights ~ U(0.5, 2); MAPIE has no weights) is compared with MAPIE's unweighted tests.

Floors: a jitted read of the float32 scores and labels (one sum each), and ``np.sort`` of
the packed (score bits, label) uint64 keys, the least a sort-based test must do on CPU.

Steady-state medians after a warm-up call (``block_until_ready``); compile time (trace +
XLA compile of the jitted public function for the shape) is listed on its own. Ratios are
"times faster than MAPIE" on the same task (> 1: jaxcal wins).
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import (
    Table,
    compile_seconds,
    environment,
    fmt_ms,
    read_floor,
    sort_floor,
    time_interleaved,
    write_tables,
)
from _timing import row as table_row

import jaxcal

try:
    from mapie.metrics import calibration as mapie
except ImportError:  # pragma: no cover - optional peer
    mapie = None


REFERENCE = "jaxcal calibration_tests (f32)"
READ_FLOOR = "floor: jax.jit read of scores, labels"
SORT_FLOOR = "floor: np.sort of packed (score bits, label) keys"


def _data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, n)
    y = (rng.random(n) < s).astype(np.int32)
    return s, y


def numpy_tests(s: np.ndarray, y: np.ndarray):
    """Float64 NumPy: (KS, Kuiper, Spiegelhalter Z) and p-values from one argsort.

    Same definitions as jaxcal (ties aggregated, origin included); the Brownian p-values
    by the leading Gaussian-tail terms, accurate for the moderate statistics benchmarked.
    """
    order = np.argsort(s)
    ss, ys = s[order], y[order]
    path = np.cumsum(ys - ss)
    ends = np.empty(len(ss), bool)
    ends[:-1] = ss[1:] != ss[:-1]
    ends[-1] = True
    at_ends = path[ends]
    top, bottom = max(at_ends.max(), 0.0), min(at_ends.min(), 0.0)
    v = s * (1 - s)
    scale = np.sqrt(v.sum())
    ks, kuiper = max(top, -bottom) / scale, (top - bottom) / scale
    a = 1 - 2 * s
    z = np.sum((y - s) * a) / np.sqrt(np.sum(a * a * v))
    p_ks = 4 * sum((-1) ** (k - 1) * ndtr(-(2 * k - 1) * ks) for k in range(1, 6))
    p_ku = 8 * sum((-1) ** (k - 1) * k * ndtr(-k * kuiper) for k in range(1, 6))
    return (ks, p_ks), (kuiper, p_ku), (z, 2 * ndtr(-abs(z)))


def bench(n: int, repeats: int, budget_s: float, clock: str):
    s, y = _data(n)
    s32 = jnp.asarray(s.astype(np.float32))
    yj = jnp.asarray(y)
    w32 = jnp.asarray(np.random.default_rng(1).uniform(0.5, 2.0, n).astype(np.float32))
    with jax.enable_x64(True):
        s64 = jnp.asarray(s)

    def all_x64():
        with jax.enable_x64(True):
            return jaxcal.calibration_tests(s64, yj)

    cases = {}
    if mapie is not None:
        cases["MAPIE KS"] = lambda: mapie.kolmogorov_smirnov_p_value(y, s)
        cases["MAPIE all three"] = lambda: (
            mapie.kolmogorov_smirnov_p_value(y, s),
            mapie.kuiper_p_value(y, s),
            mapie.spiegelhalter_p_value(y, s),
        )
    cases["NumPy argsort, all three"] = lambda: numpy_tests(s, y)
    cases["jaxcal ks_test (f32)"] = lambda: jaxcal.ks_test(s32, yj)
    cases["jaxcal calibration_tests (f32)"] = lambda: jaxcal.calibration_tests(s32, yj)
    cases["jaxcal calibration_tests (f64)"] = all_x64
    cases["jaxcal calibration_tests, weights (f32)"] = lambda: jaxcal.calibration_tests(
        s32, yj, weights=w32
    )
    cases[READ_FLOOR] = read_floor(s32, yj)
    cases[SORT_FLOOR] = sort_floor(s, y)
    outputs: dict = {}
    times = time_interleaved(cases, repeats, budget_s, outputs=outputs, clock=clock)

    # The answers agree (KS statistics; MAPIE jitters the scores by 1e-8 relative).
    ks_values = {
        "numpy": outputs["NumPy argsort, all three"][0][0],
        "jaxcal f32": float(outputs["jaxcal calibration_tests (f32)"].ks.statistic),
        "jaxcal f64": float(outputs["jaxcal calibration_tests (f64)"].ks.statistic),
    }
    if mapie is not None:
        ks_values["MAPIE"] = mapie.kolmogorov_smirnov_statistic(y, s)
    ref = ks_values["numpy"]
    for name, value in ks_values.items():
        assert abs(value - ref) <= 1e-4 * ref, (name, value, ref)

    trace, comp = compile_seconds(lambda a, b: jaxcal.calibration_tests(a, b), s32, yj)
    return times, trace + comp, ks_values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 1e4 and 1e5 only (CI)")
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6, 1e7])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget-s", type=float, default=10.0, help="per case and size")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    args = parser.parse_args()
    sizes = [10_000, 100_000] if args.quick else [int(n) for n in args.sizes]

    print(f"# KS + Kuiper + Spiegelhalter tests of calibration ({args.clock} clock)\n")
    print(environment())
    if mapie is None:
        print("\nMAPIE is not installed: its rows are skipped (pip install mapie).")
    print()
    print("| N | case | median ms | best ms | repeats | x faster than MAPIE (same task) |")
    print("|---|---|---|---|---|---|")
    notes, table_rows = [], []
    for n in sizes:
        times, compile_s, ks_values = bench(n, args.repeats, args.budget_s, args.clock)
        for name, t in times.items():
            kind = "floor" if name.startswith("floor") else "jaxcal" if "jaxcal" in name else "peer"
            table_rows.append(
                table_row(
                    n, name, t.median, kind=kind, compile_s=compile_s if name == REFERENCE else None
                )
            )
        mapie_ks = times.get("MAPIE KS")
        mapie_all = times.get("MAPIE all three")
        for name, t in times.items():
            ref = mapie_ks if name.startswith(("MAPIE KS", "jaxcal ks_test")) else mapie_all
            ratio = f"{ref.median / t.median:.2f}" if ref is not None else "n/a"
            if name.startswith("MAPIE"):
                ratio = "1.00"
            row = f"| {n:.0e} | {name} | {fmt_ms(t.median)} | {fmt_ms(t.best)} | {t.repeats} |"
            print(f"{row} {ratio} |")
        notes.append(
            f"N={n:.0e}: compile of calibration_tests (f32, trace + XLA) {compile_s:.2f} s; "
            f"KS statistic {', '.join(f'{k} {v:.6f}' for k, v in ks_values.items())}"
        )
    print()
    for line in notes:
        print(line)
    table = Table(
        key="tests",
        title="Tests of calibration: KS, Kuiper, Spiegelhalter (binary, float32 unless noted)",
        command=" ".join(["python benchmarks/bench_tests.py", *sys.argv[1:]]),
        environment=environment(),
        clock=args.clock,
        reference=REFERENCE,
        floor=SORT_FLOOR,
        rows=table_rows,
        notes=[*notes, *([] if mapie else ["MAPIE is not installed: skipped."])],
    )
    write_tables(args.json, [table])


if __name__ == "__main__":
    main()
