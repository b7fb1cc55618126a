"""saturation_stats: the batch's accuracy, confidence, all-correct flag and regulariser."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp

from jaxcal import losses
from tests.helpers import assert_close, x64


def test_values_against_numpy():
    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(40, 4)) * 2, rng.integers(0, 4, 40)
    w = rng.uniform(0.5, 2.0, 40)
    p = sp.softmax(z, axis=1)
    correct = (p.argmax(1) == y).astype(float)
    with x64():
        s = losses.saturation_stats(jnp.asarray(z), jnp.asarray(y), weights=jnp.asarray(w))
        assert_close(s.accuracy, np.sum(w * correct) / w.sum())
        assert_close(s.confidence, np.sum(w * p.max(1)) / w.sum())
        assert float(s.all_correct) == 0.0
        assert_close(
            s.regularizer, abs(np.sum(w * p.max(1)) / w.sum() - np.sum(w * correct) / w.sum())
        )


def test_an_all_correct_batch_zeroes_mmce():
    z = jnp.array([[4.0, 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 2.0]])
    s = losses.saturation_stats(z, jnp.array([0, 1, 2]), regularizer=losses.mmce_loss)
    assert (float(s.accuracy), float(s.all_correct), float(s.regularizer)) == (1.0, 1.0, 0.0)
    s = losses.saturation_stats(
        z, jnp.array([0, 1, 2]), regularizer=functools.partial(losses.soft_ece_loss, norm="l1")
    )
    assert float(s.regularizer) > 0  # 1 - confidence: small, not 0


def test_zero_weight_rows_do_not_count():
    z = jnp.array([[4.0, 0.0], [4.0, 0.0], [0.0, 3.0]])
    y = jnp.array([0, 1, 1])
    s = losses.saturation_stats(z, y, weights=jnp.array([1.0, 0.0, 1.0]))
    assert float(s.all_correct) == 1.0 and float(s.accuracy) == 1.0
    assert float(losses.saturation_stats(z, y).all_correct) == 0.0


def test_binary_log_odds():
    z = jnp.array([2.0, -1.0, 0.5])
    s = losses.saturation_stats(z, jnp.array([1, 0, 0]))
    assert_close(s.accuracy, 2 / 3)
    p = jax.nn.sigmoid(z)
    assert_close(s.confidence, float(jnp.mean(jnp.maximum(p, 1 - p))))


def test_the_mean_over_steps_is_the_share_of_all_correct_batches():
    z = jnp.array([[[3.0, 0.0], [0.0, 3.0]], [[3.0, 0.0], [3.0, 0.0]]])  # (steps, B, K)
    y = jnp.array([[0, 1], [0, 1]])
    stats = jax.jit(jax.vmap(losses.saturation_stats))(z, y)
    assert_close(jnp.mean(stats.all_correct), 0.5)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="logits"):
        losses.saturation_stats(jnp.zeros((2, 2, 2)), jnp.array([0, 1]))
