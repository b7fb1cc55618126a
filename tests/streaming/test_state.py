"""Streaming state: chunked == one-shot for every output, merge/psum, padding, dtypes, clu."""

import textwrap
from functools import partial

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxcal
from jaxcal import streaming
from tests import reference
from tests.helpers import assert_close, count_compiles, run_on_cpu_devices, x64

N, K, M = 600, 4, 10  # three chunks of 200: one compiled shape for update
CHUNK = 200
METRIC_KEYS = ("ece", "mce", "classwise_ece", "top_label_ece", "brier", "log_loss")
DECOMPOSITION_KEYS = jaxcal.BrierDecomposition._fields[1:]  # brier is checked above


def _data(seed=0, n=N, k=K, binary=False):
    """Dirichlet rows, a quarter of them on the 0.1 grid (edge traps at M = 5 and 10)."""
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.7), size=n)
    grid = rng.multinomial(10, np.full(k, 1 / k), size=n // 4) / 10
    probs[: n // 4] = grid
    labels = np.array([rng.choice(k, p=p) for p in probs])
    labels = np.where(rng.random(n) < 0.3, rng.integers(0, k, n), labels)  # miscalibrate
    weights = rng.gamma(2.0, size=n) * (rng.random(n) < 0.9)  # some exact zeros
    perm = rng.permutation(n)
    probs, labels, weights = probs[perm], labels[perm], weights[perm]
    if binary:
        probs = probs[:, 1] / (probs[:, 0] + probs[:, 1] + 1e-12)
        probs = np.where(np.arange(n) % 7 == 0, np.round(probs, 1), probs)
        labels = (rng.random(n) < probs**1.5).astype(np.int32)
    return (
        np.asarray(probs, np.float32),
        np.asarray(labels, np.int32),
        np.asarray(weights, np.float32),
    )


#: Rows per batch of the file and array streams (test_parquet.py, test_array_state.py):
#: several batches, a padded last one, one compiled shape.
BATCH_ROWS = 256


def assert_same_state(got, want):
    """Equal counts, and every output of :func:`streaming.compute` to round-off."""
    np.testing.assert_array_equal(got.top_count, want.top_count)
    np.testing.assert_array_equal(got.class_count, want.class_count)
    a, b = streaming.compute(got), streaming.compute(want)
    for name in streaming.OUTPUTS:
        assert_close(a[name], b[name], err_msg=name)


@partial(jax.jit, static_argnames=("closed", "norm", "debias", "average"))
def _one_shot(probs, labels, weights, *, closed, norm="l1", debias=False, average="label"):
    """The one-shot jaxcal metrics, in one jit (one compile per configuration)."""
    kw = dict(n_bins=M, closed=closed, weights=weights)
    nd = dict(norm=norm, debias=debias)
    out = {
        "ece": jaxcal.ece(probs, labels, **kw, **nd),
        "mce": jaxcal.mce(probs, labels, **kw),
        "classwise_ece": jaxcal.classwise_ece(probs, labels, **kw, **nd),
        "top_label_ece": jaxcal.top_label_ece(probs, labels, **kw, **nd, average=average),
        "brier": jaxcal.brier_score(probs, labels, weights=weights),
        "log_loss": jaxcal.log_loss(probs, labels, weights=weights),
    }
    decomposition = jaxcal.brier_decomposition(probs, labels, **kw)._asdict()
    out.update({key: decomposition[key] for key in DECOMPOSITION_KEYS})
    return out


def _decomposition_oracle(probs, labels, weights, closed, edge_dtype):
    """Float64 loop over classes and bins, bins from edges rounded to ``edge_dtype``."""
    p = np.asarray(
        np.asarray(probs).astype(np.float32) if edge_dtype != np.float64 else probs, np.float64
    )
    cols = p[:, None] if p.ndim == 1 else p
    onehot = (labels == 1)[:, None] if p.ndim == 1 else labels[:, None] == np.arange(p.shape[1])
    w = np.ones(len(labels)) if weights is None else np.asarray(weights, np.float64)
    terms = np.zeros(5)
    for f, o in zip(cols.T, onehot.T.astype(np.float64), strict=True):
        bins = reference.uniform_bin(f, M, closed, dtype=edge_dtype)
        o_bar = np.sum(w * o) / w.sum()
        terms[2] += o_bar * (1 - o_bar)
        for b in range(M):
            m = (bins == b) & (w > 0)
            if m.any():
                wb = w[m].sum()
                fb, ob = np.sum(w[m] * f[m]) / wb, np.sum(w[m] * o[m]) / wb
                terms[0] += wb * (fb - ob) ** 2 / w.sum()
                terms[1] += wb * (ob - o_bar) ** 2 / w.sum()
                terms[3] += np.sum(w[m] * (f[m] - fb) ** 2) / w.sum()
                terms[4] += 2 * np.sum(w[m] * (o[m] - ob) * (f[m] - fb)) / w.sum()
    return dict(zip(DECOMPOSITION_KEYS, terms, strict=True))


def _stream(probs, labels, weights, *, closed="right", binary=False, chunk=CHUNK, dtype=None):
    k = 2 if binary else probs.shape[1]
    state = streaming.init(M, k, closed=closed, binary=binary, dtype=dtype)
    for start in range(0, len(labels), chunk):
        sl = slice(start, start + chunk)
        state = streaming.update(
            state, probs[sl], labels[sl], None if weights is None else weights[sl]
        )
    return state


# Each factor at both levels, four compiles instead of eight.
@pytest.mark.parametrize(
    ("closed", "weighted", "binary"),
    [("right", True, False), ("left", False, False), ("right", False, True), ("left", True, True)],
)
def test_chunked_equals_one_shot(closed, weighted, binary):
    probs, labels, weights = _data(1, binary=binary)
    weights = weights if weighted else None
    out = streaming.compute(_stream(probs, labels, weights, closed=closed, binary=binary))
    expected = _one_shot(probs, labels, weights, closed=closed)
    assert set(out) == set(streaming.OUTPUTS)
    for key, value in expected.items():
        assert out[key].shape == () and out[key].dtype == jnp.float32
        assert_close(out[key], value, err_msg=key)
    n_present = np.sum(weights > 0) if weighted else N
    assert int(out["count"]) == n_present
    assert_close(out["weight"], N if weights is None else weights.sum(dtype=np.float64))


@pytest.mark.parametrize(
    ("norm", "debias", "average"),
    [("l2", False, "sample"), ("l2", True, "label"), ("max", False, "sample")],
)
def test_norms_and_averages_equal_one_shot(norm, debias, average):
    probs, labels, weights = _data(2)
    out = streaming.compute(
        _stream(probs, labels, weights), norm=norm, debias=debias, average=average
    )
    expected = _one_shot(
        probs, labels, weights, closed="right", norm=norm, debias=debias, average=average
    )
    for key in ("ece", "classwise_ece", "top_label_ece", "mce"):
        assert_close(out[key], expected[key], err_msg=key)


def test_decomposition_float32_against_float64_oracle():
    """Weighted float32 stream, bins from float32 edges: WBV / WBC from one-pass centred
    moments (module docstring) stay within the default float32 tolerance."""
    probs, labels, weights = _data(3)
    # The oracle itself agrees with tests/reference.py where both apply (unweighted, f64).
    p64 = probs.astype(np.float64)
    own = _decomposition_oracle(p64, labels, None, "right", np.float64)
    assert_close(list(own.values()), reference.brier_decomposition(p64, labels, M)[1:])
    out = streaming.compute(_stream(probs, labels, weights))
    for key, value in _decomposition_oracle(probs, labels, weights, "right", np.float32).items():
        assert_close(out[key], value, err_msg=key)


def test_x64_state_gives_float64_equal_to_one_shot_and_oracle():
    probs, labels, weights = _data(8)
    with x64():
        p64, w64 = probs.astype(np.float64), weights.astype(np.float64)
        out = streaming.compute(_stream(p64, labels, w64))
        expected = _one_shot(p64, labels, w64, closed="right")
        for key, value in expected.items():
            assert out[key].dtype == jnp.float64
            assert_close(out[key], value, err_msg=key)
        for key, value in _decomposition_oracle(p64, labels, w64, "right", np.float64).items():
            assert_close(out[key], value, err_msg=key)
        identity = (
            out["reliability"]
            - out["resolution"]
            + out["uncertainty"]
            + out["within_bin_variance"]
            - out["within_bin_covariance"]
        )
        assert_close(identity, out["brier"])


def test_merge_is_associative_commutative_with_init_as_identity():
    probs, labels, weights = _data(4)
    a, b, c = (
        _stream(probs[s], labels[s], weights[s])
        for s in (slice(0, 200), slice(200, 400), slice(400, 600))
    )
    left = streaming.merge(streaming.merge(a, b), c)
    right = streaming.merge(a, streaming.merge(b, c))
    swapped = streaming.merge(c, streaming.merge(b, a))
    for other in (right, swapped):
        for x, y in zip(jax.tree.leaves(left), jax.tree.leaves(other), strict=True):
            if x.dtype == jnp.int32:
                np.testing.assert_array_equal(x, y)  # counts: exactly
            else:
                assert_close(x, y, atol=1e-5)  # sums of up to ~200: float32 round-off
    empty = streaming.init(M, K)
    same = streaming.merge(a, empty)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(same), strict=True):
        np.testing.assert_array_equal(x, y)
    out = streaming.compute(left)
    expected = _one_shot(probs, labels, weights, closed="right")
    for key, value in expected.items():
        assert_close(out[key], value, err_msg=key)
    assert jax.tree.structure(left) == jax.tree.structure(a)


def test_padding_via_zero_weights_even_with_garbage_under_jit():
    """Fixed-shape batches: padded rows with weight 0 change nothing, NaN and bad labels too."""
    probs, labels, _ = _data(5)
    n_pad = 56
    pad_probs = np.concatenate([probs[:CHUNK], np.full((n_pad, K), np.nan, np.float32)])
    pad_labels = np.concatenate([labels[:CHUNK], np.full(n_pad, -1, np.int32)])
    mask = np.concatenate([np.ones(CHUNK, np.float32), np.zeros(n_pad, np.float32)])
    update = jax.jit(streaming.update)  # under jit: no value checks, garbage reaches the kernel
    state = update(streaming.init(M, K), pad_probs, pad_labels, mask)
    out = streaming.compute(state)
    expected = _one_shot(probs[:CHUNK], labels[:CHUNK], None, closed="right")
    for key, value in expected.items():
        assert_close(out[key], value, err_msg=key)
    assert int(out["count"]) == CHUNK


def test_empty_state_is_all_zeros():
    """Documented: no data (or only zero weights) gives 0 for every output, never NaN."""
    probs, labels, _ = _data(6)
    only_zeros = streaming.update(
        streaming.init(M, K), probs[:CHUNK], labels[:CHUNK], np.zeros(CHUNK, np.float32)
    )
    cases = [(streaming.init(M, K), "l1"), (streaming.init(M, 2, binary=True), "l1")]
    cases += [(only_zeros, norm) for norm in ("l1", "l2", "max")]
    for state, norm in cases:
        for key, value in streaming.compute(state, norm=norm).items():
            assert value.shape == ()
            assert float(value) == 0.0, key
    curve = streaming.reliability_curve(streaming.init(M, K))
    assert np.all(np.asarray(curve.counts) == 0)
    assert np.all(np.isfinite(np.asarray(curve.mean_confidence)))


def test_bfloat16_inputs(closed="right"):
    """bf16 rows are binned with bf16-rounded edges and summed in float32, as one-shot."""
    probs, labels, weights = _data(7)
    p16 = jnp.asarray(probs).astype(jnp.bfloat16)
    state = _stream(p16, labels, weights, closed=closed)
    assert state.dtype == jnp.float32
    out = streaming.compute(state)
    expected = _one_shot(p16, labels, weights, closed=closed)
    for key in METRIC_KEYS:
        assert_close(out[key], expected[key], err_msg=key)

    # Decomposition against a float64 loop with bf16-rounded edges (the bins of the ECEs;
    # jaxcal.brier_decomposition bins the float32-upcast values instead).
    oracle = _decomposition_oracle(
        p16.astype(jnp.float32), labels, weights, closed, ml_dtypes.bfloat16
    )
    for key, value in oracle.items():
        assert_close(out[key], value, err_msg=key)


def test_jit_and_scan_compile_once_for_batches_of_one_shape():
    probs, labels, weights = _data(9)
    update = count_compiles(streaming.update)
    state = streaming.init(M, K)
    for start in range(0, N, CHUNK):
        sl = slice(start, start + CHUNK)
        state = update(state, probs[sl], labels[sl], weights[sl])
    assert update.compiles() == 1

    # The same stream under lax.scan gives the same state.
    def step(s, batch):
        return streaming.update(s, *batch), None

    xs = (probs.reshape(3, CHUNK, K), labels.reshape(3, CHUNK), weights.reshape(3, CHUNK))
    scanned, _ = jax.jit(lambda s, xs: jax.lax.scan(step, s, xs))(streaming.init(M, K), xs)
    for x, y in zip(jax.tree.leaves(state), jax.tree.leaves(scanned), strict=True):
        assert_close(x, y)
    compute = count_compiles(streaming.compute)
    compute(state)
    compute(scanned)
    assert compute.compiles() == 1


def test_compensated_accumulation_over_many_batches():
    """20000 batches whose float32 running sum would round the same way every time.

    Each batch of six 0.55 adds 3.3 to the summed confidence; past 2**16 a float32
    total rounds every such addition down by ~0.4 ulp, a 1e-3 relative drift by the end.
    TwoSum compensation keeps the mean exact to float32 resolution.
    """
    n_batches, batch = 20_000, 6
    p = jnp.full(batch, 0.55, jnp.float32)
    y = jnp.ones(batch, jnp.int32)

    @jax.jit
    def run(state, p, y):
        return jax.lax.scan(
            lambda s, _: (streaming.update(s, p, y), None), state, length=n_batches
        )[0]

    state = run(streaming.init(M, 2, binary=True), p, y)
    curve = streaming.reliability_curve(state)
    b = int(np.argmax(np.asarray(curve.counts)))
    assert int(curve.counts[b]) == n_batches * batch
    assert_close(curve.mean_confidence[b], np.float32(0.55), rtol=1e-7, atol=0)  # 1 ulp
    out = streaming.compute(state)
    assert_close(out["brier"], (1 - np.float64(np.float32(0.55))) ** 2, rtol=1e-6)


@pytest.mark.slow
def test_counts_exact_past_two_to_the_24():
    """2**24 + 1e5 samples of one value: int32 counts and float weights stay exact."""
    batch = 100_000
    n_batches = 2**24 // batch + 1
    p = jnp.full(batch, 0.3, jnp.float32)
    y = (jnp.arange(batch) % 10 < 3).astype(jnp.int32)

    @jax.jit
    def run(state, p, y):
        return jax.lax.scan(
            lambda s, _: (streaming.update(s, p, y), None), state, length=n_batches
        )[0]

    out = streaming.compute(run(streaming.init(M, 2, binary=True), p, y))
    assert int(out["count"]) == n_batches * batch > 2**24
    assert float(out["weight"]) == n_batches * batch
    assert float(out["ece"]) < 1e-6  # exactly calibrated: 30% positives at p = 0.3


def test_reliability_curve_matches_one_shot():
    probs, labels, weights = _data(10)
    for binary in (False, True):
        p, y, w = _data(10, binary=True) if binary else (probs, labels, weights)
        got = streaming.reliability_curve(_stream(p, y, w, binary=binary))
        expected = jaxcal.reliability_curve(p, y, n_bins=M, weights=w)
        np.testing.assert_array_equal(got.counts, expected.counts)
        for field in ("edges", "weights", "mean_confidence", "mean_accuracy"):
            assert_close(getattr(got, field), getattr(expected, field), err_msg=field)


def test_bad_inputs_raise_value_errors_naming_the_argument():
    probs, labels, _ = _data(11)
    state = streaming.init(M, K)
    with pytest.raises(ValueError, match="`probs` must have shape \\(N, 4\\)"):
        streaming.update(state, probs[:, :3], labels)
    with pytest.raises(ValueError, match="`probs` must be 1-D"):
        streaming.update(streaming.init(M, 2, binary=True), probs[:, :2], labels)
    with pytest.raises(ValueError, match="`labels` must lie in"):
        streaming.update(state, probs, labels + 1)
    with pytest.raises(ValueError, match="`probs` rows must sum to 1"):
        streaming.update(state, probs * 0.5, labels)
    with pytest.raises(ValueError, match="`state` must be a CalibrationState"):
        streaming.update({"a": 1}, probs, labels)
    with pytest.raises(ValueError, match="`n_bins`"):
        streaming.init(0, K)
    with pytest.raises(ValueError, match="`num_classes`"):
        streaming.init(M, 1)
    with pytest.raises(ValueError, match="`num_classes` must be 2 with `binary=True`"):
        streaming.init(M, 3, binary=True)
    with pytest.raises(ValueError, match="`closed`"):
        streaming.init(M, K, closed="both")
    with pytest.raises(ValueError, match="`dtype`"):
        streaming.init(M, K, dtype=jnp.bfloat16)
    with pytest.raises(ValueError, match="`a` and `b` must come from init"):
        streaming.merge(state, streaming.init(M + 1, K))
    with pytest.raises(ValueError, match="`a` and `b` must come from init"):
        streaming.merge(state, streaming.init(M, K, closed="left"))
    with pytest.raises(ValueError, match="`norm`"):
        streaming.compute(state, norm="l3")
    with pytest.raises(ValueError, match="`debias=True` requires"):
        streaming.compute(state, debias=True)
    with pytest.raises(ValueError, match="`average`"):
        streaming.compute(state, average="macro")
    with pytest.raises(ValueError, match="`output`"):
        streaming.clu_metric(M, K, output="accuracy")


# ------------------------------------------------------------------ clu.metrics adapter


def test_adapter_follows_the_metric_protocol_without_clu():
    """Duck-typed protocol: empty / from_model_output / merge / reduce / compute."""
    probs, labels, weights = _data(12)
    Metric = streaming.clu_metric(M, K)
    mask = weights > 0
    total = Metric.empty()
    for start in range(0, N, CHUNK):
        sl = slice(start, start + CHUNK)
        batch = Metric.from_model_output(
            logits=np.log(probs[sl] + 1e-30), labels=labels[sl], mask=mask[sl], loss=1.0
        )
        total = total.merge(batch)
    expected = _one_shot(
        np.asarray(jax.nn.softmax(np.log(probs + 1e-30))),
        labels,
        mask.astype(np.float32),
        closed="right",
    )
    out = total.compute()
    for key, value in expected.items():
        assert_close(out[key], value, err_msg=key)
    # reduce() merges a leading device axis (as after jax.lax.all_gather).
    parts = [
        Metric.from_model_output(probs=probs[s], labels=labels[s], weights=weights[s])
        for s in (slice(0, CHUNK), slice(CHUNK, 2 * CHUNK))
    ]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *parts)
    reduced = stacked.reduce().compute()
    for key, value in parts[0].merge(parts[1]).compute().items():
        assert_close(reduced[key], value, err_msg=key)
    assert float(streaming.clu_metric(M, K, output="ece").empty().compute()) == 0.0
    # Binary: 1-D logits go through a sigmoid.
    p1, y1, _ = _data(12, binary=True)
    Binary = streaming.clu_metric(M, 2, binary=True, output="ece")
    q = np.clip(p1[:CHUNK].astype(np.float64), 1e-6, 1 - 1e-6)
    logit = (np.log(q) - np.log1p(-q)).astype(np.float32)
    got = Binary.from_model_output(logits=logit, labels=y1[:CHUNK]).compute()
    assert_close(got, jaxcal.ece(jax.nn.sigmoid(logit), y1[:CHUNK], n_bins=M))
    with pytest.raises(ValueError, match="exactly one of `probs` and `logits`"):
        Metric.from_model_output(labels=labels)


