"""Benchmark: consistency-resampling test of binary ECE, jaxcal against loops and NumPy.

Run:  python benchmarks/bench_bootstrap.py [--quick] [--resamples 1000]

Task: the consistency test of Vaicenavicius et al. (2019) with R resamples of the
binary ECE (15 uniform bins) at N samples: draw labels ~ Bernoulli(p) R times and
recompute the ECE each time. Contenders, timed side by side in one run:

* ``jaxcal``: ``jaxcal.stats.consistency_test(partial(jaxcal.ece, n_bins=15), ...)``
  (ece declares its binned form: per-bin counts of a whole batch of resamples are one
  int8 product).
* ``jaxcal generic``: the same call with the metric hidden in a plain function, so every
  resample calls the ECE kernel (vmapped): what vmap alone buys.
* ``loop over jaxcal.ece``: a Python loop, one ``jax.random.bernoulli`` and one eager
  ``jaxcal.ece`` call per resample.
* ``loop over MAPIE``: a Python loop over ``mapie.metrics.calibration.
  expected_calibration_error`` with NumPy labels (the status quo).
* ``NumPy vectorised``: samples sorted by bin once, labels for 100 resamples at a time
  from ``Generator.random(dtype=float32) < p``, per-bin counts by ``np.add.reduceat``.
* ``uncertainty-calibration`` (Kumar et al.) when installed (``import calibration``).

The two loops are timed over a few iterations and scaled to R (the table says how many).
Steady-state times are medians (and minima) after a warm-up call, with
``block_until_ready``; jaxcal's compile time (first call minus steady state) is listed
separately. "cpu s" is the process CPU time (all threads), a contention-free measure
of work: on a loaded 2-core machine wall time can exceed it; wall time can also be
below it when XLA uses both cores.

A second table compares random-number generators for the same 10^8 labels (what
dominates the cost): ``jax.random.bernoulli`` (Threefry, JAX's rolled loop on CPU), the
``rbg`` and ``unsafe_rbg`` implementations (XLA RngBitGenerator), and jaxcal's fused
Threefry with one or two labels per block.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from _timing import Table, environment, read_floor, row, size_label, write_tables

import jaxcal
from jaxcal._core.random import blocks, threshold
from jaxcal.stats import consistency_test

N_BINS = 15
REFERENCE = "jaxcal consistency_test (ece fast path)"
FLOOR = "floor: jax.jit read of probs, labels (once)"


def _timed(fn, reps):
    """(median wall, min wall, median cpu) over ``reps`` calls after one warm-up call."""
    wall, cpu = [], []
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn())
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return float(np.median(wall)), float(np.min(wall)), float(np.median(cpu))


def _first_call(fn):
    w0 = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - w0


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n).astype(np.float32)
    y = (rng.random(n) < p).astype(np.int32)
    return p, y


def _numpy_consistency(p, y, r, rng, batch=100):
    """Vectorised NumPy consistency test of the binary ECE (right-closed uniform bins).

    Samples are sorted by bin once; labels for ``batch`` resamples at a time come from
    ``Generator.random(dtype=float32) < p`` and their per-bin counts from one
    ``np.add.reduceat`` over the contiguous bins (2.3x faster here than a float32 BLAS
    product with a one-hot matrix).
    """
    n = p.shape[0]
    bins = np.clip(np.ceil(p.astype(np.float64) * N_BINS).astype(np.int64) - 1, 0, N_BINS - 1)
    order = np.argsort(bins, kind="stable")
    p_sorted, y_sorted, b_sorted = p[order], y[order], bins[order]
    count = np.bincount(bins, minlength=N_BINS).astype(np.float64)
    present = np.flatnonzero(count)  # reduceat needs the starts of non-empty bins
    starts = np.searchsorted(b_sorted, present)
    conf = np.bincount(bins, weights=p, minlength=N_BINS)[present] / count[present]
    share = count[present] / n

    def ece(hits):
        return np.abs(hits / count[present] - conf) @ share

    observed = ece(np.add.reduceat(y_sorted, starts).astype(np.float64))
    null = np.empty(r)
    for start in range(0, r, batch):
        b = min(batch, r - start)
        labels = rng.random((b, n), dtype=np.float32) < p_sorted
        hits = np.add.reduceat(labels.view(np.uint8), starts, axis=1, dtype=np.int32)
        null[start : start + b] = ece(hits)
    return observed, (1 + np.sum(null >= observed)) / (1 + r)


def bench_consistency(n, r, quick, rows):
    p_np, y_np = _data(n)
    p, y = jnp.asarray(p_np), jnp.asarray(y_np)
    key = jax.random.key(0)
    metric = partial(jaxcal.ece, n_bins=N_BINS)

    def hidden(probs, labels):  # the same metric, without a declared binned form
        return metric(probs, labels)

    reps = 3 if quick else 7
    results = {}

    fast = lambda: consistency_test(metric, p, y, key=key, n_resamples=r).p_value  # noqa: E731
    first = _first_call(fast)
    med, mn, cpu = _timed(fast, reps)
    results["jaxcal consistency_test (ece fast path)"] = (med, mn, cpu, first - med, "")

    generic = lambda: consistency_test(hidden, p, y, key=key, n_resamples=r).p_value  # noqa: E731
    first = _first_call(generic)
    med, mn, cpu = _timed(generic, max(2, reps // 2))
    results["jaxcal consistency_test (generic vmap)"] = (med, mn, cpu, first - med, "")

    iters = 5 if quick else 20
    keys = jax.random.split(key, iters)

    def jax_loop():
        out = None
        for k in keys:
            labels = jax.random.bernoulli(k, p).astype(jnp.int32)
            out = jaxcal.ece(labels=labels, probs=p, n_bins=N_BINS)
        return out

    jax_loop()
    med, mn, cpu = _timed(jax_loop, 3)
    scale = r / iters
    results["Python loop over jaxcal.ece"] = (
        med * scale,
        mn * scale,
        cpu * scale,
        None,
        f"{iters} iterations x {scale:g}",
    )

    try:
        from mapie.metrics.calibration import expected_calibration_error
    except ImportError:  # pragma: no cover - optional peer
        results["Python loop over MAPIE ECE"] = None
    else:
        rng = np.random.default_rng(1)
        m_iters = 5 if quick else 10

        def mapie_loop():
            out = None
            for _ in range(m_iters):
                labels = (rng.random(n) < p_np).astype(np.int64)
                out = expected_calibration_error(labels, p_np, num_bins=N_BINS)
            return out

        mapie_loop()
        med, mn, cpu = _timed(mapie_loop, 3)
        scale = r / m_iters
        results["Python loop over MAPIE ECE"] = (
            med * scale,
            mn * scale,
            cpu * scale,
            None,
            f"{m_iters} iterations x {scale:g}",
        )

    floor = read_floor(p, y)
    med, mn, cpu = _timed(floor, reps)
    results[FLOOR] = (med, mn, cpu, None, "")

    rng = np.random.default_rng(2)
    np_fn = lambda: _numpy_consistency(p_np, y_np, r, rng)  # noqa: E731
    np_fn()
    med, mn, cpu = _timed(np_fn, max(2, reps // 2))
    results["NumPy vectorised (float32 uniforms, reduceat counts)"] = (med, mn, cpu, None, "")

    try:
        import calibration as uc  # uncertainty-calibration (Kumar et al. 2019)
    except ImportError:
        results["uncertainty-calibration (not installed)"] = None
    else:  # pragma: no cover - optional peer
        rng = np.random.default_rng(3)
        u_iters = 3

        def uc_loop():
            out = None
            for _ in range(u_iters):
                labels = (rng.random(n) < p_np).astype(np.int64)
                out = uc.get_ece(p_np, labels, num_bins=N_BINS, mode="marginal")
            return out

        uc_loop()
        med, mn, cpu = _timed(uc_loop, 2)
        scale = r / u_iters
        results["Python loop over uncertainty-calibration get_ece (equal-mass bins)"] = (
            med * scale,
            mn * scale,
            cpu * scale,
            None,
            f"{u_iters} iterations x {scale:g}",
        )

    base = results[REFERENCE][0]
    for name, res in results.items():
        if res is None:
            rows.append((name, n, None, None, None, None, None, "skipped"))
            continue
        med, mn, cpu, compile_s, note = res
        rows.append((name, n, med, mn, cpu, compile_s, med / base, note))


def bench_rng(n, r, quick):
    """Seconds for r x n Bernoulli labels (+ a per-resample sum), by generator."""
    p = jnp.asarray(_data(n)[0])
    t = threshold(p)
    batch = 100
    key = jax.random.key(0)
    out = []

    def mapped(fn, keys):
        return jax.lax.map(fn, keys.reshape(r // batch, batch, *keys.shape[1:]))

    @jax.jit
    def bernoulli(k):
        keys = jax.random.split(k, r)
        return mapped(
            lambda ks: jax.vmap(lambda kk: jax.random.bernoulli(kk, p).sum(dtype=jnp.int32))(ks),
            keys,
        )

    def bits_with(impl):
        @jax.jit
        def fn(k):
            keys = jax.random.split(k, r)
            return mapped(
                lambda ks: jax.vmap(
                    lambda kk: (jax.random.bits(kk, (n,), jnp.uint32) < t).sum(dtype=jnp.int32)
                )(ks),
                keys,
            )

        return fn, jax.random.key(0, impl=impl)

    @jax.jit
    def fused_one(k):  # one Threefry block per label (as jax.random.bits: x0 ^ x1)
        seeds = jax.random.key_data(jax.random.split(k, r))

        def body(s):
            w0, w1 = blocks(s, jnp.arange(n, dtype=jnp.uint32))
            return ((w0 ^ w1) < t[None]).astype(jnp.int8).sum(axis=1, dtype=jnp.int32)

        return mapped(body, seeds)

    @jax.jit
    def fused_two(k):  # two labels per block, as jaxcal draws them
        seeds = jax.random.key_data(jax.random.split(k, r))
        h = n // 2

        def body(s):
            w0, w1 = blocks(s, jnp.arange(h, dtype=jnp.uint32))
            z = (w0 < t[None, :h]).astype(jnp.int8) + (w1 < t[None, h:]).astype(jnp.int8)
            return z.sum(axis=1, dtype=jnp.int32)

        return mapped(body, seeds)

    cases = [
        ("jax.random.bernoulli (threefry2x32, default)", bernoulli, key),
        ("jax.random.bits, impl='rbg'", *bits_with("rbg")),
        ("jax.random.bits, impl='unsafe_rbg'", *bits_with("unsafe_rbg")),
        ("jaxcal fused Threefry, 1 label per block", fused_one, key),
        ("jaxcal fused Threefry, 2 labels per block (used)", fused_two, key),
    ]
    reps = 2 if quick else 5
    for name, fn, k in cases:
        fn(k).block_until_ready()
        med, mn, cpu = _timed(lambda fn=fn, k=k: fn(k), reps)
        out.append((name, med, mn, cpu))
    return out


def _fmt(x, digits=3):
    return "—" if x is None else f"{x:.{digits}f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--sizes", type=int, nargs="+", help="N (default 1e4 1e5; quick 1e3 1e4)")
    parser.add_argument(
        "--clock", choices=["wall", "cpu"], default="wall", help="the JSON tables' clock"
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    args = parser.parse_args(argv)
    sizes = args.sizes or ((1_000, 10_000) if args.quick else (10_000, 100_000))
    r = args.resamples
    cpu_clock = args.clock == "cpu"

    print(f"# Consistency test of binary ECE ({N_BINS} bins), {r} resamples")
    print(
        f"jax {jax.__version__} on {jax.devices()[0].device_kind} ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores); load average before: {os.getloadavg()[0]:.1f}\n"
    )
    rows = []
    for n in sizes:
        bench_consistency(n, r, args.quick, rows)
    print("| method | N | median s | min s | cpu s | compile s | x jaxcal | note |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, n, med, mn, cpu, comp, ratio, note in rows:
        print(
            f"| {name} | {n:,} | {_fmt(med)} | {_fmt(mn)} | {_fmt(cpu)} | {_fmt(comp, 2)} | "
            f"{_fmt(ratio, 1)} | {note} |"
        )

    big = max(sizes)
    by = {name: (med, cpu) for name, n, med, _, cpu, _, _, _ in rows if n == big and med}
    ours = by["jaxcal consistency_test (ece fast path)"]
    mapie = by.get("Python loop over MAPIE ECE")
    numpy_ = by["NumPy vectorised (float32 uniforms, reduceat counts)"]
    print(f"\nTargets at N = {big:,} (wall median; CPU seconds in brackets):")
    print(f"- jaxcal {ours[0]:.3f} s [{ours[1]:.3f}] (target <= 0.3 s)")
    if mapie:
        print(
            f"- vs MAPIE loop: {mapie[0] / ours[0]:.0f}x [{mapie[1] / ours[1]:.0f}x] (target >= 50x)"
        )
    print(
        f"- vs NumPy vectorised: {numpy_[0] / ours[0]:.1f}x [{numpy_[1] / ours[1]:.1f}x] (target > 1x)"
    )

    n_rng = sizes[-1]
    print(f"\n# Random labels: {r} x {n_rng:,} Bernoulli draws (+ a sum per resample)\n")
    print("| generator | median s | min s | cpu s |")
    print("|---|---:|---:|---:|")
    rng_rows = []
    for name, med, mn, cpu in bench_rng(n_rng, r, args.quick):
        print(f"| {name} | {_fmt(med)} | {_fmt(mn)} | {_fmt(cpu)} |")
        kind = "jaxcal" if name.startswith("jaxcal") else "peer"
        rng_rows.append(
            row(f"{r} x {size_label(n_rng)}", name, cpu if cpu_clock else med, kind=kind)
        )
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")

    table_rows = []
    for name, n, med, _, cpu, comp, _, note in rows:
        kind = "floor" if name == FLOOR else "jaxcal" if name.startswith("jaxcal") else "peer"
        name = f"{name} ({note})" if note and note != "skipped" else name
        table_rows.append(row(n, name, cpu if cpu_clock else med, kind=kind, compile_s=comp))
    common = dict(
        command=" ".join(["python benchmarks/bench_bootstrap.py", *(argv or sys.argv[1:])]),
        environment=environment(),
        clock=args.clock,
        unit="s",
    )
    write_tables(
        args.json,
        [
            Table(
                "bootstrap",
                f"Consistency test of binary ECE ({N_BINS} bins), {r} resamples",
                reference=REFERENCE,
                floor=FLOOR,
                rows=table_rows,
                **common,
            ),
            Table(
                "bootstrap-rng",
                f"Random labels: {r} x {n_rng:,} Bernoulli draws (+ a sum per resample)",
                reference="jaxcal fused Threefry, 2 labels per block (used)",
                floor=None,
                rows=rng_rows,
                **common,
            ),
        ],
    )


if __name__ == "__main__":
    main()
