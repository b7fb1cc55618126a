"""jaxcal.losses against float64 NumPy oracles of each formula and the authors' definitions.

soft_ece_loss: Eq. (11) of Karandikar et al. (2021) as written (reference_soft), and the
authors' TensorFlow ``get_soft_binning_ece_tensor`` (google/uncertainty-baselines,
experimental/caltrain) transcribed with its EPS guards; mmce_loss: the kernel-matrix
MMCE_w of Kumar et al. (2018); dca_loss: Liang et al.'s (2020) batch |mean confidence -
accuracy|; focal_loss: Lin et al. (2017) per sample, optax's sigmoid_focal_loss for the
binary form, and Mukhoti et al.'s (2020) FLSD-53 table.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.special
from jax.test_util import check_grads

import jaxcal
from jaxcal import losses
from jaxcal.losses._regularizers import SOFT_ECE_LOSS_TEMPERATURE
from tests.helpers import assert_close, count_compiles, x64
from tests.reference_soft import N_GRAD, N, multiclass, np_mmce, np_soft_ece, scores_targets

REGULARISERS = {
    "soft_ece_loss": losses.soft_ece_loss,
    "mmce_loss": losses.mmce_loss,
    "dca_loss": losses.dca_loss,
}
ALL = {
    **REGULARISERS,
    "focal_loss": losses.focal_loss,
    "focal_loss flsd53": lambda z, y, **kw: losses.focal_loss(z, y, gamma="flsd53", **kw),
}


def _binary_logits(n=N, seed=3):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n) * 2.5
    y = (rng.random(n) < scipy.special.expit(z / 1.5)).astype(np.int32)
    return z, y


def _probs(z):
    z = np.asarray(z, np.float64)
    return scipy.special.expit(z) if z.ndim == 1 else scipy.special.softmax(z, axis=1)


def _np_true_prob(z, y):
    p = _probs(z)
    return np.where(y == 1, p, 1 - p) if p.ndim == 1 else p[np.arange(len(y)), y]


def _weighted_mean(x, w):
    return np.sum(w * x) / np.sum(w)


# ---------------------------------------------------------------------------------------
# float64 oracles
# ---------------------------------------------------------------------------------------


def np_caltrain_sb_ece(confidences, correct, temperature, n_bins=15):
    """The authors' TF soft-binned ECE (l2), step by step with its EPS = 1e-5 guards."""
    eps = 1e-5
    anchors = np.arange(1.0 / (2.0 * n_bins), 1.0, 1.0 / n_bins)
    coeffs = scipy.special.softmax(
        -((confidences[:, None] - anchors[None, :]) ** 2) / temperature, axis=1
    )
    per_bin = coeffs.sum(axis=0)
    conf = (coeffs * confidences[:, None]).sum(axis=0) / np.maximum(per_bin, eps)
    acc = (coeffs * correct[:, None]).sum(axis=0) / np.maximum(per_bin, eps)
    bin_weights = per_bin / np.abs(per_bin).sum()  # tf.linalg.normalize(ord=1)
    return np.sqrt(np.dot((conf - acc) ** 2, bin_weights))


def np_focal(z, y, gamma, weights=None):
    p = _np_true_prob(z, y)
    g = np.where(p < 0.2, 5.0, 3.0) if gamma == "flsd53" else gamma
    w = np.ones_like(p) if weights is None else weights
    return _weighted_mean(-((1 - p) ** g) * np.log(p), w)


def np_dca(z, y, weights=None):
    s, c = scores_targets(_probs(z), y)
    w = np.ones_like(s) if weights is None else weights
    return abs(_weighted_mean(s, w) - _weighted_mean(c, w))


