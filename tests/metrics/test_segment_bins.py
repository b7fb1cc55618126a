"""``groups=`` on ece, reliability_curve, brier_score and log_loss (jaxcal.metrics._segment_bins).

Against float64 NumPy oracles that loop over the segments and call the reference
(tests/reference.py) on each segment's rows, on random data and on the shipped digits
predictions; against per-segment ungrouped calls; under jit, vmap and grad; bad groups.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from jaxcal import metrics
from tests import reference as ref
from tests.helpers import assert_close, count_compiles, x64

N, K, G, M = 240, 4, 5, 6


def _data(seed=0):
    """Binary and multiclass predictions, weights, ids (segment G - 1 empty) and masks."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 1, N)
    p[:6] = [0.0, 1.0, 0.5, 1 / 3, 2 / 3, 1.0]  # edges and the ends
    y = (rng.uniform(size=N) < p**1.3).astype(np.int32)
    logits = 2.0 * rng.normal(size=(N, K))
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    labels = rng.integers(0, K, N).astype(np.int32)
    w = rng.uniform(0.2, 3.0, N)
    ids = rng.integers(0, G - 1, N).astype(np.int32)  # segment G - 1 has no rows
    masks = rng.uniform(size=(N, G)) < rng.uniform(0.1, 0.7, G)
    masks[:, 0], masks[:, 2] = True, False  # everyone, and no one
    return p, y, probs, labels, w, ids, masks


P, Y, PROBS, LABELS, W, IDS, MASKS = _data()


def _members(groups):
    """(N, G) boolean membership of either form of ``groups``."""
    groups = np.asarray(groups)
    return groups if groups.ndim == 2 else groups[:, None] == np.arange(G)[None, :]


def _oracle(fn, probs, labels, groups, weights):
    """``fn(probs, labels, weights)`` on each segment's rows: the float64 loop over segments."""
    out = []
    for m in _members(groups).T:
        w = None if weights is None else np.asarray(weights, np.float64)[m]
        out.append(fn(np.asarray(probs, np.float64)[m], np.asarray(labels)[m], w))
    return np.array(out)


def _ref_ece(norm="l1", debias=False, n_bins=M, closed="right"):
    def fn(p, y, w):
        return ref.ece(p, y, n_bins, norm=norm, debias=debias, closed=closed, weights=w)

    return fn


def _ref_mean(per_sample):
    def fn(p, y, w):
        if len(p) == 0:
            return 0.0
        return np.average(per_sample(p, y), weights=w)

    return fn


def _brier(p, y):
    if p.ndim == 1:
        return (p - y) ** 2
    return ((p - np.eye(p.shape[1])[y]) ** 2).sum(1)


def _log_loss(p, y):
    eps = np.finfo(np.float64).eps
    p_true = np.where(y == 1, p, 1 - p) if p.ndim == 1 else p[np.arange(len(y)), y]
    return -np.log(np.clip(p_true, eps, 1 - eps))


def _ref_curve(p, y, w):
    """Per-bin (counts, mean confidence, mean accuracy) of one segment, float64."""
    s, t = (p, y == 1) if p.ndim == 1 else (p.max(1), p.argmax(1) == y)
    w = np.ones(len(s)) if w is None else w
    bins = ref.uniform_bin(s, M, "right")
    rows = ref._gaps(s, t.astype(np.float64), bins, M, w)
    return np.array([[r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]])


