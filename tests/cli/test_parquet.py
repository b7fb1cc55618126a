"""``jaxcal report`` on Parquet files and folders (jaxcal/cli/_parquet.py): the streamed
report equals the one-shot metrics, columns are chosen as for CSV, errors are one line."""

from pathlib import Path

import numpy as np
import pytest

import jaxcal
from jaxcal.cli import main
from tests.cli_helpers import K, N, binary, json_report, multiclass
from tests.helpers import assert_close

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _value(metric) -> np.float32:
    """A reported value as the float32 it was computed in (JSON writes Python floats)."""
    return np.float32(metric["value"])


def _binary_file(tmp_path):
    _, p, y = binary()
    path = tmp_path / "scores.parquet"
    pq.write_table(pa.table({"score": p, "target": y}), path, row_group_size=64)
    return path, p, y


def test_binary_parquet_report_equals_the_one_shot_metrics(tmp_path, capsys):
    path, p, y = _binary_file(tmp_path)
    doc = json_report(["report", str(path), "--bins", "10", "--resamples", "0"], capsys)
    assert doc["schema"] == "jaxcal.report/1" and doc["settings"]["streamed"]
    (model,) = doc["models"]
    assert model["n"] == len(y) and model["binary"] and model["tests"] == {}
    m = model["metrics"]
    expected = {
        "ece": jaxcal.ece(p, y, n_bins=10),
        "mce": jaxcal.mce(p, y, n_bins=10),
        "ece_l2_debiased": jaxcal.ece(p, y, n_bins=10, norm="l2", debias=True),
        "brier": jaxcal.brier_score(p, y),
        "log_loss": jaxcal.log_loss(p, y),
        "accuracy": np.mean((p > 0.5) == y),
        "positive_rate": np.mean(y),
    }
    dec = jaxcal.brier_decomposition(p, y, n_bins=10)
    expected["brier_reliability"] = dec.reliability
    expected["brier_within_bin_covariance"] = dec.within_bin_covariance
    for name, value in expected.items():
        assert_close(_value(m[name]), value, err_msg=name)
    exact = float(jaxcal.ece(p, y, n_bins=10, binning="quantile"))
    assert abs(m["ece_quantile"]["value"] - exact) <= model["ece_quantile_bound"] + 1e-6
    corp = jaxcal.score_decomposition(p, y)
    # The buckets pool forecasts closer than 1/4100: CORP's MCB and DSC a little lower.
    assert_close(_value(m["corp_brier"]), corp.score)
    assert_close(_value(m["corp_brier_miscalibration"]), corp.miscalibration, atol=5e-3)


@pytest.mark.slow  # compiles the replicates' update and metrics: ~15 s CPU
def test_binary_parquet_report_has_poisson_bootstrap_intervals(tmp_path, capsys):
    path, _, _ = _binary_file(tmp_path)
    doc = json_report(["report", str(path), "--bins", "10", "--resamples", "8"], capsys)
    assert doc["settings"]["interval"] == "Poisson bootstrap (keyed by row number)"
    m = doc["models"][0]["metrics"]
    assert m["mce"]["low"] is None
    assert m["brier"]["low"] <= m["brier"]["value"] <= m["brier"]["high"]
    assert m["corp_brier"]["low"] <= m["corp_brier"]["value"] <= m["corp_brier"]["high"]


def test_multiclass_folder_with_column_globs_and_no_intervals(tmp_path, capsys):
    _, p, y = multiclass()
    folder = tmp_path / "preds"
    folder.mkdir()
    names = [f"p_{k}" for k in range(K)]
    for i, part in enumerate(np.array_split(np.arange(N), 3)):
        columns = {"id": part} | {n: p[part, k] for k, n in enumerate(names)} | {"y": y[part]}
        pq.write_table(pa.table(columns), folder / f"part-{i}.parquet")
    argv = ["report", str(folder), "--probs", "p_*", "--labels", "y", "--resamples", "0"]
    (model,) = json_report(argv, capsys)["models"]
    assert model["num_classes"] == K and model["n"] == N
    m = model["metrics"]
    assert_close(_value(m["ece"]), jaxcal.ece(p, y))
    assert_close(_value(m["classwise_ece"]), jaxcal.classwise_ece(p, y))
    assert_close(_value(m["top_label_ece"]), jaxcal.top_label_ece(p, y))
    assert_close(_value(m["accuracy"]), np.mean(p.argmax(1) == y))
    assert all(v["low"] is None for v in m.values())


def test_table_and_progress_bar(tmp_path, capsys):
    path, _, _ = _binary_file(tmp_path)
    assert main(["report", str(path), "--bins", "10", "--resamples", "0"]) == 0
    captured = capsys.readouterr()
    assert "streamed from Parquet" in captured.out and "N = 200, binary" in captured.out
    assert "equal-mass bins from 4100 buckets" in captured.out
    assert "100.0% 200/200 rows" in captured.err and "M rows/s" in captured.err


