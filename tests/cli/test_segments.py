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


def _write_csv(path, p, y, seg, name="seg"):
    lines = [f"p,label,{name}"] + [f"{a:.9g},{b},{c}" for a, b, c in zip(p, y, seg, strict=True)]
    path.write_text("\n".join(lines) + "\n")


def test_by_text_column_of_a_csv_without_naming_the_scores(tmp_path, capsys):
    """D1: the --by column is no score column ('France' was read as a probability)."""
    p, y, country = _segmented(2)
    _write_csv(tmp_path / "c.csv", p, y, country, name="country")
    doc = json_report(
        ["report", str(tmp_path / "c.csv"), "--bins", "10", "--by", "country"], capsys
    )
    assert doc["models"][0]["binary"] and doc["models"][0]["segments"]["n_segments"] == 3
    numeric = np.arange(N_BINARY) % 4 + 2  # integer ids 2..5: not probabilities either
    _write_csv(tmp_path / "n.csv", p, y, numeric)
    doc = json_report(["report", str(tmp_path / "n.csv"), "--bins", "10", "--by", "seg"], capsys)
    assert doc["models"][0]["segments"]["n_segments"] == 4


def test_by_names_taken_as_written_and_p_values_in_one_format(tmp_path, capsys):
    """E5: '' printed as a blank name, ' 1' merged with '1', Holm p 0.0000 next to 1e-129."""
    p, y, _ = _segmented(3)
    seg = np.array(["", " 1", "1", "x"])[np.arange(N_BINARY) % 4]
    y = y.copy()
    y[seg == "x"] = 1  # a segment far off its scores: tiny p-values
    _write_csv(tmp_path / "e.csv", p, y, seg)
    args = ["report", str(tmp_path / "e.csv"), "--bins", "10", "--by", "seg", "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out.split("Calibration within segments")[1]
    lines = [line.strip() for line in out.splitlines()[3:7]]
    names = {next(n for n in ("''", "' 1'", "1 ", "x ") if line.startswith(n)) for line in lines}
    assert names == {"''", "' 1'", "1 ", "x "}  # four segments, two of them quoted
    p_value, holm = next(line for line in lines if line.startswith("x ")).split()[-2:]
    assert "e-" in p_value and "e-" in holm  # both from the log: no 0.0000


def test_by_a_continuous_column_is_binned_and_the_table_capped(tmp_path, capsys):
    """A5, E4: a continuous key made one segment per row (200 lines, family p 1e-60)."""
    _, p, y = binary(4)
    np.savez(tmp_path / "c.npz", probs=p, labels=y, score=p, ids=np.arange(N_BINARY) % 40)
    args = ["report", str(tmp_path / "c.npz"), "--bins", "10", "--quiet"]
    doc = json_report([*args[:-1], "--by", "score"], capsys)
    seg = doc["models"][0]["segments"]
    assert seg["binned"] == {"bins": 10, "distinct_values": len(np.unique(p))}
    assert (
        seg["n_segments"] == 10
        and seg["n_tested"] + sum(not r["tested"] for r in seg["rows"]) == 10
    )
    assert main([*args, "--by", "ids", "--max-segments", "3"]) == 0
    out = capsys.readouterr().out.split("Calibration within segments")[1]
    assert "40 segments;" in out and "... 37 more segments not shown" in out
    assert "40 segments excluded, not tested: fewer than 10 rows" in out  # 5 rows each
    assert "family-wise p-value (Holm) = 1.0000" in out
    assert main([*args, "--by", "ids", "--max-segments", "0"]) == 2
    assert "--max-segments must be an integer >= 1" in capsys.readouterr().err


def test_hosmer_lemeshow_line_is_not_under_the_interval_header(tmp_path, capsys):
    """E6: the statistic sat in the "95% interval" column."""
    _, p, y = binary(5)
    np.savez(tmp_path / "h.npz", probs=p, labels=y)
    assert main(["report", str(tmp_path / "h.npz"), "--bins", "10", "--quiet"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("Hosmer-Lemeshow"))
    assert line.startswith("Hosmer-Lemeshow test (10 groups), h: C = ") and ", p = " in line
