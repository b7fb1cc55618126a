"""Papercuts of a newcomer's first hour with ``jaxcal report`` (issue 34, item 10):
every refusal comes before any computation and says what to do."""

import importlib.util
import json

import numpy as np
import pytest

from jaxcal.cli import _run, main
from tests.cli_helpers import N_BINARY, binary


@pytest.fixture
def no_computation(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the report started computing")

    monkeypatch.setattr(_run, "_prepare", refuse)


def test_plot_without_matplotlib_fails_before_computing(
    tmp_path, monkeypatch, capsys, no_computation
):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    _, p, y = binary()
    np.savez(tmp_path / "m.npz", probs=p, labels=y)
    assert main(["report", str(tmp_path / "m.npz"), "--plot", str(tmp_path / "r.png")]) == 2
    captured = capsys.readouterr()
    assert 'pip install "jaxcal[plot]"' in captured.err and captured.out == ""


def test_pandas_index_column_gets_a_hint(tmp_path, capsys, no_computation):
    _, p, y = binary()
    rows = "\n".join(f"{i},{a},{b}" for i, (a, b) in enumerate(zip(p, y, strict=True)))
    (tmp_path / "df.csv").write_text(",p,label\n" + rows + "\n")
    assert main(["report", str(tmp_path / "df.csv")]) == 2
    err = capsys.readouterr().err
    assert "index column pandas" in err and "index=False" in err and "--probs" in err


def test_text_labels_get_a_hint(tmp_path, capsys, no_computation):
    (tmp_path / "t.csv").write_text("p,diagnosis\n0.2,benign\n0.9,malignant\n")
    assert main(["report", str(tmp_path / "t.csv"), "--labels", "diagnosis"]) == 2
    err = capsys.readouterr().err
    assert "non-numeric value 'benign' in column 'diagnosis'" in err
    assert "Labels must be integers 0..K-1" in err and "factorize" in err


@pytest.mark.parametrize("option", [["--fit"], ["--plot", "r.png"], ["--by", "g"]])
def test_parquet_refusals_say_how_to_convert(tmp_path, monkeypatch, capsys, option, no_computation):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "preds.parquet").write_bytes(b"")
    assert main(["report", "preds.parquet", *option]) == 2
    err = capsys.readouterr().err
    assert "not available for Parquet input" in err and "numpy.savez" in err


def test_json_writes_float32_values_as_their_shortest_repr(tmp_path, capsys):
    _, p, y = binary()
    np.savez(tmp_path / "m.npz", probs=p, labels=y)
    assert main(["report", str(tmp_path / "m.npz"), "--bins", "10", "--json", "-", "--quiet"]) == 0
    text = capsys.readouterr().out
    doc = json.loads(text)
    ece = doc["models"][0]["metrics"]["ece"]["value"]
    assert repr(ece) == str(np.float32(ece)) and len(repr(ece)) <= 12
    assert doc["models"][0]["n"] == N_BINARY