def test_adapter_inside_a_clu_collection():
    clu_metrics = pytest.importorskip("clu.metrics")
    probs, labels, weights = _data(13)
    mask = weights > 0
    Collection = clu_metrics.Collection.create(
        calibration=streaming.clu_metric(M, K),
        ece=streaming.clu_metric(M, K, output="ece"),
    )

    @jax.jit
    def eval_step(metrics, logits, labels, mask):
        return metrics.merge(
            Collection.single_from_model_output(logits=logits, labels=labels, mask=mask)
        )

    metrics = Collection.empty()
    logits = np.log(probs + 1e-30)
    for start in range(0, N, CHUNK):
        sl = slice(start, start + CHUNK)
        metrics = eval_step(metrics, logits[sl], labels[sl], mask[sl])
    out = metrics.compute()
    expected = _one_shot(
        np.asarray(jax.nn.softmax(logits)), labels, mask.astype(np.float32), closed="right"
    )
    for key, value in expected.items():
        assert_close(out["calibration"][key], value, err_msg=key)
    assert_close(out["ece"], expected["ece"])
    values = metrics.compute_values()  # clu's Scalar wrapper needs a 0-d output
    assert_close(values["ece"].value, expected["ece"])


# ------------------------------------------------------------------ many devices

_MULTI_DEVICE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from functools import partial
    import jax, numpy as np
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
    from jaxcal import streaming

    assert jax.device_count() == 4, jax.devices()
    data = np.load(sys.argv[1])
    probs, labels, weights = data["probs"], data["labels"], data["weights"]
    n_bins, k = int(data["n_bins"]), probs.shape[1]
    mesh = jax.make_mesh((4,), ("data",))  # default axis types (Explicit in recent JAX)
    local = [jax.device_put(x, NamedSharding(mesh, P("data"))) for x in (probs, labels, weights)]

    # 1. shard_map: each device streams its shard, one psum merges the states.
    @jax.jit
    @partial(jax.shard_map, mesh=mesh, in_specs=(P("data"),) * 3, out_specs=P())
    def psum_metrics(p, y, w):
        state = streaming.update(streaming.init(n_bins, k), p, y, w)
        return streaming.compute(jax.lax.psum(state, "data"))

    # 2. jit over NamedSharding-sharded inputs, GSPMD propagation (Auto axes): XLA inserts
    # the cross-device sums. (With Explicit axes every scatter/gather would need an
    # out_sharding: use shard_map there.)
    auto_mesh = jax.make_mesh((4,), ("data",), axis_types=(AxisType.Auto,))
    sharding = NamedSharding(auto_mesh, P("data"))
    sharded = [jax.device_put(x, sharding) for x in (probs, labels, weights)]
    assert len(sharded[0].addressable_shards) == 4

    @jax.jit
    def sharded_metrics(p, y, w):
        return streaming.compute(streaming.update(streaming.init(n_bins, k), p, y, w))

    out = {"psum": psum_metrics(*local), "sharded": sharded_metrics(*sharded)}

    # 3. clu's Collection.gather_from_model_output (all_gather + reduce) in shard_map.
    try:
        from clu import metrics as clu_metrics
    except ImportError:
        clu_metrics = None
    if clu_metrics is not None:
        Collection = clu_metrics.Collection.create(cal=streaming.clu_metric(n_bins, k))

        # clu reduces with all_gather + sum, whose replication shard_map cannot infer.
        @jax.jit
        @partial(jax.shard_map, mesh=mesh, in_specs=(P("data"),) * 3, out_specs=P(),
                 check_vma=False)
        def clu_metrics_fn(p, y, w):
            return Collection.gather_from_model_output(
                axis_name="data", probs=p, labels=y, weights=w)

        out["clu"] = clu_metrics_fn(*local).compute()["cal"]
    print(json.dumps({name: {key: float(v) for key, v in d.items()} for name, d in out.items()}))
    """
)


def test_multi_device_psum_and_sharded_jit_equal_one_shot(tmp_path):
    """Four CPU devices in a subprocess: shard_map + psum, NamedSharding jit, clu gather."""
    probs, labels, weights = _data(14)
    np.savez(tmp_path / "data.npz", probs=probs, labels=labels, weights=weights, n_bins=M)
    script = tmp_path / "multi_device.py"
    script.write_text(_MULTI_DEVICE_SCRIPT)
    result = run_on_cpu_devices(script, str(tmp_path / "data.npz"))
    assert {"psum", "sharded"} <= set(result)
    expected = _one_shot(probs, labels, weights, closed="right")
    for name, out in result.items():
        assert out["count"] == np.sum(weights > 0), name
        assert_close(np.float32(out["weight"]), weights.sum(), err_msg=name)
        for key, value in expected.items():
            assert_close(np.float32(out[key]), value, err_msg=f"{name}: {key}")
