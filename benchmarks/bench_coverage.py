"""Conformal coverage metrics: jaxcal.coverage against MAPIE 1.6, all nine, in one run.

Times each of MAPIE's coverage metrics and its jaxcal counterpart on the same data,
interleaved round by round (steady-state medians after a warm-up call, JAX results
synchronised with ``block_until_ready``), reports jaxcal's compile time for the shape
separately, and checks that the values agree.

    python benchmarks/bench_coverage.py           # N = 1e6 (HSIC against MAPIE at N = 2000)
    python benchmarks/bench_coverage.py --quick   # N = 1e4 (HSIC at N = 500), few repeats
    python benchmarks/bench_coverage.py --n 3000000 --hsic-n 3000 --repeats 20

Data: heteroscedastic regression intervals, one confidence level (MAPIE's
``(N, 2, 1)`` layout; jaxcal gets ``lower``/``upper`` of shape ``(N,)``), and nested
prediction sets of K = 10 classes with varied sizes (0 to 10). jaxcal gets float32 device
arrays; MAPIE gets the same values as float64 NumPy arrays (its own dtype).

Implementations:

* ``MAPIE``: ``mapie.metrics.regression`` / ``mapie.metrics.classification`` functions.
* ``jaxcal eager``: the public function, with its input validation (one fused device pass
  per array, a few scalars back to the host).
* ``jaxcal jit``: the public function inside ``jax.jit`` (validation is skipped under
  tracing), as in a jitted evaluation loop.
* floor: a jitted read of the same device arrays (one sum each).

HSIC: MAPIE builds three dense N x N float64 matrices and multiplies them (O(N^2) memory,
O(N^3) time: 8 TB at N = 1e6), so it is compared at ``--hsic-n``; jaxcal's fast Gauss
transform (O(N log N)) is also timed alone at N.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from _timing import (
    Table,
    environment,
    fmt_ms,
    read_floor,
    row,
    size_label,
    time_interleaved,
    write_tables,
)

from jaxcal import coverage as cv

NUM_CLASSES = 10
NUM_BINS = 3
ETA = 10.0
LEVEL = 0.9
FLOOR = "floor: jax.jit read of the inputs"


def make_intervals(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Heteroscedastic y and split-conformal-like intervals (widths vary), float32."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 3, n)
    y = np.sin(x) + rng.normal(0, 0.2 + 0.3 * x)
    half = (0.3 + 0.5 * x) * rng.uniform(0.7, 1.3, n)
    centre = np.sin(x) + rng.normal(0, 0.1, n)
    return tuple(a.astype(np.float32) for a in (y, centre - half, centre + half))


def make_sets(n: int, k: int = NUM_CLASSES, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Labels and prediction sets ``p_k >= threshold`` of a Dirichlet classifier."""
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.5), n).astype(np.float32)
    labels = (probs.cumsum(axis=1) < rng.uniform(size=(n, 1))).sum(axis=1)
    labels = np.minimum(labels, k - 1).astype(np.int32)
    return labels, probs >= 0.08


