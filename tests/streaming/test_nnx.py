"""The Flax NNX metric (``streaming.nnx_metric``): one-shot equality, masks, jit, merge."""

import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import jaxcal
from jaxcal import streaming
from tests.helpers import assert_close, count_compiles

nnx = pytest.importorskip("flax.nnx")

N, K, M, CHUNK = 480, 4, 10, 160  # three chunks: one compiled shape per input kind
KEYS = ("ece", "mce", "classwise_ece", "top_label_ece", "brier", "log_loss", "reliability")


def _data(seed, binary=False):
    """Logits with a few rows masked out; masked rows hold NaN and the ignore label -1."""
    rng = np.random.default_rng(seed)
    logits = (2.5 * rng.normal(size=(N,) if binary else (N, K))).astype(np.float32)
    probs = np.asarray(jax.nn.sigmoid(logits) if binary else jax.nn.softmax(logits, axis=-1))
    p_true = np.asarray(jax.nn.sigmoid(logits / 2) if binary else jax.nn.softmax(logits / 2))
    if binary:
        labels = (rng.random(N) < p_true).astype(np.int32)
    else:
        labels = np.array([rng.choice(K, p=p / p.sum()) for p in p_true], np.int32)
    mask = rng.random(N) < 0.85
    weights = rng.gamma(2.0, size=N).astype(np.float32)
    return logits, probs, labels, mask, weights


def _garbage(logits, labels, mask):
    """What padded rows hold in a real pipeline: NaN outputs and an ignore label."""
    bad = ~mask if logits.ndim == 1 else ~mask[:, None]
    return np.where(bad, np.float32(np.nan), logits), np.where(mask, labels, -1)


def _one_shot(probs, labels, weights, binary=False):
    kw = dict(n_bins=M, weights=weights)
    return {
        "ece": jaxcal.ece(probs, labels, **kw),
        "mce": jaxcal.mce(probs, labels, **kw),
        "classwise_ece": None if binary else jaxcal.classwise_ece(probs, labels, **kw),
        "top_label_ece": None if binary else jaxcal.top_label_ece(probs, labels, **kw),
        "brier": jaxcal.brier_score(probs, labels, weights=weights),
        "log_loss": jaxcal.log_loss(probs, labels, weights=weights),
        "reliability": jaxcal.brier_decomposition(probs, labels, **kw).reliability,
    }


def _assert_matches(out, expected):
    for key in KEYS:
        if expected[key] is not None:
            assert_close(out[key], expected[key], err_msg=key)


def _batches(*arrays):
    for start in range(0, N, CHUNK):
        yield tuple(a[start : start + CHUNK] for a in arrays)


def test_multimetric_under_nnx_jit_equals_one_shot_and_ignores_masked_rows():
    logits, probs, labels, mask, weights = _data(0)
    metrics = nnx.MultiMetric(
        accuracy=nnx.metrics.Accuracy(), calibration=streaming.nnx_metric(M, K)
    )

    @nnx.jit
    def eval_step(metrics, logits, labels, mask, weights):
        # Every metric gets every keyword: ours ignores `loss`, Accuracy ignores `weights`.
        metrics.update(logits=logits, labels=labels, mask=mask, weights=weights, loss=0.0)

    padded_logits, padded_labels = _garbage(logits, labels, mask)
    # flax's Accuracy mixes int counts and float totals: it needs standard promotion.
    with jax.numpy_dtype_promotion("standard"):
        for batch in _batches(padded_logits, padded_labels, mask, weights):
            eval_step(metrics, *batch)  # traced: a host sync would raise
        out = metrics.compute()
    keep = mask
    expected = _one_shot(probs[keep], labels[keep], weights[keep])
    _assert_matches(out["calibration"], expected)
    assert int(out["calibration"]["count"]) == keep.sum()
    assert_close(out["calibration"]["weight"], weights[keep].sum())
    assert_close(out["accuracy"], np.mean(probs[keep].argmax(1) == labels[keep]))


