"""Confidence ECE: jaxcal against MAPIE, NumPy, torchmetrics and netcal, in one run.

Times the top-label (confidence) ECE of ``(N, K)`` float32 probabilities with int32 labels,
15 uniform bins, K = 10, at several N, and the time to read the inputs once (the memory
bandwidth floor). Prints Markdown tables (steady-state medians after a warm-up call, with
``block_until_ready``; compile time separately) and the environment line.

    python benchmarks/bench_ece.py            # N = 1e4, 1e5, 1e6, 1e7
    python benchmarks/bench_ece.py --quick    # N = 1e4, 1e5, few repeats (< 1 minute)
    python benchmarks/bench_ece.py --sizes 1000000 --repeats 30

Implementations (each maps the same ``probs``, ``labels`` to the same number):

* ``jaxcal jit``: ``jax.jit(partial(jaxcal.ece, n_bins=15))`` on device arrays (its
  executable from ``.lower(...).compile()``, whose compile time is reported), the kernel
  alone (value validation is skipped under tracing).
* ``jaxcal eager``: ``jaxcal.ece(probs, labels, n_bins=15)``, with input validation.
* ``numpy bincount``: max / argmax, bin index, three ``np.bincount`` (written here).
* ``MAPIE``: ``mapie.metrics.calibration.expected_calibration_error(correct, probs,
  num_bins=16)``. MAPIE takes the correctness ``argmax(probs) == labels`` as ``y_true``
  (computed inside the timed call: it is part of the job) and bins ``max(probs)`` with
  ``np.digitize(right=True)`` on ``linspace(0, 1, 16)``: 15 right-closed bins, as jaxcal.
* ``torchmetrics``: ``multiclass_calibration_error(preds, target, num_classes=10,
  n_bins=15)`` on CPU tensors sharing the NumPy memory (left-closed bins), with its default
  ``validate_args=True`` and with ``validate_args=False``.
* ``netcal``: ``netcal.metrics.ECE(bins=15).measure(probs, labels)``.
* floor: ``jax.jit`` of ``(sum(probs), sum(labels))`` and the NumPy equivalent; the
  smaller median is the floor of the ratios.

Optional peers (torchmetrics, netcal, MAPIE) that are not installed are skipped with a note.
A peer whose time, extrapolated linearly from the previous size, would exceed
``--max-call-s`` seconds per call is skipped at that size, and one whose warm-up call
takes longer than that is not repeated (both with a note).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _timing import Table, environment, fmt_ms, row, time_interleaved, write_tables

import jaxcal

N_BINS = 15
NUM_CLASSES = 10
DEFAULT_SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (10_000, 100_000)

JIT = "jaxcal jit"
EAGER = "jaxcal eager (validated)"
FLOOR_JAX = "floor: jax.jit sum(probs), sum(labels)"
FLOOR_NP = "floor: numpy sum(probs), sum(labels)"


def make_data(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Softmax probabilities ``(n, k)`` float32 and labels drawn from a tempered version.

    Labels come from ``softmax(logits / 1.5)``, so the model is overconfident and the ECE
    is clearly non-zero; confidences spread over (1/k, 1).
    """
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, k), dtype=np.float32)
    logits *= np.float32(2.5)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    true = np.exp((logits - logits.max(axis=1, keepdims=True)) / np.float32(1.5))
    np.cumsum(true, axis=1, out=true)
    u = rng.random(n, dtype=np.float32) * true[:, -1]
    labels = np.minimum((true < u[:, None]).sum(axis=1), k - 1).astype(np.int32)
    return probs, labels


def numpy_ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = N_BINS) -> float:
    """Confidence ECE in NumPy with ``np.bincount``: the fast, honest NumPy baseline.

    Right-closed uniform bins by ``ceil(conf * M) - 1`` (exact except for confidences
    that round across an edge in ``conf * M``, which does not change the timing).
    """
    conf = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    bins = np.clip(np.ceil(conf * n_bins).astype(np.intp) - 1, 0, n_bins - 1)
    sum_conf = np.bincount(bins, weights=conf, minlength=n_bins)
    sum_correct = np.bincount(bins, weights=correct, minlength=n_bins)
    # sum_b (n_b / N) |acc_b - conf_b| = sum_b |sum_correct_b - sum_conf_b| / N
    return float(np.abs(sum_correct - sum_conf).sum() / conf.shape[0])


