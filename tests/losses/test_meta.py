"""meta_calibration and hyper_cross_entropy: the hypergradient against finite differences
of a hand-written look-ahead in float64, two steps equal to a hand-written loop, the
projection into the boxes, and the training loss with its hyperparameters."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcal import losses
from tests.helpers import assert_close, x64

D, H, K = 4, 6, 3
ETA = 0.3
# optax.adam's bias correction raises a python float to an int32 count: not allowed under
# the suite's strict dtype promotion, so the tests that run Adam use the standard rules.
standard_promotion = functools.partial(jax.numpy_dtype_promotion, "standard")
CAL = functools.partial(losses.dece_loss, rank_temperature=10.0, bin_temperature=0.1)


def apply_fn(p, x):
    return jnp.tanh(x @ p["hidden"]) @ p["out"]


MASK = {"hidden": False, "out": True}


def _setup(dtype, seed=0, n=36):
    rng = np.random.default_rng(seed)
    params = {
        "hidden": jnp.asarray(rng.normal(size=(D, H)), dtype),
        "out": jnp.asarray(rng.normal(size=(H, K)), dtype),
    }
    x = jnp.asarray(rng.normal(size=(n, D)), dtype)
    y = jnp.asarray(rng.integers(0, K, n), jnp.int32)
    return params, x, y


def _hand_train_loss(p, h, x, y):
    """CE(z / T, (1 - a) e_y + a / K) + l2/2 ||out||^2, written out."""
    z = apply_fn(p, x) / h.get("temperature", 1.0)
    a = h.get("label_smoothing", 0.0)
    t = (1 - a) * jax.nn.one_hot(y, K, dtype=z.dtype) + a / K
    value = -jnp.mean(jnp.sum(t * jax.nn.log_softmax(z, axis=1), axis=1))
    return value + 0.5 * h.get("l2", 0.0) * jnp.sum(p["out"] ** 2)


def _hand_meta(p, h, x, y, xc, yc):
    g = jax.grad(_hand_train_loss)(p, h, x, y)
    ahead = {"hidden": p["hidden"], "out": p["out"] - ETA * g["out"]}
    z = apply_fn(ahead, xc)
    ce = -jnp.mean(jax.nn.log_softmax(z, axis=1)[jnp.arange(len(yc)), yc])
    return ce + 0.5 * CAL(z, yc)


@pytest.mark.parametrize(
    "hparams", [{"label_smoothing": 0.1}, {"temperature": 1.3}, {"l2": 0.05}], ids=str
)
def test_hypergradient_matches_finite_differences_in_float64(hparams):
    with x64():
        params, x, y = _setup(jnp.float64)
        hparams = {k: jnp.asarray(v, jnp.float64) for k, v in hparams.items()}
        lr = 1e-4  # sgd on h: the update is -lr * hypergradient (inside the box)
        mc = losses.meta_calibration(
            apply_fn,
            optax.sgd(0.0),
            MASK,
            lookahead_learning_rate=ETA,
            hyper_optimizer=optax.sgd(lr),
            calibration_loss=CAL,
        )
        batch, held = (x[:24], y[:24]), (x[24:], y[24:])
        _, new, _, info = mc.step(params, hparams, mc.init(params, hparams), batch, held)
        (key,) = hparams
        hypergrad = (hparams[key] - new[key]) / lr
        eps = 1e-5
        up = _hand_meta(params, {key: hparams[key] + eps}, *batch, *held)
        down = _hand_meta(params, {key: hparams[key] - eps}, *batch, *held)
        assert_close(hypergrad, (up - down) / (2 * eps), rtol=1e-5, atol=1e-8)
        assert_close(info.meta_loss, _hand_meta(params, hparams, *batch, *held))


def test_two_steps_equal_a_hand_written_loop():
    params, x, y = _setup(jnp.float32, seed=1, n=48)
    hparams = {"label_smoothing": jnp.asarray(0.05)}
    lr, hyper_lr = 0.05, 0.02
    mc = losses.meta_calibration(
        apply_fn,
        optax.sgd(lr),
        MASK,
        lookahead_learning_rate=ETA,
        hyper_optimizer=optax.sgd(hyper_lr),
        calibration_loss=CAL,
    )
    state = mc.init(params, hparams)
    batches = [((x[0:16], y[0:16]), (x[32:40], y[32:40])), ((x[16:32], y[16:32]), (x[40:], y[40:]))]
    p, h = params, hparams
    for batch, held in batches:
        p, h, state, _ = jax.jit(mc.step)(p, h, state, batch, held)

    hp, hh = params, dict(hparams)
    for (bx, by), (cx, cy) in batches:
        g_h = jax.grad(
            lambda a, hp=hp, bx=bx, by=by, cx=cx, cy=cy: _hand_meta(
                hp, {"label_smoothing": a}, bx, by, cx, cy
            )
        )(hh["label_smoothing"])
        hh = {"label_smoothing": jnp.clip(hh["label_smoothing"] - hyper_lr * g_h, 0.0, 0.5)}
        g = jax.grad(_hand_train_loss)(hp, hh, bx, by)
        hp = jax.tree.map(lambda a, b: a - lr * b, hp, g)
    assert_close(h["label_smoothing"], hh["label_smoothing"], rtol=1e-5, atol=1e-7)  # jit vs eager
    for k in params:
        assert_close(p[k], hp[k], rtol=1e-5, atol=1e-6)


@standard_promotion()
def test_hyperparameters_stay_in_their_boxes():
    params, x, y = _setup(jnp.float32, seed=2)
    hparams = {
        "label_smoothing": jnp.asarray(0.2),
        "temperature": jnp.asarray(1.0),
        "l2": jnp.asarray(0.0),
    }
    mc = losses.meta_calibration(apply_fn, optax.adam(1e-2), MASK, hyper_optimizer=optax.sgd(1e3))
    state = mc.init(params, hparams)
    step = jax.jit(mc.step)
    for _ in range(3):
        params, hparams, state, info = step(
            params, hparams, state, (x[:24], y[:24]), (x[24:], y[24:])
        )
        assert 0.0 <= float(hparams["label_smoothing"]) <= 0.5
        assert 0.05 <= float(hparams["temperature"]) <= 20.0
        assert 0.0 <= float(hparams["l2"]) <= 1.0
        assert np.isfinite(float(info.train_loss))
    custom = losses.meta_calibration(
        apply_fn,
        optax.sgd(0.1),
        MASK,
        hyper_optimizer=optax.sgd(1e3),
        bounds={"label_smoothing": (0.0, 0.01)},
    )
    h = {"label_smoothing": jnp.asarray(0.0)}
    _, h, _, _ = custom.step(params, h, custom.init(params, h), (x[:24], y[:24]), (x[24:], y[24:]))
    assert 0.0 <= float(h["label_smoothing"]) <= 0.01


def test_a_custom_training_loss_and_a_callable_mask():
    params, x, y = _setup(jnp.float32, seed=3)

    def train_loss(logits, labels, h, p):
        return optax.softmax_cross_entropy_with_integer_labels(logits * h["scale"], labels).mean()

    mc = losses.meta_calibration(
        apply_fn,
        optax.sgd(0.1),
        lambda p: {"hidden": False, "out": True},
        train_loss=train_loss,
        bounds={"scale": (0.1, 10.0)},
    )
    h = {"scale": jnp.asarray(1.0)}
    with standard_promotion():  # the default hyper_optimizer is optax.adam
        _, h2, _, info = mc.step(params, h, mc.init(params, h), (x[:24], y[:24]), (x[24:], y[24:]))
    assert float(h2["scale"]) != 1.0 and np.isfinite(float(info.meta_loss))


@standard_promotion()
def test_vmap_over_seeds_equals_a_loop():
    mc = losses.meta_calibration(apply_fn, optax.adam(1e-2), MASK, calibration_loss=CAL)
    runs = [_setup(jnp.float32, seed=s) for s in range(3)]
    h = {"label_smoothing": jnp.asarray(0.1)}

    def one(p, x, y):
        return mc.step(p, h, mc.init(p, h), (x[:24], y[:24]), (x[24:], y[24:]))[:2]

    stacked = jax.tree.map(lambda *a: jnp.stack(a), *runs)
    batched = jax.jit(jax.vmap(one))(*stacked)
    for s, (p, x, y) in enumerate(runs):
        single = one(p, x, y)
        jax.tree.map(lambda b, a, s=s: assert_close(b[s], a, rtol=1e-5, atol=1e-6), batched, single)


def test_unknown_hyperparameters_and_optimizers_are_named():
    params, _, _ = _setup(jnp.float32)
    mc = losses.meta_calibration(apply_fn, optax.sgd(0.1), MASK)
    with pytest.raises(ValueError, match="unknown keys"):
        mc.init(params, {"dropout": jnp.asarray(0.1)})
    with pytest.raises(ValueError, match="hparams"):
        mc.init(params, [0.1])
    with pytest.raises(ValueError, match="optimizer"):
        losses.meta_calibration(apply_fn, "adam", MASK)


def test_hyper_cross_entropy_is_optax_smoothing_and_temperature():
    rng = np.random.default_rng(4)
    z, y = jnp.asarray(rng.normal(size=(10, K))), jnp.asarray(rng.integers(0, K, 10))
    t = optax.smooth_labels(jax.nn.one_hot(y, K), 0.2)
    want = optax.softmax_cross_entropy(z / 2.0, t).mean()
    got = losses.hyper_cross_entropy(z, y, {"label_smoothing": 0.2, "temperature": 2.0})
    assert_close(got, want)
    vec = jnp.array([0.0, 0.1, 0.3])
    t = (1 - vec[y])[:, None] * jax.nn.one_hot(y, K) + vec[y][:, None] / K
    assert_close(
        losses.hyper_cross_entropy(z, y, {"label_smoothing": vec}),
        optax.softmax_cross_entropy(z, t).mean(),
    )
    zb, yb = jnp.asarray(rng.normal(size=10)), jnp.asarray(rng.integers(0, 2, 10))
    assert_close(
        losses.hyper_cross_entropy(zb, yb, {}),
        optax.sigmoid_binary_cross_entropy(zb, yb.astype(zb.dtype)).mean(),
    )
