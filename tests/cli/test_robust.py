"""``jaxcal report``'s defences (issue 20, defects D10, D12, D16, D22, D25 of the findings).

Arguments are range-checked and destinations probed before any work; CSV files are read
by NumPy's parser (BOM-aware, strict about cells, the column and row named in errors);
``.npz`` members are memory-mapped; long phases show their running time on stderr. The
report kernel is never reached here (``_prepare`` is replaced by a probe), so nothing
compiles.
"""

import io
import zipfile

import numpy as np
import pytest

from jaxcal.cli import _run, main
from jaxcal.cli._io import InputError, load_csv, load_npz
from jaxcal.cli._progress import Progress
from tests.cli_helpers import multiclass


class _Reached(Exception):
    """Raised by the probe in place of the report kernel: the input passed every check."""

    def __init__(self, models):
        super().__init__("reached the report kernel")
        self.models = models


@pytest.fixture
def probe(monkeypatch):
    """Stop ``main`` where the kernels would be traced; the exception holds the models."""

    def stop(models, args, fit):
        raise _Reached(models)

    monkeypatch.setattr(_run, "_prepare", stop)
    return _Reached


def _error(argv, capsys):
    """Run ``jaxcal report ARGV``: exit code 2 and one line on stderr; that line."""
    assert main(["report", *argv]) == 2, argv
    captured = capsys.readouterr()
    assert captured.out == "", argv
    err = captured.err
    assert err.startswith("jaxcal: error: ") and err.count("\n") == 1, (argv, err)
    return err


@pytest.fixture
def good(tmp_path):
    _, p, y = multiclass(0)
    np.savez(tmp_path / "good.npz", probs=p, labels=y)
    return str(tmp_path / "good.npz")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seed", str(2**63)], "--seed must be an integer >= 0 and <= 9223372036854775807"),
        (["--seed", "-1"], "--seed must be an integer >= 0"),
        (["--resamples", "1"], "--resamples must be >= 2 for the in-memory report"),
        (["--resamples", "0"], "0 (no intervals) is for the streamed report"),  # E1
        (["--max-segments", "0"], "--max-segments must be an integer >= 1"),
        (["--bins", "0"], "--bins must be an integer >= 1"),
        (["--bins", str(10**30)], "--bins must be an integer >= 1 and <= 1000000"),
        (["--folds", str(10**9)], "--folds must be an integer >= 2 and <= 10000"),
    ],
)
def test_numeric_arguments_are_range_checked(good, argv, message, probe, capsys):
    """D10: --seed 2**63 was an OverflowError traceback; --resamples 1 reached the library."""
    assert message in _error([good, *argv], capsys)


def test_largest_seed_is_accepted(good, probe):
    with pytest.raises(probe):
        main(["report", good, "--seed", str(2**63 - 1), "--quiet"])


def test_destinations_are_checked_before_computing(good, tmp_path, probe, capsys):
    """D22: an unwritable --json / --plot failed only after the whole report."""
    (tmp_path / "folder.png").mkdir()
    for argv, message in [
        (["--json", str(tmp_path / "absent" / "x.json")], "does not exist"),
        (["--json", str(tmp_path)], "is a folder"),
        (["--plot", str(tmp_path / "folder.png")], "is a folder"),
        (["--plot", "/proc/x.png"], "cannot write in /proc"),
    ]:
        assert message in _error([good, *argv], capsys)
    with pytest.raises(probe):  # a writable destination passes (and is not created)
        main(["report", good, "--json", str(tmp_path / "out.json"), "--quiet"])
    assert not (tmp_path / "out.json").exists()


