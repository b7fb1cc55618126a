"""Benchmark the kernel and adaptive calibration errors against NumPy ports of their
references (issue 28).

    python benchmarks/bench_kernel_ce.py            # N = 1e3, 1e4, 1e5 (and 1e6 for the
                                                    # O(N log N) binary Laplacian SKCE)
    python benchmarks/bench_kernel_ce.py --quick    # N = 1e3

Everything is timed side by side in one process (steady-state medians after a warm-up
call, ``block_until_ready``; compile time of a new shape apart), float32 for jaxcal,
float64 NumPy for the ports:

* SKCE (K = 10, Laplacian, median heuristic): jaxcal's tiled U-statistic against a
  row-blocked NumPy port of CalibrationErrors.jl's ``unbiasedskce`` (the reference is a
  double loop in Julia; the port vectorises it over blocks of 1000 rows: BLAS Gram
  products and ``np.exp``). Binary SKCE with the Laplacian kernel: jaxcal's sorted
  recurrence (O(N log N)) up to N = 1e6, against the same quadratic port; the growth
  per decade is printed. The block estimator (m = 2) and the asymptotic test (1000
  bootstrap resamples, against a NumPy port of CalibrationTests.jl's ``bootstrap_ccdf``
  as a quadratic form in the resample counts) where they fit.
* ECE-KDE (K = 10, canonical, b = 0.1): forward and value_and_grad against the float64
  NumPy port of tpopordanoska/ece-kde (dense N x N: up to N = 5e3).
* The binned measures: ``l2_ece_interval`` (sylydya/CI-ECE's ``T_mn_estimator``),
  ``tcal_test`` with 200 resamples (dh7401/T-Cal's ``adaptive_T_Cal`` loop with 200
  trials), ``ece_sweep`` (caltrain's ``em_monotonic_sweep``) and ``tce``
  (facebookresearch/tce with scipy's ``binomtest`` per prediction); the slow Python
  references are timed once (``repeats`` 0 in the JSON) beyond a second per call.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import Table, environment, read_floor, row, size_label, time_interleaved, write_tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import jaxcal  # noqa: E402
from tests import reference_binned as rb  # noqa: E402
from tests import reference_kde as rk  # noqa: E402

K = 10
FLOOR = "floor: jax.jit read of probs, labels"
CLOCK = "wall"
REPEATS, BUDGET = 5, 5.0


def _timed(cases, max_call_s):
    """``time_interleaved`` after one call of each jaxcal case (its compilation, which
    the warm-up must not count against ``max_call_s``)."""
    for name, fn in cases.items():
        if name.startswith("jaxcal"):
            jax.block_until_ready(fn())
    out = {}
    times = time_interleaved(
        cases, REPEATS, BUDGET, outputs=out, max_call_s=max_call_s, clock=CLOCK
    )
    return times, out


def _compile_s(fn, *args):
    """Trace + lower + compile of a fresh jit of ``fn`` on ``args`` (seconds)."""
    jitted = jax.jit(fn)
    start = time.perf_counter()
    jitted.lower(*args).compile()
    return time.perf_counter() - start


def _data(n, k=K, seed=0, power=2.0):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k), n)
    truth = probs**power / (probs**power).sum(1, keepdims=True)
    labels = (rng.random((n, 1)) > truth.cumsum(1)).sum(1).clip(0, k - 1)
    return probs, labels.astype(np.int32)


def numpy_skce(probs, labels, h, block=1000):
    """CalibrationErrors.jl's unbiasedskce, vectorised over blocks of rows (float64)."""
    p = np.asarray(probs, float).reshape(len(labels), -1)
    binary = p.shape[1] == 1
    e = (labels - p[:, 0])[:, None] * np.sqrt(2) if binary else np.eye(p.shape[1])[labels] - p
    sq = (p * p).sum(1)
    total = 0.0
    for i in range(0, len(p), block):
        d2 = np.maximum(sq[i : i + block, None] + sq[None] - 2 * p[i : i + block] @ p.T, 0)
        hm = np.exp(-np.sqrt(d2) / h) * (e[i : i + block] @ e.T)
        idx = np.arange(i, min(i + block, len(p)))
        hm[idx - i, idx] = 0
        total += hm.sum()
    n = len(p)
    return total / (n * (n - 1))


