"""Summary replicates (jaxcal/streaming/_summary.py): the same resamples as the whole
replicate states, kept as the state at M bins and the ECE view's buckets, in memory that
no longer grows as B x K x R, updated in place (donated buffers)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import streaming
from jaxcal.streaming._buckets import coarsen
from jaxcal.streaming._corp import decomposition_of_cells
from jaxcal.streaming._summary import (
    SummaryReplicates,
    _summary_update_kernel,
    summary_cells,
    summary_init,
    summary_update,
)
from jaxcal.streaming._views import equal_mass_of_cells, main_cells
from tests.helpers import assert_close
from tests.streaming.test_state import _data

KEY = jax.random.key(3)
M, R, B = 10, 40, 5  # B odd: the last chunk draws a replicate that is dropped


def _both(binary, closed="right"):
    """Whole replicate states and summary replicates of the same weighted rows."""
    probs, labels, weights = _data(binary=binary)
    k = 2 if binary else probs.shape[1]
    ids = np.arange(len(labels))
    options = dict(binary=binary, closed=closed)
    full = streaming.poisson_init(M, k, B, resolution=R, **options)
    summary = summary_init(M, k, B, resolution=R, **options)
    for part in np.array_split(ids, 3):  # three batches through the compensated sums
        batch = probs[part], labels[part], part
        full = streaming.poisson_update(full, *batch, key=KEY, weights=weights[part])
        summary = summary_update(summary, *batch, key=KEY, weights=weights[part])
    return full, summary


@pytest.mark.parametrize("binary", [True, False])
def test_summary_is_the_whole_replicate_rebinned(binary):
    full, summary = _both(binary, closed="left" if binary else "right")
    assert isinstance(summary, SummaryReplicates) and summary.states.resolution == M
    # The same multiplicities: every count is the whole replicate's, exactly.
    np.testing.assert_array_equal(summary.states.top_count, coarsen(full.top_count, M))
    np.testing.assert_array_equal(summary.states.class_count, coarsen(full.class_count, M))
    got, want = streaming.poisson_compute(summary.states), streaming.poisson_compute(full)
    for name in streaming.OUTPUTS:
        assert_close(got[name], want[name], err_msg=name)
    for b in range(B):
        one = jax.tree_util.tree_map(lambda x, b=b: x[b], full)
        cells, fine = (
            summary_cells(jax.tree_util.tree_map(lambda x, b=b: x[b], summary)),
            main_cells(one),
        )
        np.testing.assert_array_equal(cells.count, fine.count)
        for field in ("weight", "sum_score", "sum_target"):
            assert_close(getattr(cells, field), getattr(fine, field), err_msg=field)
        mass = equal_mass_of_cells(cells, M, one.closed)
        assert_close(mass.ece, streaming.equal_mass_ece(one).ece)
        assert_close(mass.bound, streaming.equal_mass_ece(one).bound)
        if binary:
            totals = summary.states.totals[b] + summary.states.compensation[2][b]
            for score in ("brier", "log"):
                dec = decomposition_of_cells(cells, totals, score)
                assert_close(dec, streaming.corp_decomposition(one, score=score), err_msg=score)


def test_stream_state_keeps_summaries_and_the_same_state():
    p, y, w = _data()
    options = dict(weights=w, n_bins=M, resolution=R, n_replicates=B, key=KEY, batch_rows=256)
    full = streaming.array_state(p, y, **options)
    summary = streaming.array_state(p, y, replicates="summary", **options)
    assert isinstance(summary.replicates, SummaryReplicates)
    # The point state does not depend on what the replicates keep: bit for bit.
    for a, b in zip(
        jax.tree_util.tree_leaves(full.state), jax.tree_util.tree_leaves(summary.state), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        summary.replicates.states.top_count, coarsen(full.replicates.top_count, M)
    )
    with pytest.raises(ValueError, match="`replicates` must be one of"):
        streaming.array_state(p, y, replicates="fine", **options)


def test_memory_does_not_grow_as_replicates_times_classes_times_buckets():
    k, m, r, b, n = 10, 15, 4110, 32, 1024  # the report's K = 10 layout
    summary = summary_init(m, k, b, resolution=r)
    full = streaming.poisson_init(m, k, b, resolution=r)

    def nbytes(tree):
        return sum(x.nbytes for x in jax.tree_util.tree_leaves(tree))

    # Per replicate: 7 R numbers (count, 3 sums, 3 low parts) and the M-bin state, where
    # a whole state is 20 K R numbers (3.3 MB here).
    assert nbytes(summary) == b * 4 * (7 * r + 20 * k * m + 6) + 4 * b
    assert nbytes(full) > 25 * nbytes(summary)
    batch = (
        jnp.full((n, k), 1 / k, jnp.float32),
        jnp.zeros(n, jnp.int32),
        jnp.ones(n, jnp.float32),
        jnp.zeros((n, 2), jnp.uint32),
        KEY,
    )
    memory = _summary_update_kernel.lower(summary, *batch).compile().memory_analysis()
    # The new replicates take the old ones' buffers, every leaf (donated: one copy alive,
    # where the whole states' update held two), and the temporaries are the batch's sums
    # (one more summary) and one chunk's scatter rows: nothing of size B x K x R.
    assert memory.alias_size_in_bytes == nbytes(summary)
    assert memory.temp_size_in_bytes < 2 * nbytes(summary) < nbytes(full) / 10


def test_update_consumes_its_input():
    probs, labels, _ = _data(binary=True)
    reps = summary_init(M, 2, B, resolution=R, binary=True)
    new = summary_update(reps, probs, labels, np.arange(len(labels)), key=KEY)
    assert reps.count.is_deleted() and not new.count.is_deleted()
    assert int(new.count.sum()) == int(new.states.top_count.sum())
    with pytest.raises(ValueError, match="does not fit the states"):
        summary_update(
            new, np.stack([1 - probs, probs], 1), labels, np.arange(len(labels)), key=KEY
        )


def test_public_intervals_of_summary_replicates_equal_whole_states():
    """streaming.array_state(replicates="summary"): poisson_interval of its states."""
    probs, labels, weights = _data(binary=False)
    options = dict(n_bins=M, resolution=R, n_replicates=B, key=KEY, batch_rows=64)
    whole = streaming.array_state(probs, labels, weights=weights, **options)
    summary = streaming.array_state(probs, labels, weights=weights, replicates="summary", **options)
    assert isinstance(summary.replicates, streaming.SummaryReplicates)
    expected = streaming.poisson_interval(whole.replicates)
    got = streaming.poisson_interval(summary.replicates.states)
    assert set(got) == set(expected)
    for name in expected:  # sums at M bins instead of re-binned from R: float32 round-off
        assert_close(got[name], expected[name], atol=1e-6, err_msg=name)
