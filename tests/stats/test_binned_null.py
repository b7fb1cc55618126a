"""Fast path of consistency resampling for binned metrics (jaxcal.stats._resampling.binned_null).

Oracles: NumPy per-bin counts of the labels the generic path draws, the metric itself
called on the resampled labels, and the generic path (the same metric hidden in a
lambda) for the p-values. Which path ran is read from the traced computation: only the
fast path counts hits with an int8 matrix product.
"""

from __future__ import annotations

import functools
from functools import partial

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
import jaxcal.stats._resampling.binned_null as binned_null
from jaxcal._core.binning import bin_edges_and_index
from jaxcal._core.random import seed_words
from jaxcal.stats import consistency_test
from jaxcal.stats._resampling.binned_null import (
    BinnedSpec,
    binned_resampling,
    binned_spec,
    hit_counts,
)
from tests.helpers import assert_close
from tests.resampling_data import ECE_VARIANTS, KEY, PM, YM, P, R, Y, consistency_labels


def test_hit_counts_equal_the_binned_labels():
    """The fast path's per-bin counts are the counts of the very labels drawn otherwise
    (binary and multiclass, N odd: the last block's second word is padding)."""
    seeds = seed_words(jax.random.split(KEY, 37))
    options = [(10, "uniform"), (7, "quantile")]
    scores = {"binary": P, "multiclass": jnp.max(PM, axis=1)}
    bins = {
        kind: [bin_edges_and_index(s, m, b, "right", None)[1] for m, b in options]
        for kind, s in scores.items()
    }

    @jax.jit
    def draw(seeds, p, y, pm, ym):
        out = {}
        for kind, probs, labels in (("binary", p, y), ("multiclass", pm, ym)):
            counts = [
                hit_counts(seeds, binned_resampling(probs, labels, m, b, "right").plan)
                for m, b in options
            ]
            out[kind] = (consistency_labels(seeds, probs), counts)
        return out

    for kind, (labels, counts) in draw(seeds, P, Y, PM, YM).items():
        labels = np.asarray(labels)
        if kind == "multiclass":
            hits = labels == np.argmax(np.asarray(PM), axis=1)[None]
        else:
            hits = labels == 1
        for (m, _), b, ours in zip(options, bins[kind], counts, strict=True):
            ref = np.stack([np.bincount(np.asarray(b), weights=h, minlength=m) for h in hits])
            np.testing.assert_array_equal(np.asarray(ours), ref.astype(np.int64))


@pytest.mark.parametrize(("variant", "multiclass"), [(0, False), (1, False), (2, True)])
def test_fast_path_equals_calling_the_metric(variant, multiclass):
    metric = ECE_VARIANTS[variant]
    probs, labels = (PM, YM) if multiclass else (P, Y)
    fast = consistency_test(metric, probs, labels, key=KEY, n_resamples=R)

    def generic(p, y):  # the same metric, without a declared binned form
        return metric(p, y)

    slow = consistency_test(generic, probs, labels, key=KEY, n_resamples=R)
    # Same labels; values may differ in the last bit (fused differently): documented.
    assert_close(fast.null, slow.null, rtol=1e-6, atol=1e-7)  # float32 round-off of gap_norm
    assert_close(fast.statistic, metric(probs, labels))
    assert fast.p_value == slow.p_value
    # And each null value is the metric evaluated on that resample's labels.
    seeds = seed_words(jax.random.split(KEY, R))
    resampled = consistency_labels(seeds[:3], probs)
    for r in range(3):
        assert_close(slow.null[r], metric(probs, resampled[r]))


# ---------------------------------------------------------------- explicit dispatch


