"""The verdict line of ``jaxcal report`` (jaxcal/cli/_verdict.py): the documented rule on
the demo and on synthetic calibrated, over- and under-confident predictions."""

import json

import numpy as np
import pytest

from jaxcal.cli import Model, compute_report, main
from jaxcal.cli._verdict import ALPHA, confidence_gap, verdict
from tests.cli_helpers import N_BINARY, check_schema


def _binary(temperature: float, seed: int = 0):
    """Labels drawn from calibrated probabilities; the predictions are those probabilities'
    log-odds divided by ``temperature`` (< 1: over-confident, > 1: under-confident)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=N_BINARY) * 2
    y = (rng.uniform(size=N_BINARY) < 1 / (1 + np.exp(-z))).astype(np.int32)
    p = (1 / (1 + np.exp(-z / temperature))).astype(np.float32)
    return Model(f"T={temperature}", "synthetic", p, y, None, "probs")


@pytest.mark.parametrize(
    ("temperature", "reads"),
    [
        (1.0, "no evidence of miscalibration"),
        (0.35, "over-confident"),
        (3.0, "under-confident"),
    ],
)
def test_verdict_reads_synthetic_predictions(temperature, reads):
    model = _binary(temperature)
    result = compute_report(model, n_bins=10, n_resamples=200, seed=0)
    v = verdict(model, result, 200)
    assert v["reads"] == reads, v["text"]
    assert v["miscalibrated"] == (v["consistency_p_value"] < ALPHA)
    assert v["ece"] == result["metrics"]["ece"]
    if reads == "no evidence of miscalibration":
        assert v["advice"] == "no recalibration indicated"
    else:
        assert "--fit" in v["advice"]  # without --fit: suggests it
        assert (v["confidence_gap"] > 0) == (reads == "over-confident")


def test_confidence_gap_binary_and_multiclass():
    p = np.array([0.9, 0.2, 0.6, 0.5])
    y = np.array([1, 1, 0, 0])
    conf, acc, gap, se = confidence_gap(p, y)
    # confidences 0.9, 0.8, 0.6, 0.5; correct: yes, no, no, yes (0.5 predicts class 0)
    assert np.isclose(conf, 0.7) and acc == 0.5 and np.isclose(gap, 0.2) and se > 0
    probs = np.array([[0.7, 0.3], [0.4, 0.6]])
    assert confidence_gap(probs, np.array([0, 0]))[:3] == pytest.approx((0.65, 0.5, 0.15))


def _result(p_value, fit=None):
    ece = {"value": 0.16, "low": 0.14, "high": 0.18}
    test = {"statistic": 0.16, "p_value": p_value, "log10_p_value": np.log10(p_value)}
    return {"metrics": {"ece": ece}, "tests": {"ece_consistency": test}, "fit": fit}


def _fit(**ece):
    return {"results": {k: {"ece": v} for k, v in ece.items()}}


def test_verdict_advice_follows_the_fit():
    model = Model(
        "m", "m", np.full(100, 0.99, np.float32), np.r_[np.ones(80), np.zeros(20)], None, "probs"
    )
    v = verdict(model, _result(1 / 201), 200)
    assert v["reads"] == "over-confident"
    assert "p = 0.0050 (the smallest 200 resamples can give)" in v["text"]
    assert "ECE 0.1600 [0.1400, 0.1800]" in v["text"] and "Run it with --fit" in v["text"]
    v = verdict(model, _result(0.001, _fit(uncalibrated=0.16, temperature_scaling=0.05)))
    assert v["advice"] == (
        "fit temperature scaling: --fit shows it lowers the held-out ECE from 0.1600 to 0.0500"
    )
    fit = _fit(uncalibrated=0.16, temperature_scaling=0.05, isotonic=0.03)
    assert (
        "(isotonic regression lowers it most, to 0.0300)"
        in verdict(model, _result(0.001, fit))["advice"]
    )
    fit = _fit(uncalibrated=0.16, temperature_scaling=0.2, isotonic=0.03)
    assert verdict(model, _result(0.001, fit))["advice"].startswith("fit isotonic regression:")
    fit = _fit(uncalibrated=0.16, temperature_scaling=0.2, isotonic=0.17)
    assert verdict(model, _result(0.001, fit))["advice"].startswith("no calibrator of --fit")
    # Not rejected: nothing to do, whatever --fit says.
    assert verdict(model, _result(0.3, fit))["reads"] == "no evidence of miscalibration"


def test_verdict_of_the_demo(tmp_path, capsys):
    js = tmp_path / "demo.json"
    assert main(["report", "--demo", "--quiet", "--json", str(js)]) == 0
    doc = json.loads(js.read_text())
    check_schema(doc, fit=True)
    nb, mlp = (m["verdict"] for m in doc["models"])
    assert nb["reads"] == "over-confident" and nb["miscalibrated"]
    assert nb["advice"].startswith("fit temperature scaling: --fit shows it lowers")
    assert mlp["reads"] == "no evidence of miscalibration"
    top = capsys.readouterr().out.split("Metrics, with")[0]  # the verdict comes first
    assert "GaussianNB: over-confident: ECE 0.1623 [" in top and "MLP: no evidence" in top
