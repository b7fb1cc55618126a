"""Benchmark the differentiable objectives: soft-binned ECE, MMCE, smooth ECE.

    python benchmarks/bench_soft.py            # N = 1e4, 1e5, 1e6 (K = 10)
    python benchmarks/bench_soft.py --quick    # N = 1e3, 1e4

Everything is timed side by side in one run (steady-state medians after a warm-up call,
with ``block_until_ready``; compilation timed separately) and reported as ratios:

* soft ECE: forward, ``jax.value_and_grad`` (w.r.t. the (N, K) probabilities), their
  ratio, and the forward against the hard ``jaxcal.ece`` at the same size. "naive" is the
  paper's formula written directly in jnp and differentiated by autodiff (what a port of
  the reference code gives), for scale.
* MMCE at N = 1e4: jaxcal's exact sorted-scan evaluation against the reference
  implementation's O(N^2) kernel (evaluated here in blocks of 1000 rows so it fits).
* smooth ECE: jaxcal (fixed point included) against ``relplot.smECE`` (NumPy), if
  installed.

Target (issue 5): value_and_grad(soft_ece) at N = 1e5 <= 3x forward; forward <= 5x hard ECE.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import CLOCKS, Table, environment, read_floor, row, size_label, write_tables

import jaxcal

K = 10
FLOOR = "floor: jax.jit read of probs, labels"
CLOCK = "wall"  # set by main (--clock)


def _median_ms(fn, *args, reps):
    now = CLOCKS[CLOCK]
    jax.block_until_ready(fn(*args))  # warm-up (compiled already)
    times = []
    for _ in range(reps):
        start = now()
        jax.block_until_ready(fn(*args))
        times.append(now() - start)
    return 1e3 * float(np.median(times))


def _floor_ms(probs, labels, reps):
    return _median_ms(read_floor(probs, labels), reps=reps)


def _compile_s(fn, *args):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, K)).astype(np.float32) * 2
    probs = jax.nn.softmax(jnp.asarray(logits))
    labels = jnp.asarray(rng.integers(0, K, n), jnp.int32)
    return probs, labels


def _naive_soft_ece(probs, labels, n_bins=15, temperature=None):
    """Karandikar et al. Eq. (11) in plain jnp (l1), differentiated by autodiff."""
    t = temperature or 1.0 / (n_bins**2 * np.log(100.0))
    conf = probs.max(axis=1)
    correct = (jnp.argmax(probs, axis=1) == labels).astype(conf.dtype)
    anchors = (jnp.arange(n_bins, dtype=conf.dtype) + 0.5) / n_bins
    u = jax.nn.softmax(-((conf[:, None] - anchors[None, :]) ** 2) / t, axis=1)
    mass = u.sum(axis=0)
    gap = (u * (correct - conf)[:, None]).sum(axis=0) / jnp.maximum(mass, 1e-12)
    return jnp.sum(mass / conf.shape[0] * jnp.abs(gap))


def _blocked_mmce(probs, labels, bandwidth=0.4, block=1000):
    """The reference MMCE: the full N x N Laplacian kernel, here one block of rows at a time."""
    conf = probs.max(axis=1)
    a = ((jnp.argmax(probs, axis=1) == labels).astype(conf.dtype) - conf) / conf.shape[0]
    rows = conf.reshape(-1, block)
    coef = a.reshape(-1, block)

    def one(xs):
        r, c = xs
        return c @ jnp.exp(-jnp.abs(r[:, None] - conf[None, :]) / bandwidth) @ a

    return jnp.sqrt(jnp.maximum(jax.lax.map(one, (rows, coef)).sum(), 0))


def bench_soft_ece(sizes, reps):
    rows, table = [], []
    for n in sizes:
        probs, labels = _data(n)
        hard = jax.jit(lambda p, y: jaxcal.ece(p, y))
        fwd = jax.jit(lambda p, y: jaxcal.soft_ece(p, y))
        vg = jax.jit(jax.value_and_grad(lambda p, y: jaxcal.soft_ece(p, y)))
        naive_fwd = jax.jit(_naive_soft_ece)
        naive_vg = jax.jit(jax.value_and_grad(_naive_soft_ece))
        compile_fwd, compile_vg = _compile_s(fwd, probs, labels), _compile_s(vg, probs, labels)
        for f in (hard, naive_fwd, naive_vg):
            _compile_s(f, probs, labels)
        r = max(3, reps if n < 10**6 else reps // 4)
        t_hard = _median_ms(hard, probs, labels, reps=r)
        t_fwd = _median_ms(fwd, probs, labels, reps=r)
        t_vg = _median_ms(vg, probs, labels, reps=r)
        t_nf = _median_ms(naive_fwd, probs, labels, reps=r)
        t_nvg = _median_ms(naive_vg, probs, labels, reps=r)
        t_floor = _floor_ms(probs, labels, r)
        table += [
            row(n, "jaxcal `soft_ece`, forward", t_fwd / 1e3, kind="jaxcal", compile_s=compile_fwd),
            row(
                n,
                "jaxcal `soft_ece`, value_and_grad",
                t_vg / 1e3,
                kind="jaxcal",
                compile_s=compile_vg,
            ),
            row(n, "jaxcal hard `ece` (for scale)", t_hard / 1e3, kind="jaxcal"),
            row(n, "naive jnp soft ECE, forward", t_nf / 1e3),
            row(n, "naive jnp soft ECE, value_and_grad (autodiff)", t_nvg / 1e3),
            row(n, FLOOR, t_floor / 1e3, kind="floor"),
        ]
        rows.append(
            f"| {n:.0e} | {t_hard:.2f} | {t_fwd:.2f} | {t_vg:.2f} | **{t_vg / t_fwd:.2f}** "
            f"| **{t_fwd / t_hard:.2f}** | {t_nf:.2f} | {t_nvg:.2f} | {t_nvg / t_nf:.2f} "
            f"| {compile_fwd:.2f} / {compile_vg:.2f} |"
        )
    print("### soft_ece (confidence ECE, K = 10, M = 15, float32), milliseconds\n")
    print(
        "| N | hard `ece` | `soft_ece` fwd | value_and_grad | vg / fwd | fwd / hard "
        "| naive fwd | naive vg | naive vg / fwd | compile fwd / vg (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return table


def bench_mmce(n, reps):
    probs, labels = _data(n, seed=1)
    rows, table = [], []
    for name, f in [
        ("`mmce` (sorted prefix sums)", lambda p, y: jaxcal.mmce(p, y)),
        ("`mmce(variant='weighted')`", lambda p, y: jaxcal.mmce(p, y, variant="weighted")),
        ("O(N^2) kernel in 1000-row blocks", _blocked_mmce),
    ]:
        fwd, vg = jax.jit(f), jax.jit(jax.value_and_grad(f))
        c_fwd, c_vg = _compile_s(fwd, probs, labels), _compile_s(vg, probs, labels)
        t_fwd = _median_ms(fwd, probs, labels, reps=reps)
        t_vg = _median_ms(vg, probs, labels, reps=reps)
        value = float(fwd(probs, labels))
        rows.append((name, t_fwd, t_vg, c_fwd, c_vg, value))
        kind = "jaxcal" if name.startswith("`") else "peer"
        table += [
            row(
                n, f"{name}, forward", t_fwd / 1e3, kind=kind, compile_s=c_fwd, value=f"{value:.6f}"
            ),
            row(n, f"{name}, value_and_grad", t_vg / 1e3, kind=kind, compile_s=c_vg),
        ]
    base = rows[-1][1]
    print(f"\n### MMCE at N = {n:.0e} (K = 10, float32), milliseconds\n")
    print("| implementation | fwd | value_and_grad | vg / fwd | O(N^2) fwd / this fwd "
          "| compile fwd / vg (s) | value |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, t_fwd, t_vg, c_fwd, c_vg, value in rows:
        print(
            f"| {name} | {t_fwd:.2f} | {t_vg:.2f} | {t_vg / t_fwd:.2f} | {base / t_fwd:.1f} "
            f"| {c_fwd:.2f} / {c_vg:.2f} | {value:.6f} |"
        )
    return [*table, row(n, FLOOR, _floor_ms(probs, labels, reps) / 1e3, kind="floor")]


def bench_smooth_ece(sizes, reps):
    try:
        import relplot
    except ImportError:
        print("\n(relplot not installed: smooth ECE peer skipped)")
        relplot = None
    print("\n### smooth_ece (fixed-point bandwidth), milliseconds\n")
    print("| N | `smooth_ece` | value_and_grad | relplot.smECE | relplot / jaxcal | |diff| |")
    print("|---|---|---|---|---|---|")
    table = []
    for n in sizes:
        probs, labels = _data(n, seed=2)
        fwd = jax.jit(lambda p, y: jaxcal.smooth_ece(p, y))
        vg = jax.jit(jax.value_and_grad(lambda p, y: jaxcal.smooth_ece(p, y)))
        _compile_s(fwd, probs, labels)
        _compile_s(vg, probs, labels)
        t_fwd = _median_ms(fwd, probs, labels, reps=reps)
        t_vg = _median_ms(vg, probs, labels, reps=reps)
        value = f"{float(fwd(probs, labels)):.6f}"
        table += [
            row(n, "jaxcal `smooth_ece`, forward", t_fwd / 1e3, kind="jaxcal", value=value),
            row(n, "jaxcal `smooth_ece`, value_and_grad", t_vg / 1e3, kind="jaxcal"),
            row(n, FLOOR, _floor_ms(probs, labels, reps) / 1e3, kind="floor"),
        ]
        if relplot is None:
            print(f"| {n:.0e} | {t_fwd:.2f} | {t_vg:.2f} | - | - | - |")
            continue
        f, y = relplot.multiclass_logits_to_confidences(np.asarray(probs), np.asarray(labels), True)
        times = []
        now = CLOCKS[CLOCK]
        for _ in range(max(3, reps // 5)):
            start = now()
            ref = relplot.smECE(f, y)
            times.append(now() - start)
        t_ref = 1e3 * float(np.median(times))
        diff = abs(float(fwd(probs, labels)) - ref)
        table.append(row(n, "relplot.smECE (NumPy)", t_ref / 1e3, value=f"{ref:.6f}"))
        print(f"| {n:.0e} | {t_fwd:.2f} | {t_vg:.2f} | {t_ref:.1f} | {t_ref / t_fwd:.0f} "
              f"| {diff:.1e} |")  # fmt: skip
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (1e3, 1e4)")
    parser.add_argument("--reps", type=int, default=20, help="timed calls per case")
    parser.add_argument(
        "--sizes", type=float, nargs="+", help="soft ECE sizes (default 1e4 1e5 1e6)"
    )
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    args = parser.parse_args()
    global CLOCK
    CLOCK = args.clock
    sizes = [10**3, 10**4] if args.quick else [10**4, 10**5, 10**6]
    sizes = [int(n) for n in args.sizes] if args.sizes else sizes
    env = environment()
    print(f"{env}\n")
    soft = bench_soft_ece(sizes, args.reps)
    mmce_n = sizes[-1] if args.quick else 10**4
    mmce = bench_mmce(mmce_n, args.reps)
    smooth = bench_smooth_ece(sizes[:2], args.reps)
    common = dict(
        command=" ".join(["python benchmarks/bench_soft.py", *sys.argv[1:]]),
        environment=env,
        clock=args.clock,
        floor=FLOOR,
    )
    write_tables(
        args.json,
        [
            Table(
                "soft-ece",
                "Soft-binned ECE (K = 10, 15 bins, float32)",
                reference="jaxcal `soft_ece`, forward",
                rows=soft,
                **common,
            ),
            Table(
                "soft-mmce",
                f"MMCE at N = {size_label(mmce_n)} (K = 10, float32)",
                reference="`mmce` (sorted prefix sums), forward",
                rows=mmce,
                **common,
            ),
            Table(
                "soft-smooth",
                "Smooth ECE (fixed-point bandwidth, K = 10)",
                reference="jaxcal `smooth_ece`, forward",
                rows=smooth,
                **common,
            ),
        ],
    )


if __name__ == "__main__":
    main()
