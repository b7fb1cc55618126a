"""``jaxcal report --sql DB --table T`` and ``--state FILE`` (jaxcal/cli/_warehouse.py):
the report of DuckDB's state equals the streamed Parquet report of the same rows, a stored
state reports the same numbers, segments become columns, errors are one line."""

import numpy as np
import pytest

from jaxcal.cli import main
from tests.cli_helpers import binary, json_report

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _db(tmp_path):
    _, p, y = binary()
    path = tmp_path / "preds.duckdb"
    con = duckdb.connect(str(path))
    t = pa.table({"score": p, "target": y, "region": np.array(["n", "s"])[np.arange(len(y)) % 2]})
    con.execute("CREATE TABLE preds AS SELECT * FROM t")
    con.close()
    pq.write_table(t.select(["score", "target"]), tmp_path / "preds.parquet")
    return path


@pytest.mark.slow
def test_sql_and_state_reports_equal_the_parquet_report(tmp_path, capsys):
    db = _db(tmp_path)
    state = tmp_path / "state.parquet"
    cols = ["--probs", "score", "--labels", "target", "--bins", "10"]
    doc = json_report(
        [
            "report",
            "--sql",
            str(db),
            "--table",
            "preds",
            *cols,
            "--resamples",
            "8",
            "--state",
            str(state),
        ],
        capsys,
    )
    (model,) = doc["models"]
    ref = json_report(
        ["report", str(tmp_path / "preds.parquet"), *cols, "--resamples", "0"], capsys
    )["models"][0]
    assert model["n"] == ref["n"]
    for key in ("ece", "mce", "brier", "log_loss", "ece_quantile", "corp_brier"):
        np.testing.assert_allclose(
            model["metrics"][key]["value"], ref["metrics"][key]["value"], rtol=1e-5, atol=1e-7
        )
    low, high = model["metrics"]["brier"]["low"], model["metrics"]["brier"]["high"]
    assert low < model["metrics"]["brier"]["value"] < high
    assert model["metrics"]["ece_quantile"]["low"] is None  # replicates at --bins only
    stored = json_report(["report", "--state", str(state), "--bins", "10"], capsys)
    assert stored["models"][0]["metrics"] == model["metrics"]
    assert main(["report", "--state", str(state), "--bins", "10", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "streamed from a state table" in text and "rows never left" in text


def test_errors_are_one_line(tmp_path, capsys):
    db = _db(tmp_path)
    for argv, message in (
        (["--sql", str(db), "--probs", "score"], "--sql needs --table"),
        (["--sql", str(db), "--table", "nope"], "cannot read table 'nope'"),
        (["--state", str(tmp_path / "x.parquet")], "no such file"),
        (["--state", str(db), "--table", "preds"], "--table goes with --sql"),
        (["--sql", str(db), "--table", "preds", "--plot", "x.png"], "needs the rows"),
    ):
        assert main(["report", *argv, "--quiet"]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
