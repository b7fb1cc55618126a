"""``jaxcal report``'s selective-prediction block and SKCE row (jaxcal/cli/_selective.py,
``_extras_kernel`` in jaxcal/cli/_report.py): the printed numbers are the library's.

Shapes and options are those of tests/cli/test_report.py (the demo at 50 resamples, the
(200,) binary file at --bins 10 and 200 resamples), so the report kernels are shared.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import selective, stats
from jaxcal.cli import _report, _selective, main
from jaxcal.cli._io import Model
from tests.cli_helpers import binary, check_schema, json_report
from tests.helpers import assert_close

DEMO = ["report", "--demo", "--no-fit", "--resamples", "50"]


def _line(out: str, start: str) -> list[str]:
    return next(row for row in out.splitlines() if row.startswith(start)).split()


def test_demo_selective_block_and_skce_are_the_library_functions(capsys):
    doc = json_report(DEMO, capsys)
    check_schema(doc, fit=False)
    assert main([*DEMO, "--quiet"]) == 0  # the same kernels: nothing compiles again
    out = capsys.readouterr().out
    data = np.load("jaxcal/data/digits_gaussian_nb.npz")
    p, y = data["probs"], data["labels"]
    metrics, tests = doc["models"][0]["metrics"], doc["models"][0]["tests"]
    direct = {
        "aurc": selective.aurc(p, y),
        "e_aurc": selective.e_aurc(p, y),
        "augrc": selective.augrc(p, y),
    }
    risks = selective.risk_at_coverage(p, y, coverage=(0.8, 0.9, 0.95))
    direct |= {f"risk_at_coverage_{c}": r for c, r in zip((80, 90, 95), risks, strict=True)}
    for key, value in direct.items():
        assert_close(np.float32(metrics[key]["value"]), value, err_msg=key)
        label = dict((k, lab) for k, lab, _ in _selective.ROWS)[key]
        assert _line(out, label)[-4] == f"{metrics[key]['value']:.4f}", key  # GaussianNB
    # The intervals are bootstrap_ci's on the report's resamples (the metrics table's key).
    boot_key = jax.random.split(jax.random.key(0))[0]
    for key, metric in (("aurc", _selective.aurc), ("risk_at_coverage_90", _selective.ROWS[4][2])):
        res = stats.bootstrap_ci(metric, p, y, key=boot_key, n_resamples=50)
        assert_close(np.float32([metrics[key]["low"], metrics[key]["high"]]), [res.low, res.high])
    # SKCE: skce_test's asymptotic test with the report's resamples and fold_in(key, 2).
    skce = stats.skce_test(p, y, key=jax.random.fold_in(jax.random.key(0), 2), n_resamples=50)
    assert tests["skce"]["method"] == "asymptotic"
    assert_close(np.float32(tests["skce"]["estimate"]), skce.estimate)
    assert_close(np.float32(tests["skce"]["statistic"]), skce.statistic)
    assert_close(np.float32(tests["skce"]["bandwidth"]), skce.bandwidth)
    assert tests["skce"]["p_value"] == pytest.approx(float(skce.p_value))
    line = " ".join(_line(out, "SKCE (unbiased, Laplacian, median bandwidth)"))
    # a model whose asymptotic null is unreliable (E < 10) has the flag after its p-value
    flagged = [not m["tests"]["skce"]["reliable"] for m in doc["models"]]
    assert line.count("unreliable:") == sum(flagged)
    row = re.sub(r" unreliable: \S+ expected errors < 10", "", line).split()
    assert row[-4] == f"{tests['skce']['estimate']:.4g}"
    # The footnotes state the conventions; the harness block is off by default.
    assert "convention='mean'" in out and "Tied confidences are averaged" in out
    assert "asymptotic test (bootstrap of the" in out and "block z-test" not in out
    assert "Harness presets" not in out and all("harness" not in m for m in doc["models"])


def test_binary_selective_block_uses_the_rows_1_minus_p_p(tmp_path, capsys):
    _z, p, y = binary(0)
    np.savez(tmp_path / "preds.npz", probs=p, labels=y)
    doc = json_report(["report", str(tmp_path / "preds.npz"), "--bins", "10"], capsys)
    check_schema(doc, fit=False)
    metrics, tests = doc["models"][0]["metrics"], doc["models"][0]["tests"]
    rows = np.stack([1 - p, p], axis=1)
    assert_close(np.float32(metrics["aurc"]["value"]), selective.aurc(rows, y))
    assert_close(np.float32(metrics["augrc"]["value"]), selective.augrc(rows, y))
    # jaxcal.selective reads (N,) probabilities so too (issue 34.5)
    assert_close(np.float32(metrics["aurc"]["value"]), selective.aurc(p, y))
    # The same as the named form: confidence max(p, 1 - p) against correctness.
    correct = ((p > 0.5).astype(int) == y).astype(int)
    assert_close(
        np.float32(metrics["e_aurc"]["value"]),
        selective.e_aurc(confidence=np.maximum(p, 1 - p), correct=correct),
    )
    skce = stats.skce_test(p, y, key=jax.random.fold_in(jax.random.key(0), 2), n_resamples=200)
    assert_close(np.float32(tests["skce"]["estimate"]), skce.estimate)
    assert tests["skce"]["p_value"] == pytest.approx(float(skce.p_value))


def test_skce_switches_to_the_block_test_beyond_the_stated_cost():
    assert _report.skce_method(2_000, 10, 200) == "asymptotic"
    assert _report.skce_method(2_001, 10, 200) == "block"
    assert _report.skce_method(899, 10, 10**6) == "block"  # the bootstrap's R counts too
    assert _report.skce_method(100_000, 10, 2) == "block"  # and the kernel's O(N^2 K)
    assert _report.skce_method(899, 10, 200) == "asymptotic"  # the demo
    # The block branch is skce_test's block test, its log p-value finite where p underflows.
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), size=400).astype(np.float32)
    y = np.zeros(400, np.int32)  # far from calibrated: z is huge
    stat, _p, log_p, estimate, *_ = jax.jit(
        lambda p, y: _report.skce_numbers(p, y, jax.random.key(0), 2, "block")
    )(p, y)
    want = stats.skce_test(p, y, method="block", block_size=_report.SKCE_BLOCK)
    assert_close(stat, want.statistic)
    assert_close(estimate, want.estimate)
    assert np.isfinite(log_p) and log_p < np.log(1e-30)


def test_skce_row_flags_an_unreliable_null(tmp_path, capsys):
    """Issue 34: calibrated predictions near 0 and 1 (E = 0.2 expected errors): the SKCE
    row says its p-value is unreliable, and the JSON says why."""
    rng = np.random.default_rng(3)
    p = np.where(rng.random(200) < 0.5, 1e-3, 1 - 1e-3).astype(np.float32)
    y = (rng.random(200) < p).astype(np.int32)
    np.savez(tmp_path / "preds.npz", probs=p, labels=y)
    assert main(["report", str(tmp_path / "preds.npz"), "--resamples", "20"]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith("SKCE")]
    assert len(row) == 1 and "unreliable: 0.2 expected errors < 10" in row[0], row
    report = json_report(["report", str(tmp_path / "preds.npz"), "--resamples", "20"], capsys)
    skce = report["models"][0]["tests"]["skce"]
    assert skce["reliable"] is False and skce["expected_errors"] == pytest.approx(0.2, rel=1e-3)


def test_streamed_report_says_the_blocks_need_the_in_memory_report(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    _z, p, y = binary(0)
    np.savez(tmp_path / "preds.npz", probs=p, labels=y)
    argv = ["report", str(tmp_path / "preds.npz"), "--stream", "--resamples", "0"]
    assert main([*argv, "--harness", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "SKCE, the selective-prediction block" in out and "--harness need the in-memory" in out
    doc = json_report(argv, capsys)  # nothing of the blocks in the streamed JSON
    assert "aurc" not in doc["models"][0]["metrics"] and doc["models"][0]["tests"] == {}


def test_risk_coverage_panel_draws_each_model_and_compiles_once():
    """--plot's fourth panel: one line per model, the library's curve; a second figure of
    data of the same shapes compiles nothing (the pattern of tests/plot/test_plot.py)."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def models(seed):
        rng = np.random.default_rng(seed)
        p = rng.dirichlet(np.ones(4), size=300).astype(np.float32)
        y = rng.integers(0, 4, 300).astype(np.int32)
        b = rng.random(300).astype(np.float32)
        return [Model("a", "a", p, y, None, "probs"), Model("b", "b", b, y % 2, None, "probs")]

    results = [{"metrics": {"aurc": {"value": 0.5}}}, {"metrics": {}}]
    fig, ax = plt.subplots()
    first = models(0)
    _selective.risk_coverage_panel(ax, first, results)
    lines = [line for line in ax.get_lines() if line.get_label() in ("a (AURC 0.5000)", "b")]
    assert len(lines) == 2
    curve = selective.risk_coverage_curve(first[0].probs, first[0].labels)
    assert_close(lines[0].get_ydata(), curve.risk)
    binary_curve = selective.risk_coverage_curve(
        jnp.stack([1 - first[1].probs, first[1].probs], axis=1), first[1].labels
    )
    assert_close(lines[1].get_xdata(), binary_curve.coverage)
    plt.close(fig)
    compiles = []

    def listen(event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        fig, ax = plt.subplots()
        _selective.risk_coverage_panel(ax, models(1), results)
        plt.close(fig)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert not compiles