FORMS = {"ids": (IDS, G), "masks": (MASKS, None)}


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("form", ["ids", "masks"])
def test_binary_metrics_match_oracle(form, weighted):
    groups, n_groups = FORMS[form]
    w = W if weighted else None
    kw = dict(weights=w, groups=jnp.asarray(groups), n_groups=n_groups)
    with x64():
        p, y = jnp.asarray(P), jnp.asarray(Y)
        for norm, debias in [("l1", False), ("l2", False), ("l2", True), ("max", False)]:
            got = jaxcal.ece(p, y, n_bins=M, norm=norm, debias=debias, **kw)
            assert got.shape == (G,)
            assert_close(got, _oracle(_ref_ece(norm, debias), P, Y, groups, w))
        got = jaxcal.ece(p, y, n_bins=M, closed="left", **kw)
        assert_close(got, _oracle(_ref_ece(closed="left"), P, Y, groups, w))
        assert_close(jaxcal.brier_score(p, y, **kw), _oracle(_ref_mean(_brier), P, Y, groups, w))
        assert_close(jaxcal.log_loss(p, y, **kw), _oracle(_ref_mean(_log_loss), P, Y, groups, w))
        curve = jaxcal.reliability_curve(p, y, n_bins=M, **kw)
    expected = _oracle(_ref_curve, P, Y, groups, w)  # (G, 3, M)
    np.testing.assert_array_equal(curve.counts, expected[:, 0])
    assert_close(curve.mean_confidence, expected[:, 1])
    assert_close(curve.mean_accuracy, expected[:, 2])
    assert curve.edges.shape == (M + 1,)


@pytest.mark.parametrize("form", ["ids", "masks"])
def test_multiclass_metrics_match_oracle(form):
    groups, n_groups = FORMS[form]
    kw = dict(weights=W, groups=jnp.asarray(groups), n_groups=n_groups)
    with x64():
        p, y = jnp.asarray(PROBS), jnp.asarray(LABELS)
        assert_close(
            jaxcal.ece(p, y, n_bins=M, **kw), _oracle(_ref_ece(), PROBS, LABELS, groups, W)
        )
        brier = _oracle(_ref_mean(_brier), PROBS, LABELS, groups, W)
        assert_close(metrics.brier_score(p, y, **kw), brier)
        loss = _oracle(_ref_mean(_log_loss), PROBS, LABELS, groups, W)
        assert_close(metrics.log_loss(p, y, **kw), loss)


def test_digits_segments_match_oracle():
    """Real predictions: segments by true digit (disjoint) and overlapping descriptions."""
    data = np.load("jaxcal/data/digits_mlp.npz")
    probs, labels = data["probs"].astype(np.float64), data["labels"]
    probs /= probs.sum(1, keepdims=True)
    conf = probs.max(1)
    masks = np.stack([labels < 5, labels % 2 == 0, conf > 0.99, np.ones_like(labels, bool)], 1)
    with x64():
        p, y = jnp.asarray(probs), jnp.asarray(labels)
        for groups, n_groups in [(labels, 10), (masks, None)]:
            got = jaxcal.ece(p, y, groups=jnp.asarray(groups), n_groups=n_groups)
            members = groups[:, None] == np.arange(10) if groups.ndim == 1 else groups
            expected = [ref.ece(probs[m], labels[m], 15) for m in members.T]
            assert_close(got, expected)
            got = jaxcal.log_loss(p, y, groups=jnp.asarray(groups), n_groups=n_groups)
            assert_close(got, [_log_loss(probs[m], labels[m]).mean() for m in members.T])
        everyone = jaxcal.brier_score(p, y, groups=jnp.asarray(masks))[-1]
        assert_close(everyone, jaxcal.brier_score(p, y))