def cases(n: int, hsic_n: int) -> list[dict[str, Any]]:
    """One dict per metric: name, MAPIE callable, jaxcal function and its arguments."""
    from mapie.metrics import classification as mc
    from mapie.metrics import regression as mr

    y, lo, up = make_intervals(n)
    labels, sets = make_sets(n)
    y64, pis = y.astype(np.float64), np.stack([lo, up], axis=1).astype(np.float64)[:, :, None]
    lo64, up64 = pis[:, 0, 0], pis[:, 1, 0]
    hy, hlo, hup = (a[:hsic_n] for a in (y, lo, up))
    hy64, hpis = hy.astype(np.float64), pis[:hsic_n]
    dev = jax.device_put
    jy, jlo, jup, jlabels, jsets = (dev(a) for a in (y, lo, up, labels, sets))
    jhy, jhlo, jhup = (dev(a) for a in (hy, hlo, hup))

    def first(x):  # MAPIE returns one value per confidence level
        return np.asarray(x).reshape(-1)[0] if np.ndim(x) else x

    return [
        dict(
            name="regression_coverage_score",
            n=n,
            mapie=lambda: first(mr.regression_coverage_score(y64, pis)),
            fn=lambda a, b, c: cv.regression_coverage_score(a, b, c),
            args=(jy, jlo, jup),
        ),
        dict(
            name="regression_mean_width_score",
            n=n,
            mapie=lambda: first(mr.regression_mean_width_score(pis)),
            fn=lambda b, c: cv.regression_mean_width_score(b, c),
            args=(jlo, jup),
        ),
        dict(
            name=f"regression_ssc (num_bins={NUM_BINS})",
            n=n,
            mapie=lambda: mr.regression_ssc(y64, pis, num_bins=NUM_BINS)[0],
            fn=lambda a, b, c: cv.regression_ssc(a, b, c, num_bins=NUM_BINS).coverage,
            args=(jy, jlo, jup),
        ),
        dict(
            name="hsic",
            n=hsic_n,
            mapie=lambda: first(mr.hsic(hy64, hpis)),
            fn=lambda a, b, c: cv.hsic(a, b, c),
            args=(jhy, jhlo, jhup),
        ),
        dict(
            name="hsic",
            n=n,
            mapie=None,
            fn=lambda a, b, c: cv.hsic(a, b, c),
            args=(jy, jlo, jup),
        ),
        dict(
            name=f"coverage_width_based (eta={ETA:g})",
            n=n,
            mapie=lambda: mr.coverage_width_based(y64, lo64, up64, ETA, LEVEL),
            fn=lambda a, b, c: cv.coverage_width_based(a, b, c, eta=ETA, confidence_level=LEVEL),
            args=(jy, jlo, jup),
        ),
        dict(
            name="regression_mwi_score (Winkler)",
            n=n,
            mapie=lambda: mr.regression_mwi_score(y64, pis, LEVEL),
            fn=lambda a, b, c: cv.regression_mwi_score(a, b, c, confidence_level=LEVEL),
            args=(jy, jlo, jup),
        ),
        dict(
            name="classification_coverage_score",
            n=n,
            mapie=lambda: first(mc.classification_coverage_score(labels, sets)),
            fn=lambda a, s: cv.classification_coverage_score(a, s),
            args=(jlabels, jsets),
        ),
        dict(
            name="classification_mean_width_score",
            n=n,
            mapie=lambda: first(mc.classification_mean_width_score(sets)),
            fn=lambda s: cv.classification_mean_width_score(s),
            args=(jsets,),
        ),
        dict(
            name="classification_ssc (num_bins=None)",
            n=n,
            mapie=lambda: mc.classification_ssc(labels, sets)[0],
            fn=lambda a, s: cv.classification_ssc(a, s).coverage,
            args=(jlabels, jsets),
        ),
    ]


def agreement(mapie_out: Any, jax_out: Any) -> str:
    """Largest |difference| (NaN groups of MAPIE are jaxcal's empty groups, reported 0)."""
    if mapie_out is None:
        return "n/a"
    m = np.asarray(mapie_out, np.float64)
    j = np.asarray(jax_out, np.float64)
    empty = np.isnan(m)
    if np.any(empty & (j != 0)):
        return "MISMATCH (empty group)"
    return f"{np.max(np.abs(np.where(empty, 0, m - j))):.1e}"


