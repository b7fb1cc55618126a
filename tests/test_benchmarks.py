"""``benchmarks/run_all.py``: the documentation's tables rendered and regenerated between markers."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("run_all", ROOT / "benchmarks" / "run_all.py")
run_all = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_all)

TABLE = {
    "key": "demo",
    "title": "A kernel",
    "command": "python benchmarks/bench_demo.py --quick",
    "environment": "jax 0.0 on a test",
    "clock": "cpu",
    "reference": "jaxcal jit",
    "floor": "floor: read",
    "unit": "ms",
    "group": "N",
    "notes": ["peer X is not installed: skipped."],
    "rows": [
        dict(
            size="1e3", name="jaxcal jit", seconds=2e-3, compile_s=0.5, kind="jaxcal", value="0.1"
        ),
        dict(size="1e3", name="peer", seconds=8e-3, compile_s=None, kind="peer", value="0.1"),
        dict(
            size="1e3", name="floor: read", seconds=1e-3, compile_s=None, kind="floor", value=None
        ),
        dict(size="1e3", name="absent peer", seconds=None, compile_s=None, kind="peer", value=None),
    ],
}


def test_tables_have_the_ratio_columns_and_replace_only_their_block():
    md = run_all.render(TABLE, "python benchmarks/run_all.py --clock cpu")
    lines = md.splitlines()
    assert "| N | implementation | median ms | ÷ jaxcal | ÷ floor | compile s | value |" in lines
    assert "| 1e3 | **jaxcal jit** | 2.00 | 1.00 | 2.00 | 0.50 | 0.1 |" in lines
    assert "| 1e3 | peer | 8.00 | 4.00 | 8.00 |  | 0.1 |" in lines
    assert "| 1e3 | absent peer | skipped |  |  |  |  |" in lines
    assert "CPU time of the process" in md and "- peer X is not installed: skipped." in lines
    readme = "intro\n<!-- bench:demo -->\nold table\n<!-- /bench:demo -->\nafter\n"
    text, missing = run_all.replace_blocks(readme, {"demo": md, "other": "x"})
    assert text == f"intro\n<!-- bench:demo -->\n{md}<!-- /bench:demo -->\nafter\n"
    assert missing == ["other"]
    assert run_all.replace_blocks(text, {"demo": md})[0] == text  # re-running: same README


@pytest.mark.slow  # a subprocess that imports JAX and compiles: ~15 s on a loaded machine
def test_quick_run_regenerates_the_docs_block(tmp_path):
    readme = tmp_path / "benchmarks.md"
    readme.write_text("# x\n<!-- bench:ece -->\nstale\n<!-- /bench:ece -->\n")
    argv = ["--quick", "--only", "ece", "--write-docs", "--targets", str(readme)]
    argv += ["--results", str(tmp_path / "results")]
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_all.py"), *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    text = readme.read_text()
    assert "stale" not in text and "**jaxcal jit**" in text
    assert "floor: jax.jit sum(probs), sum(labels)" in text
    assert "`python benchmarks/run_all.py --quick --only ece --write-docs`" in text
    assert (tmp_path / "results" / "ece.md").read_text().startswith("### Confidence ECE")
