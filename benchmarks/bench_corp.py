"""Benchmark: CORP score decomposition, jaxcal against model-diagnostics' ``decompose``.

Run:  python benchmarks/bench_corp.py [--n 1000000] [--clock cpu] [--quick]
      (``taskset -c 0`` on a shared machine, with ``--clock cpu``)

Task 1: the CORP decomposition S = MCB - DSC + UNC of the Brier and the log score of N
binary float32 forecasts (p ~ U(0, 1), y ~ Bernoulli(p^1.2)), side by side in one run:

* ``jaxcal``: ``jaxcal.score_decomposition(p, y, score=...)`` (one sort of int32 keys
  with the outcome packed in, a parallel round of pooling, the stack PAV);
* ``model-diagnostics``: ``model_diagnostics.scoring.decompose(y, p,
  scoring_function=SquaredError() / LogLoss())`` (scikit-learn's isotonic regression);

plus jaxcal's stages alone (the sort of the packed keys) to show where the time goes, and
the floors: a jitted read of the inputs and ``np.sort`` of the packed keys. The values are
checked to agree (float32 round-off) before timing.

Task 2: 1000 bootstrap replicates of the decomposition (MCB, DSC, UNC, S) at N = 1e4 in
one vmapped call, ``jaxcal.stats.score_decomposition_ci`` (one sort for all replicates),
against a Python loop over ``decompose`` on resampled data (timed over a few replicates
and scaled).

Steady-state medians after a warm-up call (``benchmarks/_timing.py``), compile time
separately; ``--clock cpu`` times process CPU time (all threads).
"""

from __future__ import annotations

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _timing import (
    Table,
    compile_seconds,
    environment,
    fmt_ms,
    read_floor,
    row,
    size_label,
    sort_floor,
    time_interleaved,
    write_tables,
)

import jaxcal
from jaxcal._core.sort import sort
from jaxcal.metrics._corp import order_keys
from jaxcal.stats import score_decomposition_ci

REFERENCE = "jaxcal brier"
READ_FLOOR = "floor: jax.jit read of p, y"
SORT_FLOOR = "floor: np.sort of packed (score bits, label) keys"
BOOT_REFERENCE = "jaxcal score_decomposition_ci, one vmapped call"


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n).astype(np.float32)
    y = (rng.uniform(size=n) < p**1.2).astype(np.int32)
    return p, y


def _md_decompose(md, p, y, score):
    scoring = md.SquaredError() if score == "brier" else md.LogLoss()
    df = md.decompose(y.astype(np.float32), p, scoring_function=scoring)
    return [float(df[k][0]) for k in ("score", "miscalibration", "discrimination", "uncertainty")]


def decomposition(n, clock, repeats, budget):
    try:
        import model_diagnostics.scoring as md
    except ImportError:  # pragma: no cover
        md = None
    p, y = _data(n)
    pj, yj = jnp.asarray(p), jnp.asarray(y)
    packed = jax.jit(lambda q, t: sort(order_keys(q) * 2 + t))
    cases = {}
    for score in ("brier", "log"):
        fn = jax.jit(lambda q, t, score=score: jaxcal.score_decomposition(q, t, score=score))
        cases[f"jaxcal {score}"] = lambda fn=fn: fn(pj, yj)
        if md is not None:
            cases[f"model-diagnostics {score}"] = lambda s=score: _md_decompose(md, p, y, s)
    cases["jaxcal: the sort alone"] = lambda: packed(pj, yj)
    cases[READ_FLOOR] = read_floor(pj, yj)
    cases[SORT_FLOOR] = sort_floor(p, y)
    outputs = {}
    timings = time_interleaved(cases, repeats, budget, outputs=outputs, clock=clock)
    print(f"\nCORP decomposition, N = {n:.0e} binary float32 ({clock} clock)")
    for score in ("brier", "log"):
        ours = np.array([float(v) for v in outputs[f"jaxcal {score}"]])
        line = f"  {score}: jaxcal (S, MCB, DSC, UNC) = {np.round(ours, 6).tolist()}"
        if md is not None:
            theirs = np.array(outputs[f"model-diagnostics {score}"])
            line += f"; max |diff| to model-diagnostics {np.max(np.abs(ours - theirs)):.1e}"
        print(line)
    print(f"  {'case':34s} {'median':>10s} {'best':>10s}")
    for name, t in timings.items():
        print(f"  {name:34s} {fmt_ms(t.median):>10s} {fmt_ms(t.best):>10s}")
    if md is not None:
        for score in ("brier", "log"):
            ratio = timings[f"model-diagnostics {score}"].median / timings[f"jaxcal {score}"].median
            print(f"  ratio model-diagnostics / jaxcal ({score}): {ratio:.1f}x")
    compile_s = sum(
        compile_seconds(lambda q, t: jaxcal.score_decomposition(q, t, score="brier"), pj, yj)
    )
    rows = []
    for name, t in timings.items():
        kind = "floor" if name.startswith("floor") else "jaxcal" if "jaxcal" in name else "peer"
        value = None
        if name in outputs and not name.startswith(("floor", "jaxcal:")):
            value = "S, MCB, DSC, UNC = " + ", ".join(f"{float(v):.6f}" for v in outputs[name])
        comp = compile_s if name == REFERENCE else None
        rows.append(row(n, name, t.median, kind=kind, compile_s=comp, value=value))
    notes = [] if md is not None else ["model-diagnostics is not installed: skipped."]
    return rows, notes