@pytest.mark.parametrize("form", ["ids", "masks"])
def test_grouped_equals_ungrouped_calls(form):
    """Segment g's value is the ungrouped call on its rows (float32, the default path)."""
    groups, n_groups = FORMS[form]
    kw = dict(weights=W.astype(np.float32), groups=jnp.asarray(groups), n_groups=n_groups)
    p, y = jnp.asarray(P, jnp.float32), jnp.asarray(Y)
    grouped = {
        "ece": jaxcal.ece(p, y, n_bins=M, norm="l2", **kw),
        "brier": jaxcal.brier_score(p, y, **kw),
        "log_loss": jaxcal.log_loss(p, y, **kw),
        "curve": jaxcal.reliability_curve(p, y, n_bins=M, **kw),
    }
    for g, m in enumerate(_members(groups).T):
        w = jnp.asarray(W * m, jnp.float32)  # the segment's rows: the others weigh 0
        assert_close(grouped["ece"][g], jaxcal.ece(p, y, n_bins=M, norm="l2", weights=w))
        assert_close(grouped["brier"][g], jaxcal.brier_score(p, y, weights=w))
        assert_close(grouped["log_loss"][g], jaxcal.log_loss(p, y, weights=w))
        curve = jaxcal.reliability_curve(p, y, n_bins=M, weights=w)
        for field in ("counts", "weights", "mean_confidence", "mean_accuracy"):
            assert_close(getattr(grouped["curve"], field)[g], getattr(curve, field))
        if m.any():  # the rows themselves (an empty selection is refused: no rows)
            sub = jaxcal.ece(p[m], y[m], n_bins=M, norm="l2", weights=w[m])
            assert_close(grouped["ece"][g], sub)


def test_empty_segment_is_zero_and_none_is_the_plain_call():
    p, y = jnp.asarray(P, jnp.float32), jnp.asarray(Y)
    ids = jnp.asarray(IDS)
    for fn in (jaxcal.ece, jaxcal.brier_score, jaxcal.log_loss):
        out = fn(p, y, groups=ids, n_groups=G)
        assert out[G - 1] == 0 and bool(jnp.all(jnp.isfinite(out)))
        plain, none = fn(p, y), fn(p, y, groups=None)
        np.testing.assert_array_equal(plain, none)  # the same code path, bit for bit
    curve = jaxcal.reliability_curve(p, y, groups=ids, n_groups=G)
    assert not curve.counts[G - 1].any() and not curve.mean_accuracy[G - 1].any()
    zero_w = jaxcal.ece(p, y, weights=jnp.zeros(N), groups=jnp.asarray(MASKS))
    np.testing.assert_array_equal(zero_w, np.zeros(G))


def test_jit_closure_and_no_recompile():
    p, y, ids, masks = jnp.asarray(P), jnp.asarray(Y), jnp.asarray(IDS), jnp.asarray(MASKS)
    eager = jaxcal.ece(p, y, groups=ids, n_groups=G)
    f = count_compiles(lambda p, y, g: jaxcal.ece(p, y, groups=g, n_groups=G))
    assert_close(f(p, y, ids), eager)
    f(p * 0.5, y, ids)
    assert f.compiles() == 1
    closed = jax.jit(lambda p: jaxcal.brier_score(p, y, groups=masks))  # concrete, closed over
    assert_close(closed(p), jaxcal.brier_score(p, y, groups=masks))
    # Ids out of range are not checked under jit: their rows belong to no segment.
    outside = ids.at[:10].set(G + 3)
    keep = jnp.arange(N) >= 10
    assert_close(
        jax.jit(lambda g: jaxcal.log_loss(p, y, groups=g, n_groups=G))(outside),
        jaxcal.log_loss(p, y, groups=ids, n_groups=G, weights=keep.astype(jnp.float32)),
    )


def test_vmap_over_a_leading_batch_axis():
    batch = [_data(seed) for seed in (1, 2, 3)]
    ps, ys, ids, masks = (jnp.asarray(np.stack([b[i] for b in batch])) for i in (0, 1, 5, 6))

    def per_row(p, y, g, m):
        return (
            jaxcal.ece(p, y, n_bins=M, groups=g, n_groups=G),
            jaxcal.log_loss(p, y, groups=m),
            jaxcal.reliability_curve(p, y, n_bins=M, groups=m).mean_accuracy,
        )

    mapped = jax.vmap(per_row)(ps, ys, ids, masks)
    for i in range(3):
        for got, want in zip(mapped, per_row(ps[i], ys[i], ids[i], masks[i]), strict=True):
            assert_close(got[i], want)


