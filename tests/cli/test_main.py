"""``jaxcal report``'s entry points and outputs: the table, --plot and --json files, --help.

The data and checks shared with the other test_cli files are in tests/cli_helpers.py.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxcal._core import cache_dir as _cache
from jaxcal.cli import main
from tests.cli_helpers import binary, check_schema, multiclass


def test_demo_prints_the_metrics_table(capsys):
    assert main(["report", "--demo"]) == 0
    out = capsys.readouterr().out
    assert "GaussianNB" in out and "N = 899, 10 classes" in out
    for row in (
        "ECE (l1, 15 uniform bins)",
        "classwise ECE",
        "top-label ECE",
        "Brier score",
        "log loss",
    ):
        assert row in out
    # E7: two different quantities were both named "Brier" (the sum over classes and
    # the top-label confidence's CORP score); the CORP MCB's bias was not footnoted.
    assert "Brier score (sum over classes)" in out
    assert "top-label Brier, CORP decomposition" in out
    assert "CORP miscalibration (MCB) are biased upwards" in out


def test_console_script_entry_point():
    # A fresh process loads the compiled kernels from the cache folder (conftest.py sets
    # JAXCAL_CACHE_DIR) or compiles them: --no-fit skips the calibrators, whose
    # cross-fitting the in-process demo test above already runs.
    argv = [sys.executable, "-m", "jaxcal.cli", "report", "--demo", "--no-fit"]
    # The on-disk store is on by default (in this worker's folder, conftest.py).
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "top-label ECE" in result.stdout
    if _cache.cache_disabled() or not _cache.store_enabled():
        return
    # A second process reads the stored executables back and prints the same report.
    again = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    assert again.stdout == result.stdout
    kernels = _cache.default_cache_dir() / "kernels"
    assert any(kernels.glob("report-*.bin")), kernels


def test_plot_and_json_files_are_written(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import matplotlib.image

    _z, p, y = multiclass(6)
    np.savez(tmp_path / "m.npz", probs=p, labels=y)
    png, js = tmp_path / "diagram.png", tmp_path / "report.json"
    argv = ["report", str(tmp_path / "m.npz"), "--plot", str(png), "--json", str(js)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert f"written to {png}" in captured.out and "ECE (l1, 15 uniform bins)" in captured.out
    assert (
        "bootstrap resamples ... done" in captured.err and f"writing {png} ... done" in captured.err
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 30_000
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 400 and image.shape[1] > 800 and image[..., :3].std() > 0.05
    check_schema(json.loads(js.read_text()), fit=False)
    # Nothing is written unless asked; --quiet silences the progress.
    before = sorted(tmp_path.iterdir())
    assert main(["report", str(tmp_path / "m.npz"), "--quiet"]) == 0
    assert capsys.readouterr().err == "" and sorted(tmp_path.iterdir()) == before


def test_help_documents_the_formats(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for text in (
        ".npz",
        ".npy",
        ".csv",
        "--labels LABELS.npy",
        "--json",
        "--plot",
        "--fit",
        "--quiet",
        "--stream",
        "--no-cache",
        "JAXCAL_NO_COMPILATION_CACHE=1",
        "~/.cache/jaxcal",
    ):
        assert text in out


def test_help_is_plain_text_with_the_options_first(capsys):
    """N6: --help was 213 lines of reStructuredText with the options at the end; now the
    options come first, in plain text, and the reference lives on the report's docs page."""
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    out = capsys.readouterr().out
    assert len(out.splitlines()) < 100
    assert out.index("--demo ") < out.index("input files") < out.index("reference:")
    for markup in ("``", ":func:", "::", ":mod:"):
        assert markup not in out, markup
    assert 'pip install "jaxcal[plot]"' in out and "docs/guides/report.md" in out


def test_report_page_is_the_reference_of_every_row_and_key():
    """Every metric and test NAME of the JSON, and every key of the verdict, is on the page."""
    from jaxcal.cli import ROW_ORDER
    from jaxcal.cli._selective import KEYS

    page = (Path(__file__).parents[2] / "docs" / "guides" / "report.md").read_text()
    names = [*ROW_ORDER, *KEYS, "ks", "kuiper", "spiegelhalter", "ece_consistency", "skce"]
    names += ["consistency_p_value", "confidence_gap_se", "mean_confidence", "advice"]
    for name in names:
        assert f"`{name}`" in page or f'"{name}"' in page, name
    assert "## The verdict" in page and "### The JSON schema" in page


class _ClosedPipe:
    """stdout whose reader has gone (`jaxcal report f.npz | head`)."""

    def __init__(self, fd):
        self.fd = fd

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        pass

    def fileno(self):
        return self.fd


def test_closed_pipe_ends_quietly(tmp_path, monkeypatch, capsys):
    _z, p, y = binary(5)
    np.savez(tmp_path / "a.npz", probs=p, labels=y)
    with open(tmp_path / "stdout", "w") as sink:
        monkeypatch.setattr(sys, "stdout", _ClosedPipe(sink.fileno()))
        code = main(["report", str(tmp_path / "a.npz"), "--bins", "10", "--quiet"])
    assert code == 1  # no traceback: main returns, as for `| head`
    assert capsys.readouterr().err == ""
