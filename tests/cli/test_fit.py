"""``jaxcal report --fit`` (jaxcal/cli/_fit.py): cross-fitted calibrators, held-out metrics."""

import numpy as np

from jaxcal.cli import main
from tests.cli_helpers import binary, check_schema, json_report, multiclass
from tests.helpers import assert_close


def test_fit_shows_before_and_after_on_held_out_folds(tmp_path, capsys):
    z, p, y = multiclass(4, sharpen=0.4)  # under-confident: labels follow softmax(z / 0.4)
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
        "Venn-Abers (merged)",
    }
    before = rows["uncalibrated"]
    for name in ("temperature scaling", "top-label Platt", "top-label isotonic"):
        ece, _nll, brier, acc = rows[name]
        assert ece < before[0] / 2 and brier < before[2], name
        assert acc == before[3], name  # all three keep the argmax
    assert rows["temperature scaling"][1] < before[1]
    # Without logits, temperature scaling uses the log-probabilities and says so.
    np.savez(tmp_path / "probs_only.npz", probs=p, labels=y)
    doc = json_report(["report", str(tmp_path / "probs_only.npz"), "--fit"], capsys)
    check_schema(doc, fit=True)
    fit = doc["models"][0]["fit"]
    assert fit["temperature_inputs"] == "log_probs" and fit["folds"] == 5
    # The table prints 4 decimals; log-probabilities and logits give the same softmax.
    ece = fit["results"]["temperature_scaling"]["ece"]
    assert_close(ece, rows["temperature scaling"][0], atol=1e-4)


def test_binary_fit_and_several_files_side_by_side(tmp_path, capsys):
    _zb, pb, yb = binary(5)
    np.savez(tmp_path / "a.npz", probs=pb, labels=yb)
    np.savez(tmp_path / "b.npz", probs=np.clip(pb * 1.3, 0, 1), labels=yb)
    files = [str(tmp_path / "a.npz"), str(tmp_path / "b.npz")]
    doc = json_report(["report", *files, "--fit", "--bins", "10"], capsys)
    check_schema(doc, fit=True)
    assert [m["name"] for m in doc["models"]] == ["a", "b"]
    _a, b = (m["fit"]["results"] for m in doc["models"])
    assert b["platt"]["ece"] < b["uncalibrated"]["ece"]
    assert main(["report", *files, "--bins", "10", "--quiet"]) == 0
    header = capsys.readouterr().out.split("Metrics")[1].splitlines()[1]
    assert header.split() == ["metric", "95%", "interval", "a", "95%", "interval", "b"]
