"""``jaxcal report --stream`` on ``.npz`` and ``.npy`` files (jaxcal/cli/_stream.py): the
report of the same rows written to Parquet, in batches that do not divide N, and the
hint that suggests it for a large in-memory input. Refusals are in test_cli_corpus.py."""

import jax
import numpy as np
import pytest

from jaxcal import streaming
from jaxcal.cli import InputError, _parquet, _run, main
from tests.cli_helpers import json_report
from tests.helpers import assert_close

ROWS, CLASSES, BATCH = 3000, 10, 1024  # three batches, the last one padded


@pytest.fixture(autouse=True)
def _small_batches(monkeypatch):
    monkeypatch.setattr(_parquet, "BATCH_ROWS", BATCH)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(CLASSES, 0.5), size=ROWS).astype(np.float32)
    y = np.minimum((rng.uniform(size=(ROWS, 1)) > np.cumsum(p, 1)).sum(1), CLASSES - 1)
    return p, y.astype(np.int32)


def _metrics(doc):
    (model,) = doc["models"]
    assert model["n"] == ROWS and model["num_classes"] == CLASSES
    return {k: v["value"] for k, v in model["metrics"].items()}


def test_stream_npz_equals_the_parquet_report(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    p, y = _data()
    np.savez(tmp_path / "preds.npz", probs=p, labels=y)
    columns = {f"p{k}": p[:, k] for k in range(CLASSES)} | {"label": y}
    pq.write_table(pa.table(columns), tmp_path / "preds.parquet", row_group_size=700)
    options = ["--resamples", "0"]
    doc = json_report(["report", str(tmp_path / "preds.npz"), "--stream", *options], capsys)
    want = json_report(["report", str(tmp_path / "preds.parquet"), *options], capsys)
    assert doc["settings"] == want["settings"] and doc["settings"]["streamed"]
    # The same batches of the same float32 rows: the same numbers, bit for bit.
    assert _metrics(doc) == _metrics(want)


def test_stream_npy_equals_npz_and_prints_the_table(tmp_path, capsys):
    p, y = _data()
    np.savez(tmp_path / "preds.npz", probs=p, labels=y)
    np.save(tmp_path / "scores.npy", p)
    np.save(tmp_path / "labels.npy", y.astype(np.int64))
    argv = ["--stream", "--resamples", "0"]
    npy = ["report", str(tmp_path / "scores.npy"), "--labels", str(tmp_path / "labels.npy")]
    doc = json_report([*npy, *argv], capsys)
    assert _metrics(doc) == _metrics(
        json_report(["report", str(tmp_path / "preds.npz"), *argv], capsys)
    )
    assert main([*npy, *argv]) == 0
    captured = capsys.readouterr()
    assert "streamed from .npy" in captured.out and f"N = {ROWS:,}, 10 classes" in captured.out
    assert f"100.0% {ROWS:,}/{ROWS:,} rows" in captured.err


def test_a_large_in_memory_input_suggests_stream(tmp_path, capsys, monkeypatch):
    def stop(*_):
        raise InputError("stopped before computing")

    monkeypatch.setattr(_run, "_prepare", stop)
    monkeypatch.setattr(_run, "STREAM_HINT_VALUES", ROWS * CLASSES)
    p, y = _data()
    path = str(tmp_path / "preds.npz")
    np.savez(path, probs=p, labels=y)
    assert main(["report", path]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    hints = [line for line in lines if "hint" in line]
    assert len(hints) == 1 and "--stream" in hints[0] and "30,000 values" in hints[0], lines
    assert captured.out == ""
    for quiet in (["--quiet"], ["--json", "-"]):
        assert main(["report", path, *quiet]) == 2
        assert "hint" not in capsys.readouterr().err, quiet
    monkeypatch.setattr(_run, "STREAM_HINT_VALUES", ROWS * CLASSES + 1)
    assert main(["report", path]) == 2
    assert "hint" not in capsys.readouterr().err


def test_intervals_are_those_of_the_whole_replicate_states(tmp_path, capsys):
    """The report keeps summary replicates (the state at --bins and the ECE view's
    buckets): the same resamples as whole replicate states, the same intervals up to
    float32 round-off, the same values bit for bit."""
    p, y = _data()
    path = str(tmp_path / "preds.npz")
    np.savez(path, probs=p, labels=y)
    doc = json_report(["report", path, "--stream", "--resamples", "8", "--seed", "3"], capsys)
    resolution = doc["settings"]["resolution"]
    whole = streaming.array_state(
        p,
        y,
        n_bins=15,
        resolution=resolution,
        n_replicates=8,
        key=jax.random.key(3),
        batch_rows=BATCH,
    )
    assert isinstance(whole.replicates, streaming.CalibrationState)
    point = jax.device_get(_parquet.state_metrics(whole.state, 15))
    reps = jax.device_get(jax.vmap(lambda s: _parquet.state_metrics(s, 15))(whole.replicates))
    metrics = doc["models"][0]["metrics"]
    for key, metric in metrics.items():
        # the JSON writes float32 values as their shortest repr (N16): equal as float32
        assert np.float32(metric["value"]) == point[key], key
        if metric["low"] is not None:
            want = np.quantile(reps[key], [0.025, 0.975])
            assert_close(np.float32([metric["low"], metric["high"]]), want, err_msg=key)
    assert sum(m["low"] is not None for m in metrics.values()) == 8