def _has_int8_product(jaxpr) -> bool:
    """Whether ``jaxpr`` (or one nested in its equations) has a dot_general of int8."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general" and all(
            v.aval.dtype == jnp.int8 for v in eqn.invars
        ):
            return True
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                if isinstance(sub, jex_core.ClosedJaxpr):
                    sub = sub.jaxpr
                if isinstance(sub, jex_core.Jaxpr) and _has_int8_product(sub):
                    return True
    return False


def _takes_fast_path(metric, probs, labels) -> bool:
    traced = jax.make_jaxpr(
        lambda p, y, k: consistency_test(metric, p, y, key=k, n_resamples=R).null
    )(probs, labels, KEY)
    return _has_int8_product(traced.jaxpr)


def test_declared_metrics_take_the_fast_path_under_partial_and_jit():
    """Declared forms are found through partial and jax.jit; a lambda takes the generic
    path; both give the same p-values (the same labels)."""
    ece10 = partial(jaxcal.ece, n_bins=10)
    mce5 = partial(jaxcal.mce, n_bins=5, closed="left")
    cases = [
        (ece10, P, Y),
        (jax.jit(partial(jaxcal.ece, n_bins=10)), P, Y),
        (jaxcal.mce, PM, YM),
        (mce5, PM, YM),
    ]
    for metric, probs, labels in cases:
        assert _takes_fast_path(metric, probs, labels), metric
    hidden = lambda p, y: ece10(p, y)  # noqa: E731
    assert not _takes_fast_path(hidden, P, Y)
    generic = consistency_test(hidden, P, Y, key=KEY, n_resamples=R)
    for metric in (ece10, jax.jit(partial(jaxcal.ece, n_bins=10))):
        fast = consistency_test(metric, P, Y, key=KEY, n_resamples=R)
        assert fast.p_value == generic.p_value
        assert_close(fast.null, generic.null, rtol=1e-6, atol=1e-7)  # float32 round-off of gap_norm
    fast = consistency_test(mce5, PM, YM, key=KEY, n_resamples=R)
    generic = consistency_test(lambda p, y: mce5(p, y), PM, YM, key=KEY, n_resamples=R)
    assert fast.p_value == generic.p_value


def test_binned_spec_reads_the_declaration():
    assert binned_spec(jaxcal.ece) == BinnedSpec(15, "uniform", "l1", "right", False)
    nested = partial(partial(jaxcal.ece, n_bins=4, norm="l2"), n_bins=7)  # the outer wins
    assert binned_spec(nested) == BinnedSpec(7, "uniform", "l2", "right", False)
    assert binned_spec(jax.jit(partial(jaxcal.mce, binning="quantile"))) == BinnedSpec(
        15, "quantile", "max", "right", False
    )
    assert binned_spec(partial(jaxcal.ece, weights=None)) is not None

    @functools.wraps(jaxcal.ece)  # copies the declaration, but may change the value
    def doubled(probs, labels):
        return 2 * jaxcal.ece(probs, labels)

    undeclared = [
        lambda p, y: jaxcal.ece(p, y),
        doubled,
        jaxcal.classwise_ece,
        partial(jaxcal.ece, P),  # a positional argument
        partial(jaxcal.ece, weights=jnp.ones(3)),
        partial(jaxcal.mce, norm="l1"),  # mce fixes norm: the metric itself refuses it
        partial(jaxcal.mce, debias=False),  # not an option of mce
        partial(jaxcal.ece, average="label"),  # not an option of ece
    ]
    for metric in undeclared:
        assert binned_spec(metric) is None, metric
    with pytest.raises(ValueError, match="`n_bins`"):
        binned_spec(partial(jaxcal.ece, n_bins=0))
    with pytest.raises(ValueError, match="`debias=True` requires"):
        binned_spec(partial(jaxcal.ece, debias=True))


@pytest.mark.parametrize(("probs", "labels"), [(P, Y), (PM, YM)], ids=["binary", "top-label"])
def test_cumulative_hit_counts_equal_the_dense_ones(probs, labels, monkeypatch):
    # Beyond DENSE_MAX_BINS the hits are counted from cumulative sums (D09); both forms
    # count the same draws.
    seeds = seed_words(jax.random.split(KEY, 8))
    dense = binned_resampling(jnp.asarray(probs), jnp.asarray(labels), 40, "uniform", "right")
    monkeypatch.setattr(binned_null, "DENSE_MAX_BINS", 0)
    flat = binned_resampling(jnp.asarray(probs), jnp.asarray(labels), 40, "uniform", "right")
    assert dense.plan.onehot is not None and flat.plan.onehot is None
    np.testing.assert_array_equal(hit_counts(seeds, flat.plan), hit_counts(seeds, dense.plan))


def test_many_bins_in_bounded_memory():
    # D09: 1e5 bins asked for 40 GB (an (M - 1, M) matrix) whatever N; now O(N + M).
    scores = np.full(20, 0.3, np.float32)
    metric = partial(jaxcal.ece, n_bins=100_000)
    res = consistency_test(metric, scores, np.zeros(20, int), key=KEY, n_resamples=2)
    assert 0 < float(res.p_value) <= 1
    bands = jaxcal.consistency_bands(scores, key=KEY, n_resamples=2, n_bins=100_000)
    assert bands.low.shape == (100_000,)