def peers(probs: np.ndarray, labels: np.ndarray, notes: list[str]) -> dict[str, Callable[[], Any]]:
    """Zero-argument callables of the installed peers on these inputs (NumPy / torch)."""
    cases: dict[str, Callable[[], Any]] = {
        "numpy bincount": partial(numpy_ece, probs, labels),
    }
    if importlib.util.find_spec("mapie") is not None:
        from mapie.metrics.calibration import expected_calibration_error

        def mapie_ece():
            correct = (probs.argmax(axis=1) == labels).astype(np.int64)
            return expected_calibration_error(correct, probs, num_bins=N_BINS + 1)

        cases["MAPIE"] = mapie_ece
    else:
        notes.append("MAPIE is not installed: skipped (`pip install mapie`).")
    if importlib.util.find_spec("torchmetrics") is not None:
        import torch
        from torchmetrics.functional.classification import multiclass_calibration_error

        preds_t, target_t = torch.from_numpy(probs), torch.from_numpy(labels).long()
        for validate in (True, False):
            cases[f"torchmetrics (validate_args={validate})"] = partial(
                multiclass_calibration_error,
                preds_t,
                target_t,
                num_classes=probs.shape[1],
                n_bins=N_BINS,
                norm="l1",
                validate_args=validate,
            )
    else:
        notes.append(
            "torchmetrics is not installed: skipped (`pip install torch==2.13.0 torchmetrics`)."
        )
    if importlib.util.find_spec("netcal") is not None:
        from netcal.metrics import ECE

        metric = ECE(bins=N_BINS)
        cases["netcal"] = partial(metric.measure, probs, labels)
    else:
        notes.append("netcal is not installed: skipped (`pip install netcal`).")
    return cases


def as_float(value: Any) -> float:
    """A Python float from a jax / torch / NumPy scalar."""
    return float(value.item() if hasattr(value, "item") else value)


