"""Venn-Abers predictors against the venn-abers package and a brute-force oracle."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal.calibrators import classwise, venn_abers, venn_abers_interval
from tests.helpers import assert_close, x64
from tests.reference_clinical import venn_abers_brute

va_package = pytest.importorskip("venn_abers")

CAL = venn_abers()
MULTI = venn_abers(multiclass=True)

rng = np.random.default_rng(18)
N = 300
S = rng.random(N)
Y = (rng.random(N) < S).astype(np.int32)
T = np.concatenate([rng.random(200), S[:20], [0.0, 1.0]])


def _package(s, y, t):
    va = va_package.VennAbers().fit(np.stack([1 - s, s], 1), y)
    with np.errstate(divide="ignore", invalid="ignore"):
        merged, pair = va.predict_proba(np.stack([1 - t, t], 1))
    return merged[:, 1], pair


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_matches_the_package_float64_with_ties():
    s = np.round(S, 2)  # many exact ties, and test points on calibration scores
    t = np.concatenate([np.round(T, 2), T])
    merged, pair = _package(s, Y, t)
    with x64():
        params = CAL.fit(s, Y)
        p0, p1 = venn_abers_interval(params, t)
        assert_close(p0, pair[:, 0])
        assert_close(p1, pair[:, 1])
        assert_close(CAL.apply(params, t), merged)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_matches_the_package_float32():
    merged, pair = _package(S, Y, T)
    params = CAL.fit(jnp.asarray(S, jnp.float32), Y)
    p0, p1 = venn_abers_interval(params, jnp.asarray(T, jnp.float32))
    assert_close(p0, pair[:, 0])
    assert_close(p1, pair[:, 1])
    assert_close(CAL.apply(params, jnp.asarray(T, jnp.float32)), merged)


def _padded(s, y, size=32):
    """Pad to one shape with zero-weight samples (one compile for every case)."""
    pad = size - len(s)
    w = np.concatenate([np.ones(len(s)), np.zeros(pad)])
    return np.concatenate([s, np.full(pad, 0.5)]), np.concatenate([y, np.zeros(pad, y.dtype)]), w


def test_matches_brute_force_isotonic_on_small_sets():
    with x64():
        for seed in range(12):
            r = np.random.default_rng(seed)
            n = int(r.integers(1, 25))
            s = np.round(r.random(n), 1 + seed % 3)
            y = (r.random(n) < s).astype(np.int32)
            t = np.clip(np.concatenate([np.round(r.random(15), 2), s[:3], [-0.5, 1.5]])[:20], 0, 1)
            t = np.concatenate([t, np.zeros(20 - len(t))])
            ps, py, pw = _padded(s, y)
            p0, p1 = venn_abers_interval(CAL.fit(ps, py, weights=pw), t)
            want = venn_abers_brute(s, y, t)
            assert_close(p0, want[:, 0], err_msg=f"seed {seed}")
            assert_close(p1, want[:, 1], err_msg=f"seed {seed}")


def test_interval_holds_the_merged_probability_and_logits_rank_alike():
    params = CAL.fit(S, Y)
    p0, p1 = venn_abers_interval(params, T)
    merged = CAL.apply(params, T)
    assert bool(jnp.all(p0 <= p1)) and bool(jnp.all((p0 <= merged) & (merged <= p1)))
    logit = venn_abers(inputs="logits")
    z = lambda p: np.log(np.clip(p, 1e-6, 1 - 1e-6) / (1 - np.clip(p, 1e-6, 1 - 1e-6)))  # noqa: E731
    lp = logit.fit(z(S), Y)
    inner = (T > 1e-6) & (T < 1 - 1e-6)
    assert_close(logit.apply(lp, z(T))[inner], merged[inner])


def test_frequency_weights_equal_repeated_samples():
    w = rng.integers(0, 3, N)
    weighted = CAL.fit(S, Y, weights=w.astype(np.float32))
    repeated = CAL.fit(np.repeat(S, w), np.repeat(Y, w))
    for a, b in zip(
        venn_abers_interval(weighted, T), venn_abers_interval(repeated, T), strict=True
    ):
        assert_close(a, b)


def test_zero_weight_is_the_identity():
    params = CAL.fit(S, Y, weights=np.zeros(N, np.float32))
    assert_close(CAL.apply(params, T), T.astype(np.float32))


def test_jit_and_vmap_over_folds():
    folds = np.arange(N) % 4
    weights = jnp.asarray(folds[None, :] != np.arange(4)[:, None], jnp.float32)
    params = jax.jit(jax.vmap(lambda w: CAL.fit(S, Y, weights=w)))(weights)
    out = jax.vmap(lambda p: CAL.apply(p, T))(params)
    one = CAL.apply(CAL.fit(S[folds != 2], Y[folds != 2]), T)
    assert_close(out[2], one)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_multiclass_one_vs_rest_matches_the_package():
    k = 3
    logits = rng.normal(size=(N, k)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = np.array([rng.choice(k, p=p) for p in probs])
    test = probs[:50]
    want, pairs = va_package.venn_abers.predict_proba_prefitted_va(
        probs, labels, test, va_tpe="one_vs_rest"
    )
    with x64():
        params = MULTI.fit(probs, labels)
        assert_close(MULTI.apply(params, test), want)
        p0, p1 = venn_abers_interval(params, test)
        for c in range(k):
            assert_close(p0[:, c], pairs[c][:, 0])
            assert_close(p1[:, c], pairs[c][:, 1])
    assert classwise(CAL).apply(classwise(CAL).fit(probs, labels), test).shape == (50, k)


def test_bad_options():
    with pytest.raises(ValueError, match="`inputs`"):
        venn_abers(inputs="log_probs")
    with pytest.raises(ValueError, match="`multiclass`"):
        venn_abers(multiclass="yes")
    with pytest.raises(ValueError, match="`scores`"):
        venn_abers_interval(CAL.fit(S, Y), np.array([0.5, 1.5]))


def test_interval_under_jit_and_vmap():
    params = CAL.fit(S, Y)
    tests = jnp.asarray(np.stack([T, T[::-1]]), jnp.float32)
    p0, p1 = jax.jit(jax.vmap(venn_abers_interval, in_axes=(None, 0)))(params, tests)
    q0, q1 = venn_abers_interval(params, tests[1])
    assert_close(p0[1], q0)
    assert_close(p1[1], q1)
