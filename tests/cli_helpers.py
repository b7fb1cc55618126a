"""Data and checks shared by the ``jaxcal report`` tests (tests/test_cli*.py).

Generated multiclass data have the demo's shape (899, 10) so that they reuse its compiled
kernels; binary data have the shape and bins of the first npz test (200,), reported with
``--bins 10``. Each distinct (shape, n_bins) compiles the whole report kernel: add no new
shapes.
"""

import json

import numpy as np

from jaxcal.cli import main

N, K = 899, 10
N_BINARY = 200


def multiclass(seed=0, sharpen=1.0):
    """Logits, softmax probs and labels drawn from softmax(logits / sharpen)."""
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(N, K)) * 2.5).astype(np.float32)
    p = np.exp(z - z.max(1, keepdims=True))
    p = (p / p.sum(1, keepdims=True)).astype(np.float32)
    q = np.exp(z / sharpen - (z / sharpen).max(1, keepdims=True))
    q /= q.sum(1, keepdims=True)
    y = np.minimum((rng.uniform(size=(N, 1)) > np.cumsum(q, 1)).sum(1), K - 1).astype(np.int32)
    return z, p, y


def binary(seed=0):
    """N_BINARY log-odds, probabilities and labels (calibrated); report them with --bins 10."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=N_BINARY).astype(np.float32) * 2
    p = (1 / (1 + np.exp(-z.astype(np.float64)))).astype(np.float32)
    y = (rng.uniform(size=N_BINARY) < p).astype(np.int32)
    return z, p, y


def write_csv(path, columns: dict):
    names = list(columns)
    rows = zip(*(columns[n] for n in names), strict=True)
    lines = [",".join(names)] + [",".join(f"{v:.9g}" for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def json_report(argv, capsys):
    """Run ``jaxcal report ARGV --json - --quiet``; the parsed document (nothing on stderr)."""
    assert main([*argv, "--json", "-", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return json.loads(captured.out)


def check_schema(doc, *, fit):
    """The --json schema documented in jaxcal.cli (types and keys)."""
    assert doc["schema"] == "jaxcal.report/1"
    assert isinstance(doc["jaxcal_version"], str)
    settings = doc["settings"]
    assert set(settings) == {"n_bins", "resamples", "confidence", "seed", "interval", "folds"}
    assert settings["interval"] == "percentile bootstrap" and settings["confidence"] == 0.95
    for model in doc["models"]:
        assert set(model) - {"harness"} == {
            "name", "source", "n", "num_classes", "binary", "inputs", "metrics", "tests", "fit",
            "clinical", "verdict",
        }  # fmt: skip
        v = model["verdict"]
        assert set(v) == {
            "reads", "miscalibrated", "alpha", "ece", "consistency_p_value",
            "consistency_log10_p_value", "mean_confidence", "accuracy", "confidence_gap",
            "confidence_gap_se", "advice", "text",
        }  # fmt: skip
        assert v["text"].startswith(f"{model['name']}: {v['reads']}: ECE ")
        assert v["ece"] == model["metrics"]["ece"]
        assert v["consistency_p_value"] == model["tests"]["ece_consistency"]["p_value"]
        assert model["inputs"] in ("probs", "logits")
        with_interval = {"accuracy", "ece", "ece_quantile", "ece_l2_debiased", "brier", "log_loss"}
        with_interval |= {
            f"corp_{score}{term}"
            for score in ("brier", "log")
            for term in ("", "_miscalibration", "_discrimination", "_uncertainty")
        }
        with_interval |= {"aurc", "e_aurc", "augrc"}  # the selective-prediction block
        with_interval |= {f"risk_at_coverage_{c}" for c in (80, 90, 95)}
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
        tests = {"ks", "kuiper", "spiegelhalter", "ece_consistency", "skce"}
        assert set(model["tests"]) == tests
        for name, t in model["tests"].items():
            extra = {"estimate", "bandwidth", "method", "reliable", "expected_errors"}
            extra = extra if name == "skce" else set()
            assert set(t) == {"statistic", "p_value", "log10_p_value"} | extra
            assert 0 <= t["p_value"] <= 1 and t["log10_p_value"] <= 1e-6
        assert model["tests"]["skce"]["method"] in ("asymptotic", "block")
        assert model["tests"]["skce"]["bandwidth"] > 0
        if model["binary"]:
            clinical = model["clinical"]
            fitted = {"slope", "intercept", "citl"}
            summaries = {"ici", "e50", "e90", "emax"}
            assert set(clinical) == fitted | summaries | {"hosmer_lemeshow"}
            for name in fitted:
                c = clinical[name]
                assert c["low"] <= c["value"] <= c["high"], name
            for name in summaries:
                assert 0 <= clinical[name]["value"] <= 1 and clinical[name]["low"] is None
            hl = clinical["hosmer_lemeshow"]
            assert hl["statistic"] >= 0 and 0 < hl["p_value"] <= 1
        else:
            assert model["clinical"] is None
        if fit:
            f = model["fit"]
            assert set(f) == {"folds", "seed", "temperature_inputs", "results"}
            names = ["uncalibrated", "temperature_scaling"]
            names += (
                ["platt", "isotonic", "centred_isotonic", "venn_abers"]
                if model["binary"]
                else ["top_label_platt", "top_label_isotonic", "venn_abers"]
            )
            assert list(f["results"]) == names
            for r in f["results"].values():
                assert set(r) == {"ece", "log_loss", "brier", "accuracy"}
        else:
            assert model["fit"] is None
