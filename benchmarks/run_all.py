"""Run every benchmark side by side and write the documentation's benchmark tables.

Each comparison script (``bench_ece.py``, ``bench_tests.py``, ``bench_bootstrap.py``,
``bench_calibrators.py``, ``bench_affine.py``, ``bench_soft.py``, ``bench_coverage.py``,
``bench_streaming.py``, ``bench_corp.py``, ``bench_inputs.py``, ``bench_startup.py``,
``bench_selective.py``, ``bench_widek.py``, ``bench_kernel_ce.py``, ``bench_factories.py``,
``bench_compile.py``, ``bench_first_touch.py``)
runs in its own process, as it would alone, and writes its
results as JSON (``--json``, the :class:`_timing.Table` format); ``bench_streaming.py``
runs each implementation in a process of its own. This driver renders one Markdown table
per :class:`~_timing.Table`, with the same columns everywhere:

* median: steady-state median after a warm-up call (``block_until_ready``);
* ÷ jaxcal: this row's median over the jaxcal row the table names (> 1: slower than
  jaxcal);
* ÷ floor: this row's median over the floor's, a jitted read of the same inputs (one sum
  each; ``np.sort`` of the packed (score bits, label) keys for the sort-based tests);
* ÷ NAME: where a table names more floors (``bench_widek.py``: the read with the row
  max, NumPy's max + argmax; ``bench_factories.py``: refitting one calibrator object),
  its median over each of them;
* compile s: trace + lower + XLA compile of a new shape, for jaxcal's rows, apart from
  the steady state.

``bench_compile.py``'s tables have columns of their own (trace, lower and compile seconds,
the StableHLO program's lines and bytes, beside plain ``jnp``): the script renders them.

    python benchmarks/run_all.py --quick                 # small sizes: a smoke test
    taskset -c 0 python benchmarks/run_all.py --clock cpu --write-docs
    python benchmarks/run_all.py --only ece tests --torch-python /path/to/torch-env/python

``--write-docs`` replaces what lies between ``<!-- bench:KEY -->`` and
``<!-- /bench:KEY -->`` in the documentation's pages (``docs/**/*.md``) and README.md with
the table KEY (so re-running regenerates them; a table may stand on several pages), and
saves each script's own full report in ``benchmarks/results/NAME.md``.
torch-based peers (torchmetrics, netcal) live in the ``bench-torch`` extra, in an
environment of their own: ``--torch-python`` runs ``bench_ece.py``, ``bench_selective.py``
(torch-uncertainty's AURC) and the torch workers
of ``bench_streaming.py`` with that interpreter; without it they are skipped with a note.
A script that fails is reported and the others still run (exit code 1 at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: script -> (arguments of the full run, arguments of --quick)
SCRIPTS: dict[str, tuple[list[str], list[str]]] = {
    "ece": ([], ["--sizes", "2000", "--repeats", "2", "--budget-s", "0.05"]),
    "tests": ([], ["--sizes", "2000", "--repeats", "2", "--budget-s", "0.05"]),
    "bootstrap": ([], ["--quick", "--sizes", "1000", "--resamples", "100"]),
    "calibrators": ([], ["--quick", "--repeats", "2", "--sequential", "2"]),
    "affine": ([], ["--sizes", "2000", "--repeats", "2"]),
    "soft": ([], ["--quick", "--sizes", "1000", "--reps", "2"]),
    "coverage": ([], ["--n", "2000", "--hsic-n", "200", "--repeats", "2", "--budget-s", "0.05"]),
    "streaming": ([], ["--sizes", "200000", "--rounds", "1", "--repeats", "1"]),
    "corp": ([], ["--n", "2000", "--boot-n", "1000", "--resamples", "20"]),
    "inputs": ([], ["--sizes", "2000", "--repeats", "2", "--budget-s", "0.05"]),
    "startup": ([], ["--quick"]),
    "selective": (
        [],
        ["--sizes", "2000", "--sklearn-n", "3000", "--repeats", "2", "--budget-s", "0.05"],
    ),
    "widek": ([], ["--mb", "4", "--repeats", "2", "--budget-s", "0.05"]),
    "kernel_ce": ([], ["--quick"]),
    "factories": ([], ["--n", "2000", "--repeats", "2", "--budget-s", "0.05"]),
    "compile": ([], ["--quick", "--n", "2000", "--only", "ece", "brier_score"]),
    "first_touch": (["--rounds", "2"], ["--quick"]),
}
#: Scripts that take --clock (bench_streaming.py and bench_first_touch.py time whole
#: subprocess runs by wall clock).
CLOCKED = set(SCRIPTS) - {"streaming", "first_touch"}


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return ""
    return f"{a / b:.2f}" if a / b < 100 else f"{a / b:.0f}"


def _time(seconds: float | None, unit: str) -> str:
    if seconds is None:
        return "skipped"
    value = seconds * 1e3 if unit == "ms" else seconds
    for digits, limit in ((0, 100), (1, 10), (2, 1)):
        if value >= limit:
            return f"{value:.{digits}f}"
    return f"{value:.3f}"


def render(table: dict, driver_command: str) -> str:
    """Markdown of one table (see the module docstring for the columns)."""
    unit = table["unit"]
    clock = "CPU time of the process (all threads)" if table["clock"] == "cpu" else "wall clock"
    extra = table.get("floors") or []
    lines = [
        f"**{table['title']}**  ",
        f"`{driver_command}` ran `{table['command']}`; {clock}.  ",
        f"{table['environment']}",
        "",
    ]
    if table.get("markdown"):  # columns of its own (bench_compile.py's sizes and times)
        lines += [table["markdown"], "", *(f"- {note}" for note in table["notes"])]
        return "\n".join(lines).rstrip() + "\n"
    lines += [
        f"| {table['group']} | implementation | median {unit} | ÷ jaxcal | ÷ floor "
        + "".join(f"| ÷ {name} " for name in extra)
        + "| compile s | value |",
        "|---|---|---:|---:|---:" + "|---:" * len(extra) + "|---:|---|",
    ]
    groups: dict[str, list[dict]] = {}
    for r in table["rows"]:
        groups.setdefault(r["size"], []).append(r)
    for group, rows in groups.items():
        by_name = {r["name"]: r["seconds"] for r in rows}
        ref = by_name.get(table["reference"])
        floor = by_name.get(table["floor"]) if table["floor"] else None
        for r in rows:
            compile_s = "" if r["compile_s"] is None else f"{r['compile_s']:.2f}"
            name = f"**{r['name']}**" if r["name"] == table["reference"] else r["name"]
            others = "".join(f"| {_ratio(r['seconds'], by_name.get(f))} " for f in extra)
            lines.append(
                f"| {group} | {name} | {_time(r['seconds'], unit)} "
                f"| {_ratio(r['seconds'], ref)} | {_ratio(r['seconds'], floor)} {others}"
                f"| {compile_s} | {r['value'] or ''} |"
            )
    lines += ["", *(f"- {note}" for note in table["notes"])]
    return "\n".join(lines).rstrip() + "\n"


def replace_blocks(text: str, blocks: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with each ``<!-- bench:KEY -->...<!-- /bench:KEY -->`` body set to
    ``blocks[KEY]``; also the keys that have no markers in ``text``."""
    missing = []
    for key, body in blocks.items():
        pattern = re.compile(
            rf"(<!-- bench:{re.escape(key)} -->\n).*?(<!-- /bench:{re.escape(key)} -->)", re.S
        )
        if not pattern.search(text):
            missing.append(key)
            continue
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(2), text)
    return text, missing


