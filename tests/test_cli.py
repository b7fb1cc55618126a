"""The ``jaxcal report`` command: demo, files, and clear errors with exit code 2."""

import json
import subprocess
import sys

import numpy as np
import pytest

from jaxcal.cli import main
from tests.helpers import assert_close


def test_demo_prints_the_metrics_table(capsys):
    assert main(["report", "--demo"]) == 0
    out = capsys.readouterr().out
    assert "GaussianNB" in out and "N = 899, 10 classes" in out
    for row in (
        "ECE (l1, 15 uniform bins)",
        "classwise ECE",
        "top-label ECE",
        "Brier score",
        "log loss",
    ):
        assert row in out


def test_report_on_an_npz_file_matches_the_metrics(tmp_path, capsys):
    import jaxcal

    rng = np.random.default_rng(0)
    p = rng.random(200)
    y = (rng.random(200) < p).astype(int)
    np.savez(tmp_path / "preds.npz", probs=p, labels=y)
    assert main(["report", str(tmp_path / "preds.npz"), "--bins", "10"]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("ECE (l1, 10 uniform bins)"))
    assert float(line.split()[-1]) == round(float(jaxcal.ece(p, y, n_bins=10)), 4)


def test_bad_files_exit_2_without_traceback(tmp_path, capsys):
    np.savez(tmp_path / "nolabels.npz", probs=np.ones(3))
    (tmp_path / "garbage.npz").write_bytes(b"not a zip")
    np.savez(tmp_path / "pickled.npz", probs=np.array([{"a": 1}], dtype=object), labels=np.zeros(1))
    np.savez(tmp_path / "offsimplex.npz", probs=np.full((3, 2), 0.3), labels=np.zeros(3, int))
    cases = {
        "nolabels.npz": "missing key",
        "garbage.npz": "cannot read",
        "pickled.npz": "cannot read",
        "offsimplex.npz": "rows must sum to 1",
        "absent.npz": "cannot read",
    }
    for name, message in cases.items():
        assert main(["report", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert main(["report"]) == 2
    assert main(["report", "--demo", "--bins", "0"]) == 2


def test_console_script_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "jaxcal.cli", "report", "--demo"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "top-label ECE" in result.stdout


# --------------------------------------------------------------------------------------
# The full report: three formats, JSON schema, --fit, --plot, progress, bad inputs.
# Generated multiclass data have the demo's shape (899, 10) so that they reuse its
# compiled kernels; binary data have the shape and bins of the first npz test (200,).

N, K = 899, 10
N_BINARY = 200


def _multiclass(seed=0, sharpen=1.0):
    """Logits, softmax probs and labels drawn from softmax(logits / sharpen)."""
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(N, K)) * 2.5).astype(np.float32)
    p = np.exp(z - z.max(1, keepdims=True))
    p = (p / p.sum(1, keepdims=True)).astype(np.float32)
    q = np.exp(z / sharpen - (z / sharpen).max(1, keepdims=True))
    q /= q.sum(1, keepdims=True)
    y = np.minimum((rng.uniform(size=(N, 1)) > np.cumsum(q, 1)).sum(1), K - 1).astype(np.int32)
    return z, p, y


