"""``jaxcal report`` on a Parquet file, next to the read floor of the same file (pyarrow alone).

Writes N binary predictions (``p`` float32, ``y`` int8; row groups of 2**20 rows) to one
Parquet file, written in chunks so that the driver never holds the N rows, then runs in
alternation, each in its own subprocess (so that its peak memory is its own):

* ``read floor``: ``pyarrow.dataset`` record batches of the two columns, each converted to
  NumPy (what any reader of the file must do; nothing computed), without pre-buffering as
  jaxcal reads (pyarrow's default pre-buffering keeps a file's column chunks until the
  file ends: memory linear in the file's size, 660 MiB for a 447 MiB file);
* ``jaxcal report``: ``jaxcal.cli.main(["report", FILE, "--quiet", "--resamples", B])``,
  the whole command (reading, the 4096-bucket state, the metrics, the table; JAX import
  and compilation included), for each B in ``--resamples``.

Each report process first reports a 70,000-row file of the same schema (``start s``: JAX
import and compilation; the stream's batches have one fixed shape, so nothing compiles
again), then the N-row file. Reported per case, medians over ``--rounds`` rounds: that
first call, the wall time on the N-row file and its throughput (predictions per second),
its process CPU time and the throughput per CPU second (steadier than wall time on a
shared machine), and the process's peak resident set (``ru_maxrss``, whole process; the
issue's target: at most 1 GiB at N = 1e8).

    python benchmarks/bench_parquet.py                     # N = 1e7, B = 0 and 20
    python benchmarks/bench_parquet.py --rows 100000000    # the issue's size (a 447 MiB file)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._timing import environment  # noqa: E402

CHUNK = 1 << 20
TIMES = ("first", "seconds", "cpu")


def write_file(path: Path, rows: int, seed: int = 0) -> None:
    """N calibrated-ish binary predictions, written chunk by chunk."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    schema = pa.schema([("p", pa.float32()), ("y", pa.int8())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            p = rng.beta(2.0, 5.0, n).astype(np.float32)
            y = (rng.random(n) < p**1.1).astype(np.int8)
            writer.write_table(pa.table({"p": p, "y": y}, schema=schema), row_group_size=CHUNK)


def _read_floor(path: str) -> None:
    import pyarrow.dataset as ds

    rows = 0
    # As jaxcal reads (jaxcal/streaming/_parquet.py): no pre-buffering, bounded memory.
    options = ds.ParquetFragmentScanOptions(pre_buffer=False)
    for batch in ds.dataset(path, format="parquet").to_batches(
        columns=["p", "y"], batch_size=1 << 16, fragment_scan_options=options
    ):
        arrays = [batch.column(c).to_numpy(zero_copy_only=False) for c in ("p", "y")]
        rows += len(arrays[0])
    print(rows, file=sys.stderr)


def _report(path: str, resamples: int) -> None:
    import contextlib
    import io

    from jaxcal.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["report", path, "--quiet", "--resamples", str(resamples)]) == 0


def _timed(fn, *args) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def worker(case: str, path: str) -> None:
    """Run one case; print ``{"first", "seconds", "cpu", "peak_mib"}`` as JSON on stdout.

    A report first runs on the small warm-up file beside ``path`` (``first``: JAX start-up
    and compilation, the same batch shape), then on ``path`` (``seconds``, ``cpu``).
    """
    first = 0.0
    if case == "floor":
        seconds, cpu = _timed(_read_floor, path)
    else:
        first, _ = _timed(_report, str(Path(path).with_name("warmup.parquet")), int(case))
        seconds, cpu = _timed(_report, path, int(case))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"first": first, "seconds": seconds, "cpu": cpu, "peak_mib": peak}))


def _run(case: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    out = subprocess.run(
        [sys.executable, __file__, "--worker", case, str(path)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e7, help="N predictions (default 1e7)")
    parser.add_argument("--resamples", default="0,20", help="values of --resamples (default 0,20)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of alternation (default 3)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the file")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    rows = int(args.rows)
    cases = ["floor", *(s.strip() for s in args.resamples.split(","))]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "preds.parquet"
        start = time.perf_counter()
        write_file(path, rows)
        write_file(path.with_name("warmup.parquet"), 70_000, seed=1)  # > 1 batch
        size = path.stat().st_size / 2**20
        print(f"wrote {rows:,} rows ({size:.0f} MiB) in {time.perf_counter() - start:.1f} s")
        print(environment())
        results: dict[str, list[dict]] = {c: [] for c in cases}
        for _ in range(args.rounds):
            for case in cases:
                results[case].append(_run(case, path))
    head = ["case", "start s", "wall s", "M pred/s", "cpu s", "M pred/cpu s", "peak MiB"]
    print("\n" + f"{head[0]:<30}" + "".join(f"{h:>13}" for h in head[1:]))
    for case in cases:
        first, seconds, cpu = (statistics.median(r[k] for r in results[case]) for k in TIMES)
        peak = max(r["peak_mib"] for r in results[case])
        name = "read floor (pyarrow)" if case == "floor" else f"jaxcal report --resamples {case}"
        cells = [first, seconds, rows / seconds / 1e6, cpu, rows / cpu / 1e6, peak]
        print(f"{name:<30}" + "".join(f"{c:>13.2f}" for c in cells))
    print(f"(uptime: {os.getloadavg()})")


if __name__ == "__main__":
    main()