def test_jit_of_a_functional_eval_step_compiles_once_and_matches_eager():
    _, probs, labels, _, weights = _data(1)
    metric = streaming.nnx_metric(M, K)
    graphdef, state = nnx.split(metric)

    def eval_step(state, probs, labels, weights):
        metric = nnx.merge(graphdef, state)
        metric.update(probs=probs, labels=labels, weights=weights)
        return nnx.state(metric)

    step = count_compiles(eval_step)
    eager = streaming.nnx_metric(M, K)
    for p, y, w in _batches(probs, labels, weights):
        state = step(state, p, y, w)
        eager.update(probs=p, labels=y, weights=w)  # eager: validated, same sums
    assert step.compiles() == 1
    nnx.update(metric, state)
    out, expected = metric.compute(), eager.compute()
    for key in streaming.OUTPUTS:
        assert_close(out[key], expected[key], err_msg=key)
    _assert_matches(out, _one_shot(probs, labels, weights))
    # The metric is a pytree too: a jitted step may take and return it whole.
    whole = jax.jit(lambda m, p, y: (m.update(probs=p, labels=y), m)[1])
    ece = whole(streaming.nnx_metric(M, K, output="ece"), probs, labels).compute()
    assert_close(ece, jaxcal.ece(probs, labels, n_bins=M))


@pytest.mark.parametrize("inputs", ["logits", "probs"])
def test_binary_streams_take_1d_logits_or_probs(inputs):
    logits, probs, labels, mask, _ = _data(2, binary=True)
    metric = streaming.nnx_metric(M, 2, binary=True)
    update = nnx.jit(lambda m, x, y, k: m.update(**{inputs: x}, labels=y, mask=k))
    x = _garbage(logits, labels, mask)[0] if inputs == "logits" else probs
    for batch in _batches(x, labels, mask):
        update(metric, *batch)
    _assert_matches(metric.compute(), _one_shot(probs[mask], labels[mask], None, binary=True))


def test_reset_and_merge():
    _, probs, labels, _, _ = _data(3)
    half = N // 2
    a, b, both = (streaming.nnx_metric(M, K, output="ece") for _ in range(3))
    a.update(probs=probs[:half], labels=labels[:half])
    b.update(probs=probs[half:], labels=labels[half:])
    both.update(probs=probs, labels=labels)
    a.merge(b)  # in place; b unchanged
    assert_close(a.compute(), both.compute())
    assert_close(a.compute(), jaxcal.ece(probs, labels, n_bins=M))
    assert int(b.state.get_value().top_count.sum()) == N - half
    b.reset()  # zero sums, same configuration; reset is the merge identity
    assert float(b.compute()) == 0.0
    assert int(b.state.get_value().top_count.sum()) == 0
    assert b.state.get_value().top_count.shape == (K, M)
    both.merge(b)
    assert_close(both.compute(), a.compute())
    b.update(probs=probs[half:], labels=labels[half:])  # after reset: as a fresh metric
    assert_close(b.compute(), jaxcal.ece(probs[half:], labels[half:], n_bins=M))
    # reset and merge run inside nnx.jit as well
    nnx.jit(lambda m: m.reset())(a)
    assert float(a.compute()) == 0.0
    nnx.jit(lambda m, o: m.merge(o))(a, both)
    assert_close(a.compute(), both.compute())


def test_bad_arguments_raise_value_errors():
    _, probs, labels, _, _ = _data(4)
    metric = streaming.nnx_metric(M, K)
    with pytest.raises(ValueError, match="exactly one of `probs` and `logits` to update"):
        metric.update(labels=labels)
    with pytest.raises(ValueError, match="`probs` must have shape \\(N, 4\\)"):
        metric.update(probs=probs[:, :3], labels=labels)
    with pytest.raises(ValueError, match="`labels` must lie in"):  # eager calls validate
        metric.update(probs=probs, labels=labels + K)
    with pytest.raises(ValueError, match="`output`"):
        streaming.nnx_metric(M, K, output="accuracy")
    with pytest.raises(ValueError, match="`norm`"):
        streaming.nnx_metric(M, K, norm="l3")
    with pytest.raises(ValueError, match="`n_bins`"):
        streaming.nnx_metric(0, K)
    with pytest.raises(ValueError, match="`other` must be a metric made by nnx_metric"):
        metric.merge(nnx.metrics.Average())
    with pytest.raises(ValueError, match="`a` and `b` must come from init"):
        metric.merge(streaming.nnx_metric(M + 1, K))


def test_import_jaxcal_does_not_import_flax():
    code = textwrap.dedent(
        """
        import sys
        import jaxcal, jaxcal.streaming
        assert not [m for m in sys.modules if m.split(".")[0] == "flax"]
        sys.modules["flax"] = None  # as if flax were not installed
        try:
            jaxcal.streaming.nnx_metric(10, 4)
        except ImportError as error:
            print(error)
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert 'pip install "jaxcal[flax]"' in run.stdout
