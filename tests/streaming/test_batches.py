"""The batch loop of ``array_state``, ``parquet_state`` and ``dask_state``: bad rows are
refused in any batch, on every call, and labels are never truncated (issue 26).

A1: ``streaming.update`` validated a repeated batch shape from a summary that took a
``jnp.max``, which on XLA:CPU (jax 0.10.2) drops a NaN among 4096 or more float32 values:
``parquet_state`` returned ``ece nan`` for a NaN in row 5 after any earlier call, and the
streamed report of a file with a NaN at row 70,000 exited 0. Here each source is read
clean first (its batches compile), then with a NaN, an inf, a value outside [0, 1] or a
label outside [0, K) in the first, a middle or the last batch, at its first, middle or
last row, in batches below (1024 rows) and above (8192) 4096; the error must be the one a
first call (a process that never validated the shape) raises. The streaming update itself
is swept with every public function in ``tests/test_bad_input.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxcal import streaming
from jaxcal._core import validity
from jaxcal.streaming._batches import integer_labels

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

_BAD = {"nan": np.nan, "inf": np.inf, "range": 1.5}


def _clean(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    p = rng.random(n).astype(np.float32)
    return p, (rng.random(n) < p).astype(np.int32)


def _cases(n: int, batch: int):
    """(what, row, kind): first/middle/last row of the first, a middle and the last batch."""
    starts = sorted({0, (n // batch // 2) * batch, (n - 1) // batch * batch})
    rows = []
    for start in starts:
        stop = min(start + batch, n)
        rows += [start, (start + stop) // 2, stop - 1]
    return [(what, row) for row in rows for what in ("nan", "inf", "range", "label")]


def _corrupt(p, y, what, row):
    p, y = p.copy(), y.copy()
    if what == "label":
        y[row] = 2
    else:
        p[row] = _BAD[what]
    return p, y


def _error(read) -> str:
    with pytest.raises(ValueError) as caught:
        read()
    return str(caught.value)


def _every_call(read, clean, n, batch):
    """``read(p, y)`` of each corrupted input: the first call's error, then the same one
    after a clean read of the same shapes."""
    for what, row in _cases(n, batch):
        bad = _corrupt(*clean, what, row)
        validity._SEEN.clear()
        first = _error(lambda bad=bad: read(*bad))
        read(*clean)
        assert _error(lambda bad=bad: read(*bad)) == first, (what, row, first)
        start = row // batch * batch
        assert f"rows {start:,} to" in first or start == 0, first  # the batch is named


@pytest.mark.parametrize(("n", "batch"), [(3000, 1024), (20000, 8192)])
def test_array_state_refuses_bad_rows_in_any_batch_on_every_call(n, batch):
    clean = _clean(n)
    _every_call(
        lambda p, y: streaming.array_state(p, y, n_bins=8, batch_rows=batch), clean, n, batch
    )


@pytest.mark.parametrize(("n", "batch"), [(3000, 1024), (20000, 8192)])
def test_parquet_state_refuses_bad_rows_in_any_batch_on_every_call(tmp_path, n, batch):
    clean = _clean(n, 1)

    def read(p, y):
        path = tmp_path / "preds.parquet"
        pq.write_table(pa.table({"p": p, "y": y}), path, row_group_size=batch // 2)
        return streaming.parquet_state(path, probs="p", labels="y", n_bins=8, batch_rows=batch)

    _every_call(read, clean, n, batch)


def test_dask_state_refuses_bad_rows_on_every_call(tmp_path):
    dask = pytest.importorskip("dask")
    n, batch = 20000, 8192  # two files of 10,000 rows: two batches each, of 8192 >= 4096
    clean = _clean(n, 2)

    def read(p, y):
        for i, part in enumerate(np.array_split(np.arange(n), 2)):
            table = pa.table({"p": p[part], "y": y[part]})
            pq.write_table(table, tmp_path / f"part-{i}.parquet")
        with dask.config.set(scheduler="sync"):
            return streaming.dask_state(tmp_path, probs="p", labels="y", n_bins=8, batch_rows=batch)

    for what, row in [("nan", 5), ("nan", 10_000 + 8192 + 5), ("nan", n - 1), ("label", n // 2)]:
        bad = _corrupt(*clean, what, row)
        validity._SEEN.clear()
        first = _error(lambda bad=bad: read(*bad))
        read(*clean)
        assert _error(lambda bad=bad: read(*bad)) == first


def test_float_labels_must_be_whole_numbers():
    """A2: array_state and Parquet truncated labels 0.5, 1.7 to 0, 1 (astype(int32))."""
    p = np.array([0.2, 0.6, 0.9], np.float32)
    with pytest.raises(ValueError, match=r"`labels` must hold integer labels; got 0.5 at row 0"):
        streaming.array_state(p, np.array([0.5, 1.0, 1.7]))
    out = streaming.array_state(p, np.array([0.0, 1.0, 1.0]), n_bins=2)  # whole floats: fine
    assert out.rows == 3
    np.testing.assert_array_equal(integer_labels(np.array([True, False])), [1, 0])
    with pytest.raises(ValueError, match="must hold numbers; got text"):
        integer_labels(np.array(["yes", "no"]))


def test_labels_beyond_int32_and_bfloat16_labels():
    """int32 would wrap 2**32 + 1 to 1; bfloat16 (no NumPy float kind) is checked too."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for y in (np.array([0, 2**32 + 1]), np.array([0.0, 3e9])):
        with pytest.raises(ValueError, match="beyond int32"):
            integer_labels(y)
    with pytest.raises(ValueError, match=r"got 0\.5 at row 1"):
        integer_labels(np.array([1.0, 0.5]).astype(ml_dtypes.bfloat16))
    p = np.array([0.1, 0.8], np.float32).astype(ml_dtypes.bfloat16)
    assert streaming.array_state(p, np.array([0, 1]), n_bins=2).rows == 2