def run_size(n: int, args: argparse.Namespace, history: dict[str, tuple[int, float]], notes):
    """Time every implementation at ``n``; returns (rows, compile row, table rows)."""
    probs, labels = make_data(n, NUM_CLASSES, seed=n)
    probs_d, labels_d = jnp.asarray(probs), jnp.asarray(labels)
    jax.block_until_ready((probs_d, labels_d))

    # Compile costs first, on shapes never seen before in this process.
    start = time.perf_counter()
    jax.block_until_ready(jaxcal.ece(probs_d, labels_d, n_bins=N_BINS))
    first_eager = time.perf_counter() - start
    # The kernel: jax.jit(partial(jaxcal.ece, n_bins=15)), lowered and compiled here (timed),
    # and its executable called below (the same code and dispatch as calling the jitted
    # function, without compiling it a second time).
    start = time.perf_counter()
    lowered = jax.jit(partial(jaxcal.ece, n_bins=N_BINS)).lower(probs_d, labels_d)
    traced = time.perf_counter()
    jitted = lowered.compile()
    trace_s, compile_s = traced - start, time.perf_counter() - traced

    floor_jax = jax.jit(lambda p, y: (jnp.sum(p), jnp.sum(y)))
    cases: dict[str, Callable[[], Any]] = {
        JIT: partial(jitted, probs_d, labels_d),
        EAGER: partial(jaxcal.ece, probs_d, labels_d, n_bins=N_BINS),
    }
    for name, fn in peers(probs, labels, notes if not history else []).items():
        if name in history:
            prev_n, prev_s = history[name]
            estimate = prev_s * n / prev_n
            if estimate > args.max_call_s:
                notes.append(
                    f"{name} skipped at N = {n:.0e}: about {estimate:.0f} s per call "
                    f"(extrapolated from {prev_s:.2f} s at N = {prev_n:.0e})."
                )
                continue
        cases[name] = fn
    cases[FLOOR_JAX] = partial(floor_jax, probs_d, labels_d)
    cases[FLOOR_NP] = lambda: (probs.sum(), labels.sum())

    for name in (JIT, FLOOR_JAX):  # compile now, so that no warm-up below includes it
        jax.block_until_ready(cases[name]())
    values: dict[str, Any] = {}
    timings = time_interleaved(
        cases, args.repeats, args.budget_s, values, args.max_call_s, clock=args.clock
    )
    for name, t in timings.items():
        history[name] = (n, t.median)
        if t.repeats == 0:
            notes.append(
                f"{name} at N = {n:.0e}: one call took {t.median:.3g} s (> {args.max_call_s:g} s),"
                " so it was not repeated; its row shows that single call."
            )

    floor = min(timings[FLOOR_JAX].median, timings[FLOOR_NP].median)
    t_jit, t_eager = timings[JIT].median, timings[EAGER].median
    nbytes = probs.nbytes + labels.nbytes
    rows, table_rows = [], []
    for name, t in timings.items():
        if name.startswith("floor"):
            value = f"{nbytes / t.median / 1e9:.1f} GB/s"
        else:
            value = f"{as_float(values[name]):.6f}"
        kind = "floor" if name.startswith("floor") else "jaxcal" if "jaxcal" in name else "peer"
        compile_total = trace_s + compile_s if name == JIT else None
        table_rows.append(row(n, name, t.median, kind=kind, compile_s=compile_total, value=value))
        rows.append(
            f"| {n:.0e} | {name} | {fmt_ms(t.median)} | {fmt_ms(t.best)} | {t.repeats} "
            f"| {t.median / t_jit:.2f} | {t.median / t_eager:.2f} | {t.median / floor:.2f} "
            f"| {value} |"
        )
    compile_row = (
        f"| {n:.0e} | {fmt_ms(trace_s)} | {fmt_ms(compile_s)} | {fmt_ms(trace_s + compile_s)} "
        f"| {fmt_ms(first_eager)} | {fmt_ms(t_eager)} |"
    )
    return rows, compile_row, table_rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="N = 1e4, 1e5 and few repeats")
    parser.add_argument("--sizes", type=int, nargs="+", help="sample sizes N (default 1e4..1e7)")
    parser.add_argument("--repeats", type=int, help="timed calls per case (default 15; quick 5)")
    parser.add_argument(
        "--budget-s", type=float, default=None, help="stop repeating a case after this many s"
    )
    parser.add_argument(
        "--max-call-s", type=float, default=10.0, help="skip a peer whose call would exceed this"
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time (default) or process CPU time, all threads (for a loaded machine: "
        "run under `taskset -c 0` to estimate one uncontended core)",
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    args = parser.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    args.repeats = args.repeats or (5 if args.quick else 15)
    args.budget_s = args.budget_s or (0.5 if args.quick else 5.0)

    notes: list[str] = []
    history: dict[str, tuple[int, float]] = {}
    rows, compile_rows, table_rows = [], [], []
    for n in sizes:
        print(f"timing N = {n:.0e} ...", file=sys.stderr, flush=True)
        r, c, t = run_size(n, args, history, notes)
        rows += r
        compile_rows.append(c)
        table_rows += t

    env = environment()
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        env += f"; torch {torch.__version__} ({torch.get_num_threads()} threads)"
    print(f"### Confidence ECE, K = {NUM_CLASSES}, {N_BINS} uniform bins, float32\n")
    print(f"`python benchmarks/{' '.join(['bench_ece.py', *(argv or sys.argv[1:])])}`  ")
    print(f"{env}\n")
    if args.clock == "cpu":
        print("Times are process CPU time summed over all threads, not wall time.\n")
    print(
        "| N | implementation | median ms | best ms | runs | ÷ jaxcal jit | ÷ jaxcal eager "
        "| ÷ floor | ECE (floor: GB/s) |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print("\njaxcal compile time for a new shape (wall ms), and the eager call for scale:\n")
    print("| N | trace + lower | XLA compile | total | first eager call | steady eager call |")
    print("|---:|---:|---:|---:|---:|---:|")
    print("\n".join(compile_rows))
    print(
        "\nSteady state: median of timed calls after one warm-up call, cases interleaved "
        "round-robin, JAX results synchronised with `block_until_ready`. "
        "÷ columns: this row's median over jaxcal jit's, jaxcal eager's, and the floor's "
        "(the faster of the two read-once sums)."
    )
    for note in notes:
        print(f"- {note}")
    command = " ".join(["python benchmarks/bench_ece.py", *(argv or sys.argv[1:])])
    table = Table(
        key="ece",
        title=f"Confidence ECE ({N_BINS} uniform bins, K = {NUM_CLASSES}, float32)",
        command=command,
        environment=env,
        clock=args.clock,
        reference=JIT,
        floor=FLOOR_JAX,
        rows=table_rows,
        notes=notes,
    )
    write_tables(args.json, [table])


if __name__ == "__main__":
    main()