# ---------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.002, 0.01, 0.05])
def test_soft_ece_loss_is_eq_11_of_the_softmax_and_the_authors_code(temperature):
    z, _, y = multiclass()
    zb, yb = _binary_logits()
    w = np.random.default_rng(20).random(N)
    with x64():
        for logits, labels in [(z, y), (zb, yb)]:
            for weights in (None, w):
                got = losses.soft_ece_loss(logits, labels, temperature=temperature, weights=weights)
                want = np_soft_ece(_probs(logits), labels, temperature, 15, "l2", weights)
                assert_close(got, want, rtol=1e-9)  # float64 sums over 256 x 15 terms
        got = losses.soft_ece_loss(z, y, temperature=temperature)
        s, c = scores_targets(_probs(z), y)
        # The authors' code divides by max(mass, 1e-5): equal wherever no bin is that empty.
        assert_close(got, np_caltrain_sb_ece(s, c, temperature), rtol=1e-7)


def test_soft_ece_loss_norm_and_bins_reach_the_metric():
    z, _, y = multiclass()
    with x64():
        for norm, n_bins in [("l1", 15), ("l2", 7)]:
            got = losses.soft_ece_loss(z, y, norm=norm, n_bins=n_bins, temperature=0.03)
            want = jaxcal.soft_ece(_probs(z), y, norm=norm, n_bins=n_bins, temperature=0.03)
            assert_close(got, want)


def test_soft_ece_loss_default_temperature_is_the_documented_one():
    z, _, y = multiclass()
    assert SOFT_ECE_LOSS_TEMPERATURE == 0.002
    assert_close(
        losses.soft_ece_loss(z, y), losses.soft_ece_loss(z, y, temperature=0.002, norm="l2")
    )


@pytest.mark.parametrize("bandwidth", [0.4, 0.1])
def test_mmce_loss_is_the_weighted_mmce_of_the_softmax(bandwidth):
    z, _, y = multiclass()
    zb, yb = _binary_logits()
    w = np.random.default_rng(21).random(N)
    with x64():
        for logits, labels in [(z, y), (zb, yb)]:
            for weights in (None, w):
                got = losses.mmce_loss(logits, labels, bandwidth=bandwidth, weights=weights)
                want = np_mmce(_probs(logits), labels, bandwidth, "weighted", weights)
                assert_close(got, want, rtol=1e-9)  # float64 sums over 6.6e4 kernel terms


def test_dca_loss_is_the_batch_gap_of_mean_confidence_and_accuracy():
    z, _, y = multiclass()
    zb, yb = _binary_logits()
    w = np.random.default_rng(22).random(N)
    with x64():
        for logits, labels in [(z, y), (zb, yb)]:
            for weights in (None, w):
                got = losses.dca_loss(logits, labels, weights=weights)
                assert_close(got, np_dca(logits, labels, weights))


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0, 3.0, "flsd53"])
def test_focal_loss_against_the_per_sample_formula(gamma):
    z, _, y = multiclass()
    zb, yb = _binary_logits()
    w = np.random.default_rng(23).random(N)
    with x64():
        for logits, labels in [(z, y), (zb, yb)]:
            for weights in (None, w):
                got = losses.focal_loss(logits, labels, gamma=gamma, weights=weights)
                assert_close(got, np_focal(logits, labels, gamma, weights))


def test_focal_loss_against_optax():
    z, _, y = multiclass()
    zb, yb = _binary_logits()
    with x64():
        assert_close(
            losses.focal_loss(z, y, gamma=0.0),
            optax.softmax_cross_entropy_with_integer_labels(jnp.asarray(z), y).mean(),
        )
        for gamma in (0.0, 2.0, 3.0):
            want = optax.sigmoid_focal_loss(jnp.asarray(zb), yb.astype(np.float64), gamma=gamma)
            assert_close(losses.focal_loss(zb, yb, gamma=gamma), want.mean())


def test_flsd53_gamma_is_mukhotis_table():
    # The reference code: gamma 5 below 0.2, 3 below 0.5, the base gamma 3 from 0.5 up.
    p = jnp.array([0.0, 0.1, 0.1999, 0.2, 0.35, 0.5, 0.9, 1.0])
    assert losses.flsd53_gamma(p).tolist() == [5.0, 5.0, 5.0, 3.0, 3.0, 3.0, 3.0, 3.0]


