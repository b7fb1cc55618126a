"""``groups=`` with ``binning="quantile"`` (jaxcal.metrics._segment_bins.segment_quantile_edges).

Segment g is binned by the (weighted) quantiles of its own scores: its ECE and curve are
the ungrouped call on its rows, on tied scores with and without weights, for disjoint ids
(one sort for all segments) and an overlapping membership matrix (one pass per column),
binary and confidence views; an empty segment; jit, vmap; the number of sorts.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jex_core

import jaxcal
from jaxcal._core import sort as _sort
from tests.helpers import assert_close, count_compiles

N, K, G, M = 240, 3, 5, 6
FIELDS = ("counts", "weights", "mean_confidence", "mean_accuracy")


def _data(n=N, seed=0):
    """Tied binary and multiclass scores, integer and float weights, ids and masks.

    Ids in random order with segment 3 empty; masks overlap, column 0 holds everyone and
    column 2 no one. Integer weights have exact sums, so the weighted edges are the
    ungrouped ones bit for bit; float weights' cumulative sums may round differently.
    """
    rng = np.random.default_rng(seed)
    p = np.round(rng.uniform(0, 1, n), 2).astype(np.float32)  # many ties
    y = (rng.uniform(size=n) < p).astype(np.int32)
    logits = np.round(2.0 * rng.normal(size=(n, K)), 1)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs = (probs / probs.sum(1, keepdims=True)).astype(np.float32)
    labels = rng.integers(0, K, n).astype(np.int32)
    weights = {
        "none": None,
        "int": rng.integers(0, 4, n).astype(np.float32),
        "float": rng.uniform(0.2, 3.0, n).astype(np.float32),
    }
    ids = rng.integers(0, G, n).astype(np.int32)
    ids[ids == 3] = 4  # segment 3 has no rows
    masks = rng.uniform(size=(n, G)) < rng.uniform(0.1, 0.7, G)
    masks[:, 0], masks[:, 2] = True, False
    return p, y, probs, labels, weights, ids, masks


P, Y, PROBS, LABELS, WEIGHTS, IDS, MASKS = _data()


def _members(groups):
    groups = np.asarray(groups)
    return groups if groups.ndim == 2 else groups[:, None] == np.arange(G)[None, :]


def _check_against_loop(probs, labels, groups, weights, exact_edges, **kw):
    """Grouped ece and reliability_curve against the ungrouped calls on each segment."""
    n_groups = None if np.ndim(groups) == 2 else G
    opts = dict(binning="quantile", weights=weights, **kw)
    g_ece = jaxcal.ece(probs, labels, groups=groups, n_groups=n_groups, **opts)
    g_curve = jaxcal.reliability_curve(probs, labels, groups=groups, n_groups=n_groups, **opts)
    assert g_ece.shape == (G,) and g_curve.edges.shape == (G, kw["n_bins"] + 1)
    for g, m in enumerate(_members(groups).T):
        if not m.any():
            continue  # an empty selection is refused by the ungrouped call: see below
        sub = dict(opts, weights=None if weights is None else weights[m])
        assert_close(g_ece[g], jaxcal.ece(probs[m], labels[m], **sub))
        curve = jaxcal.reliability_curve(probs[m], labels[m], **sub)
        if exact_edges:
            np.testing.assert_array_equal(g_curve.edges[g], curve.edges)
        else:
            assert_close(g_curve.edges[g], curve.edges)
        np.testing.assert_array_equal(g_curve.counts[g], curve.counts)
        for field in FIELDS[1:]:
            assert_close(getattr(g_curve, field)[g], getattr(curve, field))


@pytest.mark.parametrize("weighted", ["none", "int", "float"])
@pytest.mark.parametrize("form", ["ids", "masks"])
def test_binary_segments_match_the_ungrouped_calls(form, weighted):
    groups = IDS if form == "ids" else MASKS
    for closed in ("right", "left"):
        _check_against_loop(
            P, Y, groups, WEIGHTS[weighted], weighted != "float", n_bins=M, closed=closed
        )


@pytest.mark.parametrize("form", ["ids", "masks"])
def test_confidence_segments_match_the_ungrouped_calls(form):
    groups = IDS if form == "ids" else MASKS
    for weighted in ("none", "int"):
        _check_against_loop(PROBS, LABELS, groups, WEIGHTS[weighted], True, n_bins=4)
    for norm in ("l2", "max"):
        got = jaxcal.ece(
            PROBS,
            LABELS,
            n_bins=4,
            binning="quantile",
            norm=norm,
            groups=groups,
            n_groups=None if form == "masks" else G,
        )
        for g, m in enumerate(_members(groups).T):
            if m.any():
                want = jaxcal.ece(PROBS[m], LABELS[m], n_bins=4, binning="quantile", norm=norm)
                assert_close(got[g], want)


@pytest.mark.parametrize("weighted", ["none", "int"])
def test_host_sort_path_matches_the_ungrouped_calls(weighted):
    """N past the host sorts' thresholds (the CPU callback sorts), ids in random order."""
    assert 5000 >= _sort.HOST_SEGMENT_SORT_MIN_SIZE
    p, y, _, _, weights, ids, _ = _data(n=5000, seed=1)
    _check_against_loop(p, y, ids, weights[weighted], True, n_bins=15)


