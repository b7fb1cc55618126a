"""``jaxcal report``'s numbers (jaxcal/cli/_report.py) are the library's."""

import numpy as np

import jaxcal
from jaxcal.cli import main
from tests.cli_helpers import check_schema, json_report
from tests.helpers import assert_close


def test_report_on_an_npz_file_matches_the_metrics(tmp_path, capsys):
    rng = np.random.default_rng(0)
    p = rng.random(200)
    y = (rng.random(200) < p).astype(int)
    np.savez(tmp_path / "preds.npz", probs=p, labels=y)
    assert main(["report", str(tmp_path / "preds.npz"), "--bins", "10"]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("ECE (l1, 10 uniform bins)"))
    assert float(line.split()[-1]) == round(float(jaxcal.ece(p, y, n_bins=10)), 4)


def test_demo_json_has_the_schema_and_the_library_numbers(capsys):
    doc = json_report(["report", "--demo"], capsys)
    check_schema(doc, fit=True)
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
    # E9: the shipped logits are the log of the shipped probabilities; GaussianNB's own
    # log-probabilities (to -3000, floored at -1e4) made temperature scaling fit T = 563
    # and read ECE 0.16 -> 0.62, a correct fit that looked like a bug.
    assert np.all(data["logits"] >= np.log(np.finfo(np.float32).tiny))
    assert fit["temperature_scaling"]["ece"] < metrics["ece"]["value"] / 2
    assert fit["temperature_scaling"]["brier"] < fit["uncalibrated"]["brier"]


def test_demo_json_has_the_corp_decomposition_of_the_library(capsys):
    doc = json_report(["report", "--demo", "--no-fit", "--resamples", "50"], capsys)
    data = np.load("jaxcal/data/digits_gaussian_nb.npz")
    p, y = data["probs"], data["labels"]
    metrics = doc["models"][0]["metrics"]
    for score in ("brier", "log"):
        d = jaxcal.score_decomposition(p, y, score=score, reduction="top_label")
        for field, value in zip(d._fields, d, strict=True):
            key = f"corp_{score}" if field == "score" else f"corp_{score}_{field}"
            assert_close(np.float32(metrics[key]["value"]), value, err_msg=key)
        m = {f: metrics[f"corp_{score}_{f}"]["value"] for f in d._fields[1:]}
        total = m["miscalibration"] - m["discrimination"] + m["uncertainty"]
        assert_close(np.float32(total), np.float32(metrics[f"corp_{score}"]["value"]))