def _binary(seed=0):
    """N_BINARY log-odds, probabilities and labels (calibrated); report them with --bins 10."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=N_BINARY).astype(np.float32) * 2
    p = (1 / (1 + np.exp(-z.astype(np.float64)))).astype(np.float32)
    y = (rng.uniform(size=N_BINARY) < p).astype(np.int32)
    return z, p, y


def _write_csv(path, columns: dict):
    names = list(columns)
    rows = zip(*(columns[n] for n in names), strict=True)
    lines = [",".join(names)] + [",".join(f"{v:.9g}" for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def _json(argv, capsys):
    assert main([*argv, "--json", "-", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return json.loads(captured.out)


def _check_schema(doc, *, fit):
    """The --json schema documented in jaxcal.cli (types and keys)."""
    assert doc["schema"] == "jaxcal.report/1"
    assert isinstance(doc["jaxcal_version"], str)
    settings = doc["settings"]
    assert set(settings) == {"n_bins", "resamples", "confidence", "seed", "interval", "folds"}
    assert settings["interval"] == "percentile bootstrap" and settings["confidence"] == 0.95
    for model in doc["models"]:
        assert set(model) == {
            "name", "source", "n", "num_classes", "binary", "inputs", "metrics", "tests", "fit"
        }  # fmt: skip
        assert model["inputs"] in ("probs", "logits")
        with_interval = {"accuracy", "ece", "ece_quantile", "ece_l2_debiased", "brier", "log_loss"}
        point = {"mce", *(f"brier_{k}" for k in ("reliability", "resolution", "uncertainty"))}
        point |= {"brier_within_bin_variance", "brier_within_bin_covariance"}
        if model["binary"]:
            point.add("positive_rate")
        else:
            with_interval |= {"classwise_ece", "top_label_ece"}
        assert set(model["metrics"]) == with_interval | point
        for name, m in model["metrics"].items():
            assert set(m) == {"value", "low", "high"}
            assert isinstance(m["value"], float)
            if name in with_interval:
                assert m["low"] <= m["high"], name
                if name in ("accuracy", "brier", "log_loss"):  # means: estimate inside
                    assert m["low"] <= m["value"] <= m["high"], name
            else:
                assert m["low"] is None and m["high"] is None
        assert set(model["tests"]) == {"ks", "kuiper", "spiegelhalter", "ece_consistency"}
        for t in model["tests"].values():
            assert set(t) == {"statistic", "p_value", "log10_p_value"}
            assert 0 <= t["p_value"] <= 1 and t["log10_p_value"] <= 1e-6
        if fit:
            f = model["fit"]
            assert set(f) == {"folds", "seed", "temperature_inputs", "results"}
            names = ["uncalibrated", "temperature_scaling"]
            names += (
                ["platt", "isotonic"]
                if model["binary"]
                else ["top_label_platt", "top_label_isotonic"]
            )
            assert list(f["results"]) == names
            for r in f["results"].values():
                assert set(r) == {"ece", "log_loss", "brier", "accuracy"}
        else:
            assert model["fit"] is None


def test_demo_json_has_the_schema_and_the_library_numbers(capsys):
    import jaxcal

    doc = _json(["report", "--demo"], capsys)
    _check_schema(doc, fit=True)
    assert [m["name"] for m in doc["models"]] == ["GaussianNB", "MLP"]
    data = np.load("jaxcal/data/digits_gaussian_nb.npz")
    p, y = data["probs"], data["labels"]
    metrics = doc["models"][0]["metrics"]
    assert_close(np.float32(metrics["ece"]["value"]), jaxcal.ece(p, y))
    assert_close(np.float32(metrics["top_label_ece"]["value"]), jaxcal.top_label_ece(p, y))
    assert_close(np.float32(metrics["log_loss"]["value"]), jaxcal.log_loss(p, y))
    assert_close(np.float32(metrics["accuracy"]["value"]), np.mean(p.argmax(1) == y))
    tests = doc["models"][0]["tests"]
    assert_close(np.float32(tests["kuiper"]["statistic"]), jaxcal.kuiper_test(p, y).statistic)
    assert tests["ks"]["log10_p_value"] < -100  # GaussianNB is grossly over-confident
    assert doc["models"][1]["tests"]["ks"]["p_value"] > 0.05  # the MLP is not rejected
    fit = doc["models"][0]["fit"]["results"]
    assert fit["uncalibrated"]["ece"] == metrics["ece"]["value"]
    assert fit["top_label_isotonic"]["ece"] < metrics["ece"]["value"] / 2


def test_the_three_formats_give_the_same_report(tmp_path, capsys):
    import jaxcal

    _z, p, y = _multiclass(1, sharpen=1.5)
    np.savez(tmp_path / "preds.npz", probs=p, labels=y)
    np.save(tmp_path / "preds.npy", p)
    np.save(tmp_path / "labels.npy", y)
    _write_csv(tmp_path / "preds.csv", {**{f"p{k}": p[:, k] for k in range(K)}, "label": y})
    docs = [
        _json(["report", str(tmp_path / "preds.npz")], capsys),
        _json(["report", str(tmp_path / "preds.npy"), "--labels", str(tmp_path / "labels.npy")], capsys),
        _json(["report", str(tmp_path / "preds.csv"), "--probs", "p?"], capsys),
    ]  # fmt: skip
    for doc in docs:
        _check_schema(doc, fit=False)
        model = doc["models"][0]
        assert model["n"] == N and model["num_classes"] == K and model["inputs"] == "probs"
        assert model["metrics"] == docs[0]["models"][0]["metrics"]
        assert model["tests"] == docs[0]["models"][0]["tests"]
    metrics = docs[0]["models"][0]["metrics"]
    assert_close(np.float32(metrics["ece"]["value"]), jaxcal.ece(p, y))
    assert_close(np.float32(metrics["classwise_ece"]["value"]), jaxcal.classwise_ece(p, y))
    assert_close(np.float32(metrics["brier"]["value"]), jaxcal.brier_score(p, y))
    dec = jaxcal.brier_decomposition(p, y)
    assert_close(np.float32(metrics["brier_resolution"]["value"]), dec.resolution)


def test_logits_in_npz_and_csv_and_binary_inputs(tmp_path, capsys):
    import jaxcal

    z, p, y = _multiclass(2)
    np.savez(tmp_path / "logits.npz", logits=z, labels=y)
    doc = _json(["report", str(tmp_path / "logits.npz")], capsys)
    model = doc["models"][0]
    assert model["inputs"] == "logits"
    np.savez(tmp_path / "both.npz", probs=np.full_like(p, 0.1), logits=z, labels=y)
    doc_both = _json(["report", str(tmp_path / "both.npz"), "--logits"], capsys)
    assert doc_both["models"][0]["metrics"] == model["metrics"]  # the probs key is ignored
    # The CLI takes the softmax in float64, this test in float32: scores differ by an ulp.
    assert_close(np.float32(model["metrics"]["ece"]["value"]), jaxcal.ece(p, y), atol=1e-5)
    # A binary problem: one log-odds column of a CSV, label column named by --labels.
    zb, pb, yb = _binary(3)
    _write_csv(tmp_path / "bin.csv", {"margin": zb, "noise": zb * 0, "truth": yb})
    argv = ["report", str(tmp_path / "bin.csv"), "--logits", "margin", "--labels", "truth"]
    doc = _json([*argv, "--bins", "10"], capsys)
    _check_schema(doc, fit=False)
    model = doc["models"][0]
    assert model["binary"] and model["num_classes"] == 2 and model["inputs"] == "logits"
    ece = jaxcal.ece(pb, yb, n_bins=10)
    assert_close(np.float32(model["metrics"]["ece"]["value"]), ece, atol=1e-5)  # sigmoid, as above
    assert_close(np.float32(model["metrics"]["positive_rate"]["value"]), yb.mean())
    assert_close(np.float32(model["metrics"]["accuracy"]["value"]), np.mean((pb > 0.5) == yb))
    ks = jaxcal.ks_test(pb, yb)
    assert_close(np.float32(model["tests"]["ks"]["p_value"]), ks.p_value, atol=1e-5)  # as above


def test_fit_shows_before_and_after_on_held_out_folds(tmp_path, capsys):
    z, p, y = _multiclass(4, sharpen=0.4)  # under-confident: labels follow softmax(z / 0.4)
    np.savez(tmp_path / "sharp.npz", probs=p, logits=z, labels=y)
    assert main(["report", str(tmp_path / "sharp.npz"), "--fit", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "temperature scaling fitted on logits" in out
    rows = {}
    for line in out.split("Calibrators, cross-fitted")[1].splitlines()[4:]:
        name, *values = line.rsplit(None, 4)
        rows[name.strip()] = [float(v) for v in values]
    assert set(rows) == {
        "uncalibrated",
        "temperature scaling",
        "top-label Platt",
        "top-label isotonic",
    }
    before = rows["uncalibrated"]
    for name in ("temperature scaling", "top-label Platt", "top-label isotonic"):
        ece, _nll, brier, acc = rows[name]
        assert ece < before[0] / 2 and brier < before[2], name
        assert acc == before[3], name  # all three keep the argmax
    assert rows["temperature scaling"][1] < before[1]
    # Without logits, temperature scaling uses the log-probabilities and says so.
    np.savez(tmp_path / "probs_only.npz", probs=p, labels=y)
    doc = _json(["report", str(tmp_path / "probs_only.npz"), "--fit"], capsys)
    _check_schema(doc, fit=True)
    fit = doc["models"][0]["fit"]
    assert fit["temperature_inputs"] == "log_probs" and fit["folds"] == 5
    # The table prints 4 decimals; log-probabilities and logits give the same softmax.
    ece = fit["results"]["temperature_scaling"]["ece"]
    assert_close(ece, rows["temperature scaling"][0], atol=1e-4)


def test_binary_fit_and_several_files_side_by_side(tmp_path, capsys):
    _zb, pb, yb = _binary(5)
    np.savez(tmp_path / "a.npz", probs=pb, labels=yb)
    np.savez(tmp_path / "b.npz", probs=np.clip(pb * 1.3, 0, 1), labels=yb)
    files = [str(tmp_path / "a.npz"), str(tmp_path / "b.npz")]
    doc = _json(["report", *files, "--fit", "--bins", "10"], capsys)
    _check_schema(doc, fit=True)
    assert [m["name"] for m in doc["models"]] == ["a", "b"]
    _a, b = (m["fit"]["results"] for m in doc["models"])
    assert b["platt"]["ece"] < b["uncalibrated"]["ece"]
    assert main(["report", *files, "--bins", "10", "--quiet"]) == 0
    header = capsys.readouterr().out.split("Metrics")[1].splitlines()[1]
    assert header.split() == ["metric", "95%", "interval", "a", "95%", "interval", "b"]


def test_plot_and_json_files_are_written(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import matplotlib.image

    _z, p, y = _multiclass(6)
    np.savez(tmp_path / "m.npz", probs=p, labels=y)
    png, js = tmp_path / "diagram.png", tmp_path / "report.json"
    argv = ["report", str(tmp_path / "m.npz"), "--plot", str(png), "--json", str(js)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert f"written to {png}" in captured.out and "ECE (l1, 15 uniform bins)" in captured.out
    assert (
        "bootstrap resamples ... done" in captured.err and f"writing {png} ... done" in captured.err
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 30_000
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 400 and image.shape[1] > 800 and image[..., :3].std() > 0.05
    _check_schema(json.loads(js.read_text()), fit=False)
    # Nothing is written unless asked; --quiet silences the progress.
    before = sorted(tmp_path.iterdir())
    assert main(["report", str(tmp_path / "m.npz"), "--quiet"]) == 0
    assert capsys.readouterr().err == "" and sorted(tmp_path.iterdir()) == before


def _bad_files(tmp):
    """(argv, message) pairs: malformed inputs and arguments."""
    _, p, y = _multiclass(0)
    cases = []

    def npz(name, **arrays):
        np.savez(tmp / name, **arrays)
        return str(tmp / name)

    def text(name, body):
        (tmp / name).write_text(body)
        return str(tmp / name)

    nan = p.copy()
    nan[3, 2] = np.nan
    cases += [
        ([npz("nan.npz", probs=nan, labels=y)], "must be finite"),
        ([npz("range.npz", probs=p, labels=y + 5)], "must lie in [0, 10)"),
        ([npz("shape3.npz", probs=p[None], labels=y)], "must be 1-D (N,) or 2-D (N, K)"),
        ([npz("short.npz", probs=p, labels=y[:-1])], "to match the predictions"),
        ([npz("nolabel.npz", probs=p, target=y)], "missing key(s) ['labels']"),
        ([npz("noscores.npz", scores=p, labels=y)], "missing key(s)"),
        ([npz("strings.npz", probs=np.array(["a", "b"]), labels=y[:2])], "must be numeric"),
        ([npz("badlogits.npz", logits=np.full((3, 2), np.inf), labels=y[:3])], "must be finite"),
        ([npz("ok.npz", probs=p, labels=y), "--probs", "scores"], "missing key(s) ['scores']"),
        ([text("words.csv", "p0,p1,label\n0.5,0.5,1\n0.2,abc,0\n")], "non-numeric value 'abc' in column 'p1', line 3"),
        ([text("ragged.csv", "p0,p1,label\n0.5,0.5,1\n0.2,0.8\n")], "line 3 has 2 fields"),
        ([text("nolabel.csv", "p0,p1\n0.5,0.5\n")], "no label column"),
        ([text("empty.csv", "p0,p1,label\n")], "at least one data row"),
        ([text("nan.csv", "p0,p1,label\n0.5,0.5,1\nnan,1,0\n")], "must be finite"),
        ([text("cols.csv", "p0,p1,label\n0.5,0.5,1\n"), "--probs", "q*"], "no column matches --probs 'q*'"),
        ([text("float.csv", "p0,p1,label\n0.5,0.5,0.5\n")], "must hold integers"),
        ([text("notes.txt", "hello")], "unsupported file type '.txt'"),
    ]  # fmt: skip
    np.save(tmp / "scores.npy", p)
    np.save(tmp / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    cases += [
        ([str(tmp / "scores.npy")], "give the labels as a second .npy file"),
        ([str(tmp / "scores.npy"), "--labels", str(tmp / "absent.npy")], "cannot read the labels"),
        ([str(tmp / "objects.npy"), "--labels", str(tmp / "scores.npy")], "cannot read the scores"),
        ([str(tmp / "scores.npy"), "--probs", "x", "--labels", "y.npy"], "take no column names"),
        ([str(tmp / "ok.npz"), "--folds", "1"], "--folds must be an integer >= 2"),
        ([str(tmp / "ok.npz"), "--resamples", "0"], "--resamples must be an integer >= 1"),
        (
            [str(tmp / "ok.npz"), "--plot", str(tmp / "x.jpg")],
            "--plot must end in .png, .pdf or .svg",
        ),
        ([str(tmp / "ok.npz"), "--demo"], "give either FILE(s) or --demo"),
        ([npz("tiny.npz", probs=p[:9], labels=y[:9]), "--fit"], "needs at least 10 samples"),
    ]
    return cases


def test_malformed_inputs_exit_2_with_one_line(tmp_path, capsys):
    for argv, message in _bad_files(tmp_path):
        assert main(["report", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err, (argv, err)
        assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("jaxcal: error: ")


def test_help_documents_the_formats(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for text in (
        ".npz",
        ".npy",
        ".csv",
        "--labels LABELS.npy",
        "--json",
        "--plot",
        "--fit",
        "--quiet",
    ):
        assert text in out
