"""Murphy diagrams (jaxcal.metrics._corp_murphy) against the (N, T) definition and the Brier score."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from jaxcal import murphy_diagram
from tests import reference
from tests.helpers import assert_close, x64

RNG = np.random.default_rng(2)
N = 3000
P = RNG.uniform(size=N).round(2)  # forecasts on the grid's values: the <= side matters
Y = (RNG.uniform(size=N) < P).astype(np.int32)
W = RNG.uniform(0.5, 1.5, size=N)
GRID = np.linspace(0.01, 0.99, 99)


@pytest.mark.parametrize("weighted", [False, True])
def test_equals_the_definition(weighted):
    w = W if weighted else None
    with x64():
        m = murphy_diagram(jnp.asarray(P), jnp.asarray(Y), thresholds=jnp.asarray(GRID),
                           weights=None if w is None else jnp.asarray(w))  # fmt: skip
    assert_close(np.asarray(m.scores), reference.murphy(P, Y, GRID, w))


def test_twice_the_integral_is_the_brier_score():
    data = np.load("jaxcal/data/digits_mlp.npz")
    probs, labels = data["probs"], data["labels"]
    with x64():
        m = murphy_diagram(probs.astype(np.float64), labels, n_thresholds=20000)
    integral = 2 * np.mean(np.asarray(m.scores))  # midpoint-like rule on j / (T + 1)
    # the grid's rule errs by O(1/T) on the forecasts' jumps
    assert_close(integral, float(jaxcal.brier_score(probs, labels)), rtol=2e-3)


def test_vmaps_over_models_and_views():
    p = jnp.asarray(np.stack([P, P**2]).astype(np.float32))
    batched = jax.vmap(lambda q: murphy_diagram(q, Y).scores)(p)
    assert_close(batched[1], murphy_diagram(p[1], Y).scores)
    probs = RNG.dirichlet(np.ones(3), size=200).astype(np.float32)
    labels = RNG.integers(0, 3, size=200)
    top = murphy_diagram(probs, labels, reduction="top_label")
    conf, ok = probs.max(1), (probs.argmax(1) == labels).astype(np.int32)
    assert_close(top.scores, murphy_diagram(conf, ok).scores)
    classwise = murphy_diagram(probs, labels)
    parts = sum(
        np.asarray(murphy_diagram(probs[:, k], (labels == k).astype(np.int32)).scores)
        for k in range(3)
    )
    assert_close(classwise.scores, parts)


def test_bad_thresholds():
    with pytest.raises(ValueError, match="sorted"):
        murphy_diagram(P, Y, thresholds=np.array([0.5, 0.2]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        murphy_diagram(P, Y, thresholds=np.array([0.5, 1.2]))
    with pytest.raises(ValueError, match="`n_thresholds`"):
        murphy_diagram(P, Y, n_thresholds=0)