@pytest.mark.parametrize("fn", [jaxcal.ece, jaxcal.brier_score, jaxcal.log_loss])
def test_grad_with_groups_is_the_sum_of_segment_gradients(fn):
    p, y, ids = jnp.asarray(P, jnp.float32), jnp.asarray(Y), jnp.asarray(IDS)
    p = jnp.clip(p, 0.01, 0.99)  # log loss: no clipped samples, whose gradient is 0
    grad = jax.grad(lambda p: fn(p, y, groups=ids, n_groups=G).sum())(p)
    assert bool(jnp.all(jnp.isfinite(grad)))
    expected = sum(
        jax.grad(lambda p, m=m: fn(p, y, weights=jnp.asarray(m, jnp.float32)))(p)
        for m in _members(IDS).T
    )
    assert_close(grad, expected)


BAD = [
    (IDS[:-1], G, r"`groups` must be integer segment ids of shape \(240,\).*got shape \(239,\)"),
    (MASKS[:-1], None, r"`groups` must have 240 rows .*got shape \(239, 5\)"),
    (IDS + 2, G, r"`groups` ids must lie in \[0, n_groups\) = \[0, 5\); got values in \[2, 5\]"),
    (IDS - 1, G, r"got values in \[-1, 2\]\. Raise `n_groups` or relabel"),
    (IDS.astype(np.float32), G, r"`groups` ids must be integers .*float32\. Cast them"),
    (IDS, None, r"`n_groups` .* is required with integer `groups`; got None\. Pass `n_groups=G`"),
    (MASKS, 3, r"`n_groups` must be None or 5 \(the columns of `groups`\).*got 3"),
]


@pytest.mark.parametrize("groups, n_groups, match", BAD)
@pytest.mark.parametrize("fn", [jaxcal.ece, jaxcal.reliability_curve, jaxcal.log_loss])
def test_bad_groups_raise_before_compilation(fn, groups, n_groups, match, monkeypatch):
    called = []
    for module, name in [
        (jaxcal.metrics._ece, "_ece_kernel"),
        (jaxcal.metrics._reliability, "_reliability_kernel"),
        (jaxcal.metrics._scoring, "_log_loss_kernel"),
    ]:
        monkeypatch.setattr(module, name, lambda *a, **k: called.append(1))
    with pytest.raises(ValueError, match=match):
        fn(P, Y, groups=groups, n_groups=n_groups)
    assert not called


def test_missing_n_groups_under_jit():
    # (Quantile bins with groups, once refused here, are tests/metrics/test_segment_quantile.py's.)
    with pytest.raises(ValueError, match=r"`n_groups`.*required"):
        jax.jit(lambda p, g: jaxcal.brier_score(p, Y, groups=g))(P, IDS)


def test_string_ids_and_a_lone_n_groups_get_a_message():
    """C1: country names gave JAX's "Error interpreting argument to stage"; E8: n_groups
    without groups was silently ignored (one ECE over all samples)."""
    p, y = jnp.array([0.2, 0.7, 0.4, 0.9, 0.1, 0.6]), jnp.array([0, 1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"got strings\. Map them to integer ids first"):
        jaxcal.ece(p, y, groups=np.array(list("ababab")), n_groups=2)
    with pytest.raises(ValueError, match="Python objects"):
        jaxcal.brier_score(p, y, groups=np.array(["a", 1, "b", 2, None, 3], object), n_groups=2)
    for call in (jaxcal.ece, jaxcal.brier_score, jaxcal.log_loss, jaxcal.reliability_curve):
        with pytest.raises(ValueError, match="`n_groups` \\(3\\) was given without `groups`"):
            call(p, y, n_groups=3)
    with pytest.raises(ValueError, match="without `groups`"):
        jaxcal.ks_test(p, y, n_groups=3)
    names, ids = np.unique(np.array(list("ababab")), return_inverse=True)  # the advice works
    assert jaxcal.ece(p, y, groups=ids, n_groups=len(names)).shape == (2,)
