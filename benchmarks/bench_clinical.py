"""Venn-Abers and the loess ICI: jaxcal against the venn-abers package and statsmodels.

Three cases, side by side in one run (interleaved, steady-state medians after a warm-up):

1. Venn-Abers fit + apply, 50k calibration and 50k test scores (float32 for jaxcal,
   float64 for the package, which needs it), on several data sets: the package's cost
   depends on how often its convex-hull shortcut fails (each failure is an O(n) scan), so
   the ratio does too. ``jaxcal``: ``venn_abers()`` fit and ``venn_abers_interval`` +
   merge, jitted; ``venn-abers``: ``VennAbers().fit(p_cal, y).predict_proba(p_test)``.
   The (p0, p1) of both are checked to agree (max |difference| printed).
2. LOWESS at N = 1e5 (frac 0.75, no robustness iteration): ``jaxcal.ici(p, y)`` (the fit
   and its four summaries, jitted) against statsmodels' ``lowess(y, p, frac=0.75, it=0,
   delta=0)`` (the fit alone). statsmodels is O(N^2) and takes about a minute: it is
   timed once (``Timing.repeats`` 0).
3. ``jaxcal.ici`` (loess) at N = 1e4, 1e5, 1e6 against ``np.sort`` of the N scores.

    python benchmarks/bench_clinical.py                     # the issue's sizes
    python benchmarks/bench_clinical.py --quick             # small sizes, seconds
    python benchmarks/bench_clinical.py --n-venn-abers 20000 --n-loess 20000
    taskset -c 0 python benchmarks/bench_clinical.py --clock cpu   # on a loaded machine

Compile times (trace + lower + XLA compile of a fresh ``jax.jit``) are reported apart.
"""

from __future__ import annotations

import argparse
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from _timing import compile_seconds, environment, fmt_ms, time_interleaved

import jaxcal
from jaxcal.calibrators import venn_abers, venn_abers_interval