def numpy_bootstrap(probs, labels, h, counts):
    """CalibrationTests.jl's statistic and bootstrap_ccdf quadratic forms (float64)."""
    p = np.asarray(probs, float)
    e = np.eye(p.shape[1])[labels] - p
    d = np.sqrt(np.maximum(((p[:, None] - p[None]) ** 2).sum(-1), 0))
    hm = np.exp(-d / h) * (e @ e.T)
    n = len(p)
    u = (hm.sum() - np.trace(hm)) / (n * (n - 1))
    stat = n / (n - 1) * u - hm.sum() / n**2
    hc = counts @ hm
    null = ((hc * counts).sum(1) - counts @ np.diag(hm)) / (n * (n - 1)) - 2 * hc.sum(1) / n**2
    return np.mean(null >= stat)


def bench_skce(sizes):
    return [r for n in sizes for r in _skce_at(n)]


def _skce_at(n):
    table = []
    probs, labels = _data(n)
    p32, y = jnp.asarray(probs, jnp.float32), jnp.asarray(labels)
    h = float(jaxcal.metrics._kernels.median_bandwidth(p32[:, :], jnp.ones(n)))
    cases = {
        "jaxcal `skce` (tiled U-statistic)": lambda: jaxcal.skce(p32, y, bandwidth=h),
        "jaxcal `skce(estimator='block')`, m = 2": lambda: jaxcal.skce(
            p32, y, bandwidth=h, estimator="block"
        ),
        FLOOR: read_floor(p32, y),
    }
    if n <= 10**5:
        cases["NumPy port of unbiasedskce (1000-row blocks)"] = lambda: numpy_skce(probs, labels, h)
    times, out = _timed(cases, 2.0)
    compiles = {
        "jaxcal `skce` (tiled U-statistic)": _compile_s(
            lambda a, b: jaxcal.skce(a, b, bandwidth=h), p32, y
        ),
        "jaxcal `skce(estimator='block')`, m = 2": _compile_s(
            lambda a, b: jaxcal.skce(a, b, bandwidth=h, estimator="block"), p32, y
        ),
    }
    for name, t in times.items():
        kind = "floor" if name == FLOOR else "jaxcal" if name.startswith("jaxcal") else "peer"
        value = None if name == FLOOR else f"{float(out[name]):.3e}"
        table.append(row(n, name, t.median, kind=kind, compile_s=compiles.get(name), value=value))
    print(
        f"SKCE N = {size_label(n)}: "
        + ", ".join(f"{k}: {v.median:.4f} s" for k, v in times.items()),
        flush=True,
    )
    return table


def bench_binary_skce(sizes):
    table, previous = [], None
    for n in sizes:
        rows, t = _binary_at(n)
        table += rows
        growth = "" if previous is None else f" (x{t / previous:.1f} per decade)"
        print(f"binary Laplacian SKCE N = {size_label(n)}: {t * 1e3:.2f} ms{growth}", flush=True)
        previous = t
    return table


def _binary_at(n):
    table = []
    rng = np.random.default_rng(1)
    p = rng.random(n)
    y = (rng.random(n) < p**1.5).astype(np.int32)
    p32, yj = jnp.asarray(p, jnp.float32), jnp.asarray(y)
    cases = {
        "jaxcal `skce`, binary Laplacian (sorted, O(N log N))": lambda: jaxcal.skce(
            p32, yj, bandwidth=0.3
        ),
        "jaxcal `skce`, binary Gaussian (tiled, O(N^2))": lambda: jaxcal.skce(
            p32, yj, kernel="gaussian", bandwidth=0.3
        ),
        FLOOR: read_floor(p32, yj),
    }
    if n > 10**5:
        del cases["jaxcal `skce`, binary Gaussian (tiled, O(N^2))"]
    if n <= 10**5:
        cases["NumPy port of unbiasedskce (binary, 1000-row blocks)"] = lambda: numpy_skce(
            p, y, 0.3
        )
    times, out = _timed(cases, 2.0)
    compile_s = _compile_s(lambda a, b: jaxcal.skce(a, b, bandwidth=0.3), p32, yj)
    for name, t in times.items():
        kind = "floor" if name == FLOOR else "jaxcal" if name.startswith("jaxcal") else "peer"
        value = None if name == FLOOR else f"{float(out[name]):.3e}"
        first = name.startswith("jaxcal `skce`, binary Laplacian")
        table.append(
            row(
                n,
                name,
                t.median,
                kind=kind,
                value=value,
                compile_s=compile_s if first else None,
            )
        )
    return table, times["jaxcal `skce`, binary Laplacian (sorted, O(N log N))"].median


