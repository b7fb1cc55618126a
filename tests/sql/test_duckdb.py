"""``jaxcal.sql.state``: DuckDB's state equals ``streaming.update`` over the same rows
(counts exactly, sums to round-off), binary and K = 10, with weights, segments and
hash-generator replicates; bad rows are refused naming the column and the count."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pd = pytest.importorskip("pandas")
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

from jaxcal import sql, streaming  # noqa: E402
from jaxcal.streaming._state import value_of  # noqa: E402


def _same(a, b):
    for name in ("top_count", "class_count"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for x, y in zip(value_of(a), value_of(b), strict=True):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-5 * max(1.0, np.abs(y).max()))


def _binary(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n).astype(np.float32)
    p[:10] = [0, 1, 0.5, 0.25, 0.75, 1 / 3, 2 / 3, 0.2, 0.4, 0.6]  # edges and ties
    y = (rng.uniform(size=n) < p).astype(np.int64)
    w = rng.exponential(size=n).astype(np.float32)
    w[::7] = 0
    return pd.DataFrame({"p": p, "y": y, "w": w, "g": rng.integers(0, 3, n), "id": np.arange(n)})


@pytest.mark.parametrize("closed", ["right", "left"])
def test_binary_with_weights_equals_update(closed):
    df = _binary()
    for fine in (15, 4095):  # not powers of two: the buckets are corrected against j / R
        s = sql.state(
            None, df, probs="p", labels="y", weights="w", n_bins=15, fine=fine, closed=closed
        )
        ref = streaming.init(15, 2, binary=True, resolution=fine, closed=closed)
        ref = streaming.update(ref, df.p.to_numpy(), df.y.to_numpy(), df.w.to_numpy())
        _same(s, ref)
        a, b = streaming.compute(s), streaming.compute(ref)
        for key in ("ece", "brier", "log_loss", "within_bin_variance"):
            np.testing.assert_allclose(a[key], b[key], rtol=1e-5, err_msg=key)


def test_k10_with_segments_equals_update_per_segment():
    rng = np.random.default_rng(1)
    n, k = 2000, 10
    p = rng.dirichlet(np.ones(k) * 0.3, n).astype(np.float32)
    y = rng.integers(0, k, n)
    g = np.array(["a", "b"])[rng.integers(0, 2, n)]
    df = pd.DataFrame({f"p{i}": p[:, i] for i in range(k)} | {"y": y, "g": g, "h": n % 2})
    cols = [f"p{i}" for i in range(k)]
    out = sql.state(None, df, probs=cols, labels="y", segments="g", n_bins=16, fine=4096)
    assert sorted(out) == ["a", "b"]
    for v in ("a", "b"):
        m = g == v
        ref = streaming.update(streaming.init(16, k, resolution=4096), p[m], y[m])
        _same(out[v], ref)
    two = sql.state(None, df, probs=cols, labels="y", segments=("g", "h"), n_bins=16)
    assert sorted(two) == [("a", 0), ("b", 0)]


def test_replicates_equal_the_hash_poisson_state(tmp_path):
    df = _binary(800, 2)
    path = tmp_path / "preds.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE preds AS SELECT * FROM df")
    con.close()
    out = sql.state(
        path,
        "preds",
        probs="p",
        labels="y",
        weights="w",
        n_bins=4,
        fine=64,
        replicates=6,
        seed=11,
        row_key="id",
    )
    reps = streaming.poisson_update(
        streaming.poisson_init(4, 2, 6, binary=True),
        df.p.to_numpy(),
        df.y.to_numpy(),
        jnp.asarray(df.id.to_numpy()),
        key=jax.random.key(11),
        weights=df.w.to_numpy(),
        generator="hash",
    )
    _same(out.replicates, reps)
    table = sql.state(
        path,
        "preds",
        probs="p",
        labels="y",
        n_bins=4,
        fine=64,
        replicates=6,
        seed=11,
        row_key="id",
        as_table=True,
    )
    back = streaming.from_table(table)
    assert back.replicates.totals.shape[0] == 6 and table.schema.metadata[b"generator"] == b"hash"


def _nan_table(df):
    """An Arrow table keeps a NaN (pandas would hand DuckDB a NULL)."""
    import pyarrow as pa

    p = df.p.to_numpy().copy()
    p[0] = np.nan
    return pa.table({"p": p, "y": df.y.to_numpy(), "w": df.w.to_numpy()})


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda df: df.assign(p=df.p.where(df.index % 5 > 0)), "600 NULL values in column 'p'"),
        (lambda df: df.assign(y=df.y.where(df.index > 2)), "3 NULL values in column 'y'"),
        (lambda df: df.assign(y=df.y.where(df.index > 3, 2)), r"4 labels .*\[0, 2\)"),
        (lambda df: df.assign(p=df.p.where(df.index > 1, 1.5)), "2 values outside"),
        (_nan_table, "1 values outside"),
        (lambda df: df.assign(w=df.w.where(df.index > 0, -1.0)), "1 negative"),
    ],
)
def test_bad_rows_are_refused_with_counts(change, match):
    df = change(_binary())
    with pytest.raises(ValueError, match=match):
        sql.state(None, df, probs="p", labels="y", weights="w")


def test_rows_not_summing_to_one_are_refused():
    df = pd.DataFrame({"a": [0.2, 0.5], "b": [0.3, 0.3], "c": [0.5, 0.1], "y": [0, 1]})
    with pytest.raises(ValueError, match="1 rows whose probabilities do not sum to 1"):
        sql.state(None, df, probs=["a", "b", "c"], labels="y")


def test_bad_connection_and_missing_table(tmp_path):
    with pytest.raises(ValueError, match="no DuckDB file"):
        sql.state(tmp_path / "nope.duckdb", "t", probs="p", labels="y")
    with pytest.raises(ValueError, match="DuckDB could not read"):
        sql.state(None, "no_such_table", probs="p", labels="y")
