"""A corpus of malformed files and arguments for ``jaxcal report`` (issue 20, item 4).

Each case runs in-process through :func:`jaxcal.cli.main` and must exit with code 2 and
exactly one line on stderr (``jaxcal: error: ...``, no traceback, nothing on stdout),
before the report kernel is traced and before XLA compiles anything: bad input costs no
computation. Every case builds its own small file in ``tmp_path``.
"""

import io
import pickle
import zipfile

import jax.monitoring
import numpy as np
import pytest

from jaxcal.cli import _run, main

P2 = np.array([[0.75, 0.25], [0.5, 0.5], [0.125, 0.875], [0.25, 0.75]], np.float32)
Y2 = np.array([0, 1, 1, 0], np.int32)

_COMPILES: list[str] = []


def _listen(event: str, duration: float, **_) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES.append(event)


jax.monitoring.register_event_duration_secs_listener(_listen)


def _npz(tmp, name, **arrays):
    np.savez(tmp / name, **arrays)
    return str(tmp / name)


def _text(tmp, name, body, encoding="utf-8"):
    (tmp / name).write_bytes(body.encode(encoding))
    return str(tmp / name)


def _raw(tmp, name, data: bytes):
    (tmp / name).write_bytes(data)
    return str(tmp / name)


def _truncated_npz(tmp):
    buffer = io.BytesIO()
    np.savez(buffer, probs=np.tile(P2, (64, 1)), labels=np.tile(Y2, 64))
    return [_raw(tmp, "truncated.npz", buffer.getvalue()[:-200])]


def _pickle_npz(tmp):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("probs.npy", pickle.dumps(P2))
        archive.writestr("labels.npy", pickle.dumps(Y2))
    return [_raw(tmp, "pickled.npz", buffer.getvalue())]


def _object_npz(tmp):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for key, array in (("probs", np.array([P2[0], None], dtype=object)), ("labels", Y2)):
            member = io.BytesIO()
            np.save(member, array, allow_pickle=True)
            archive.writestr(f"{key}.npy", member.getvalue())
    return [_raw(tmp, "objects.npz", buffer.getvalue())]


CSV = "p0,p1,label\n0.75,0.25,0\n0.5,0.5,1\n"

