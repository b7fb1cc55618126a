"""Wide-K top-label metrics against the memory floor and NumPy, in one run per K.

The confidence ECE of ``(N, K)`` probabilities needs each row's max and whether the label
is the first index that reaches it; at K = 100 to 32,000 (ImageNet's classes, an LLM's
vocabulary) that is a pass over an array of hundreds of MB, so the floor is a read of the
array. For each K, N is chosen so that the probabilities take ``--mb`` MB (default 400;
the labels add N int32), and the script times side by side, interleaved, steady state:

* ``jaxcal ece (jit)``: ``jax.jit(partial(jaxcal.ece, n_bins=15))`` (the kernel alone:
  value checks are skipped under tracing), the reference of the ratios;
* ``confidence_and_correctness (jit)``, ``top_label_ece (jit)``, ``classwise_ece (jit)``
  and ``streaming.update (jit)`` (a state of 15 bins; it also bins every class, so it
  does K times the binning work of the confidence ECE);
* ``jaxcal ece (eager)``: with the value checks (one more pass for the row sums);
* ``numpy max + argmax``: ``probs.max(1)`` and ``probs.argmax(1)``, what a NumPy ECE
  must compute before binning;
* floors: ``jax.jit`` of ``(sum(probs), sum(labels))`` (``floor: read``) and of
  ``(sum(max(probs, 1)), sum(labels))`` (``floor: read + row max``).

The table's ratio columns: ÷ read, ÷ read + row max, ÷ numpy. Compile time (trace,
lower, XLA compile of a new shape) is reported for the jitted ECE.

    python benchmarks/bench_widek.py                   # K = 10, 100, 1000, 32000 at 400 MB
    python benchmarks/bench_widek.py --mb 4 --repeats 2  # a smoke test
    taskset -c 1 python benchmarks/bench_widek.py --clock cpu
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from _timing import Table, environment, fmt_ms, row, time_interleaved, write_tables

import jaxcal

N_BINS = 15
CLASSES = (10, 100, 1000, 32_000)
ECE = "jaxcal ece (jit)"
READ = "floor: read"
ROWMAX = "floor: read + row max"
NUMPY = "numpy max + argmax"


def make_data(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Softmax rows ``(n, k)`` float32 with a few exact ties at the max, int32 labels."""
    rng = np.random.default_rng(seed)
    probs = rng.standard_normal((n, k), dtype=np.float32)
    probs *= np.float32(3.0)
    probs -= probs.max(axis=1, keepdims=True)
    np.exp(probs, out=probs)
    probs[::97, k // 2] = probs[::97].max(axis=1)  # exact ties at the max (equal / equal)
    probs /= probs.sum(axis=1, keepdims=True)
    labels = np.where(rng.random(n) < 0.7, probs.argmax(axis=1), rng.integers(0, k, n)).astype(
        np.int32
    )
    return probs, labels


def run_k(k: int, args: argparse.Namespace) -> tuple[list[dict], list[str]]:
    n = max(8, int(args.mb * 1e6 / (4 * k)))
    probs, labels = make_data(n, k, seed=k)
    p, y = jnp.asarray(probs), jnp.asarray(labels)
    jax.block_until_ready((p, y))

    start = time.perf_counter()
    lowered = jax.jit(partial(jaxcal.ece, n_bins=N_BINS)).lower(p, y)
    ece = lowered.compile()
    compile_s = time.perf_counter() - start

    cc = jax.jit(jaxcal.confidence_and_correctness)
    top_label = jax.jit(partial(jaxcal.top_label_ece, n_bins=N_BINS))
    classwise = jax.jit(partial(jaxcal.classwise_ece, n_bins=N_BINS))
    update = jax.jit(jaxcal.streaming.update)
    state = jaxcal.streaming.init(N_BINS, k)
    read = jax.jit(lambda p, y: (jnp.sum(p), jnp.sum(y)))
    read_max = jax.jit(lambda p, y: (jnp.sum(jnp.max(p, axis=1)), jnp.sum(y)))
    cases = {
        ECE: partial(ece, p, y),
        "confidence_and_correctness (jit)": lambda: jax.tree.map(jnp.sum, cc(p, y)),
        "top_label_ece (jit)": partial(top_label, p, y),
        "jaxcal ece (eager)": partial(jaxcal.ece, p, y, n_bins=N_BINS),
    }
    if not args.skip_classwise:
        cases["classwise_ece (jit)"] = partial(classwise, p, y)
        cases["streaming.update (jit)"] = partial(update, state, p, y)
    cases[NUMPY] = lambda: (probs.max(axis=1), probs.argmax(axis=1))
    cases[READ] = partial(read, p, y)
    cases[ROWMAX] = partial(read_max, p, y)
    values: dict = {}
    timings = time_interleaved(cases, args.repeats, args.budget_s, values, clock=args.clock)

    conf, correct = values[NUMPY][0], values[NUMPY][1] == labels
    # the jitted top label agrees with NumPy's max and first-index argmax, ties included
    c_j, ok_j = cc(p, y)
    assert np.array_equal(np.asarray(c_j), conf) and np.array_equal(np.asarray(ok_j), correct)

    size = f"K = {k:,}, N = {n:,}"
    rows = []
    for name, t in timings.items():
        kind = "floor" if name.startswith("floor") else "peer" if name == NUMPY else "jaxcal"
        value = values[name]
        scalar = isinstance(value, jax.Array) and value.ndim == 0
        shown = f"{float(value):.6f}" if scalar else ""
        rows.append(
            row(
                size,
                name,
                t.median,
                kind=kind,
                compile_s=compile_s if name == ECE else None,
                value=shown,
            )
        )
    read_s, max_s, np_s, ece_s = (timings[name].median for name in (READ, ROWMAX, NUMPY, ECE))
    lines = [
        f"| {k:,} | {n:,} | {name} | {fmt_ms(t.median)} | {t.median / read_s:.2f} "
        f"| {t.median / max_s:.2f} | {t.median / np_s:.2f} |"
        for name, t in timings.items()
    ]
    print(
        f"K = {k}: ece {fmt_ms(ece_s)} ms = {ece_s / read_s:.2f} x read, "
        f"{ece_s / np_s:.2f} x numpy",
        file=sys.stderr,
        flush=True,
    )
    return rows, lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--classes", type=int, nargs="+", default=list(CLASSES))
    parser.add_argument("--mb", type=float, default=400.0, help="size of the probabilities")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--budget-s", type=float, default=5.0)
    parser.add_argument(
        "--skip-classwise", action="store_true", help="time only the top-label metrics"
    )
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)

    rows, lines = [], []
    for k in args.classes:
        r, line = run_k(k, args)
        rows += r
        lines += line
    env = environment()
    command = " ".join(["python benchmarks/bench_widek.py", *(argv or sys.argv[1:])])
    print(f"### Wide-K top-label metrics, {N_BINS} uniform bins, float32, {args.mb:g} MB\n")
    print(f"`{command}`  \n{env}\n")
    if args.clock == "cpu":
        print("Times are process CPU time summed over all threads, not wall time.\n")
    print("| K | N | implementation | median ms | ÷ read | ÷ read + row max | ÷ numpy |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    print("\n".join(lines))
    notes = [
        "÷ read: over a jitted sum of the probabilities and of the labels (the memory floor);"
        " ÷ read + row max: over the same with the row max; ÷ numpy: over NumPy's max and"
        " argmax along the rows.",
        "classwise_ece and streaming.update bin all N x K entries (K binary problems), so "
        "they are not bounded by a read; they are shown for scale.",
    ]
    for note in notes:
        print(f"- {note}")
    table = Table(
        key="widek",
        title=f"Wide-K top-label metrics ({N_BINS} uniform bins, float32, {args.mb:g} MB)",
        command=command,
        environment=env,
        clock=args.clock,
        reference=ECE,
        floor=READ,
        rows=rows,
        notes=notes,
        group="K, N",
        floors=[ROWMAX, NUMPY],
    )
    write_tables(args.json, [table])


if __name__ == "__main__":
    main()
