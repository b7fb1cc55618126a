"""Streaming NumPy arrays (in memory or memory-mapped): the state of the one-shot update,
the states and replicates of the same rows read from Parquet, whatever the batch size."""

import sys

import jax
import numpy as np
import pytest

from jaxcal import streaming
from jaxcal.streaming._batches import release_rows
from tests.streaming.test_state import BATCH_ROWS as BATCH
from tests.streaming.test_state import _data, assert_same_state


def test_binary_equals_one_update_of_every_row():
    p, y, w = _data(binary=True)
    assert len(y) % BATCH  # a padded last batch
    seen = []
    out = streaming.array_state(
        p,
        y,
        weights=w,
        n_bins=16,
        resolution=256,
        batch_rows=BATCH,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert out.rows == len(y) and out.replicates is None
    assert seen[-1] == (len(y), len(y)) and len(seen) == -(-len(y) // BATCH)
    want = streaming.update(
        streaming.init(16, 2, binary=True, resolution=256),
        p.astype(np.float32),
        y,
        w.astype(np.float32),
    )
    assert_same_state(out.state, want)


def test_memory_mapped_multiclass_equals_one_update(tmp_path):
    probs, labels, _ = _data()
    path = tmp_path / "probs.npy"
    np.save(path, probs.astype(np.float32))
    mapped = np.load(path, mmap_mode="r")
    out = streaming.array_state(mapped, labels, n_bins=10, batch_rows=BATCH)
    assert_same_state(out.state, streaming.update(streaming.init(10, 4), probs, labels))


def test_equals_parquet_states_and_replicates(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    probs, labels, _ = _data()
    names = [f"p{k}" for k in range(probs.shape[1])]
    path = tmp_path / "preds.parquet"
    columns = {n: probs[:, k].astype(np.float32) for k, n in enumerate(names)}
    pq.write_table(pa.table(columns | {"y": labels}), path, row_group_size=100)
    key = jax.random.key(3)
    options = dict(n_bins=10, n_replicates=4, key=key, batch_rows=BATCH, first_id=7)
    got = streaming.array_state(probs.astype(np.float32), labels, **options)
    want = streaming.parquet_state(path, probs=names, labels="y", **options)
    assert got.rows == want.rows
    # The same batches of the same float32 rows: the same sums, bit for bit.
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(a, b)


def test_replicates_do_not_depend_on_the_batch_size():
    p, y, _ = _data(binary=True)
    key = jax.random.key(5)
    a = streaming.array_state(p, y, n_replicates=6, key=key, batch_rows=BATCH)
    b = streaming.array_state(p, y, n_replicates=6, key=key, batch_rows=3 * BATCH)
    np.testing.assert_array_equal(a.replicates.class_count, b.replicates.class_count)


def test_bad_arrays_are_named():
    p, y, _ = _data(binary=True)
    with pytest.raises(ValueError, match="`probs` must have shape"):
        streaming.array_state(p[:-1], y)
    with pytest.raises(ValueError, match="`weights` must have shape"):
        streaming.array_state(p, y, weights=np.ones(3))
    with pytest.raises(ValueError, match="empty"):
        streaming.array_state(p[:0], y[:0])
    with pytest.raises(ValueError, match="`key` is required"):
        streaming.array_state(p, y, n_replicates=3)
    with pytest.raises(ValueError, match="probs"):
        streaming.array_state(p + 1, y, batch_rows=BATCH)


def test_needs_no_pyarrow(monkeypatch):
    for name in ("pyarrow", "pyarrow.dataset"):
        monkeypatch.setitem(sys.modules, name, None)  # any import of it raises ImportError
    p, y, _ = _data(binary=True)
    out = streaming.array_state(p, y, batch_rows=BATCH)
    assert out.rows == len(y)


def test_released_pages_of_a_memmap_read_the_same(tmp_path):
    values = np.arange(1 << 16, dtype=np.float32).reshape(-1, 4)  # 64 pages of 4 KiB
    np.save(tmp_path / "v.npy", values)
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    assert mapped.sum() == values.sum()  # every page read
    release_rows(mapped, 10_000)
    release_rows(values, 10_000)  # not a memmap: nothing to do
    np.testing.assert_array_equal(mapped, values)  # read again from the file
