"""``jaxcal report --harness`` (jaxcal/cli/_harness.py): the presets' own numbers."""

import math

import numpy as np
import pytest

from jaxcal import presets
from jaxcal.cli import _harness, main
from jaxcal.cli._io import Model
from tests.cli_helpers import binary, check_schema, json_report
from tests.helpers import assert_close

DEMO = ["report", "--demo", "--no-fit", "--resamples", "50"]


def _direct(confidence, correct, logits, labels) -> dict:
    out = {
        k: float(v) for k, v in presets.helm_calibration(confidence, correct).helm_stats().items()
    }
    out["hle_calibration_error"] = float(presets.hle_calibration_error(confidence, correct).value)
    tuned = presets.temperature_tuned(logits, labels)._asdict()
    tuned.pop("at_bound")  # a flag of the Python result, not a row of the block
    out |= {k: float(v) for k, v in tuned.items()}
    return out


def test_demo_harness_numbers_are_the_presets(capsys):
    doc = json_report([*DEMO, "--harness"], capsys)
    check_schema(doc, fit=False)
    assert main([*DEMO, "--harness", "--quiet"]) == 0
    out = capsys.readouterr().out
    data = np.load("jaxcal/data/digits_gaussian_nb.npz")
    p, y, z = data["probs"], data["labels"], data["logits"]
    confidence, correct = p.max(1), (p.argmax(1) == y).astype(np.int32)
    harness = doc["models"][0]["harness"]
    assert harness["temperature_inputs"] == "logits"
    for key, value in _direct(confidence, correct, z, y).items():
        assert_close(np.float32(harness[key]), np.float32(value), err_msg=key)
    labels = dict(_harness.ROWS)
    row = next(r for r in out.splitlines() if r.startswith(labels["hle_calibration_error"]))
    assert row.split()[-2] == f"{harness['hle_calibration_error']:.4f}"
    assert "Harness presets (--harness)" in out and "need N >= 100" in out


def test_binary_harness_uses_log_odds_as_two_logits(tmp_path, capsys):
    z, p, y = binary(0)
    np.savez(tmp_path / "preds.npz", probs=p, labels=y, logits=z)
    doc = json_report(["report", str(tmp_path / "preds.npz"), "--bins", "10", "--harness"], capsys)
    harness = doc["models"][0]["harness"]
    rows = np.stack([1 - p, p], axis=1)
    confidence, correct = rows.max(1), (rows.argmax(1) == y).astype(np.int32)
    two = np.stack([np.zeros_like(z), z], axis=1)  # softmax(0, z) = (1 - sigmoid z, sigmoid z)
    for key, value in _direct(confidence, correct, two, y).items():
        assert_close(np.float32(harness[key]), np.float32(value), err_msg=key)


def test_harness_below_one_bin_leaves_hle_and_temperature_out():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), size=60).astype(np.float32)
    y = rng.integers(0, 3, 60).astype(np.int32)
    got = _harness.compute_harness(Model("m", "m", p, y, None, "probs"))
    assert math.isnan(got["hle_calibration_error"]) and math.isnan(got["temperature"])
    assert got["temperature_inputs"] == "log_probs"
    h = presets.helm_calibration(p.max(1), (p.argmax(1) == y).astype(np.int32))
    assert_close(np.float32(got["ece_10_bin"]), h.ece_10_bin)


def test_help_documents_the_new_flag_and_blocks(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    out = capsys.readouterr().out
    for text in ("--harness", "HLE", "selective-prediction", "SKCE", "risk-coverage"):
        assert text in out, text
