"""What the three differentiable objectives share (jaxcal.metrics._objectives): finite values and
gradients at the boundaries, traced hyperparameters, jit / vmap / training loops, and
validation that names the argument."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.special

import jaxcal
from jaxcal.metrics import mmce, smooth_ece, soft_ece
from tests.helpers import assert_close, count_compiles
from tests.reference_soft import N, multiclass

# ---------------------------------------------------------------------------------------
# finite everywhere
# ---------------------------------------------------------------------------------------


def _objectives():
    return {
        "soft_l1": lambda p, y, w: soft_ece(p, y, weights=w),
        # a cold l2: every bin but the data's has exactly zero mass (0/0 guarded)
        "soft_l2_cold": lambda p, y, w: soft_ece(p, y, norm="l2", temperature=1e-7, weights=w),
        "mmce": lambda p, y, w: mmce(p, y, weights=w),
        "mmce_w": lambda p, y, w: mmce(p, y, variant="weighted", weights=w),
        "smooth": lambda p, y, w: smooth_ece(p, y, weights=w),
    }


BOUNDARY_CASES = {
    # probabilities of exactly 0 and 1, right and wrong
    "binary_extremes": (np.array([0.0, 1.0, 0.0, 1.0, 0.5, 1.0]), np.array([0, 1, 1, 0, 1, 1])),
    # every confidence is 1 (one-hot rows): all mass in the last bin, the others empty
    "one_hot_rows": (np.eye(4)[[0, 1, 2, 3, 1, 2]], np.array([0, 1, 2, 1, 1, 0])),
    # perfectly calibrated: every residual 0, every objective 0 (sqrt at 0)
    "perfect": (np.array([0.0, 1.0, 1.0, 0.0, 0.0, 1.0]), np.array([0, 1, 1, 0, 0, 1])),
    # all scores in one bin, uniform rows (ties in the top label)
    "ties": (np.full((6, 4), 0.25), np.array([0, 1, 2, 3, 0, 1])),
}


@pytest.mark.parametrize("case", list(BOUNDARY_CASES))
def test_values_and_gradients_are_finite_at_the_boundaries(case):
    probs, labels = BOUNDARY_CASES[case]
    probs = jnp.asarray(probs, jnp.float32)
    for zero_weights in (False, True):
        w = jnp.zeros(6) if zero_weights else jnp.ones(6)
        for name, f in _objectives().items():
            value, grad = jax.value_and_grad(f)(probs, labels, w)
            assert np.isfinite(value), (case, name)
            assert np.all(np.isfinite(grad)), (case, name, grad)
            if zero_weights or case == "perfect":
                assert float(value) == 0.0, (case, name)


# ---------------------------------------------------------------------------------------
# jit, vmap, training loop
# ---------------------------------------------------------------------------------------


def test_hyperparameters_are_traced_no_retrace():
    _, probs, labels = multiclass()
    probs = jnp.asarray(probs, jnp.float32)
    for f in (
        lambda p, y, h: soft_ece(p, y, temperature=h),
        lambda p, y, h: mmce(p, y, bandwidth=h),
        lambda p, y, h: smooth_ece(p, y, bandwidth=h),
    ):
        jitted = count_compiles(f)
        first = jitted(probs, labels, 0.01)
        second = jitted(probs[::-1], labels[::-1], 0.02)
        assert jitted.compiles() == 1
        assert float(first) != float(second)
        assert_close(first, f(probs, labels, 0.01))
    jitted = count_compiles(lambda p, y: smooth_ece(p, y))
    jitted(probs, labels)
    jitted(probs[::-1], labels)
    assert jitted.compiles() == 1


def test_vmap_over_a_batch_of_models():
    rng = np.random.default_rng(21)
    logits = rng.normal(size=(3, N, 5)) * np.array([0.5, 2.0, 4.0])[:, None, None]
    probs = jnp.asarray(scipy.special.softmax(logits, axis=2), jnp.float32)
    labels = jnp.asarray(rng.integers(0, 5, N))
    for f, with_grad in (
        (lambda p, y: soft_ece(p, y, norm="l2"), True),
        (lambda p, y: mmce(p, y, variant="weighted"), False),
        (lambda p, y: smooth_ece(p, y), False),
    ):
        batched = jax.jit(jax.vmap(f, in_axes=(0, None)))(probs, labels)
        assert_close(batched, jnp.stack([f(p, labels) for p in probs]))
        assert len(set(np.asarray(batched).tolist())) == 3
        if with_grad:
            grads = jax.jit(jax.vmap(jax.grad(f), in_axes=(0, None)))(probs, labels)
            assert_close(grads[1], jax.grad(f)(probs[1], labels), atol=1e-6)  # float32 grads


def test_jitted_optax_loop_reduces_calibration_error():
    # Overconfident logits: fitting a temperature by soft ECE alone (in a jitted optax loop
    # under lax.scan) must bring the *hard* ECE down.
    logits, _, labels = multiclass(n=1000, seed=22, scale=4.0)
    logits = jnp.asarray(logits, jnp.float32)
    opt = optax.adam(0.05)

    def loss(log_t, logits, labels):
        return soft_ece(jax.nn.softmax(logits / jnp.exp(log_t)), labels)

    @jax.jit
    def fit(log_t, logits, labels):
        def step(carry, _):
            log_t, state = carry
            value, g = jax.value_and_grad(loss)(log_t, logits, labels)
            updates, state = opt.update(g, state)
            return (optax.apply_updates(log_t, updates), state), value

        (log_t, _), trace = jax.lax.scan(step, (log_t, opt.init(log_t)), length=150)
        return log_t, trace

    with jax.numpy_dtype_promotion("standard"):  # optax.adam mixes int and float (users' mode)
        log_t, trace = fit(jnp.zeros(()), logits, labels)
    before = jaxcal.ece(jax.nn.softmax(logits), labels)
    after = jaxcal.ece(jax.nn.softmax(logits / jnp.exp(log_t)), labels)
    assert np.all(np.isfinite(trace))
    assert float(trace[-1]) < 0.5 * float(trace[0])
    assert float(after) < 0.5 * float(before)


def test_regulariser_changes_training_of_a_linear_model():
    rng = np.random.default_rng(23)
    x = jnp.asarray(rng.normal(size=(N, 8)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, N))
    opt = optax.sgd(0.5)

    def loss(w, lam, x, y):
        logits = x @ w
        probs = jax.nn.softmax(logits)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return ce + lam * (soft_ece(probs, y) + mmce(probs, y) + smooth_ece(probs, y))

    @jax.jit
    def train(lam, x, y):
        def step(carry, _):
            w, state = carry
            value, g = jax.value_and_grad(loss)(w, lam, x, y)
            updates, state = opt.update(g, state)
            return (optax.apply_updates(w, updates), state), value

        w0 = jnp.zeros((8, 3))
        (w, _), trace = jax.lax.scan(step, (w0, opt.init(w0)), length=20)
        return w, trace

    w_plain, _ = train(0.0, x, y)
    w_reg, trace_reg = train(1.0, x, y)
    assert np.all(np.isfinite(trace_reg)) and np.all(np.isfinite(w_reg))
    assert float(jnp.max(jnp.abs(w_reg - w_plain))) > 1e-3


# ---------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------

P, Y = jnp.array([0.2, 0.7, 0.9]), jnp.array([0, 1, 1])


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: soft_ece(P, Y, n_bins=0), "n_bins"),
        (lambda: soft_ece(P, Y, n_bins=2.5), "n_bins"),
        (lambda: soft_ece(P, Y, norm="max"), "norm"),
        (lambda: soft_ece(P, Y, temperature=0.0), "temperature"),
        (lambda: soft_ece(P, Y, temperature=-1e-3), "temperature"),
        (lambda: soft_ece(P, Y, temperature=float("nan")), "temperature"),
        (lambda: soft_ece(P, Y, temperature=float("inf")), "temperature"),
        (lambda: soft_ece(P, Y, temperature="hot"), "temperature"),
        (lambda: soft_ece(P, Y, temperature=True), "temperature"),
        (lambda: soft_ece(P, Y, temperature=jnp.ones(2)), "temperature"),
        (lambda: soft_ece(P, Y, temperature=jnp.asarray(-1.0)), "temperature"),
        (lambda: soft_ece(jnp.array([0.2, 1.5, 0.9]), Y), "probs"),
        (lambda: soft_ece(jnp.array([[0.2, 0.9]]), jnp.array([0])), "probs"),
        (lambda: soft_ece(P, jnp.array([0, 1])), "labels"),
        (lambda: soft_ece(P, jnp.array([0, 2, 1])), "labels"),
        (lambda: soft_ece(P, Y, weights=jnp.array([1.0, -1.0, 1.0])), "weights"),
        (lambda: mmce(P, Y, variant="w"), "variant"),
        (lambda: mmce(P, Y, bandwidth=0), "bandwidth"),
        (lambda: mmce(P, Y, bandwidth=-0.4), "bandwidth"),
        (lambda: mmce(P, Y, bandwidth=1e-4), "bandwidth"),
        (lambda: mmce(jnp.array([0.2, float("nan"), 0.9]), Y), "probs"),
        (lambda: mmce(P, Y, weights=jnp.ones(4)), "weights"),
        (lambda: smooth_ece(P, Y, bandwidth=1e-4), "bandwidth"),
        (lambda: smooth_ece(P, Y, bandwidth=-0.1), "bandwidth"),
        (lambda: smooth_ece(jnp.zeros((3, 2, 2)), Y), "probs"),
        (lambda: smooth_ece(jnp.zeros((0,)), jnp.zeros((0,), jnp.int32)), "probs"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_value_checks_are_skipped_under_jit():
    # Documented: inside jit the kernels trust their input (no ValueError, no host sync).
    for f in (soft_ece, mmce, smooth_ece):
        out = jax.jit(f)(jnp.array([0.2, 1.5, 0.9]), Y)
        assert out.shape == ()


def test_labels_closed_over_inside_jit():
    # Training loops often close over a fixed label batch: the metrics must trace.
    for f in (soft_ece, mmce, smooth_ece):
        assert_close(jax.jit(lambda p, f=f: f(p, Y))(P), f(P, Y))
