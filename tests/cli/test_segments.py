"""``jaxcal report FILE --by COLUMN`` (jaxcal/cli/_segments.py): the library's numbers."""

import numpy as np

from jaxcal import stats
from jaxcal.cli import main
from tests.cli_helpers import N_BINARY, binary, json_report
from tests.helpers import assert_close


def _segmented(seed=0):
    _, p, y = binary(seed)
    country = np.array(["fr", "de", "jp"])[np.arange(N_BINARY) % 3]
    return p, y, country


def test_by_csv_column_table_and_json_match_the_library(tmp_path, capsys):
    p, y, country = _segmented()
    path = tmp_path / "preds.csv"
    lines = ["p,label,country"] + [
        f"{a:.9g},{b},{c}" for a, b, c in zip(p, y, country, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")
    args = ["report", str(path), "--probs", "p", "--bins", "10", "--by", "country"]
    assert main([*args, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "Calibration within segments of 'country'" in out
    assert "family-wise p-value (Holm)" in out
    doc = json_report(args, capsys)
    seg = doc["models"][0]["segments"]
    ids = np.unique(country, return_inverse=True)[1]
    r = stats.multicalibration_error(p, y, ids, n_groups=3)
    assert seg["by"] == "country" and seg["n_segments"] == 3
    holm = [row["p_holm"] for row in seg["rows"]]
    assert holm == sorted(holm)
    for row in seg["rows"]:
        g = ["de", "fr", "jp"].index(row["value"])
        assert row["n"] == int(np.sum(country == row["value"]))
        assert_close(np.float32(row["statistic"]), r.statistic[g])
        assert_close(np.float32(row["p_holm"]), r.p_holm[g])
    assert_close(np.float32(seg["family_p_value"]), r.family_p_value)


def test_by_npz_key_and_errors(tmp_path, capsys):
    p, y, _ = _segmented(1)
    group = np.arange(N_BINARY) % 4
    np.savez(tmp_path / "preds.npz", probs=p, labels=y, group=group)
    doc = json_report(
        ["report", str(tmp_path / "preds.npz"), "--bins", "10", "--by", "group"],
        capsys,
    )
    assert doc["models"][0]["segments"]["n_segments"] == 4
    assert main(["report", str(tmp_path / "preds.npz"), "--by", "nope", "--quiet"]) == 2
    assert "no key 'nope'" in capsys.readouterr().err
    assert main(["report", "--demo", "--by", "x", "--quiet"]) == 2
