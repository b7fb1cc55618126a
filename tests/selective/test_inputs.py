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
        b = fn(confidence=probs.max(1), correct=correct)  # bool correctness
        c = fn(confidence=probs.max(1), correct=correct.astype(float))  # a quality of 0s and 1s
        np.testing.assert_allclose([b, c], [a, a], rtol=1e-6)


@pytest.mark.parametrize(
    ("probs", "labels", "match"),
    [
        (np.ones((2, 2, 2)), [0, 1], "must be \\(N, K\\) class probabilities or \\(N,\\)"),
        (np.zeros(0), [], "must not be empty"),
        (np.array([[0.5, 0.6], [0.5, 0.5]]), [0, 1], "`probs` rows must sum to 1"),
        (np.array([[0.5, 0.5], [0.5, 0.5]]), [0, 3], "`labels` must lie in \\[0, 2\\)"),
        # (N,): a binary model's positive-class probability, with a hint at the named form
        (np.array([0.1, np.nan]), [0, 1], "`probs`.*confidence=..., correct=..."),
        (np.array([0.1, 2.5]), [0, 1], "`probs`.*confidence=..., correct=..."),
        (np.array([0.1, 0.2]), [0, 2], "`labels`.*confidence=..., correct=..."),
        (np.array([0.1, 0.2]), [0.5, 1.0], "`labels`.*confidence=..., correct=..."),
    ],
)
def test_bad_input_is_named_on_every_call(probs, labels, match):
    for _ in range(2):
        with pytest.raises(ValueError, match=match):
            selective.aurc(probs, labels)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"confidence": np.array([0.1, np.nan]), "correct": [0, 1]}, "`confidence` must be finite"),
        ({"confidence": np.array([0.1, 0.2]), "correct": [0, 2]}, "correctness of each"),
        ({"confidence": np.array([0.1, 0.2]), "correct": [0.5, 1.5]}, "`correct` must lie in"),
        ({"confidence": np.array([0.1, 0.2]), "correct": [0.5]}, "must have shape \\(2,\\)"),
        ({"confidence": np.ones((2, 2)) / 2, "correct": [0, 1]}, "pass them as `probs`"),
        ({"confidence": np.array([0.1, 0.2])}, "`correct` is missing"),
        ({"correct": np.array([0, 1])}, "`confidence` is missing"),
        ({}, "Pass `probs` with `labels`"),
        (
            {"probs": np.array([0.1, 0.2]), "labels": [0, 1], "correct": np.array([0, 1])},
            "not both",
        ),
        ({"probs": np.array([0.1, 0.2]), "correct": np.array([0, 1])}, "not both"),
    ],
)
def test_the_named_form_and_its_messages(kwargs, match):
    for _ in range(2):
        with pytest.raises(ValueError, match=match):
            selective.aurc(**kwargs)


def test_scores_of_any_scale_go_through_the_named_form():
    score = np.array([-12.0, 3.5, 40.0, -0.5])  # log-likelihoods: not probabilities
    correct = np.array([0, 1, 1, 0])
    value = selective.aurc(confidence=score, correct=correct)  # sorted: 40, 3.5, -0.5, -12
    assert float(value) == pytest.approx((0 + 0 + 1 / 3 + 2 / 4) / 4, rel=1e-6)
    with pytest.raises(ValueError, match=r"confidence=\.\.\., correct=\.\.\."):
        selective.aurc(score, correct)


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