def _csv(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def test_csv_with_a_byte_order_mark(tmp_path):
    """D16: Excel's "CSV UTF-8" starts with a BOM, which hid the label column."""
    path = _csv(tmp_path, "excel.csv", "label,p\r\n1,0.75\r\n0,0.25\r\n", "utf-8-sig")
    model = load_csv(path)
    np.testing.assert_array_equal(model.labels, [1, 0])
    np.testing.assert_array_equal(model.probs, np.float32([0.75, 0.25]))


def test_csv_cells_must_be_plain_numbers(tmp_path):
    """D22: float('1_0') is 10.0; the parser refuses the cell and names it."""
    path = _csv(tmp_path, "underscore.csv", "p,label\n0.5,1\n0.25,1_0\n")
    with pytest.raises(InputError, match=r"non-numeric value '1_0' in column 'label', line 3"):
        load_csv(path)


def test_csv_names_the_column_of_a_bad_value(tmp_path):
    """D22: an extra id column gave "`probs` must lie in [0, 1]; got 199.0" (no column)."""
    path = _csv(tmp_path, "id.csv", "id,p,label\n1,0.5,1\n199,0.25,0\n")
    with pytest.raises(
        InputError, match=r"column 'id' must hold probabilities .* 199.0 in data row 2"
    ):
        load_csv(path)
    model = load_csv(path, probs_cols="p")
    np.testing.assert_array_equal(model.probs, np.float32([0.5, 0.25]))
    nan = _csv(tmp_path, "nan.csv", "p,label\n0.5,1\n0.5,nan\n")
    with pytest.raises(InputError, match=r"column 'label' must be finite; got nan in data row 2"):
        load_csv(nan)


def test_csv_quoted_cells_and_text_columns(tmp_path):
    """Quoted numbers parse; a text column that is not read does not matter."""
    path = _csv(tmp_path, "quoted.csv", 'name,p,label\n"a, b","0.5",1\nc,0.25,0\n')
    model = load_csv(path, probs_cols="p")
    np.testing.assert_array_equal(model.labels, [1, 0])


def test_renormalize_divides_rounded_rows(tmp_path, probe, capsys):
    """D12 (CLI part): rows rounded to 2 decimals are refused, or renormalized on request."""
    _, p, y = multiclass(0)
    rounded = np.round(p.astype(np.float64), 2)
    assert np.abs(rounded.sum(1) - 1).max() > 0.01
    np.savez(tmp_path / "rounded.npz", probs=rounded, labels=y)
    argv = [str(tmp_path / "rounded.npz")]
    message = _error(argv, capsys)
    # C6: the command-line options, not the library's keyword and jax.nn.softmax.
    assert "pass --renormalize" in message and "give --logits" in message
    assert "renormalize=True" not in message and "jax.nn.softmax" not in message
    with pytest.raises(probe) as reached:
        main(["report", *argv, "--renormalize", "--quiet"])
    (model,) = reached.value.models
    np.testing.assert_allclose(model.probs.sum(1), 1, rtol=1e-6)  # float32 row sums
    np.testing.assert_allclose(model.probs, rounded / rounded.sum(1, keepdims=True), rtol=1e-6)


def test_npz_members_are_memory_mapped(tmp_path):
    """D25: np.load(.npz) copies each member; stored members are mapped instead."""
    _, p, y = multiclass(0)
    np.savez(tmp_path / "stored.npz", probs=p, labels=y)
    model = load_npz(tmp_path / "stored.npz")
    assert isinstance(model.probs, np.memmap) and isinstance(model.labels, np.memmap)
    np.testing.assert_array_equal(model.probs, p)
    np.testing.assert_array_equal(model.labels, y)
    np.savez_compressed(tmp_path / "deflated.npz", probs=p, labels=y)
    model = load_npz(tmp_path / "deflated.npz")
    assert not isinstance(model.probs, np.memmap)
    np.testing.assert_array_equal(model.probs, p)


def test_truncated_npz_is_an_input_error(tmp_path):
    _, p, y = multiclass(0)
    np.savez(tmp_path / "whole.npz", probs=p, labels=y)
    data = (tmp_path / "whole.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"cannot read as \.npz"):
        load_npz(tmp_path / "cut.npz")
    buffer = io.BytesIO()  # a member whose data ends early inside an intact archive
    with zipfile.ZipFile(buffer, "w") as archive:
        whole = io.BytesIO()
        np.save(whole, p)
        archive.writestr("probs.npy", whole.getvalue()[:1000])
        archive.writestr("labels.npy", b"")
    (tmp_path / "short.npz").write_bytes(buffer.getvalue())
    with pytest.raises(InputError, match=r"cannot read as \.npz"):
        load_npz(tmp_path / "short.npz")


def test_progress_shows_running_time_and_stays_quiet_for_quick_phases(capsys):
    """D25: one progress line covered 160 silent seconds; now a heartbeat line is added."""
    progress = Progress(quiet=False, interval=0.05)
    with progress("quick", delay=5.0):
        pass
    assert capsys.readouterr().err == ""
    with progress("long"):
        progress.stop.wait(0.3)
    err = capsys.readouterr().err
    assert err.startswith("jaxcal: long ...")
    assert err.splitlines()[-1].startswith("jaxcal: long ... done (")
    assert err.count("\n") >= 3, err  # the start line, heartbeats, the end
    with Progress(quiet=True, interval=0.01)("silent"):
        pass
    assert capsys.readouterr().err == ""


def test_help_and_bad_arguments_answer_before_jax_is_imported(tmp_path):
    """N12: ``--help``, a missing file or an option out of range answer in a fresh process
    without importing JAX (which costs 1.5-2.5 s); only good arguments import it."""
    import subprocess
    import sys

    probe = (
        "import sys\nfrom jaxcal.cli import main\n"
        "code = main(sys.argv[1:])\nprint('jax' in sys.modules, code, file=sys.stderr)"
    )
    for argv, code in (
        (["report", str(tmp_path / "absent.npz")], 2),
        (["report", "--demo", "--bins", "0"], 2),
        (["report", "--demo", "--plot", str(tmp_path / "x.gif")], 2),
    ):
        out = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=False
        )
        assert out.stderr.splitlines()[-1] == f"False {code}", (argv, out.stderr)
        assert "jaxcal: error:" in out.stderr
    help_run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom jaxcal.cli import main\ntry:\n main(['report',"
            " '--help'])\nexcept SystemExit:\n print('jax' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert help_run.stdout.splitlines()[-1] == "False" and "--resamples" in help_run.stdout