def _datasets(n: int, rng) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(calibration scores, labels, test scores) of a few kinds of models."""
    z = rng.normal(size=2 * n)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    u = rng.random(2 * n)
    out = {}
    s = rng.random(2 * n)
    out["calibrated, uniform scores"] = (s, u < s)
    s = sig(2 * z)
    out["over-confident (logistic)"] = (s, u < sig(z))
    s = rng.beta(0.5, 10, 2 * n)
    out["rare events (beta(0.5, 10))"] = (s, u < s)
    s = rng.random(2 * n)
    out["separable (y = s > 0.5)"] = (s, s > 0.5)
    return {k: (s[:n], y[:n].astype(np.int32), s[n:]) for k, (s, y) in out.items()}


def bench_venn_abers(n: int, repeats: int, clock: str) -> None:
    from venn_abers import VennAbers

    cal = venn_abers()

    @jax.jit
    def ours(s, y, t):
        params = cal.fit(s, y)
        p0, p1 = venn_abers_interval(params, t)
        return p0, p1, cal.apply(params, t)

    print(f"\n1. Venn-Abers fit + apply, {n} calibration and {n} test scores")
    rng = np.random.default_rng(0)
    data = _datasets(n, rng)
    first = next(iter(data.values()))
    s0, y0, t0 = first
    compile_s = sum(
        compile_seconds(ours, jnp.asarray(s0, jnp.float32), y0, jnp.asarray(t0, jnp.float32))
    )
    print(f"   jaxcal compile: {compile_s:.2f} s")
    print(f"   {'data':30s} {'jaxcal':>10s} {'venn-abers':>12s} {'ratio':>8s} {'max |dp|':>9s}")
    for name, (s, y, t) in data.items():
        sj, yj, tj = jnp.asarray(s, jnp.float32), jnp.asarray(y), jnp.asarray(t, jnp.float32)

        def package(s=s, y=y, t=t):
            with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
                warnings.simplefilter("ignore")
                va = VennAbers().fit(np.stack([1 - s, s], 1), y)
                return va.predict_proba(np.stack([1 - t, t], 1))

        outputs: dict = {}
        cases = {"jaxcal": lambda sj=sj, yj=yj, tj=tj: ours(sj, yj, tj), "venn-abers": package}
        times = time_interleaved(
            cases, repeats=repeats, budget_s=20.0, outputs=outputs, clock=clock
        )
        p0, p1, _ = (np.asarray(v, np.float64) for v in outputs["jaxcal"])
        pair = outputs["venn-abers"][1]
        diff = max(np.abs(p0 - pair[:, 0]).max(), np.abs(p1 - pair[:, 1]).max())
        ours_t, theirs = times["jaxcal"].median, times["venn-abers"].median
        print(
            f"   {name:30s} {fmt_ms(ours_t):>10s} {fmt_ms(theirs):>12s} "
            f"{theirs / ours_t:7.0f}x {diff:9.1e}"
        )


def bench_loess(n: int, repeats: int, clock: str) -> None:
    from statsmodels.nonparametric.smoothers_lowess import lowess

    rng = np.random.default_rng(1)
    p = rng.beta(2, 5, n)
    y = (rng.random(n) < np.clip(1.2 * p, 0, 1)).astype(np.int32)
    pj, yj = jnp.asarray(p, jnp.float32), jnp.asarray(y)
    ours = jax.jit(lambda p, y: jaxcal.ici(p, y))
    compile_s = sum(compile_seconds(ours, pj, yj))
    jax.block_until_ready(ours(pj, yj))  # compiled before the timed warm-up
    print(f"\n2. LOWESS ICI at N = {n} (frac 0.75, it 0); jaxcal compile {compile_s:.2f} s")
    outputs: dict = {}
    cases = {
        "jaxcal.ici (loess)": lambda: ours(pj, yj),
        "statsmodels lowess": lambda: lowess(y, p, frac=0.75, it=0, delta=0, return_sorted=False),
    }
    times = time_interleaved(
        cases, repeats=repeats, budget_s=10.0, outputs=outputs, max_call_s=5.0, clock=clock
    )
    ici_sm = float(np.mean(np.abs(outputs["statsmodels lowess"] - p)))
    ici_ours = float(outputs["jaxcal.ici (loess)"].ici)
    a, b = times["jaxcal.ici (loess)"], times["statsmodels lowess"]
    print(f"   jaxcal.ici          {fmt_ms(a.median):>10s} ms  ({a.repeats} timed calls)")
    print(f"   statsmodels lowess  {fmt_ms(b.median):>10s} ms  ({b.repeats} timed calls)")
    print(f"   ratio {b.median / a.median:.0f}x; ICI {ici_ours:.6f} vs {ici_sm:.6f}")


def bench_ici_scaling(sizes, repeats: int, clock: str) -> None:
    """``jaxcal.ici`` (loess) at several N against ``np.sort`` of the N scores (the floor
    of anything that orders them): O(N log N) shows as a ratio that grows like log N."""
    print("\n3. ICI (loess, frac 0.75) by N, against np.sort of the N float32 scores")
    print(f"   {'N':>9s} {'ici ms':>10s} {'compile s':>9s} {'np.sort ms':>10s} {'ratio':>7s}")
    for n in sizes:
        rng = np.random.default_rng(2)
        p = rng.beta(2, 5, n).astype(np.float32)
        y = (rng.random(n) < np.clip(1.2 * p, 0, 1)).astype(np.int32)
        pj, yj = jnp.asarray(p), jnp.asarray(y)
        ours = jax.jit(lambda p, y: jaxcal.ici(p, y))
        compile_s = sum(compile_seconds(ours, pj, yj))
        jax.block_until_ready(ours(pj, yj))
        cases = {
            "ici": lambda f=ours, a=pj, b=yj: f(a, b),
            "sort": lambda p=p: np.sort(p),
        }
        t = time_interleaved(cases, repeats=repeats, budget_s=10.0, clock=clock)
        a, b = t["ici"].median, t["sort"].median
        print(f"   {n:9,d} {fmt_ms(a):>10s} {compile_s:9.2f} {fmt_ms(b):>10s} {a / b:7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--n-venn-abers", type=int, help="calibration = test size")
    parser.add_argument("--n-loess", type=int, help="ICI sample size")
    parser.add_argument("--ici-sizes", type=int, nargs="+", help="sizes of the ICI scaling")
    args = parser.parse_args()
    start = time.perf_counter()
    n_va, n_loess = (5_000, 5_000) if args.quick else (50_000, 100_000)
    n_va, n_loess = args.n_venn_abers or n_va, args.n_loess or n_loess
    print(f"clock: {args.clock}")
    bench_venn_abers(n_va, args.repeats, args.clock)
    bench_loess(n_loess, args.repeats, args.clock)
    sizes = args.ici_sizes or ((1_000, 10_000) if args.quick else (10_000, 100_000, 1_000_000))
    bench_ici_scaling(sizes, args.repeats, args.clock)
    print(f"\n{environment()}; total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