def bootstrap(n, n_resamples, clock, budget):
    try:
        import model_diagnostics.scoring as md
    except ImportError:  # pragma: no cover
        md = None
    p, y = _data(n, seed=1)
    key = jax.random.key(0)
    fn = jax.jit(
        lambda q, t, k: score_decomposition_ci(q, t, key=k, n_resamples=n_resamples).samples
    )
    cases = {BOOT_REFERENCE: lambda: fn(p, y, key)}
    loop_reps = 10
    rng = np.random.default_rng(0)
    idx = rng.integers(0, n, size=(loop_reps, n))
    if md is not None:
        cases[f"loop over decompose ({loop_reps})"] = lambda: [
            _md_decompose(md, p[i], y[i], "brier") for i in idx
        ]
    timings = time_interleaved(cases, 3, budget, clock=clock)
    print(f"\nBootstrap of the Brier decomposition, N = {n:.0e}, {n_resamples} replicates")
    group = f"{n_resamples} x {size_label(n)}"
    rows = [row(group, BOOT_REFERENCE, timings[BOOT_REFERENCE].median, kind="jaxcal")]
    ours = timings[BOOT_REFERENCE].median
    print(f"  jaxcal, one vmapped call: {fmt_ms(ours)}")
    if md is not None:
        per = timings[f"loop over decompose ({loop_reps})"].median / loop_reps
        print(
            f"  loop over model-diagnostics decompose: {fmt_ms(per)} per replicate, "
            f"{fmt_ms(per * n_resamples)} for {n_resamples} (scaled); ratio "
            f"{per * n_resamples / ours:.1f}x"
        )
        name = f"loop over model-diagnostics decompose (timed on {loop_reps}, scaled)"
        rows.append(row(group, name, per * n_resamples))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--boot-n", type=int, default=10**4, help="N of the bootstrap task")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--quick", action="store_true", help="N = 1e5, fewer repeats")
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    args = parser.parse_args()
    env = environment()
    print(env)
    n = 10**5 if args.quick else args.n
    rows, notes = decomposition(n, args.clock, 3 if args.quick else 9, 5.0 if args.quick else 20.0)
    boot_rows = bootstrap(args.boot_n, args.resamples, args.clock, 5.0 if args.quick else 20.0)
    common = dict(
        command=" ".join(["python benchmarks/bench_corp.py", *sys.argv[1:]]),
        environment=env,
        clock=args.clock,
        notes=notes,
    )
    write_tables(
        args.json,
        [
            Table(
                "corp",
                "CORP decomposition S = MCB - DSC + UNC, binary float32",
                reference=REFERENCE,
                floor=SORT_FLOOR,
                rows=rows,
                **common,
            ),
            Table(
                "corp-bootstrap",
                f"{args.resamples} bootstrap replicates of the Brier CORP decomposition",
                reference=BOOT_REFERENCE,
                floor=None,
                rows=boot_rows,
                **common,
            ),
        ],
    )


if __name__ == "__main__":
    main()
