"""heldout_objective and heldout_batch_indices: the value by hand, gradients against
finite differences in float64, and two scanned steps equal to a hand-written loop."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.test_util import check_grads

from jaxcal import losses
from tests.helpers import assert_close, x64

D, H, K = 5, 7, 3


def apply_fn(params, x):
    return jnp.tanh(x @ params["w1"]) @ params["w2"]


def _setup(dtype=jnp.float32, n=40, seed=0):
    rng = np.random.default_rng(seed)
    params = {
        "w1": jnp.asarray(rng.normal(size=(D, H)) * 0.5, dtype),
        "w2": jnp.asarray(rng.normal(size=(H, K)) * 0.5, dtype),
    }
    x = jnp.asarray(rng.normal(size=(n, D)), dtype)
    y = jnp.asarray(rng.integers(0, K, n), jnp.int32)
    return params, x, y


def test_value_is_ce_on_the_batch_plus_lambda_r_on_the_heldout_batch():
    params, x, y = _setup()
    objective = losses.heldout_objective(apply_fn, losses.soft_ece_loss, lam=0.7)
    loss, terms = objective(params, (x[:30], y[:30]), (x[30:], y[30:]))
    ce = optax.softmax_cross_entropy_with_integer_labels(apply_fn(params, x[:30]), y[:30]).mean()
    reg = losses.soft_ece_loss(apply_fn(params, x[30:]), y[30:])
    assert_close(terms.base, ce)
    assert_close(terms.regularizer, reg)
    assert_close(loss, ce + 0.7 * reg)
    stats = losses.saturation_stats(apply_fn(params, x[30:]), y[30:])
    assert_close(terms.heldout.accuracy, stats.accuracy)


def test_weights_reach_both_losses():
    params, x, y = _setup()
    w = jnp.linspace(0.5, 2.0, 40)
    objective = losses.heldout_objective(apply_fn, losses.mmce_loss, lam=1.0)
    loss, _ = objective(params, (x[:30], y[:30], w[:30]), (x[30:], y[30:], w[30:]))
    ce = optax.softmax_cross_entropy_with_integer_labels(apply_fn(params, x[:30]), y[:30])
    want = jnp.sum(ce * w[:30]) / jnp.sum(w[:30]) + losses.mmce_loss(
        apply_fn(params, x[30:]), y[30:], weights=w[30:]
    )
    assert_close(loss, want)


@pytest.mark.parametrize("reg", ["mmce_loss", "soft_ece_loss", "dca_loss", "dece_loss"])
def test_gradients_match_finite_differences_in_float64(reg):
    with x64():
        params, x, y = _setup(jnp.float64, seed=1)
        objective = losses.heldout_objective(apply_fn, getattr(losses, reg), lam=2.0)

        def f(p):
            return objective(p, (x[:30], y[:30]), (x[30:], y[30:]))[0]

        check_grads(f, (params,), order=1, modes=("rev",), atol=1e-6, rtol=1e-5)


def test_lambda_may_be_traced_under_vmap():
    params, x, y = _setup()

    def loss_at(lam):
        obj = losses.heldout_objective(apply_fn, losses.dca_loss, lam=lam)
        return obj(params, (x[:30], y[:30]), (x[30:], y[30:]))[0]

    lams = jnp.array([0.0, 1.0, 4.0])
    assert_close(jax.vmap(loss_at)(lams), jnp.stack([loss_at(v) for v in (0.0, 1.0, 4.0)]))


def test_two_scanned_steps_equal_a_hand_written_loop():
    params, x, y = _setup(n=60, seed=2)
    x_tr, y_tr, x_c, y_c = x[:48], y[:48], x[48:], y[48:]
    idx = losses.heldout_batch_indices(
        jax.random.key(3), 48, 12, steps=2, batch_size=16, heldout_batch_size=6
    )
    objective = losses.heldout_objective(apply_fn, losses.mmce_loss, lam=1.5)
    opt = optax.sgd(0.1)

    def step(carry, i):
        p, s = carry
        grads, _ = jax.grad(objective, has_aux=True)(
            p, (x_tr[i.train], y_tr[i.train]), (x_c[i.heldout], y_c[i.heldout])
        )
        updates, s = opt.update(grads, s, p)
        return (optax.apply_updates(p, updates), s), None

    scanned = jax.jit(lambda p: jax.lax.scan(step, (p, opt.init(p)), idx)[0][0])(params)

    by_hand = params
    for t in range(2):
        bi, ci = np.asarray(idx.train[t]), np.asarray(idx.heldout[t])

        def loss(p, bi=bi, ci=ci):
            logits = jnp.tanh(x_tr[bi] @ p["w1"]) @ p["w2"]
            log_p = jax.nn.log_softmax(logits, axis=1)
            ce = -jnp.mean(log_p[jnp.arange(len(bi)), y_tr[bi]])
            return ce + 1.5 * losses.mmce_loss(jnp.tanh(x_c[ci] @ p["w1"]) @ p["w2"], y_c[ci])

        g = jax.grad(loss)(by_hand)
        by_hand = jax.tree.map(lambda a, b: a - 0.1 * b, by_hand, g)
    for k in params:
        assert_close(scanned[k], by_hand[k], rtol=1e-5, atol=1e-6)  # scan vs eager rounding


def test_indices_are_epochs_of_permutations():
    idx = losses.heldout_batch_indices(
        jax.random.key(0), 10, 4, steps=7, batch_size=3, heldout_batch_size=2
    )
    assert idx.train.shape == (7, 3) and idx.heldout.shape == (7, 2)
    assert idx.train.dtype == jnp.int32
    train = np.asarray(idx.train)
    for epoch in range(2):  # 3 batches of 3 per epoch, the 10th row left out
        rows = train[3 * epoch : 3 * epoch + 3].ravel()
        assert len(set(rows.tolist())) == 9 and rows.max() < 10
    held = np.asarray(idx.heldout)
    for epoch in range(3):
        assert sorted(held[2 * epoch : 2 * epoch + 2].ravel().tolist()) == [0, 1, 2, 3]
    again = losses.heldout_batch_indices(
        jax.random.key(0), 10, 4, steps=7, batch_size=3, heldout_batch_size=2
    )
    np.testing.assert_array_equal(np.asarray(again.train), train)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": 11}, "batch_size"),
        ({"batch_size": 3, "heldout_batch_size": 5}, "heldout_batch_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 3, "steps": 0}, "steps"),
    ],
)
def test_bad_sizes_are_named(kwargs, match):
    kwargs = {"steps": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        losses.heldout_batch_indices(jax.random.key(0), 10, 4, **kwargs)


def test_bad_batches_and_callables_are_named():
    params, x, y = _setup()
    objective = losses.heldout_objective(apply_fn, losses.mmce_loss)
    with pytest.raises(ValueError, match="heldout_batch"):
        objective(params, (x, y), x)
    with pytest.raises(ValueError, match="regularizer"):
        losses.heldout_objective(apply_fn, 1.0)
    with pytest.raises(ValueError, match="apply_fn"):
        losses.heldout_objective(None, losses.mmce_loss)
