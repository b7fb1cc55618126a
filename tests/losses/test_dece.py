"""dece_loss against Bohdal et al.'s DECE (``Losses/dece.py`` of
github.com/ondrejbohdal/meta-calibration) transcribed to float64 NumPy with its 1e-6
membership guard, its limit (the hard 15-bin ECE), weights and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp
from jax.test_util import check_grads

import jaxcal
from jaxcal import losses
from tests.helpers import assert_close, x64


def np_dece_authors(logits, labels, n_bins=15, t_a=100.0, t_b=0.01):
    """The authors' DECE step by step (their torch code, in NumPy float64)."""
    p = sp.softmax(np.asarray(logits, np.float64), axis=1)
    cut_points = np.linspace(0, 1, n_bins + 1)[:-1]
    w = np.linspace(1.0, n_bins, n_bins)[None, :]
    b = np.cumsum(-cut_points)
    conf = p.max(axis=1, keepdims=True)
    bin_probs = sp.softmax((conf @ w + b) / t_b, axis=1)
    eps = 1e-6
    bin_probs = (bin_probs + eps) / (1.0 + (n_bins + 1) * eps)
    bin_confs = (bin_probs.T @ conf).ravel() / bin_probs.sum(axis=0)
    diffs = p[:, :, None] - p[:, None, :]
    indicators = sp.expit(t_a * np.transpose(diffs, (0, 2, 1)))
    ranks = indicators.sum(axis=2) + 0.5
    accs = np.maximum(2.0 - ranks[np.arange(len(labels)), labels], 0.0)
    bin_accs = (bin_probs.T @ accs) / bin_probs.sum(axis=0)
    return np.sum(bin_probs.sum(axis=0) * np.abs(bin_accs - bin_confs) / bin_probs.shape[0])


def _data(n=200, k=5, seed=0, scale=2.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * scale
    y = rng.integers(0, k, n)
    return z, y


@pytest.mark.parametrize("k", [2, 5, 10])
def test_dece_is_the_authors_code(k):
    z, y = _data(k=k, seed=k)
    with x64():
        got = losses.dece_loss(jnp.asarray(z), jnp.asarray(y))
        # the authors' 1e-6 membership guard moves the value by O(1e-6) (docstring)
        assert_close(got, np_dece_authors(z, y), rtol=0, atol=1e-5)
        for t_a, t_b in [(10.0, 0.1), (1000.0, 0.001)]:
            got = losses.dece_loss(
                jnp.asarray(z), jnp.asarray(y), rank_temperature=t_a, bin_temperature=t_b
            )
            assert_close(got, np_dece_authors(z, y, t_a=t_a, t_b=t_b), rtol=0, atol=1e-5)


def test_binary_log_odds_are_the_two_column_logits():
    rng = np.random.default_rng(1)
    z = rng.normal(size=64) * 3
    y = rng.integers(0, 2, 64)
    two = np.stack([np.zeros_like(z), z], axis=1)
    with x64():
        assert_close(
            losses.dece_loss(jnp.asarray(z), jnp.asarray(y)),
            np_dece_authors(two, y),
            rtol=0,
            atol=1e-5,
        )


def test_tends_to_the_hard_ece_as_the_temperatures_vanish():
    z, y = _data(n=400, seed=3)
    with x64():
        probs = jax.nn.softmax(jnp.asarray(z), axis=1)
        hard = jaxcal.ece(probs, jnp.asarray(y), n_bins=15)
        soft = losses.dece_loss(
            jnp.asarray(z), jnp.asarray(y), bin_temperature=1e-6, rank_temperature=1e7
        )
        # a score within ~1e-5 of a bin edge may still be split between two bins
        assert_close(soft, hard, rtol=0, atol=2e-3)


def test_integer_weights_are_repeated_rows():
    z, y = _data(n=50, seed=4)
    w = np.random.default_rng(5).integers(0, 4, 50)
    with x64():
        weighted = losses.dece_loss(
            jnp.asarray(z), jnp.asarray(y), weights=jnp.asarray(w, jnp.float64)
        )
        repeated = losses.dece_loss(jnp.asarray(np.repeat(z, w, 0)), jnp.asarray(np.repeat(y, w)))
        assert_close(weighted, repeated)


def test_zero_total_weight_gives_zero():
    z, y = _data(n=8)
    assert float(losses.dece_loss(jnp.asarray(z), jnp.asarray(y), weights=jnp.zeros(8))) == 0.0


def test_gradients_match_finite_differences_in_float64():
    z, y = _data(n=24, k=4, seed=6, scale=1.0)
    with x64():

        def f(logits):
            return losses.dece_loss(
                logits, jnp.asarray(y), rank_temperature=5.0, bin_temperature=0.1
            )

        check_grads(f, (jnp.asarray(z),), order=1, modes=("rev",), atol=1e-6, rtol=1e-5)


def test_the_accuracy_term_carries_a_gradient():
    """A wrong row: the soft rank moves its true class's logit, not only the confidence."""
    z = jnp.array([[1.0, 1.2, -1.0], [3.0, 0.0, 0.0]])
    y = jnp.array([0, 0])
    g = jax.grad(lambda v: losses.dece_loss(v, y, rank_temperature=10.0))(z)
    assert float(g[0, 0]) < 0  # raising the true class's logit lowers DECE
    hard_acc = jax.grad(lambda v: losses.soft_ece_loss(v, y))(z)
    assert np.all(np.isfinite(np.asarray(hard_acc)))


def test_saturated_logits_give_finite_gradients():
    z = jnp.array([[1e4, -1e4, 0.0], [0.0, 1e4, -1e4]])
    g = jax.grad(losses.dece_loss)(z, jnp.array([0, 2]))
    assert bool(jnp.all(jnp.isfinite(g)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_bins": 0}, "n_bins"),
        ({"bin_temperature": -1.0}, "bin_temperature"),
        ({"rank_temperature": 0.0}, "rank_temperature"),
    ],
)
def test_bad_options_are_named(kwargs, match):
    z, y = _data(n=4)
    for _ in range(2):  # on every call, not only the first
        with pytest.raises(ValueError, match=match):
            losses.dece_loss(jnp.asarray(z), jnp.asarray(y), **kwargs)


def test_labels_out_of_range_are_named():
    with pytest.raises(ValueError, match="labels"):
        losses.dece_loss(jnp.zeros((3, 2)), jnp.array([0, 1, 2]))
