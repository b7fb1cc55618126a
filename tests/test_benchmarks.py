"""``benchmarks/run_all.py``: the documentation's tables rendered and regenerated between markers."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
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


def _train_module(name):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_train_calibration_selection_rule_and_holm():
    """The rule: lowest validation ECE within 1 point of CE's validation accuracy."""
    pytest.importorskip("scipy")
    rep = _train_module("_train_report")
    s = 4
    ce = rep.Run({}, {"val accuracy": np.full((1, s), 0.90)})
    arm = rep.Run(
        {},
        {
            "val accuracy": np.array([[0.90] * s, [0.885] * s, [0.95] * s]),
            "val ECE": np.array([[0.05] * s, [0.01] * s, [0.03] * s]),
            "val+TS ECE": np.array([[0.02] * s, [0.03] * s, [0.01] * s]),
        },
    )
    runs = {"CE": ce, "x": arm}
    assert rep.select(runs, "x", ts=False) == (2, True)  # 0.885 is 1.5 points below CE
    assert rep.select(runs, "x", ts=True) == (2, True)
    arm.a["val accuracy"][:] = 0.5
    assert rep.select(runs, "x", ts=False) == (0, False)  # none qualifies: best accuracy
    adjusted = rep.holm([0.01, 0.04, 0.03, 0.5])
    np.testing.assert_allclose(adjusted, [0.04, 0.09, 0.09, 0.5])  # Holm by hand
    c = rep.paired("d", "x", np.array([-0.02, -0.01, -0.03, -0.02]))
    assert c.high < 0 and c.p < 0.05


@pytest.mark.slow  # compiles the training of every arm: ~2 minutes on a loaded machine
def test_train_calibration_smoke_run_resumes_and_reports(tmp_path):
    pytest.importorskip("sklearn")
    script = ROOT / "benchmarks" / "train_calibration.py"
    argv = [sys.executable, str(script), "--smoke", "--datasets", "digits", "--out", str(tmp_path)]
    run = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    files = sorted(p.stem for p in (tmp_path / "digits").glob("*.npz"))
    assert len(files) == 11 and "CE + early stopping" in files and "meta-calibration" in files
    again = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert again.returncode == 0 and "digits /" not in again.stdout  # resumed: nothing rerun
    rep = _train_module("_train_report")
    text = rep.report(tmp_path)
    for title in ("## E1", "## E2", "## Accuracy", "## Regime logs", "## Every grid point"):
        assert title in text
    assert "| mmce (held-out) |" in text and "CE + TS (temperature scaling alone)" in text
    z = np.load(tmp_path / "digits" / "mmce (held-out).npz")
    assert z["test ECE"].shape == (6, 2) and z["log train_ECE"].shape == (6, 2, 24)
    assert np.all(np.isfinite(z["test+TS ECE"])) and np.all(z["sat all_correct"] <= 1)


def test_tables_with_columns_of_their_own_render_as_given():
    md = "| function | trace s |\n|---|---:|\n| ece | 0.5 |"
    table = {**TABLE, "key": "compile", "markdown": md, "rows": []}
    out = run_all.render(table, "python benchmarks/run_all.py --only compile")
    assert md in out and "÷ jaxcal" not in out
    assert out.splitlines()[0] == "**A kernel**  "
    assert "- peer X is not installed: skipped." in out.splitlines()


@pytest.mark.slow  # five small eager jnp programs and their jaxcal counterparts: ~10 s
def test_bench_compile_plain_versions_compute_what_jaxcal_does():
    """The plain-jnp rows of bench_compile.py are the same numbers as jaxcal's defaults."""
    import jax.numpy as jnp

    import jaxcal
    from tests.api_registry import make_data

    bench = _train_module("bench_compile")
    d = make_data(0)
    probs, labels, p, y = (jnp.asarray(a) for a in (d.probs, d.labels, d.p, d.y))
    w = jnp.ones(labels.shape)
    np.testing.assert_allclose(bench.plain_ece(probs, labels, w), jaxcal.ece(probs, labels), 1e-5)
    np.testing.assert_allclose(
        bench.plain_brier(probs, labels, w), jaxcal.brier_score(probs, labels), 1e-5
    )
    np.testing.assert_allclose(
        bench.plain_log_loss(probs, labels, w), jaxcal.log_loss(probs, labels), 1e-5
    )
    conf, acc, count = bench.plain_reliability(probs, labels, w)
    curve = jaxcal.reliability_curve(probs, labels)
    np.testing.assert_allclose(np.asarray(count), np.asarray(curve.counts), 1e-6)
    np.testing.assert_allclose(conf, curve.mean_confidence, 1e-5)
    np.testing.assert_allclose(acc, curve.mean_accuracy, 1e-5)
    # plain_ks is Gupta et al.'s KS error, max |C_k|; ks_test's statistic is it over sigma
    sigma = jnp.sqrt(jnp.sum(p * (1 - p))) / p.shape[0]
    np.testing.assert_allclose(
        bench.plain_ks(p, y, w), jaxcal.ks_test(p, y).statistic * sigma, 1e-5
    )
