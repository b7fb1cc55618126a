"""The report's clinical block (jaxcal/cli/_clinical.py) gives the library's numbers."""

import numpy as np

import jaxcal
from tests.cli_helpers import json_report
from tests.helpers import assert_close


def test_binary_report_prints_the_library_clinical_numbers(tmp_path, capsys):
    rng = np.random.default_rng(0)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(int)
    np.savez(tmp_path / "b.npz", probs=p, labels=y)
    doc = json_report(["report", str(tmp_path / "b.npz"), "--no-fit", "--resamples", "20"], capsys)
    clinical = doc["models"][0]["clinical"]
    fit = jaxcal.stats.calibration_slope_intercept(p, y)
    for name in ("slope", "intercept", "citl"):
        wald = getattr(fit, name)
        got = clinical[name]
        assert_close(
            np.float32([got["value"], got["low"], got["high"]]),
            np.stack([wald.estimate, wald.low, wald.high]),
            err_msg=name,
        )
    ici = jaxcal.ici(p, y)
    for name in ("ici", "e50", "e90", "emax"):
        assert_close(np.float32(clinical[name]["value"]), getattr(ici, name))
    hl = jaxcal.stats.hosmer_lemeshow_test(p, y)
    assert_close(np.float32(clinical["hosmer_lemeshow"]["statistic"]), hl.statistic)
    assert_close(np.float32(clinical["hosmer_lemeshow"]["p_value"]), hl.p_value)


def test_multiclass_report_has_no_clinical_block(capsys):
    doc = json_report(["report", "--demo", "--no-fit", "--resamples", "20"], capsys)
    assert all(model["clinical"] is None for model in doc["models"])