def test_parquet_errors_are_one_line(tmp_path, capsys):
    path, _, _ = _binary_file(tmp_path)
    np.savez(tmp_path / "other.npz", probs=np.full(3, 0.5), labels=np.zeros(3, int))
    holes = tmp_path / "holes.parquet"
    pq.write_table(pa.table({"p": pa.array([0.2, None], pa.float32()), "y": [0, 1]}), holes)
    cases = [
        (["--labels", "nope"], "no column 'nope' for the labels"),
        (["--probs", "q*"], "no column matches --probs 'q*'"),
        (["--logits"], "--logits is not available for Parquet"),
        (["--fit"], "--fit needs the predictions in memory"),
        (["--resamples", "-1"], "--resamples must be an integer >= 0"),
        ([str(tmp_path / "other.npz")], "report it apart from other files"),
    ]
    for extra, message in cases:
        assert main(["report", str(path), *extra, "--quiet"]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (extra, err)
    assert main(["report", str(holes), "--quiet"]) == 2
    assert "column 'p' has missing values" in capsys.readouterr().err


def _error(argv, capsys) -> str:
    """Run the report; it must fail with one line on stderr and exit code 2."""
    assert main(["report", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("jaxcal: error: ") and "Traceback" not in err
    return err


@pytest.mark.parametrize("rows", [200, 5000])  # batches of 1024 and of 8192 rows
def test_a_nan_in_any_row_exits_2_on_every_run(tmp_path, capsys, rows):
    """A1: the streamed report of a file with a NaN at row 70,000 exited 0 and printed '-'
    for ECE (after any earlier streamed call of that batch shape): Parquet input and
    ``--stream`` of an ``.npz``, the NaN in the first, a middle and the last row."""
    rng = np.random.default_rng(rows)
    p = rng.random(rows).astype(np.float32)
    y = (rng.random(rows) < p).astype(np.int32)
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"score": p, "target": y}), good)
    np.savez(tmp_path / "good.npz", probs=p, labels=y)
    argv = ["--bins", "10", "--resamples", "0"]
    for row in (0, rows // 2, rows - 1):
        q = p.copy()
        q[row] = np.nan
        bad = tmp_path / f"nan_{row}.parquet"
        pq.write_table(pa.table({"score": q, "target": y}), bad)
        np.savez(tmp_path / f"nan_{row}.npz", probs=q, labels=y)
        for source, extra in (("parquet", []), ("npz", ["--stream"])):
            # A clean run of the same shapes first: the bad one reads the kernel's summary.
            assert main(["report", str(good.with_suffix(f".{source}")), *argv, *extra]) == 0
            capsys.readouterr()
            err = _error([str(tmp_path / f"nan_{row}.{source}"), *argv, *extra], capsys)
            assert "must be finite; got nan" in err, (row, source, err)


def test_parquet_inputs_the_report_cannot_read_name_the_column(tmp_path, capsys):
    """A2, C2-C4: soft labels read as 0, text labels, a list column, a file without the
    column in a folder (read as nulls), an empty folder."""
    _, p, y = binary()
    soft = tmp_path / "soft.parquet"
    pq.write_table(pa.table({"score": p, "target": np.clip(p + 0.05, 0, 1)}), soft)
    assert "column 'target' must hold integer labels" in _error([str(soft)], capsys)
    text = tmp_path / "text.parquet"
    pq.write_table(pa.table({"score": p, "label": np.where(y == 1, "yes", "no")}), text)
    assert "column 'label' must hold integer (or bool) labels; got string" in _error(
        [str(text)], capsys
    )
    lists = tmp_path / "lists.parquet"
    pq.write_table(pa.table({"p": [[a, 1 - a] for a in p], "label": y}), lists)
    assert "column 'p' must hold numbers; got list" in _error([str(lists)], capsys)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    pq.write_table(pa.table({"p": p, "label": y}), mixed / "a.parquet")
    pq.write_table(pa.table({"q": p, "label": y}), mixed / "b.parquet")
    err = _error([str(mixed), "--probs", "p"], capsys)
    assert "no column ['p'] in" in err and "b.parquet" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no Parquet file" in _error([str(empty)], capsys)


def test_streamed_footnotes_say_what_the_report_holds(tmp_path, capsys):
    """C7, D4, D5: the footnote told a Parquet user to drop a --stream never given, and a
    multiclass report of "CORP rows (binary)" it did not have; --help said 4096 buckets."""
    _, p, y = multiclass()
    path = tmp_path / "multi.parquet"
    pq.write_table(pa.table({f"p_{k}": p[:, k] for k in range(K)} | {"y": y}), path)
    assert main(["report", str(path), "--labels", "y", "--resamples", "0", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "without --stream (on an .npz sample)" not in out
    assert "CORP rows: isotonic" not in out and "Multiclass input has no CORP rows" in out
    page = (Path(__file__).parents[2] / "docs" / "guides" / "report.md").read_text()
    assert "fine histogram (4096 buckets)" not in page
    assert "4110 at the default 15 bins" in page
