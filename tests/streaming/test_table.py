"""``to_table`` / ``from_table``: the long-form state table round-trips exactly, in any row
order, with replicates and segments, and partial tables concatenated are their merge."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jaxcal
from jaxcal import streaming


def _data(n, k, seed):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(k), n).astype(np.float32)
    y = rng.integers(0, k, n)
    return p, y


def _same(a, b):
    for name in ("top_count", "class_count"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for x, y in zip(streaming._state.value_of(a), streaming._state.value_of(b), strict=True):
        np.testing.assert_allclose(
            np.asarray(x, np.float64), np.asarray(y, np.float64), rtol=1e-6, atol=1e-9
        )


def test_round_trip_any_order_and_parquet(tmp_path: Path):
    p, y = _data(300, 4, 0)
    s = streaming.update(streaming.init(4, 4, resolution=64), p, y)
    t = streaming.to_table(s)
    shuffled = t.take(np.random.default_rng(1).permutation(t.num_rows))
    _same(streaming.from_table(shuffled), s)
    path = tmp_path / "state.parquet"
    pq.write_table(t, path)
    back = streaming.from_table(path)
    _same(back, s)
    assert back.resolution == 64 and back.n_bins == 4
    # a table written again is the same table
    assert streaming.to_table(back).equals(t)
    _same(streaming.from_table(t.to_pandas(), n_bins=4, num_classes=4, resolution=64), s)


def test_partial_tables_sum_to_the_merge():
    p, y = _data(200, 3, 2)
    init = streaming.init(3, 3)
    a, b = streaming.update(init, p[:120], y[:120]), streaming.update(init, p[120:], y[120:])
    both = pa.concat_tables([streaming.to_table(a), streaming.to_table(b)])
    _same(streaming.from_table(both), streaming.update(init, p, y))


def test_replicates_and_segments_round_trip():
    p, y = _data(120, 2, 3)
    p = p[:, 1]
    g = np.arange(120) % 3
    key = jax.random.key(0)
    states = {}
    for v in range(3):
        m = g == v
        s = streaming.update(streaming.init(4, 2, binary=True, resolution=16), p[m], y[m])
        reps = streaming.poisson_update(
            streaming.poisson_init(4, 2, 5, binary=True),
            p[m],
            y[m],
            jnp.flatnonzero(m),
            key=key,
            generator="hash",
        )
        states[f"s{v}"] = (s, reps)
    t = streaming.to_table(states, segments="region", seed=0, generator="hash")
    assert t.column_names[:2] == ["region", "replicate"]
    meta = t.schema.metadata
    assert json.loads(meta[b"segments"]) == ["region"] and meta[b"replicates"] == b"5"
    back = streaming.from_table(t.take(np.random.default_rng(0).permutation(t.num_rows)))
    assert sorted(back) == ["s0", "s1", "s2"]
    for v, (s, reps) in states.items():
        _same(back[v].state, s)
        np.testing.assert_array_equal(back[v].replicates.class_count, reps.class_count)
        got = streaming.poisson_compute(back[v].replicates)["brier"]
        np.testing.assert_allclose(got, streaming.poisson_compute(reps)["brier"], rtol=1e-6)


def test_bad_tables_are_refused():
    s = streaming.update(streaming.init(2, 2), jnp.array([[0.3, 0.7]]), jnp.array([1]))
    t = streaming.to_table(s)
    with pytest.raises(ValueError, match="no jaxcal metadata"):
        streaming.from_table(t.replace_schema_metadata(None))
    with pytest.raises(ValueError, match="segment columns"):
        streaming.from_table(t, segments=("nope",))
    with pytest.raises(ValueError, match="`segments`"):
        streaming.to_table({"a": s})
    with pytest.raises(ValueError, match="CalibrationState"):
        streaming.to_table([1, 2])


def test_schema_file_lists_the_columns():
    path = Path(jaxcal.__file__).parent / "streaming" / "state_table.schema.json"
    schema = json.loads(path.read_text())
    s = streaming.update(streaming.init(2, 2), jnp.array([[0.3, 0.7]]), jnp.array([1]))
    cols = set(streaming.to_table(s).column_names)
    assert cols == set(schema["properties"]) and set(schema["required"]) <= cols
    assert schema["$id"].endswith(streaming.TABLE_SCHEMA)
