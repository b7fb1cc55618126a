"""Streaming Parquet files and folders: the same state as the arrays in memory, whatever
the row groups, batch size, files and padding."""

import jax
import numpy as np
import pytest

from jaxcal import streaming
from tests.helpers import assert_close
from tests.streaming.test_state import BATCH_ROWS, _data, assert_same_state

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

BATCH = BATCH_ROWS  # small batches: several batches, a padded last one, one compiled shape


def _write(path, table, row_group_size=100):
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def _binary_table():
    p, y, w = _data(binary=True)
    return pa.table({"score": p, "label": y.astype(np.int64), "w": w}), (p, y, w)


def test_binary_file_equals_the_arrays(tmp_path):
    table, (p, y, w) = _binary_table()
    path = _write(tmp_path / "preds.parquet", table)
    seen = []
    out = streaming.parquet_state(
        path,
        probs="score",
        labels="label",
        weights="w",
        n_bins=16,
        resolution=256,
        batch_rows=BATCH,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert out.rows == len(y) and out.replicates is None
    assert seen[-1] == (len(y), len(y)) and len(seen) == -(-len(y) // BATCH)
    want = streaming.update(streaming.init(16, 2, binary=True, resolution=256), p, y, w)
    assert_same_state(out.state, want)


def test_multiclass_columns_in_a_folder_of_files(tmp_path):
    probs, labels, _ = _data()
    names = [f"p{k}" for k in range(probs.shape[1])]
    for i, part in enumerate(np.array_split(np.arange(len(labels)), 3)):
        columns = {n: probs[part, k] for k, n in enumerate(names)} | {"y": labels[part]}
        _write(tmp_path / f"part-{i}.parquet", pa.table(columns))
    out = streaming.parquet_state(tmp_path, probs=names, labels="y", n_bins=10, batch_rows=BATCH)
    assert_same_state(out.state, streaming.update(streaming.init(10, 4), probs, labels))


def test_replicates_are_keyed_by_the_row_number(tmp_path):
    table, (p, y, _) = _binary_table()
    path = _write(tmp_path / "preds.parquet", table)
    key = jax.random.key(5)
    out = streaming.parquet_state(
        path, probs="score", labels="label", n_replicates=6, key=key, batch_rows=BATCH
    )
    reps = streaming.poisson_update(
        streaming.poisson_init(15, 2, 6, binary=True), p, y, np.arange(len(y)), key=key
    )
    np.testing.assert_array_equal(out.replicates.class_count, reps.class_count)
    assert_close(
        streaming.poisson_compute(out.replicates)["brier"], streaming.poisson_compute(reps)["brier"]
    )


def test_bad_columns_and_nulls_are_named(tmp_path):
    table, _ = _binary_table()
    path = _write(tmp_path / "preds.parquet", table)
    with pytest.raises(ValueError, match=r"no column \['prob'\]"):
        streaming.parquet_state(path, probs="prob", labels="label")
    with pytest.raises(ValueError, match="`key` is required"):
        streaming.parquet_state(path, probs="score", labels="label", n_replicates=3)
    holes = pa.table({"p": pa.array([0.2, None], pa.float32()), "y": [0, 1]})
    with pytest.raises(ValueError, match="column 'p' has missing values"):
        streaming.parquet_state(_write(tmp_path / "holes.parquet", holes), probs="p", labels="y")