def bench_skce_test(n, resamples=1000):
    probs, labels = _data(n, seed=3, power=1.0)
    p32, y = jnp.asarray(probs, jnp.float32), jnp.asarray(labels)
    key = jax.random.key(0)
    counts = np.random.default_rng(0).multinomial(n, np.full(n, 1 / n), resamples).astype(float)
    cases = {
        "jaxcal `skce_test` (asymptotic, 1000 resamples)": lambda: (
            jaxcal.skce_test(p32, y, key=key, n_resamples=resamples, bandwidth=0.5).p_value
        ),
        "NumPy port of bootstrap_ccdf (counts as a matrix)": lambda: numpy_bootstrap(
            probs, labels, 0.5, counts
        ),
        FLOOR: read_floor(p32, y),
    }
    times, out = _timed(cases, 5.0)
    compile_s = _compile_s(
        lambda a, b: jaxcal.skce_test(a, b, key=key, n_resamples=resamples, bandwidth=0.5), p32, y
    )
    table = []
    for name, t in times.items():
        kind = "floor" if name == FLOOR else "jaxcal" if name.startswith("jaxcal") else "peer"
        value = None if name == FLOOR else f"{float(out[name]):.3f}"
        table.append(
            row(
                n,
                name,
                t.median,
                kind=kind,
                value=value,
                compile_s=compile_s if kind == "jaxcal" else None,
            )
        )
    return table


def bench_ece_kde(sizes):
    return [r for n in sizes for r in _ece_kde_at(n)]


def _ece_kde_at(n):
    table = []
    probs, labels = _data(n, seed=4)
    p32, y = jnp.asarray(probs, jnp.float32), jnp.asarray(labels)
    fwd = jax.jit(lambda a, b: jaxcal.ece_kde(a, b, bandwidth=0.1))
    vg = jax.jit(jax.value_and_grad(lambda a, b: jaxcal.ece_kde(a, b, bandwidth=0.1)))
    cases = {
        "jaxcal `ece_kde`, forward": lambda: fwd(p32, y),
        "jaxcal `ece_kde`, value_and_grad": lambda: vg(p32, y)[0],
        FLOOR: read_floor(p32, y),
    }
    if n <= 5000:
        cases["NumPy port of get_ece_kde (dense, float64)"] = lambda: rk.get_ece_kde(
            probs, labels, 0.1, 1, "canonical"
        )
    compiles = {
        "jaxcal `ece_kde`, forward": _compile_s(
            lambda a, b: jaxcal.ece_kde(a, b, bandwidth=0.1), p32, y
        ),
        "jaxcal `ece_kde`, value_and_grad": _compile_s(
            jax.value_and_grad(lambda a, b: jaxcal.ece_kde(a, b, bandwidth=0.1)), p32, y
        ),
    }
    times, out = _timed(cases, 5.0)
    for name, t in times.items():
        kind = "floor" if name == FLOOR else "jaxcal" if name.startswith("jaxcal") else "peer"
        value = None if name == FLOOR else f"{float(out[name]):.4f}"
        table.append(row(n, name, t.median, kind=kind, value=value, compile_s=compiles.get(name)))
    print(
        f"ECE-KDE N = {size_label(n)}: "
        + ", ".join(f"{k}: {v.median:.4f} s" for k, v in times.items()),
        flush=True,
    )
    return table


def _reference_tcal(z, y, trials, rng):
    """dh7401/T-Cal's adaptive_T_Cal decision with its Monte-Carlo loop (seeded)."""
    n = len(y)
    b_max = rb.tcal_scales(n)
    for b in range(1, b_max + 1):
        null = np.empty(trials)
        for t in range(trials):
            s = rng.choice(z, size=n, replace=True)
            null[t] = rb.plugin_ece(s, rng.binomial(1, s, n), 2**b)
        if rb.plugin_ece(z, y, 2**b) > np.quantile(null, 1 - 0.05 / b_max):
            return True
    return False


def bench_binned(sizes):
    return [r for n in sizes for r in _binned_at(n)]