def _run_script(name: str, args: argparse.Namespace, json_path: Path) -> tuple[int, str, str]:
    full, quick = SCRIPTS[name]
    script_args = list(quick if args.quick else full)
    if name in CLOCKED:
        script_args += ["--clock", args.clock]
    python = sys.executable
    if args.torch_python and name in ("ece", "selective"):
        python = args.torch_python
    if args.torch_python and name == "streaming":
        script_args += ["--torch-python", args.torch_python]
    cmd = [python, str(HERE / f"bench_{name}.py"), *script_args, "--json", str(json_path)]
    print(f"run_all: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats (smoke)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument("--only", nargs="+", choices=list(SCRIPTS), help="run these scripts")
    parser.add_argument("--torch-python", help="interpreter with the bench-torch extra")
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="regenerate the tables between markers in docs/**/*.md and README.md",
    )
    parser.add_argument("--targets", type=Path, nargs="+", help=argparse.SUPPRESS)
    parser.add_argument(
        "--results", type=Path, default=HERE / "results", help="where --write-docs saves reports"
    )
    args = parser.parse_args(argv)
    driver = " ".join(
        ["python benchmarks/run_all.py", *(argv if argv is not None else sys.argv[1:])]
    )
    driver = re.sub(r" --(targets|results)( [^-]\S*)+", "", driver)
    names = args.only or list(SCRIPTS)
    blocks: dict[str, str] = {}
    failed = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            json_path = Path(tmp) / f"{name}.json"
            code, out, err = _run_script(name, args, json_path)
            if code != 0 or not json_path.exists():
                failed.append(name)
                reason = (err.strip().splitlines() or out.strip().splitlines() or ["no output"])[-1]
                print(
                    f"run_all: bench_{name}.py failed or wrote nothing: {reason}", file=sys.stderr
                )
                continue
            if args.write_docs:
                args.results.mkdir(parents=True, exist_ok=True)
                (args.results / f"{name}.md").write_text(out)
            for table in json.loads(json_path.read_text()):
                table["command"] = re.sub(r" --json \S+", "", table["command"])
                blocks[table["key"]] = render(table, driver)
    for key, body in blocks.items():
        print(f"<!-- bench:{key} -->\n{body}<!-- /bench:{key} -->\n")
    if args.write_docs:
        targets = args.targets or [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
        unwritten = set(blocks)
        for path in targets:
            text, missing = replace_blocks(path.read_text(), blocks)
            unwritten &= set(missing)
            if text != path.read_text():
                path.write_text(text)
        for key in sorted(unwritten):
            print(
                f"run_all: no page has <!-- bench:{key} --> markers: not written", file=sys.stderr
            )
    print(f"run_all: {len(blocks)} tables in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if failed:
        print(f"run_all: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