def test_losses_of_a_batch_with_no_weight_are_zero_and_weights_scale_free():
    z, _, y = multiclass(n=32)
    rng = np.random.default_rng(24)
    w = rng.random(32)
    for name, fn in ALL.items():
        assert float(fn(z, y, weights=np.zeros(32))) == 0.0, name
        assert_close(fn(z, y, weights=3 * w), fn(z, y, weights=w), err_msg=name)


# ---------------------------------------------------------------------------------------
# transformations
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL))
def test_jit_vmap_and_no_recompile(name):
    fn = ALL[name]
    z, _, y = multiclass(n=64)
    batch_z = np.stack([z, z[::-1], 0.5 * z])
    batch_y = np.stack([y, y[::-1], y])
    eager = [fn(bz, by) for bz, by in zip(batch_z, batch_y, strict=True)]
    jitted = count_compiles(fn)
    assert_close(jitted(z, y), eager[0])
    jitted(0.5 * z, y)
    assert jitted.compiles() == 1
    assert_close(jax.jit(jax.vmap(fn))(batch_z, batch_y), np.array(eager))


def test_hyperparameters_are_traced_not_static():
    z, _, y = multiclass(n=64)
    for fn, option in [
        (losses.soft_ece_loss, "temperature"),
        (losses.mmce_loss, "bandwidth"),
        (losses.focal_loss, "gamma"),
    ]:
        f = count_compiles(lambda z, y, v, fn=fn, option=option: fn(z, y, **{option: v}))
        first, second = f(z, y, 0.02), f(z, y, 0.3)
        assert f.compiles() == 1, option
        assert float(first) != float(second), option


@pytest.mark.parametrize("name", sorted(ALL))
def test_gradients_match_finite_differences_in_float64(name):
    fn = ALL[name]
    z, _, y = multiclass(n=N_GRAD)
    zb, yb = _binary_logits(n=N_GRAD)
    w = np.random.default_rng(25).random(N_GRAD) + 0.5
    with x64():
        for logits, labels in [(z, y), (zb, yb)]:
            f = jax.jit(lambda z, w, labels=labels: fn(z, labels, weights=w))
            check_grads(f, (jnp.asarray(logits), jnp.asarray(w)), 1, modes=("rev",), eps=1e-6)


def test_soft_ece_loss_forward_mode_matches_finite_differences():
    z, _, y = multiclass(n=N_GRAD)
    with x64():
        check_grads(lambda z: losses.soft_ece_loss(z, y), (jnp.asarray(z),), 1, modes=("fwd",))


def _extreme_cases(dtype):
    """Multiclass (3 batches of 12 x 4, stacked) and binary logits at and near saturation."""
    rng = np.random.default_rng(26)
    y = rng.integers(0, 4, 12)
    multi = np.stack(
        [
            np.where(np.eye(4)[rng.integers(0, 4, 12)] > 0, 1e4, -1e4),  # certain, right or not
            np.zeros((12, 4)),  # every row a four-way tie
            np.where(np.eye(4)[y] > 0, 1e4, -1e4),  # all right, all certain
        ]
    )
    binary = np.array([1e4, -1e4, 0.0, 30.0, -30.0, 1e4] * 2)
    return (
        (jnp.asarray(multi, dtype), jnp.asarray(np.stack([y] * 3), jnp.int32)),
        (jnp.asarray(binary, dtype), jnp.asarray(np.arange(12) % 2, jnp.int32)),
    )


def _check_finite_gradients(dtype):
    with x64():
        for name, fn in ALL.items():
            value_and_grad = jax.jit(jax.vmap(jax.value_and_grad(fn)))
            for logits, labels in _extreme_cases(dtype):
                if logits.ndim == 1:
                    logits, labels = logits[None], labels[None]
                value, grad = value_and_grad(logits, labels)
                assert np.all(np.isfinite(np.asarray(value))), name
                assert grad.dtype == dtype
                assert np.all(np.isfinite(np.asarray(grad))), name


def test_gradients_are_finite_at_extreme_logits():
    _check_finite_gradients(jnp.float32)


