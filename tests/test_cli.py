"""The ``jaxcal report`` command: demo, files, and clear errors with exit code 2."""

import subprocess
import sys

import numpy as np

from jaxcal.cli import main


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


def test_report_on_an_npz_file_matches_the_metrics(tmp_path, capsys):
    import jaxcal

    rng = np.random.default_rng(0)
    p = rng.random(200)
    y = (rng.random(200) < p).astype(int)
    np.savez(tmp_path / "preds.npz", probs=p, labels=y)
    assert main(["report", str(tmp_path / "preds.npz"), "--bins", "10"]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("ECE (l1, 10 uniform bins)"))
    assert float(line.split()[-1]) == round(float(jaxcal.ece(p, y, n_bins=10)), 4)


def test_bad_files_exit_2_without_traceback(tmp_path, capsys):
    np.savez(tmp_path / "nolabels.npz", probs=np.ones(3))
    (tmp_path / "garbage.npz").write_bytes(b"not a zip")
    np.savez(tmp_path / "pickled.npz", probs=np.array([{"a": 1}], dtype=object), labels=np.zeros(1))
    np.savez(tmp_path / "offsimplex.npz", probs=np.full((3, 2), 0.3), labels=np.zeros(3, int))
    cases = {
        "nolabels.npz": "missing key",
        "garbage.npz": "cannot read",
        "pickled.npz": "cannot read",
        "offsimplex.npz": "rows must sum to 1",
        "absent.npz": "cannot read",
    }
    for name, message in cases.items():
        assert main(["report", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert main(["report"]) == 2
    assert main(["report", "--demo", "--bins", "0"]) == 2


def test_console_script_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "jaxcal.cli", "report", "--demo"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "top-label ECE" in result.stdout
