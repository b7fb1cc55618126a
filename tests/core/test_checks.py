"""Bad input raises a ValueError naming the argument, before compilation; tracing skips values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal

P2 = np.array([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
Y = np.array([1, 0, 1])
METRICS = [jaxcal.ece, jaxcal.mce, jaxcal.classwise_ece, jaxcal.top_label_ece, jaxcal.brier_score,
           jaxcal.log_loss, jaxcal.brier_decomposition, jaxcal.reliability_curve]  # fmt: skip
BINNED = [jaxcal.ece, jaxcal.classwise_ece, jaxcal.top_label_ece, jaxcal.brier_decomposition,
          jaxcal.reliability_curve]  # fmt: skip


@pytest.mark.parametrize("metric", METRICS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("probs", "labels", "match"),
    [
        (np.zeros((3, 2, 2)), Y, r"`probs` must be 1-D \(N,\) or 2-D"),
        (np.zeros((0, 2)), np.zeros(0, int), "`probs` must not be empty"),
        (P2, np.array([1, 0]), r"`labels` must have shape \(3,\)"),
        (P2, np.array([[1], [0], [1]]), "`labels` must be 1-D"),
        (np.array([[0.2, np.nan], [0.6, 0.4], [0.5, 0.5]]), Y, "`probs` must be finite"),
        (np.array([[0.2, np.inf], [0.6, 0.4], [0.5, 0.5]]), Y, "`probs` must be finite"),
        (np.array([[-0.2, 1.2], [0.6, 0.4], [0.5, 0.5]]), Y, r"`probs` must lie in \[0, 1\]"),
        (np.array([[0.3, 0.3], [0.6, 0.4], [0.5, 0.5]]), Y, "rows must sum to 1"),
        (P2, np.array([1, 0, 2]), r"`labels` must lie in \[0, 2\)"),
        (P2, np.array([1, -1, 0]), r"`labels` must lie in \[0, 2\)"),
        (P2, np.array([1.0, 0.5, 0.0]), "`labels` must hold integers"),
        (P2, np.array(["a", "b", "c"]), "`labels` must"),
        (np.array([0.2, 0.9, 1.5]), Y, r"`probs` must lie in \[0, 1\]"),
        (np.array([0.2, 0.9, 0.5]), np.array([0, 2, 1]), r"`labels` must lie in \[0, 2\)"),
    ],
)
def test_bad_arrays(metric, probs, labels, match):
    with pytest.raises(ValueError, match=match):
        metric(probs, labels)


@pytest.mark.parametrize("metric", METRICS, ids=lambda f: f.__name__)
def test_bad_weights(metric):
    with pytest.raises(ValueError, match=r"`weights` must have shape \(3,\)"):
        metric(P2, Y, weights=np.ones(4))
    with pytest.raises(ValueError, match="`weights` must be non-negative"):
        metric(P2, Y, weights=np.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="`weights` must be finite"):
        metric(P2, Y, weights=np.array([1.0, np.nan, 1.0]))


@pytest.mark.parametrize("metric", BINNED, ids=lambda f: f.__name__)
def test_bad_options(metric):
    for n_bins in (0, -3, 2.5, True, "15"):
        with pytest.raises(ValueError, match="`n_bins` must be an integer >= 1"):
            metric(P2, Y, n_bins=n_bins)
    with pytest.raises(
        ValueError, match="`binning` must be one of 'uniform', 'quantile'; got 'equal'"
    ):
        metric(P2, Y, binning="equal")
    with pytest.raises(ValueError, match="`closed` must be one of 'right', 'left'"):
        metric(P2, Y, closed="both")


def test_bad_norm_debias_average():
    with pytest.raises(ValueError, match="`norm` must be one of 'l1', 'l2', 'max'; got 'L1'"):
        jaxcal.ece(P2, Y, norm="L1")
    with pytest.raises(ValueError, match='`debias=True` requires `norm="l2"`'):
        jaxcal.ece(P2, Y, debias=True)
    with pytest.raises(ValueError, match="`average` must be one of 'label', 'sample'"):
        jaxcal.top_label_ece(P2, Y, average="class")
    with pytest.raises(ValueError, match="`norm` cannot be passed to mce"):
        jaxcal.mce(P2, Y, norm="l1")


def test_tolerances_are_documented_and_accept_round_off():
    from jaxcal._core.checks import RANGE_ATOL, SIMPLEX_ATOL

    slightly_off = P2 + np.array([[SIMPLEX_ATOL / 4, 0.0], [0.0, 0.0], [0.0, 0.0]])
    assert np.isfinite(float(jaxcal.ece(slightly_off, Y)))
    assert np.isfinite(float(jaxcal.ece(np.array([1 + RANGE_ATOL / 2, 0.0, 0.5]), Y)))
    assert np.isfinite(float(jaxcal.ece(P2, np.array([True, False, True]))))
    assert np.isfinite(float(jaxcal.ece(P2, np.array([1.0, 0.0, 1.0]))))  # whole floats


def test_value_checks_are_skipped_under_tracing():
    # Documented: under jit the kernel trusts its input (no host round-trip, no error).
    bad = jnp.array([[0.3, 0.3], [0.6, 0.4], [0.5, 0.5]])
    value = jax.jit(jaxcal.ece)(bad, jnp.array([1, 0, 1]))
    assert np.isfinite(float(value))
    # ... but static checks (shapes, options) still raise at trace time.
    with pytest.raises(ValueError, match="`labels` must have shape"):
        jax.jit(jaxcal.ece)(bad, jnp.array([1, 0]))
    with pytest.raises(ValueError, match="`n_bins`"):
        jax.jit(lambda p, y: jaxcal.ece(p, y, n_bins=0))(bad, jnp.array([1, 0, 1]))


def test_validation_happens_before_compilation():
    calls = []
    original = jaxcal.metrics._ece._ece_kernel

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    jaxcal.metrics._ece._ece_kernel = spy
    try:
        with pytest.raises(ValueError):
            jaxcal.ece(np.array([0.5, 2.0]), np.array([0, 1]))
    finally:
        jaxcal.metrics._ece._ece_kernel = original
    assert not calls


_RENORM_RNG = np.random.default_rng(12)
_LOGITS = _RENORM_RNG.normal(size=(200, 10))
#: Probabilities exported with 3 decimals: row sums within +-0.005 of 1 (D12).
ROUNDED = np.round(np.exp(_LOGITS) / np.exp(_LOGITS).sum(1, keepdims=True), 3).astype(np.float32)
ROUNDED_LABELS = _RENORM_RNG.integers(0, 10, 200)
RENORMALIZING = [*METRICS, jaxcal.mmce, jaxcal.soft_ece, jaxcal.smooth_ece]


@pytest.mark.parametrize("metric", RENORMALIZING, ids=lambda f: f.__name__)
def test_rounded_probabilities_need_renormalize(metric):
    # D12: the message blamed logits and nothing could accept rounded exports.
    worst = int(np.argmax(np.abs(ROUNDED.astype(np.float64).sum(1) - 1)))
    with pytest.raises(ValueError, match=rf"row {worst} sums to .*renormalize=True"):
        metric(ROUNDED, ROUNDED_LABELS)
    got = metric(ROUNDED, ROUNDED_LABELS, renormalize=True)
    exact = (ROUNDED / ROUNDED.sum(1, keepdims=True)).astype(np.float32)
    want = metric(exact, ROUNDED_LABELS)
    for a, e in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)  # one float32 division apart


def test_renormalize_refuses_rows_without_mass():
    probs = ROUNDED.copy()
    probs[7] = 0
    with pytest.raises(
        ValueError, match=r"positive sum to be renormalized \(renormalize=True\); row 7 sums to 0"
    ):
        jaxcal.ece(probs, ROUNDED_LABELS, renormalize=True)
    with pytest.raises(ValueError, match="`renormalize` must be one of"):
        jaxcal.ece(ROUNDED, ROUNDED_LABELS, renormalize="yes")


def test_renormalize_under_jit_and_for_binary_probs():
    jitted = jax.jit(lambda p: jaxcal.brier_score(p, ROUNDED_LABELS, renormalize=True))
    exact = ROUNDED / ROUNDED.sum(1, keepdims=True)
    np.testing.assert_allclose(
        jitted(ROUNDED), jaxcal.brier_score(exact, ROUNDED_LABELS), rtol=1e-6
    )  # one float32 division apart
    scores, outcomes = np.array([0.2, 0.9]), np.array([0, 1])
    assert jaxcal.ece(scores, outcomes, renormalize=True) == jaxcal.ece(scores, outcomes)


@pytest.mark.parametrize(
    ("probs", "labels", "match"),
    [
        ([[0.5, 0.5], [1.0]], [0, 1], r"`probs` must be a rectangular array; got a ragged list"),
        ([0.1, None], [0, 1], "`probs` must hold numbers only; got None entries"),
        (np.ma.masked_array([0.1, 0.2], [0, 1]), [0, 1], r"`probs` is a NumPy masked array"),
        (P2[:2].astype(np.longdouble), [0, 1], r"`probs` has dtype float128.*float64"),
        (["a", "b"], [0, 1], "`probs` must hold real numbers; got dtype <U1"),
        (P2[:2], [0, None], "`labels` must hold numbers only; got None entries"),
        (P2[:2], [[0], [1, 1]], r"`labels` must be a rectangular array"),
        (P2[:2], np.ma.masked_array([0, 1], [0, 1]), r"`labels` is a NumPy masked array"),
    ],
)
def test_foreign_inputs_name_the_argument(probs, labels, match):
    # D21: numpy/JAX messages that did not name the argument, or "got ndarray" for float128.
    if np.dtype(np.longdouble).itemsize <= 8 and "float128" in match:
        pytest.skip("long double is float64 on this platform")
    with pytest.raises(ValueError, match=match):
        jaxcal.ece(probs, labels)


def test_object_arrays_of_numbers_still_work():
    labels = np.array([1, 0, 1], dtype=object)
    assert jaxcal.ece(P2, labels) == jaxcal.ece(P2, Y)


def test_torch_tensors_that_numpy_cannot_read():
    torch = pytest.importorskip("torch")
    probs = torch.tensor(P2, requires_grad=True)
    with pytest.raises(ValueError, match=r"`probs` is a torch tensor that requires grad.*detach"):
        jaxcal.ece(probs, torch.tensor(Y))
    with pytest.raises(ValueError, match=r"`probs` is a torch bfloat16 tensor.*\.float\(\)"):
        jaxcal.ece(torch.tensor(P2).bfloat16(), Y)
    assert jaxcal.ece(probs.detach(), torch.tensor(Y)) == jaxcal.ece(P2, Y)