def test_empty_segment_is_zero_with_edges_zero_then_one():
    curve = jaxcal.reliability_curve(P, Y, n_bins=M, binning="quantile", groups=IDS, n_groups=G)
    np.testing.assert_array_equal(curve.edges[3], [0.0] * M + [1.0])
    assert not curve.counts[3].any() and not curve.weights[3].any()
    assert not curve.mean_confidence[3].any() and not curve.mean_accuracy[3].any()
    for groups, n_groups, empty in ((IDS, G, 3), (MASKS, None, 2)):
        for w in (None, WEIGHTS["float"]):
            e = jaxcal.ece(P, Y, binning="quantile", weights=w, groups=groups, n_groups=n_groups)
            assert e[empty] == 0 and bool(jnp.all(jnp.isfinite(e)))
    # Rows of weight 0 alone: the segment's ECE is 0, as the ungrouped call on them gives.
    zero = jnp.where(jnp.asarray(IDS) == 1, 0.0, 1.0)
    e = jaxcal.ece(P, Y, binning="quantile", weights=zero, groups=IDS, n_groups=G)
    assert (
        e[1]
        == 0
        == jaxcal.ece(P[IDS == 1], Y[IDS == 1], binning="quantile", weights=zero[IDS == 1])
    )


def test_jit_with_groups_as_arguments_and_ids_outside():
    p, y, ids, masks = jnp.asarray(P), jnp.asarray(Y), jnp.asarray(IDS), jnp.asarray(MASKS)
    kw = dict(n_bins=M, binning="quantile")
    f = count_compiles(lambda p, y, g: jaxcal.ece(p, y, groups=g, n_groups=G, **kw))
    np.testing.assert_array_equal(f(p, y, ids), jaxcal.ece(p, y, groups=ids, n_groups=G, **kw))
    f(p * 0.5, y, jnp.roll(ids, 1))
    assert f.compiles() == 1
    curve = jax.jit(lambda g: jaxcal.reliability_curve(p, y, groups=g, **kw))(masks)
    eager = jaxcal.reliability_curve(p, y, groups=masks, **kw)
    np.testing.assert_array_equal(curve.edges, eager.edges)
    np.testing.assert_array_equal(curve.counts, eager.counts)
    # Ids outside [0, G) are not checked under jit: their rows belong to no segment.
    outside = ids.at[:10].set(G + 3)
    got = jax.jit(lambda g: jaxcal.ece(p, y, groups=g, n_groups=G, **kw))(outside)
    for g in range(G):
        m = np.asarray(outside == g)
        if m.any():
            assert_close(got[g], jaxcal.ece(p[m], y[m], **kw))


def test_vmap_over_a_leading_batch_axis():
    batch = [_data(seed=seed) for seed in (1, 2)]
    ps, ys, ids, masks = (jnp.asarray(np.stack([b[i] for b in batch])) for i in (0, 1, 5, 6))
    ws = jnp.asarray(np.stack([b[4]["int"] for b in batch]))
    kw = dict(n_bins=M, binning="quantile")

    def per_row(p, y, w, g, m):
        return (
            jaxcal.ece(p, y, weights=w, groups=g, n_groups=G, **kw),
            jaxcal.reliability_curve(p, y, groups=m, **kw).edges,
        )

    mapped = jax.vmap(per_row)(ps, ys, ws, ids, masks)
    for i in range(2):
        for got, want in zip(mapped, per_row(ps[i], ys[i], ws[i], ids[i], masks[i]), strict=True):
            assert_close(got[i], want)


def _count_sorts(jaxpr) -> int:
    """``sort`` equations in ``jaxpr`` and the jaxprs nested in its equations."""
    count = 0
    for eqn in jaxpr.eqns:
        count += eqn.primitive.name == "sort"
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                sub = getattr(sub, "jaxpr", sub)
                if isinstance(sub, jex_core.Jaxpr):
                    count += _count_sorts(sub)
    return count


@pytest.mark.parametrize("weighted", [False, True])
def test_disjoint_segments_take_the_sorts_of_one_ungrouped_call(weighted):
    """One sort for all disjoint segments (two with weights: by weight, then by (segment,
    score)), as the ungrouped quantile ECE: the count does not grow with G. N is below
    the host thresholds, so every sort is an XLA ``sort`` in the program."""
    w = jnp.asarray(WEIGHTS["float"]) if weighted else None

    def sorts(fn):
        return _count_sorts(jax.make_jaxpr(fn)(jnp.asarray(P), jnp.asarray(Y)).jaxpr)

    plain = sorts(lambda p, y: jaxcal.ece(p, y, binning="quantile", weights=w))
    assert plain == (2 if weighted else 1)
    for n_groups in (G, 100):
        ids = jnp.asarray(IDS)

        def grouped(p, y, n_groups=n_groups, ids=ids):
            return jaxcal.ece(p, y, binning="quantile", weights=w, groups=ids, n_groups=n_groups)

        assert sorts(grouped) == plain


def test_grad_is_the_sum_of_the_segments_gradients():
    p, y, w = jnp.asarray(P), jnp.asarray(Y), jnp.asarray(WEIGHTS["int"])
    kw = dict(n_bins=M, binning="quantile")
    grad = jax.grad(lambda p: jaxcal.ece(p, y, weights=w, groups=IDS, n_groups=G, **kw).sum())(p)
    want = jnp.zeros_like(p)
    for m in _members(IDS).T:
        if m.any():
            want = want + jax.grad(lambda p, m=m: jaxcal.ece(p[m], y[m], weights=w[m], **kw))(p)
    assert bool(jnp.all(jnp.isfinite(grad)))
    assert_close(grad, want)