#: (name, builder of argv after "report" from tmp_path, a part of the message).
CASES = [
    ("no input", lambda t: [], "give either FILE(s) or --demo"),
    ("absent file", lambda t: [str(t / "absent.npz")], "no such file or folder"),
    ("empty folder", lambda t: [_mkdir(t, "folder")], "no Parquet file (.parquet) in this folder"),  # C4
    ("empty npz", lambda t: [_raw(t, "empty.npz", b"")], "cannot read as .npz"),
    ("empty csv", lambda t: [_raw(t, "empty.csv", b"")], "needs a header row"),
    ("header-only csv", lambda t: [_text(t, "header.csv", "p0,p1,label\n")], "at least one data row"),
    ("garbage npz", lambda t: [_raw(t, "garbage.npz", b"PK\x03\x04garbage")], "cannot read as .npz"),
    ("truncated npz", _truncated_npz, "cannot read as .npz"),
    ("pickle npz", _pickle_npz, "cannot read as .npz"),
    ("object arrays", _object_npz, "cannot read as .npz"),
    ("missing labels key", lambda t: [_npz(t, "nolab.npz", probs=P2)], "missing key(s) ['labels']"),
    ("wrong --labels key", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--labels", "y"], "missing key(s) ['y']"),
    ("mismatched lengths", lambda t: [_npz(t, "short.npz", probs=P2, labels=Y2[:3])], "to match the predictions"),
    ("NaN probs", lambda t: [_npz(t, "nan.npz", probs=np.where(P2 == 0.5, np.nan, P2), labels=Y2)], "must be finite"),
    ("labels out of range", lambda t: [_npz(t, "range.npz", probs=P2, labels=Y2 + 2)], "must lie in [0, 2)"),
    ("float labels", lambda t: [_npz(t, "flt.npz", probs=P2, labels=Y2 + 0.5)], "must hold integers"),
    ("off-simplex rows", lambda t: [_npz(t, "off.npz", probs=P2 * 0.5, labels=Y2)], "rows must sum to 1"),
    ("3-D probs", lambda t: [_npz(t, "cube.npz", probs=P2[None], labels=Y2)], "must be 1-D (N,) or 2-D (N, K)"),
    ("complex probs", lambda t: [_npz(t, "cplx.npz", probs=P2.astype(np.complex64), labels=Y2)], "must hold real numbers"),
    ("string probs", lambda t: [_npz(t, "str.npz", probs=np.array(["a", "b"]), labels=Y2[:2])], "must be numeric"),
    ("infinite logits", lambda t: [_npz(t, "inf.npz", logits=np.full((4, 2), np.inf), labels=Y2)], "must be finite"),
    ("BOM csv, wrong label column", lambda t: [_text(t, "bom.csv", CSV, "utf-8-sig"), "--labels", "y"], "no column 'y' for the labels"),
    ("csv without a label column", lambda t: [_text(t, "nolabel.csv", "p0,p1\n0.5,0.5\n")], "no label column"),
    ("csv extra id column", lambda t: [_text(t, "id.csv", "id,p,label\n1,0.5,1\n199,0.5,0\n")], "column 'id' must hold probabilities in [0, 1]; got 199.0 in data row 2"),
    ("csv cell 1_0", lambda t: [_text(t, "underscore.csv", "p,label\n0.5,1_0\n")], "non-numeric value '1_0' in column 'label', line 2"),
    ("csv empty cell", lambda t: [_text(t, "blank.csv", "p,label\n,1\n")], "non-numeric value '' in column 'p', line 2"),
    ("csv NaN cell", lambda t: [_text(t, "nan.csv", "p,label\n0.5,1\nnan,0\n")], "column 'p' must be finite; got nan in data row 2"),
    ("csv ragged row", lambda t: [_text(t, "ragged.csv", "p0,p1,label\n0.5,0.5,1\n0.2,0.8\n")], "line 3 has 2 fields"),
    ("csv row with an extra field", lambda t: [_text(t, "extra.csv", "p0,p1,label\n0.5,0.5,1\n\n0.2,0.8,0,7\n")], "line 4 has 4 fields; the header has 3 (data row 2)"),
    ("csv row lacking an unread column", lambda t: [_text(t, "short.csv", "p0,p1,label,note\n0.5,0.5,1,a\n0.2,0.8,0\n"), "--probs", "p*"], "line 3 has 3 fields; the header has 4 (data row 2)"),
    ("csv quoted row with an extra field", lambda t: [_text(t, "quoted.csv", 'p0,p1,label\n0.5,0.5,1\n0.2,0.8,0,"x,y"\n')], "line 3 has 4 fields; the header has 3 (data row 2)"),
    ("csv last row with an extra field, no newline", lambda t: [_text(t, "last.csv", "p0,p1,label\n0.5,0.5,1\n0.2,0.8,0,9")], "line 3 has 4 fields"),
    ("csv not UTF-8", lambda t: [_raw(t, "latin.csv", "p,label\n0.5,1\n0.5,\xe9\n".encode("latin-1"))], "cannot read as .csv"),
    ("csv glob matches nothing", lambda t: [_text(t, "g.csv", CSV), "--probs", "q*"], "no column matches --probs 'q*'"),
    ("npy without labels", lambda t: [str(_save(t, "s.npy", P2))], "give the labels as a second .npy file"),
    ("unsupported suffix", lambda t: [_text(t, "notes.txt", "hello")], "unsupported file type '.txt'"),
    ("bad --seed", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--seed", str(2**63)], "--seed must be an integer >= 0"),
    ("negative --seed", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--seed", "-5"], "--seed must be an integer >= 0"),
    ("--bins 0", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--bins", "0"], "--bins must be an integer >= 1"),
    ("--resamples 1", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--resamples", "1"], "--resamples must be >= 2 for the in-memory report"),
    ("--folds 1", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--folds", "1"], "--folds must be an integer >= 2"),
    ("--fit on too few", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--fit"], "needs at least 10 samples"),
    ("unwritable --json", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--json", str(t / "no" / "x.json")], "does not exist"),
    ("folder as --json", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--json", str(t)], "is a folder"),
    ("folder as --plot", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--plot", _mkdir(t, "x.png")], "is a folder"),
    ("bad --plot suffix", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--plot", str(t / "x.jpg")], "--plot must end in .png"),
    ("--demo with a file", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--demo"], "give either FILE(s) or --demo"),
    ("--by with --demo", lambda t: ["--demo", "--by", "x"], "--by needs FILE(s)"),
    ("--stream NaN probs", lambda t: [_npz(t, "nan.npz", probs=np.where(P2 == 0.5, np.nan, P2), labels=Y2), "--stream"], "must be finite"),
    ("--stream labels out of range", lambda t: [_npz(t, "range.npz", probs=P2, labels=Y2 + 2), "--stream"], "must lie in [0, 2)"),
    ("--stream short .npy labels", lambda t: [str(_save(t, "s.npy", P2)), "--labels", str(_save(t, "y.npy", Y2[:3])), "--stream"], "to match the predictions"),
    ("--stream logits only", lambda t: [_npz(t, "lg.npz", logits=P2, labels=Y2), "--stream"], "missing key(s) ['probs']"),
    ("--stream csv", lambda t: [_text(t, "s.csv", CSV), "--stream"], "--stream reads .npz, .npy and Parquet"),
    ("--stream --fit", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--stream", "--fit"], "not available for --stream"),
    ("--stream --by", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--stream", "--by", "g"], "--by is not available for --stream"),
    ("--stream --demo", lambda t: ["--demo", "--stream"], "--stream needs FILE(s)"),
    ("--stream --plot", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--stream", "--plot", str(t / "x.png")], "--plot is not available for --stream"),
    ("--stream --renormalize", lambda t: [_npz(t, "ok.npz", probs=P2, labels=Y2), "--stream", "--renormalize"], "--renormalize is not available for --stream"),
]  # fmt: skip


def _save(tmp, name, array):
    np.save(tmp / name, array)
    return tmp / name


def _mkdir(tmp, name):
    (tmp / name).mkdir(exist_ok=True)
    return str(tmp / name)


@pytest.fixture(autouse=True)
def _no_kernels(monkeypatch):
    def refuse(*_):
        raise AssertionError("a malformed input reached the report kernel")

    monkeypatch.setattr(_run, "_prepare", refuse)


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    argv = argv(tmp_path)
    _COMPILES.clear()
    assert main(["report", *argv]) == 2, argv
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err
    assert err.startswith("jaxcal: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and message in err, err
    assert not _COMPILES, f"{len(_COMPILES)} XLA compilations for a malformed input"
