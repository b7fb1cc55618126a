"""Streaming calibration: jaxcal.streaming under lax.scan against torchmetrics' stateful metric.

Streams N samples (K = 10 classes, 15 bins) in batches of 1e5 through

* ``jaxcal scan``: ``streaming.update`` inside one jitted ``jax.lax.scan`` over the batch
  index, then ``streaming.compute`` (every output: ECE, MCE, classwise and top-label ECE,
  Brier score, log loss, the Brier decomposition), state O(n_bins x K);
* ``jaxcal eager loop``: a Python loop of eager ``streaming.update`` calls (each batch
  validated on the host), then ``compute``;
* ``torchmetrics``: ``MulticlassCalibrationError(num_classes=10, n_bins=15)`` ``update``
  per batch then ``compute`` (confidence ECE only), with its default
  ``validate_args=True`` and with ``validate_args=False``. It appends every confidence and
  correctness to lists and concatenates them in ``compute``: memory O(N).
* floor: the same jitted ``lax.scan`` over the batches that only sums each batch (a read
  of the whole stream).

Each implementation runs in its own subprocess (so its peak memory is its own), on the
same batches: a pool of 10 distinct batches written once by the driver, batch i being
``pool[i % 10]``. jaxcal uses ``closed="left"`` bins, torchmetrics' convention, so the
ECEs agree. Peak memory is the process's peak resident set (``ru_maxrss``, what
``/usr/bin/time -v`` reports as "Maximum resident set size"), shown whole and above the
process's resident set once its libraries are imported and the pool loaded (the metric's
own cost, including for jaxcal the one-time XLA compilation), and as the working memory of
the steady-state runs (peak during them above the RSS before them: the stream's cost once
compiled; VmHWM is reset through ``/proc/self/clear_refs``). Time is the whole stream (all updates + compute), the median of ``--repeats``
runs after a first run (which for jaxcal includes compilation; shown separately). The
implementations are run in alternation, ``--rounds`` times, and the medians over rounds
reported, so load changes on a shared machine hit all of them alike.

    python benchmarks/bench_streaming.py                 # N = 1e6, 1e7
    python benchmarks/bench_streaming.py --quick         # N = 1e6, one round (< 1 minute)
    python benchmarks/bench_streaming.py --torch-python /path/to/venv/bin/python

``--torch-python`` runs the torchmetrics worker with another interpreter (one with
``torch==2.13.0`` and ``torchmetrics``), so the main environment does not need PyTorch;
without it, torchmetrics runs under this interpreter when installed, and is otherwise
skipped with a note.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N_BINS = 15
NUM_CLASSES = 10
POOL = 10  # distinct batches; batch i is pool[i % POOL]

FLOOR = "floor: jax.jit scan reading every batch"
WORKERS = {
    "jaxcal scan": "jax-scan",
    "jaxcal eager loop": "jax-loop",
    FLOOR: "jax-read",
    "torchmetrics (validate_args=True)": "torch-validate",
    "torchmetrics (validate_args=False)": "torch",
}


def make_pool(path: Path, batch: int, seed: int = 0) -> None:
    """``POOL`` batches of softmax probabilities and labels drawn from a sharper model."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(POOL, batch, NUM_CLASSES)).astype(np.float32) * 2
    gumbel = -np.log(-np.log(rng.random(logits.shape, dtype=np.float32)))
    labels = np.argmax(logits / 1.5 + gumbel, axis=-1).astype(np.int32)  # overconfident
    z = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(z)
    probs /= probs.sum(axis=-1, keepdims=True)
    np.savez(path, probs=probs.astype(np.float32), labels=labels)


