"""Streaming state of any weight scale (issue 20): weights of 1e37 or 1e-30 give the metrics
of weights near 1, batch splits and merges of states of different exponents change nothing.

Before the state kept a power-of-two exponent, it summed raw weights across batches: at
1e37 the float32 sums overflowed (inf, then NaN metrics).
"""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import streaming
from jaxcal.streaming._merge import merge_stacked
from tests.helpers import assert_close

_RNG = np.random.default_rng(37)
N, K, M = 96, 4, 8
PROBS = _RNG.dirichlet(np.ones(K), size=N).astype(np.float32)
LABELS = _RNG.integers(0, K, N).astype(np.int32)
SCORES = _RNG.uniform(size=N).astype(np.float32)
OUTCOMES = (_RNG.uniform(size=N) < SCORES).astype(np.int32)
BASE = _RNG.uniform(0.5, 2.0, N).astype(np.float32)
BASE[::7] = 0  # padding rows at every scale
SCALES = (1e37, 3e30, 1e-30, 2.0**-100)


def _stream(weights, splits=(0, 24, 60, N), binary=False):
    state = streaming.init(M, 2 if binary else K, binary=binary, resolution=4 * M)
    probs, labels = (SCORES, OUTCOMES) if binary else (PROBS, LABELS)
    for lo, hi in itertools.pairwise(splits):
        state = streaming.update(state, probs[lo:hi], labels[lo:hi], weights[lo:hi])
    return state


def _assert_same_metrics(state, expected, scale, msg=""):
    out = streaming.compute(state)
    for key, value in expected.items():
        if key == "weight":
            continue
        # a non-power-of-two scale rounds each weight once: a few float32 ulps
        assert_close(out[key], value, rtol=1e-4, atol=1e-6, err_msg=f"{key} at {scale} {msg}")


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("scale", SCALES)
def test_huge_and_tiny_weights_give_the_metrics_of_weights_near_one(scale, binary):
    expected = streaming.compute(_stream(BASE, binary=binary))
    state = _stream(BASE * np.float32(scale), binary=binary)
    _assert_same_metrics(state, expected, scale)
    total = np.float64(BASE.sum(dtype=np.float64)) * np.float32(scale)
    weight = streaming.compute(state)["weight"]
    if total < np.finfo(np.float32).max:
        assert_close(weight, total, rtol=1e-4)  # the weights' rounding
    else:  # documented: the total weight itself does not fit float32
        assert weight == np.inf


def test_batch_splits_of_mixed_scales_change_nothing():
    # a stream whose scale jumps by 2**120 mid-way: the early sums are rescaled exactly
    weights = BASE * np.where(np.arange(N) < 40, np.float32(1), np.float32(2.0**120))
    whole = streaming.compute(_stream(weights, splits=(0, N)))
    for splits in ((0, 40, N), (0, 10, 40, 41, N), (0, 70, N)):
        _assert_same_metrics(_stream(weights, splits=splits), whole, "mixed", str(splits))


def test_merge_of_states_of_different_exponents_is_the_concatenated_stream():
    weights = BASE.copy()
    weights[50:] *= np.float32(1e36)
    a = _stream(weights, splits=(0, 50))
    b = streaming.update(
        streaming.init(M, K, resolution=4 * M), PROBS[50:], LABELS[50:], weights[50:]
    )
    assert int(a.exponent) == 0 and int(b.exponent) > 100
    whole = streaming.compute(_stream(weights, splits=(0, 50, N)))
    empty = streaming.init(M, K, resolution=4 * M)
    for merged in (
        streaming.merge(a, b),
        streaming.merge(b, a),
        streaming.merge(streaming.merge(empty, b), a),
        merge_stacked(jax.tree_util.tree_map(lambda x, y: jnp.stack([x, y]), a, b)),
    ):
        assert int(merged.exponent) == int(b.exponent)
        _assert_same_metrics(merged, whole, "merge")
    # equal exponents: a plain sum of the arrays, as jax.lax.psum computes it
    plain = jax.tree_util.tree_map(jnp.add, a, a)
    same = streaming.merge(a, a)
    for x, y in zip(jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(same), strict=True):
        np.testing.assert_array_equal(x, y)


def test_padding_only_batch_does_not_fix_the_scale():
    # an all-zero-weight batch first must not pin the exponent at 0 for 1e-37 weights
    tiny = BASE * np.float32(1e-37)
    padded = streaming.update(
        streaming.init(M, K, resolution=4 * M), PROBS[:8], LABELS[:8], np.zeros(8, np.float32)
    )
    state = streaming.update(padded, PROBS, LABELS, tiny)
    _assert_same_metrics(state, streaming.compute(_stream(BASE)), 1e-37)
    assert int(state.exponent) < -100


def test_views_report_weights_in_the_callers_units():
    scale = np.float32(1e-30)
    plain, tiny = _stream(BASE, binary=True), _stream(BASE * scale, binary=True)
    curve, ref = streaming.reliability_curve(tiny), streaming.reliability_curve(plain)
    assert_close(curve.weights / scale, ref.weights, rtol=1e-4)  # the weights' rounding
    assert_close(curve.mean_accuracy, ref.mean_accuracy, rtol=1e-4)  # likewise
    corp, ref = streaming.corp_curve(tiny), streaming.corp_curve(plain)
    assert_close(corp.weight / scale, ref.weight, rtol=1e-4)  # likewise
    assert_close(corp.calibrated, ref.calibrated, rtol=1e-4)  # likewise
    ece = streaming.equal_mass_ece(tiny).ece
    assert_close(ece, streaming.equal_mass_ece(plain).ece, rtol=1e-4)  # likewise


def test_arrow_tables_hold_plain_sums_of_any_scale():
    pytest.importorskip("pyarrow")
    state = _stream(BASE * np.float32(1e37))
    table = streaming.to_arrow(state)
    assert np.sum(table.column("weight").to_numpy()) > 1e38  # plain units, in float64
    back = streaming.from_arrow(table)
    _assert_same_metrics(back, streaming.compute(state), "arrow")
    plain = streaming.from_arrow(streaming.to_arrow(_stream(BASE)))
    assert int(plain.exponent) == 0


def test_hand_built_state_without_exponent_reads_plain_sums():
    # the field is optional (default 0): states built before it existed keep their meaning
    state = _stream(BASE)
    fields = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    del fields["exponent"]
    rebuilt = streaming.CalibrationState(**fields)
    assert rebuilt.exponent == 0
    _assert_same_metrics(rebuilt, streaming.compute(state), "rebuilt")
