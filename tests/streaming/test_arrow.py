"""The state as an Arrow table: round trips, partial tables add up, an engine's GROUP BY
(the example of docs/guides/scale.md, executed here) gives jaxcal's state."""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import streaming
from tests.helpers import assert_close
from tests.streaming.test_state import _data

pa = pytest.importorskip("pyarrow")

SCALE_GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "scale.md"


def _states():
    probs, labels, weights = _data()
    p1, y1, _ = _data(binary=True)
    return [
        streaming.update(streaming.init(10, 4), probs, labels, weights),
        streaming.update(streaming.init(4, 2, binary=True, resolution=64, closed="left"), p1, y1),
    ]


@pytest.mark.parametrize("index", [0, 1])
def test_round_trip_keeps_every_array_and_the_layout(index):
    state = _states()[index]
    table = streaming.to_arrow(state)
    assert table.schema.metadata[b"jaxcal.schema"] == streaming.SCHEMA.encode()
    back = streaming.from_arrow(table)
    assert (back.n_bins, back.resolution, back.closed, back.binary) == (
        state.n_bins,
        state.resolution,
        state.closed,
        state.binary,
    )
    np.testing.assert_array_equal(back.top_count, state.top_count)
    np.testing.assert_array_equal(back.class_count, state.class_count)
    for i, name in enumerate(("top_sums", "class_sums", "totals")):
        high = np.asarray(getattr(state, name), np.float64) + np.asarray(state.compensation[i])
        got = np.asarray(getattr(back, name), np.float64) + np.asarray(back.compensation[i])
        if name == "totals":  # the total weight is re-added from class 0's cells
            assert_close(got, high.astype(np.float32))
        else:  # the (high, low) pair is re-split from its float64 sum: far below float32
            assert_close(got, high, rtol=1e-12, atol=1e-15)
    got, want = streaming.compute(back), streaming.compute(state)
    for name in streaming.OUTPUTS:
        assert_close(got[name], want[name], err_msg=name)


def test_concatenated_tables_are_the_merge():
    probs, labels, weights = _data()
    a = streaming.update(streaming.init(10, 4), probs[:300], labels[:300], weights[:300])
    b = streaming.update(streaming.init(10, 4), probs[300:], labels[300:], weights[300:])
    table = pa.concat_tables([streaming.to_arrow(a), streaming.to_arrow(b)])
    got = streaming.compute(streaming.from_arrow(table))
    want = streaming.compute(streaming.merge(a, b))
    for name in streaming.OUTPUTS:
        assert_close(got[name], want[name], err_msg=name)


def test_parquet_file_round_trip(tmp_path):
    import pyarrow.parquet as pq

    state = _states()[1]
    pq.write_table(streaming.to_arrow(state), tmp_path / "state.parquet")
    back = streaming.from_arrow(pq.read_table(tmp_path / "state.parquet"))
    assert_close(streaming.compute(back)["ece"], streaming.compute(state)["ece"])


def test_readme_engine_example_gives_jaxcals_state():
    text = SCALE_GUIDE.read_text()
    code = text.split("<!-- executed by tests/streaming/test_arrow.py -->\n```python\n")[1].split(
        "```"
    )[0]
    namespace = {}
    exec(code, namespace)
    data = namespace["data"]
    p = np.asarray(data["p"])
    y = np.asarray(data["y"]).astype(np.int32)
    direct = streaming.update(streaming.init(16, 2, binary=True, resolution=4096), p, y)
    engine = namespace["state"]
    np.testing.assert_array_equal(engine.top_count, direct.top_count)
    np.testing.assert_array_equal(engine.class_count, direct.class_count)
    got, want = streaming.compute(engine), streaming.compute(direct)
    for name in streaming.OUTPUTS:
        assert_close(got[name], want[name], err_msg=name)


def test_bad_tables_name_what_is_wrong():
    table = streaming.to_arrow(_states()[0])
    bare = table.replace_schema_metadata(None)
    with pytest.raises(ValueError, match=r"no jaxcal metadata for \['n_bins', 'num_classes'\]"):
        streaming.from_arrow(bare)
    assert int(streaming.from_arrow(bare, n_bins=10, num_classes=4).top_count.sum()) > 0
    with pytest.raises(ValueError, match=r"has schema 'jaxcal\.state/9'"):
        streaming.from_arrow(table.replace_schema_metadata({"jaxcal.schema": "jaxcal.state/9"}))
    with pytest.raises(ValueError, match="lacks the columns"):
        streaming.from_arrow(table.drop_columns(["weight"]))
    with pytest.raises(ValueError, match="outside the layout"):
        streaming.from_arrow(bare, n_bins=5, num_classes=4)


def test_empty_state_round_trips_to_zeros():
    back = streaming.from_arrow(streaming.to_arrow(streaming.init(3, 2)))
    assert all(float(v) == 0 for v in streaming.compute(back).values())
    assert back.totals.dtype == jnp.float32


def test_concatenated_tables_of_other_layouts_are_refused():
    """A6: concat_tables keeps the first table's metadata; an 8-bin table's buckets were
    read as buckets of the 4096 of the first, wrong sums without an error."""
    rng = np.random.default_rng(42)
    p = rng.random(2000).astype(np.float32)
    y = (rng.random(2000) < p).astype(np.int32)
    fine = streaming.update(streaming.init(16, 2, binary=True, resolution=4096), p, y)
    coarse = streaming.update(streaming.init(8, 2, binary=True), p, y)
    mixed = pa.concat_tables([streaming.to_arrow(fine), streaming.to_arrow(coarse)])
    with pytest.raises(ValueError, match="mixes states of different layouts"):
        streaming.from_arrow(mixed)
    with pytest.raises(ValueError, match="same n_bins"):  # merge says which differ
        streaming.merge(fine, coarse)
    same = streaming.from_arrow(pa.concat_tables([streaming.to_arrow(fine)] * 2))
    assert_close(
        streaming.compute(same)["ece"], streaming.compute(streaming.merge(fine, fine))["ece"]
    )
    # States of bf16 scores have edges rounded to bf16: still read.
    low = streaming.update(
        streaming.init(16, 2, binary=True, resolution=4096), jnp.asarray(p, jnp.bfloat16), y
    )
    np.testing.assert_array_equal(
        streaming.from_arrow(streaming.to_arrow(low)).class_count, low.class_count
    )
