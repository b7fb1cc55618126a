"""Centred isotonic regression against the float64 NumPy oracle of R's cirPAVA."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal.calibrators import centred_isotonic, isotonic
from tests.helpers import assert_close, x64
from tests.reference_clinical import cir_pava, cir_predict

CAL = centred_isotonic()
rng = np.random.default_rng(17)


def _oracle(s, y, w, t):
    xs = np.unique(s)
    idx = np.searchsorted(xs, s)
    ws = np.bincount(idx, w, minlength=len(xs))
    ys = np.bincount(idx, w * y, minlength=len(xs)) / ws
    kx, ky = cir_pava(xs[ws > 0], ys[ws > 0], ws[ws > 0])
    return cir_predict(kx, ky, t)


def test_matches_cir_pava_float64():
    with x64():
        for seed in range(10):
            r = np.random.default_rng(seed)
            n = int(r.integers(2, 60))
            s = np.round(r.random(n), 1 + seed % 3)
            y = (r.random(n) < s).astype(np.int32)
            w = r.random(n) + 0.1
            t = np.linspace(0, 1, 41)
            pad = 64 - n  # zero-weight padding: one shape, one compile
            params = CAL.fit(
                np.concatenate([s, np.full(pad, 0.5)]),
                np.concatenate([y, np.zeros(pad, np.int32)]),
                weights=np.concatenate([w, np.zeros(pad)]),
            )
            assert_close(CAL.apply(params, t), _oracle(s, y, w, t), err_msg=f"seed {seed}")


def test_matches_cir_pava_float32():
    s = rng.random(500)
    y = (rng.random(500) < s).astype(np.int32)
    got = CAL.apply(CAL.fit(jnp.asarray(s, jnp.float32), y), jnp.asarray(s, jnp.float32))
    assert_close(got, _oracle(s, y, np.ones(500), s), atol=1e-5)  # float32 centres


def test_strictly_increasing_inside_and_ranking_kept():
    s = rng.random(400)
    y = (rng.random(400) < s).astype(np.int32)
    with x64():
        params = CAL.fit(s, y)
        knots = np.asarray(params.x[: int(params.size)])
        values = np.asarray(params.y[: int(params.size)])
        inner = (values > 0) & (values < 1)
        assert np.all(np.diff(values[inner]) > 0)
        t = np.sort(rng.uniform(knots[inner][0], knots[inner][-1], 200))
        assert np.all(np.diff(np.asarray(CAL.apply(params, t))) > 0)
        # Isotonic regression ties distinct scores; CIR keeps them apart.
        iso = isotonic()
        assert len(np.unique(np.asarray(iso.apply(iso.fit(s, y), t)))) < len(t)


def test_degenerate_and_jit_vmap():
    s = rng.random(50)
    y = (rng.random(50) < s).astype(np.int32)
    assert_close(CAL.apply(CAL.fit(s, y, weights=np.zeros(50)), s), s.astype(np.float32))
    one = CAL.fit(np.full(5, 0.3), np.array([0, 1, 1, 0, 1]))
    assert_close(CAL.apply(one, np.array([0.1, 0.9])), np.array([0.6, 0.6], np.float32))
    w = jnp.asarray(rng.integers(0, 2, (3, 50)), jnp.float32)
    params = jax.jit(jax.vmap(lambda w: CAL.fit(s, y, weights=w)))(w)
    single = CAL.fit(s, y, weights=w[1])
    assert_close(jax.vmap(lambda p: CAL.apply(p, s))(params)[1], CAL.apply(single, s))


def test_apply_grad_is_the_slope_between_knots():
    s = rng.random(40)
    y = (rng.random(40) < s).astype(np.int32)
    with x64():
        params = CAL.fit(s, y)
        t = jnp.asarray(rng.random(10) * 0.8 + 0.1)
        jax.test_util.check_grads(lambda t: CAL.apply(params, t), (t,), order=1, modes=["rev"])


def test_not_differentiable_names_centred_isotonic():
    """C5: the message named isotonic()."""
    import pytest

    cal = centred_isotonic()
    with pytest.raises(ValueError, match=r"`centred_isotonic\(\)\.fit` is not differentiable"):
        jax.grad(lambda s: jnp.sum(cal.apply(cal.fit(s, jnp.array([0, 1, 1])), s)))(
            jnp.array([0.2, 0.5, 0.7])
        )
