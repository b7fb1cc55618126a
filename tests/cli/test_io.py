"""Reading ``jaxcal report``'s inputs (jaxcal/cli/_io.py): three formats, logits, bad files.

Every malformed input or argument is one line on stderr and exit code 2, never a traceback.
"""

import numpy as np

import jaxcal
from jaxcal.cli import main
from tests.cli_helpers import K, N, binary, check_schema, json_report, multiclass, write_csv
from tests.helpers import assert_close


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
        "absent.npz": "no such file or folder",
    }
    for name, message in cases.items():
        assert main(["report", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert main(["report"]) == 2
    assert main(["report", "--demo", "--bins", "0"]) == 2


def test_the_three_formats_give_the_same_report(tmp_path, capsys):
    _z, p, y = multiclass(1, sharpen=1.5)
    np.savez(tmp_path / "preds.npz", probs=p, labels=y)
    np.save(tmp_path / "preds.npy", p)
    np.save(tmp_path / "labels.npy", y)
    write_csv(tmp_path / "preds.csv", {**{f"p{k}": p[:, k] for k in range(K)}, "label": y})
    docs = [
        json_report(["report", str(tmp_path / "preds.npz")], capsys),
        json_report(["report", str(tmp_path / "preds.npy"), "--labels", str(tmp_path / "labels.npy")], capsys),
        json_report(["report", str(tmp_path / "preds.csv"), "--probs", "p?"], capsys),
    ]  # fmt: skip
    for doc in docs:
        check_schema(doc, fit=False)
        model = doc["models"][0]
        assert model["n"] == N and model["num_classes"] == K and model["inputs"] == "probs"
        assert model["metrics"] == docs[0]["models"][0]["metrics"]
        assert model["tests"] == docs[0]["models"][0]["tests"]
    metrics = docs[0]["models"][0]["metrics"]
    assert_close(np.float32(metrics["ece"]["value"]), jaxcal.ece(p, y))
    assert_close(np.float32(metrics["classwise_ece"]["value"]), jaxcal.classwise_ece(p, y))
    assert_close(np.float32(metrics["brier"]["value"]), jaxcal.brier_score(p, y))
    dec = jaxcal.brier_decomposition(p, y)
    assert_close(np.float32(metrics["brier_resolution"]["value"]), dec.resolution)


def test_logits_in_npz_and_csv_and_binary_inputs(tmp_path, capsys):
    z, p, y = multiclass(2)
    np.savez(tmp_path / "logits.npz", logits=z, labels=y)
    doc = json_report(["report", str(tmp_path / "logits.npz")], capsys)
    model = doc["models"][0]
    assert model["inputs"] == "logits"
    np.savez(tmp_path / "both.npz", probs=np.full_like(p, 0.1), logits=z, labels=y)
    doc_both = json_report(["report", str(tmp_path / "both.npz"), "--logits"], capsys)
    assert doc_both["models"][0]["metrics"] == model["metrics"]  # the probs key is ignored
    # The CLI takes the softmax in float64, this test in float32: scores differ by an ulp.
    assert_close(np.float32(model["metrics"]["ece"]["value"]), jaxcal.ece(p, y), atol=1e-5)
    # A binary problem: one log-odds column of a CSV, label column named by --labels.
    zb, pb, yb = binary(3)
    write_csv(tmp_path / "bin.csv", {"margin": zb, "noise": zb * 0, "truth": yb})
    argv = ["report", str(tmp_path / "bin.csv"), "--logits", "margin", "--labels", "truth"]
    doc = json_report([*argv, "--bins", "10"], capsys)
    check_schema(doc, fit=False)
    model = doc["models"][0]
    assert model["binary"] and model["num_classes"] == 2 and model["inputs"] == "logits"
    ece = jaxcal.ece(pb, yb, n_bins=10)
    assert_close(np.float32(model["metrics"]["ece"]["value"]), ece, atol=1e-5)  # sigmoid, as above
    assert_close(np.float32(model["metrics"]["positive_rate"]["value"]), yb.mean())
    assert_close(np.float32(model["metrics"]["accuracy"]["value"]), np.mean((pb > 0.5) == yb))
    ks = jaxcal.ks_test(pb, yb)
    assert_close(np.float32(model["tests"]["ks"]["p_value"]), ks.p_value, atol=1e-5)  # as above


def _bad_files(tmp):
    """(argv, message) pairs: malformed inputs and arguments."""
    _, p, y = multiclass(0)
    cases = []

    def npz(name, **arrays):
        np.savez(tmp / name, **arrays)
        return str(tmp / name)

    def text(name, body):
        (tmp / name).write_text(body)
        return str(tmp / name)

    nan = p.copy()
    nan[3, 2] = np.nan
    cases += [
        ([npz("nan.npz", probs=nan, labels=y)], "must be finite"),
        ([npz("range.npz", probs=p, labels=y + 5)], "must lie in [0, 10)"),
        ([npz("shape3.npz", probs=p[None], labels=y)], "must be 1-D (N,) or 2-D (N, K)"),
        ([npz("short.npz", probs=p, labels=y[:-1])], "to match the predictions"),
        ([npz("nolabel.npz", probs=p, target=y)], "missing key(s) ['labels']"),
        ([npz("noscores.npz", scores=p, labels=y)], "missing key(s)"),
        ([npz("strings.npz", probs=np.array(["a", "b"]), labels=y[:2])], "must be numeric"),
        ([npz("badlogits.npz", logits=np.full((3, 2), np.inf), labels=y[:3])], "must be finite"),
        ([npz("ok.npz", probs=p, labels=y), "--probs", "scores"], "missing key(s) ['scores']"),
        ([text("words.csv", "p0,p1,label\n0.5,0.5,1\n0.2,abc,0\n")], "non-numeric value 'abc' in column 'p1', line 3"),
        ([text("ragged.csv", "p0,p1,label\n0.5,0.5,1\n0.2,0.8\n")], "line 3 has 2 fields"),
        ([text("nolabel.csv", "p0,p1\n0.5,0.5\n")], "no label column"),
        ([text("empty.csv", "p0,p1,label\n")], "at least one data row"),
        ([text("nan.csv", "p0,p1,label\n0.5,0.5,1\nnan,1,0\n")], "must be finite"),
        ([text("cols.csv", "p0,p1,label\n0.5,0.5,1\n"), "--probs", "q*"], "no column matches --probs 'q*'"),
        ([text("float.csv", "p0,p1,label\n0.5,0.5,0.5\n")], "must hold integers"),
        ([text("notes.txt", "hello")], "unsupported file type '.txt'"),
    ]  # fmt: skip
    np.save(tmp / "scores.npy", p)
    np.save(tmp / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    cases += [
        ([str(tmp / "scores.npy")], "give the labels as a second .npy file"),
        ([str(tmp / "scores.npy"), "--labels", str(tmp / "absent.npy")], "cannot read the labels"),
        ([str(tmp / "objects.npy"), "--labels", str(tmp / "scores.npy")], "cannot read the scores"),
        ([str(tmp / "scores.npy"), "--probs", "x", "--labels", "y.npy"], "take no column names"),
        ([str(tmp / "ok.npz"), "--folds", "1"], "--folds must be an integer >= 2"),
        (
            [str(tmp / "ok.npz"), "--resamples", "0"],
            "--resamples must be >= 2 for the in-memory report",
        ),
        (
            [str(tmp / "ok.npz"), "--plot", str(tmp / "x.jpg")],
            "--plot must end in .png, .pdf or .svg",
        ),
        ([str(tmp / "ok.npz"), "--demo"], "give either FILE(s) or --demo"),
        ([npz("tiny.npz", probs=p[:9], labels=y[:9]), "--fit"], "needs at least 10 samples"),
    ]
    return cases


def test_malformed_inputs_exit_2_with_one_line(tmp_path, capsys):
    for argv, message in _bad_files(tmp_path):
        assert main(["report", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err, (argv, err)
        assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("jaxcal: error: ")