@pytest.mark.slow
def test_gradients_are_finite_at_extreme_logits_in_float64():
    _check_finite_gradients(jnp.float64)


def test_padding_rows_with_zero_weight_change_nothing():
    z, _, y = multiclass(n=48)
    mask = np.concatenate([np.ones(48), np.zeros(16)])
    # finite garbage in the padding: saturated logits, labels of a class the row ranks last
    garbage = np.full((16, 5), -3e3) + np.eye(5)[np.arange(16) % 5] * 6e3
    pads = [
        (np.concatenate([z, garbage]), np.concatenate([y, (np.arange(16) + 2) % 5])),
        (np.concatenate([z, np.zeros((16, 5))]), np.concatenate([y, np.zeros(16, int)])),
        # what a padded batch holds under jit: NaN logits and the ignore label -100
        (np.concatenate([z, np.full((16, 5), np.nan)]), np.concatenate([y, np.full(16, -100)])),
    ]
    with x64():
        for name, fn in ALL.items():
            value_and_grad = jax.jit(jax.value_and_grad(fn))
            (value, grad), *others = (
                value_and_grad(jnp.asarray(pz), py, weights=mask) for pz, py in pads
            )
            assert_close(value, fn(z, y), err_msg=name)
            for other, other_grad in others:
                assert_close(other, value, err_msg=name)
                assert_close(other_grad[:48], grad[:48], atol=1e-15, err_msg=name)  # round-off
                assert np.all(np.asarray(other_grad[48:]) == 0), name  # no 0 * NaN
            assert np.all(np.asarray(grad[48:]) == 0), name
            assert np.all(np.isfinite(np.asarray(grad[:48]))), name


# ---------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL))
def test_bad_inputs_name_the_argument(name):
    fn = ALL[name]
    z, _, y = multiclass(n=8)
    bad = [
        ((np.zeros((8, 2, 2)), y), "logits"),
        ((np.zeros((8, 1)), np.zeros(8, np.int32)), "logits"),
        ((np.zeros((0, 3)), np.zeros(0, np.int32)), "logits"),
        ((np.where(np.eye(8, 5) > 0, np.nan, z), y), "logits"),
        ((z, np.full(8, 5)), "labels"),
        ((z, y[:7]), "labels"),
        ((np.zeros(8), np.full(8, 2)), "labels"),
    ]
    for args, argument in bad:
        with pytest.raises(ValueError, match=f"`{argument}`"):
            fn(*args)
    with pytest.raises(ValueError, match="`weights`"):
        fn(z, y, weights=-np.ones(8))


def test_bad_options_name_the_option():
    z, _, y = multiclass(n=8)
    cases = [
        (lambda: losses.soft_ece_loss(z, y, temperature=0.0), "temperature"),
        (lambda: losses.soft_ece_loss(z, y, norm="max"), "norm"),
        (lambda: losses.soft_ece_loss(z, y, n_bins=0), "n_bins"),
        (lambda: losses.mmce_loss(z, y, bandwidth=1e-4), "bandwidth"),
        (lambda: losses.focal_loss(z, y, gamma=-1.0), "gamma"),
        (lambda: losses.focal_loss(z, y, gamma="flsd35"), "gamma"),
        (lambda: losses.focal_loss(z, y, gamma=np.ones(2)), "gamma"),
        (lambda: losses.flsd53_gamma("high"), "probs_true"),
    ]
    for call, argument in cases:
        with pytest.raises(ValueError, match=f"`{argument}`"):
            call()


def test_flsd53_gamma_refuses_what_is_no_probability():
    """Found by tests/test_bad_input.py: a NaN p_y gave gamma 3 without a word."""
    for bad in (np.nan, np.inf, 1.5, -0.5):
        with pytest.raises(ValueError, match="`probs_true`"):
            losses.flsd53_gamma(np.array([0.1, bad]))
    assert jax.jit(losses.flsd53_gamma)(jnp.array([0.1, 0.5])).tolist() == [5.0, 3.0]