def run(args: argparse.Namespace) -> tuple[list[str], list[str], list[dict]]:
    rows, notes, table_rows = [], [], []
    for case in cases(args.n, args.hsic_n):
        name, fn, call_args = case["name"], case["fn"], case["args"]
        print(f"timing {name} at N = {case['n']:.0e} ...", file=sys.stderr, flush=True)
        # compile once, timed, and time that executable as "jit"
        start = time.perf_counter()
        lowered = jax.jit(fn).lower(*call_args)
        traced = time.perf_counter()
        jitted = lowered.compile()
        trace_s, compile_s = traced - start, time.perf_counter() - traced
        timed: dict[str, Callable[[], Any]] = {
            "eager": lambda fn=fn, a=call_args: fn(*a),
            "jit": lambda j=jitted, a=call_args: j(*a),
            "floor": read_floor(*call_args),
        }
        if case["mapie"] is not None:
            timed["MAPIE"] = case["mapie"]
        outputs: dict[str, Any] = {}
        t = time_interleaved(
            timed, repeats=args.repeats, budget_s=args.budget_s, outputs=outputs, clock=args.clock
        )
        mapie = t.get("MAPIE")
        ratios = {
            key: f"{mapie.median / t[key].median:.1f}x" if mapie else "—"
            for key in ("eager", "jit")
        }
        diff = agreement(outputs.get("MAPIE"), outputs["eager"])
        rows.append(
            f"| {name} | {case['n']:.0e} | {fmt_ms(mapie.median) if mapie else 'n/a'} "
            f"| {fmt_ms(t['eager'].median)} | {fmt_ms(t['jit'].median)} "
            f"| {ratios['eager']} | {ratios['jit']} | {1e3 * (trace_s + compile_s):.0f} | {diff} |"
        )
        group = f"{name}, N = {size_label(case['n'])}"
        table_rows += [
            row(group, "MAPIE", mapie.median if mapie else None, value=_value(outputs, "MAPIE")),
            row(group, "jaxcal eager", t["eager"].median, kind="jaxcal", value=diff),
            row(group, "jaxcal jit", t["jit"].median, kind="jaxcal", compile_s=trace_s + compile_s),
            row(group, FLOOR, t["floor"].median, kind="floor"),
        ]
        if mapie is None:
            gib = 3 * 8 * case["n"] ** 2 / 2**30
            notes.append(
                f"{name} at N = {case['n']:.0e}: MAPIE not run, it would allocate three "
                f"N x N float64 matrices ({gib:,.0f} GiB) and multiply them (O(N^3))."
            )
    return rows, notes, table_rows


def _value(outputs: dict[str, Any], name: str) -> str | None:
    if name not in outputs:
        return None
    return f"{np.asarray(outputs[name], np.float64).reshape(-1)[0]:.6g}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="N = 1e4, HSIC at 500, few repeats")
    parser.add_argument("--n", type=int, help="sample size (default 1e6; quick 1e4)")
    parser.add_argument("--hsic-n", type=int, help="N for HSIC against MAPIE (default 2000)")
    parser.add_argument("--repeats", type=int, help="timed calls per case (default 15; quick 5)")
    parser.add_argument("--budget-s", type=float, help="stop repeating a case after this many s")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    args = parser.parse_args(argv)
    args.n = args.n or (10_000 if args.quick else 1_000_000)
    args.hsic_n = args.hsic_n or (500 if args.quick else 2_000)
    args.repeats = args.repeats or (5 if args.quick else 15)
    args.budget_s = args.budget_s or (1.0 if args.quick else 5.0)
    if importlib.util.find_spec("mapie") is None:
        print("MAPIE is not installed (pip install 'jaxcal[bench]'): nothing to compare with.")
        return
    import mapie

    with warnings.catch_warnings():
        # MAPIE's classification_ssc averages empty groups (NaN, "Mean of empty slice").
        warnings.simplefilter("ignore", RuntimeWarning)
        rows, notes, table_rows = run(args)
    print(f"### Conformal coverage metrics: jaxcal.coverage vs MAPIE {mapie.__version__}\n")
    print(f"`python benchmarks/{' '.join(['bench_coverage.py', *(argv or sys.argv[1:])])}`  ")
    print(f"{environment()}\n")
    print(
        "| metric | N | MAPIE ms | jaxcal eager ms | jaxcal jit ms | MAPIE ÷ eager "
        "| MAPIE ÷ jit | jaxcal compile ms | max abs diff |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(
        "\nSteady state: median of timed calls after one warm-up call, cases interleaved "
        "round-robin, JAX results synchronised with `block_until_ready`. Compile: trace, "
        "lower and XLA-compile a fresh `jax.jit` of the call for this shape (paid once per "
        "shape). Max abs diff: jaxcal (float32) against MAPIE (float64)."
    )
    for note in notes:
        print(f"- {note}")
    table = Table(
        key="coverage",
        title=f"Conformal coverage metrics against MAPIE {mapie.__version__}",
        command=" ".join(["python benchmarks/bench_coverage.py", *(argv or sys.argv[1:])]),
        environment=environment(),
        clock=args.clock,
        reference="jaxcal jit",
        floor=FLOOR,
        rows=table_rows,
        notes=[*notes, "jaxcal eager's value column: max abs diff against MAPIE (float64)."],
        group="metric",
    )
    write_tables(args.json, [table])


if __name__ == "__main__":
    main()
