"""The two input forms of the selective measures, and their messages on bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import selective


def test_probabilities_and_scores_agree():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), 40)
    labels = rng.integers(0, 3, 40)
    correct = probs.argmax(1) == labels
    for fn in (selective.aurc, selective.augrc, selective.correctness_auroc):
        a = fn(probs, labels)
        b = fn(probs.max(1), correct)  # bool correctness
        c = fn(probs.max(1), correct.astype(float))  # a quality of 0s and 1s
        np.testing.assert_allclose([b, c], [a, a], rtol=1e-6)


@pytest.mark.parametrize(
    ("confidence", "labels", "match"),
    [
        (np.ones((2, 2, 2)), [0, 1], "must be \\(N, K\\) class probabilities or \\(N,\\)"),
        (np.zeros(0), [], "must not be empty"),
        (np.array([0.1, np.nan]), [0, 1], "`confidence` must be finite"),
        (np.array([0.1, 0.2]), [0, 2], "correctness of each prediction"),
        (np.array([0.1, 0.2]), [0.5, 1.5], "`labels` must lie in \\[0, 1\\]; got 1.5"),
        (np.array([0.1, 0.2]), [0.5], "must have shape \\(2,\\)"),
        (np.array([[0.5, 0.6], [0.5, 0.5]]), [0, 1], "`confidence` rows must sum to 1"),
        (np.array([[0.5, 0.5], [0.5, 0.5]]), [0, 3], "`labels` must lie in \\[0, 2\\)"),
    ],
)
def test_bad_input_is_named_on_every_call(confidence, labels, match):
    for _ in range(2):
        with pytest.raises(ValueError, match=match):
            selective.aurc(confidence, labels)


def test_weights_and_groups_are_checked():
    p, y = np.array([0.2, 0.9]), np.array([0, 1])
    with pytest.raises(ValueError, match="`weights` must be non-negative"):
        selective.aurc(p, y, weights=np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="`n_groups`"):
        selective.aurc(p, y, groups=np.array([0, 1]))
    with pytest.raises(ValueError, match="ids must lie in"):
        selective.aurc(p, y, groups=np.array([0, 3]), n_groups=2)


def test_values_are_not_checked_under_jit():
    # under jit a NaN confidence of positive weight cannot be reported: documented
    out = jax.jit(selective.aurc)(jnp.array([0.2, 0.9]), jnp.array([0, 1]))
    assert out.shape == ()
