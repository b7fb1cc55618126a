"""Start-up: ``jaxcal report --demo`` in fresh processes, cold and with its kernel cache.

    python benchmarks/bench_startup.py             # 3 rounds
    python benchmarks/bench_startup.py --rounds 5 --clock cpu
    python benchmarks/bench_startup.py --quick     # one round, --no-fit --resamples 20

Each round runs, one after another, in new processes (``python -m jaxcal.cli``):

* ``cold``: ``jaxcal report --demo`` with an empty cache folder (``JAXCAL_CACHE_DIR`` set
  to a fresh temporary folder): every kernel traced and compiled;
* ``warm``: the same command again: the compiled kernels are loaded from the folder;
* ``--no-cache``: no cache at all (what every run cost before the cache);
* floors: ``python -c "import jaxcal"`` and ``python -c "import jax; jax.devices()"``, the
  start-up no run of the command can avoid;
* ``files``: ``jaxcal report`` of two models' held-out predictions, N = 10,000 and K = 4
  (softmax of two linear models, over- and under-confident, on data drawn here), cold, then
  a second run on files of 9,800 and 11,000 rows: another N of the same size class
  (12,288 rows), which loads the stored kernels instead of compiling (issue 33, item 4).

The median over rounds is reported; ``--clock cpu`` reports the CPU time of the child
processes (user + system, all threads) instead of wall time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _timing import Table, environment, row, write_tables

ROOT = Path(__file__).resolve().parents[1]
WARM = "jaxcal report --demo, warm (kernels loaded from the cache)"
FLOOR = 'floor: python -c "import jax; jax.devices()"'


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str], clock: str) -> float:
    """Seconds (wall, or CPU of the child) of one run of ``python ARGV``."""
    wall, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.run(
        [sys.executable, *argv], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"python {' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return _children_cpu() - cpu if clock == "cpu" else time.perf_counter() - wall


FILE_ROWS = {"cold": (10_000, 10_000), "second run, another N": (9_800, 11_000)}


def write_files(folder: Path, rows: tuple[int, int], tag: str) -> list[str]:
    """Two models' .npz predictions (K = 4) of ``rows`` held-out samples each."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=(8, 4))
    paths = []
    for model, (n, sharpness) in enumerate(zip(rows, (1.6, 0.7), strict=True)):
        x = rng.normal(size=(n, 8))
        z = x @ w
        truth = np.exp(z - z.max(1, keepdims=True))
        truth /= truth.sum(1, keepdims=True)
        labels = (rng.random((n, 1)) > truth.cumsum(1)).sum(1).clip(0, 3)
        p = np.exp(sharpness * (z - z.max(1, keepdims=True)))
        path = folder / f"model{model}_{tag}.npz"
        np.savez(path, probs=(p / p.sum(1, keepdims=True)).astype(np.float32), labels=labels)
        paths.append(str(path))
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument(
        "--quick", action="store_true", help="one round of --demo --no-fit --resamples 20"
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    args = parser.parse_args(argv)
    report = ["-m", "jaxcal.cli", "report", "--demo", "--quiet"]
    if args.quick:
        report += ["--no-fit", "--resamples", "20"]
        args.rounds = 1
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    for name in ("JAXCAL_NO_COMPILATION_CACHE", "JAXCAL_KERNEL_STORE"):  # the store is on
        env.pop(name, None)
    cases = {
        "jaxcal report --demo, cold (empty cache folder)": None,
        WARM: None,
        "jaxcal report --demo --no-cache": [*report, "--no-cache"],
        'floor: python -c "import jaxcal"': ["-c", "import jaxcal"],  # lazy: no JAX yet
        FLOOR: ["-c", "import jax; jax.devices()"],
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    file_times: dict[str, list[float]] = {name: [] for name in FILE_ROWS}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            cached = {**env, "JAXCAL_CACHE_DIR": tmp}
            for name, command in cases.items():
                times[name].append(timed(command or report, cached, args.clock))
        if args.quick:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cached = {**env, "JAXCAL_CACHE_DIR": str(Path(tmp) / "cache")}
            for name, rows in FILE_ROWS.items():
                files = write_files(Path(tmp), rows, name.split(",")[0].replace(" ", "_"))
                command = ["-m", "jaxcal.cli", "report", *files, "--quiet"]
                file_times[name].append(timed(command, cached, args.clock))
    env_line = environment()
    print(f"### Start-up of `jaxcal report --demo` ({args.clock} clock, {args.rounds} rounds)\n")
    print(f"{env_line}\n\n| case | median s | all runs (s) |\n|---|---:|---|")
    rows = []
    for name, ts in times.items():
        median = statistics.median(ts)
        print(f"| {name} | {median:.2f} | {', '.join(f'{t:.2f}' for t in ts)} |")
        kind = "floor" if name.startswith("floor") else "jaxcal"
        rows.append(row("demo", name, median, kind=kind))
    for name, ts in file_times.items():
        if ts:
            median = statistics.median(ts)
            label = f"jaxcal report of two N = 10,000, K = 4 files, {name}"
            print(f"| {label} | {median:.2f} | {', '.join(f'{t:.2f}' for t in ts)} |")
            rows.append(row("files", label, median, kind="jaxcal"))
    table = Table(
        key="startup",
        title="Start-up: `jaxcal report --demo` (N = 899, K = 10, two models) and two "
        "files of N = 10,000, K = 4, new processes",
        command=" ".join(["python benchmarks/bench_startup.py", *(argv or sys.argv[1:])]),
        environment=env_line,
        clock=args.clock,
        reference=WARM,
        floor=FLOOR,
        rows=rows,
        unit="s",
        group="run",
    )
    write_tables(args.json, [table])


if __name__ == "__main__":
    main()