def _rss_mb() -> float:
    """Current resident set size (VmRSS) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    """Peak resident set size of this process (ru_maxrss, KiB on Linux) in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _hwm_mb() -> float:
    """Peak resident set size since the last reset (VmHWM) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _timed_runs(run, repeats: int) -> dict:
    """First run (compilation, warm-up), then ``repeats`` timed runs whose own peak is kept.

    ``steady_mb`` is the peak RSS during the timed runs above the RSS just before them:
    the stream's working memory once compiled (NaN where VmHWM cannot be reset).
    """
    start = time.perf_counter()
    value = run()
    first = time.perf_counter() - start
    before = _rss_mb()
    reset = _reset_hwm()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        value = run()
        times.append(time.perf_counter() - start)
    steady = _hwm_mb() - before if reset else float("nan")
    return dict(first=first, times=times, ece=value, steady_mb=steady)


def worker_jax(pool_path: str, n: int, repeats: int, mode: str) -> dict:
    import jax
    import jax.numpy as jnp

    from jaxcal import streaming

    with np.load(pool_path) as data:
        pool_p, pool_y = jnp.asarray(data["probs"]), jnp.asarray(data["labels"])
    jax.block_until_ready((pool_p, pool_y))
    batch = pool_p.shape[1]
    n_batches = n // batch
    baseline = _rss_mb()

    if mode == "jax-scan":

        @jax.jit
        def stream(pool_p, pool_y):
            def step(state, i):
                j = i % POOL
                return streaming.update(state, pool_p[j], pool_y[j]), None

            state = streaming.init(N_BINS, NUM_CLASSES, closed="left")
            state, _ = jax.lax.scan(step, state, jnp.arange(n_batches, dtype=jnp.int32))
            return streaming.compute(state)

        def run():
            return float(jax.block_until_ready(stream(pool_p, pool_y))["ece"])

    elif mode == "jax-read":

        @jax.jit
        def read(pool_p, pool_y):
            def step(total, i):
                j = i % POOL
                return total + jnp.sum(pool_p[j]) + jnp.sum(pool_y[j]).astype(jnp.float32), None

            total, _ = jax.lax.scan(step, jnp.float32(0), jnp.arange(n_batches, dtype=jnp.int32))
            return total

        def run():
            return float(jax.block_until_ready(read(pool_p, pool_y)))

    else:
        batches = [(pool_p[j], pool_y[j]) for j in range(POOL)]

        def run():
            state = streaming.init(N_BINS, NUM_CLASSES, closed="left")
            for i in range(n_batches):
                state = streaming.update(state, *batches[i % POOL])
            return float(jax.block_until_ready(streaming.compute(state))["ece"])

    return dict(**_timed_runs(run, repeats), peak_mb=_peak_mb(), baseline_mb=baseline)


def worker_torch(pool_path: str, n: int, repeats: int, validate: bool) -> dict:
    import torch
    from torchmetrics.classification import MulticlassCalibrationError

    with np.load(pool_path) as data:
        probs, labels = data["probs"], data["labels"].astype(np.int64)
    pool_p, pool_y = torch.from_numpy(probs), torch.from_numpy(labels)
    batch = pool_p.shape[1]
    n_batches = n // batch
    baseline = _rss_mb()

    def run():
        metric = MulticlassCalibrationError(
            num_classes=NUM_CLASSES, n_bins=N_BINS, validate_args=validate
        )
        for i in range(n_batches):
            metric.update(pool_p[i % POOL], pool_y[i % POOL])
        return float(metric.compute())

    return dict(**_timed_runs(run, repeats), peak_mb=_peak_mb(), baseline_mb=baseline)


def _has_torchmetrics(python: str) -> bool:
    probe = "import torch, torchmetrics; assert torch.__version__.startswith('2.13.0')"
    return subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode == 0


def _run_worker(python: str, mode: str, pool: Path, n: int, repeats: int) -> dict:
    cmd = [python, __file__, "--worker", mode, "--pool", str(pool), "--n", str(n)]
    cmd += ["--repeats", str(repeats)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _environment() -> str:
    import jax
    import jaxlib

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"jax {jax.__version__} (jaxlib {jaxlib.__version__}), numpy {np.__version__}, "
        f"Python {platform.python_version()}; {os.cpu_count()} cores, load average {load:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 1e6, one round")
    parser.add_argument("--sizes", type=float, nargs="+", default=None)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (3)")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per worker")
    parser.add_argument("--torch-python", default=None, help="interpreter with torchmetrics")
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=list(WORKERS.values()), help="workers to skip"
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--pool", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker is not None:  # subprocess mode: one implementation, one size
        if args.worker.startswith("jax"):
            out = worker_jax(args.pool, args.n, args.repeats, args.worker)
        else:
            out = worker_torch(args.pool, args.n, args.repeats, args.worker == "torch-validate")
        print(json.dumps(out))
        return

    # Not at the top: _timing imports JAX, which the torch workers must not load.
    from _timing import Table, write_tables

    sizes = [int(s) for s in (args.sizes or ([1e6] if args.quick else [1e6, 1e7]))]
    rounds = args.rounds or (1 if args.quick else 3)
    repeats = args.repeats or (1 if args.quick else 2)
    torch_python = args.torch_python or sys.executable
    notes = []
    workers = {name: mode for name, mode in WORKERS.items() if mode not in args.skip}
    if not _has_torchmetrics(torch_python):
        notes.append(
            f"torchmetrics with torch 2.13.0 not found for {torch_python}: skipped "
            "(`pip install torch==2.13.0 torchmetrics`, or pass --torch-python)."
        )
        workers = {k: v for k, v in workers.items() if not v.startswith("torch")}

    title = f"Streaming ECE, K = {NUM_CLASSES}, {N_BINS} bins, batches of {args.batch:.0e}"
    print(f"# {title}\n")
    env = _environment()
    print(env + "\n")
    table_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        pool = Path(tmp) / "pool.npz"
        make_pool(pool, args.batch)
        for n in sizes:
            results: dict[str, list[dict]] = {name: [] for name in workers}
            for _ in range(rounds):
                for name, mode in workers.items():
                    python = torch_python if mode.startswith("torch") else sys.executable
                    results[name].append(_run_worker(python, mode, pool, n, repeats))
            table_rows += _print_table(n, args.batch, results)
    for note in notes:
        print(f"Note: {note}")
    table = Table(
        key="streaming",
        title=title + " (one subprocess per implementation; wall clock)",
        command=" ".join(["python benchmarks/bench_streaming.py", *sys.argv[1:]]),
        environment=env,
        clock="wall",
        reference="jaxcal scan",
        floor=FLOOR,
        rows=table_rows,
        notes=notes,
        unit="s",
    )
    write_tables(args.json, [table])


def _print_table(n: int, batch: int, results: dict[str, list[dict]]) -> list[dict]:
    from _timing import row  # imports JAX: never in a torch worker

    med = statistics.median
    rows = {}
    for name, runs in results.items():
        rows[name] = dict(
            time=med(med(r["times"]) for r in runs),
            first=med(r["first"] for r in runs),
            peak=med(r["peak_mb"] for r in runs),
            above=med(r["peak_mb"] - r["baseline_mb"] for r in runs),
            steady=med(r["steady_mb"] for r in runs),
            ece=runs[0]["ece"],
        )
    ref = rows["jaxcal scan"]
    print(f"## N = {n:.0e} ({n // batch} batches)\n")
    print(
        "| implementation | stream time (s) | first run (s) | peak RSS (MiB) "
        "| peak above baseline (MiB) | stream working memory (MiB) | time ratio "
        "| peak ratio | above-baseline ratio | working-memory ratio | ECE |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['time']:.3f} | {r['first']:.2f} | {r['peak']:.0f} "
            f"| {r['above']:.0f} | {r['steady']:.0f} | {r['time'] / ref['time']:.2f} "
            f"| {r['peak'] / ref['peak']:.2f} | {r['above'] / max(ref['above'], 1):.1f} "
            f"| {r['steady'] / max(ref['steady'], 1):.1f} | {r['ece']:.6f} |"
        )
    table_rows = []
    for name, r in rows.items():
        kind = "floor" if name == FLOOR else "jaxcal" if name.startswith("jaxcal") else "peer"
        memory = f"peak RSS {r['peak']:.0f} MiB, working {r['steady']:.0f} MiB"
        value = memory if kind == "floor" else f"ECE {r['ece']:.6f}; {memory}"
        first = r["first"] - r["time"] if kind != "peer" else None  # compile + first run
        table_rows.append(row(n, name, r["time"], kind=kind, compile_s=first, value=value))
    print(
        "\nRatios are relative to `jaxcal scan` (> 1: jaxcal is faster / smaller). Baseline:"
        " the process's RSS once its libraries are imported and the batch pool loaded."
        " Working memory: peak RSS during the timed (post-compilation) runs above the RSS"
        " before them.\n"
    )
    return table_rows


if __name__ == "__main__":
    main()