def _binned_at(n):
    table = []
    rng = np.random.default_rng(5)
    z = rng.random(n)
    y = (rng.random(n) < z**1.3).astype(np.int32)
    z32, yj = jnp.asarray(z, jnp.float32), jnp.asarray(y)
    key = jax.random.key(0)
    jax_cases = {
        "jaxcal `l2_ece_interval` (15 bins)": (lambda a, b: jaxcal.l2_ece_interval(a, b).upper),
        "jaxcal `tcal_test` (200 resamples)": (
            lambda a, b: jaxcal.tcal_test(a, b, key=key, n_resamples=200).p_value
        ),
        "jaxcal `ece_sweep`": (lambda a, b: jaxcal.ece_sweep(a, b)),
        "jaxcal `tce`": (lambda a, b: jaxcal.tce(a, b)),
    }
    cases = {name: (lambda f=f: f(z32, yj)) for name, f in jax_cases.items()}
    cases[FLOOR] = read_floor(z32, yj)
    cases["CI-ECE T_mn_estimator (15 bins)"] = lambda: rb.t_mn_estimator(y, z, 15)[0]
    if n <= 10**4:
        cases["T-Cal adaptive_T_Cal (200 trials)"] = lambda: _reference_tcal(
            z, y, 200, np.random.default_rng(0)
        )
        cases["caltrain em_monotonic_sweep"] = lambda: rb.em_ece_sweep(z, y)[0]
    cases["facebookresearch tce (scipy binomtest)"] = lambda: rb.tce(z, y)
    compiles = {name: _compile_s(f, z32, yj) for name, f in jax_cases.items()}
    times, out = _timed(cases, 1.0)
    for name, t in times.items():
        kind = "floor" if name == FLOOR else "jaxcal" if name.startswith("jaxcal") else "peer"
        value = None if name == FLOOR else f"{float(out[name]):.4g}"
        table.append(row(n, name, t.median, kind=kind, value=value, compile_s=compiles.get(name)))
    print(
        f"binned N = {size_label(n)}: "
        + ", ".join(f"{k}: {v.median:.4f} s" for k, v in times.items()),
        flush=True,
    )
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 1e3 only")
    parser.add_argument("--sizes", type=float, nargs="+", help="default 1e3 1e4 1e5")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    args = parser.parse_args()
    global CLOCK, REPEATS, BUDGET
    CLOCK = args.clock
    sizes = [10**3] if args.quick else [10**3, 10**4, 10**5]
    sizes = [int(n) for n in args.sizes] if args.sizes else sizes
    if args.quick:
        REPEATS, BUDGET = 2, 0.5
    env = environment()
    print(env, flush=True)
    skce = bench_skce(sizes)
    binary = bench_binary_skce(sizes if args.quick else [*sizes, 10**6])
    test = bench_skce_test(min(sizes[0], 1000))
    kde = bench_ece_kde([n for n in sizes if n <= 10**4])
    binned = bench_binned(sizes)
    common = dict(
        command=" ".join(["python benchmarks/bench_kernel_ce.py", *sys.argv[1:]]),
        environment=env,
        clock=CLOCK,
        floor=FLOOR,
    )
    tables = [
        Table("kernel-skce", "SKCE, K = 10, Laplacian (float32 jaxcal, float64 NumPy)",
              reference="jaxcal `skce` (tiled U-statistic)", rows=skce, unit="s", **common),
        Table("kernel-skce-binary", "Binary SKCE: the O(N log N) Laplacian recurrence",
              reference="jaxcal `skce`, binary Laplacian (sorted, O(N log N))", rows=binary, unit="s", **common),
        Table("kernel-skce-test", "Asymptotic SKCE test, K = 10, 1000 resamples",
              reference="jaxcal `skce_test` (asymptotic, 1000 resamples)", rows=test, unit="s", **common),
        Table("kernel-ece-kde", "ECE-KDE, canonical, K = 10, b = 0.1",
              reference="jaxcal `ece_kde`, forward", rows=kde, unit="s", **common),
        Table("kernel-binned", "Binned and adaptive measures (binary scores)",
              reference="jaxcal `l2_ece_interval` (15 bins)", rows=binned, unit="s", **common),
    ]  # fmt: skip
    print()
    for t in tables:
        print(f"### {t.title}\n")
        for r in t.rows:
            sec = "skipped" if r["seconds"] is None else f"{r['seconds']:.4g}"
            comp = "" if r["compile_s"] is None else f", compile {r['compile_s']:.2f} s"
            print(f"- N = {r['size']}: {r['name']}: {sec} s{comp} ({r['value']})")
        print()
    write_tables(args.json, tables)


if __name__ == "__main__":
    main()
