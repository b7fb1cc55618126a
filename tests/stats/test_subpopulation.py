"""subpopulation_test against a float64 transcription of Tygert's cdeets (reference_segments)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import stats
from tests.helpers import assert_close, count_compiles, x64
from tests.reference_segments import cdeets_subpop

N = 500


def _data(seed, ties=False, shift=0.0):
    rng = np.random.default_rng(seed)
    s = rng.random(N)
    if ties:
        s = np.round(s, 2)
    sub = rng.random(N) < 0.3
    y = (rng.random(N) < np.where(sub, np.clip(s + shift, 0, 1), s)).astype(np.int32)
    return s, y, sub, rng.uniform(0.5, 2.0, N)


@pytest.mark.parametrize(("ties", "weighted"), [(False, False), (True, False), (True, True)])
def test_matches_cdeets(ties, weighted):
    s, y, sub, w = _data(1, ties)
    w = w if weighted else None
    kuiper, ks, sigma = cdeets_subpop(s, y, sub, w)
    with x64():
        r = stats.subpopulation_test(jnp.asarray(s), jnp.asarray(y), jnp.asarray(sub), weights=w)
    assert_close(r.sigma, sigma)
    assert_close(r.kuiper.statistic, kuiper / sigma)
    assert_close(r.ks.statistic, ks / sigma)
    assert_close(r.kuiper.p_value, stats.brownian_range_sf(kuiper / sigma))
    assert_close(r.ks.p_value, stats.brownian_max_sf(ks / sigma))


def test_float32_and_input_order():
    # Distinct scores against the oracle: on a grid, samples at the exact midpoint of two
    # subpopulation scores fall on either side by the precision of the midpoint.
    s, y, sub, _ = _data(2)
    kuiper, _, sigma = cdeets_subpop(s, y, sub)
    a = stats.subpopulation_test(jnp.asarray(s, jnp.float32), jnp.asarray(y), jnp.asarray(sub))
    assert_close(a.kuiper.statistic, kuiper / sigma, rtol=1e-4)  # float32 sums of 500 terms
    s, y, sub, _ = _data(3, ties=True)
    perm = np.random.default_rng(3).permutation(N)
    a = stats.subpopulation_test(jnp.asarray(s, jnp.float32), jnp.asarray(y), jnp.asarray(sub))
    b = stats.subpopulation_test(
        jnp.asarray(s[perm], jnp.float32), jnp.asarray(y[perm]), jnp.asarray(sub[perm])
    )
    assert_close(a.kuiper.statistic, b.kuiper.statistic)


def test_degenerate_subpopulations():
    s, y, _, _ = _data(4)
    empty = stats.subpopulation_test(jnp.asarray(s), jnp.asarray(y), jnp.zeros(N, bool))
    assert float(empty.kuiper.statistic) == 0 and float(empty.kuiper.p_value) == 1
    # The full population against itself (distinct scores): every deviation is 0.
    full = stats.subpopulation_test(jnp.asarray(s), jnp.asarray(y), jnp.ones(N, bool))
    assert float(full.kuiper.statistic) == 0 and float(full.ks.p_value) == 1


def test_power_on_a_shifted_subpopulation():
    s, y, sub, _ = _data(5, shift=0.3)
    r = stats.subpopulation_test(jnp.asarray(s), jnp.asarray(y), jnp.asarray(sub))
    assert float(r.kuiper.p_value) < 1e-4


def test_errors():
    s, y = jnp.array([0.2, 0.4, 0.6]), jnp.array([0, 1, 1])
    with pytest.raises(ValueError, match="shape \\(3,\\)"):
        stats.subpopulation_test(s, y, jnp.array([True, False]))
    with pytest.raises(ValueError, match="0/1"):
        stats.subpopulation_test(s, y, jnp.array([0, 2, 1]))


def test_jit_vmap_no_recompile():
    s, y, sub, _ = _data(6)
    s32, y32, m = jnp.asarray(s, jnp.float32), jnp.asarray(y), jnp.asarray(sub)
    f = count_compiles(lambda s: stats.subpopulation_test(s, y32, m).kuiper.statistic)
    assert_close(f(s32), stats.subpopulation_test(s32, y32, m).kuiper.statistic)
    f(s32 * 0.5)
    assert f.compiles() == 1
    v = jax.vmap(lambda m: stats.subpopulation_test(s32, y32, m).kuiper.statistic)(
        jnp.stack([m, ~m])
    )
    assert_close(v[1], stats.subpopulation_test(s32, y32, ~m).kuiper.statistic)


@pytest.mark.slow
def test_size_under_the_null():
    reps, alpha = 400, 0.05
    rng = np.random.default_rng(7)
    n = 2000
    s = rng.random((reps, n))
    y = (rng.random((reps, n)) < s).astype(np.int32)
    sub = rng.random((reps, n)) < 0.2
    fn = jax.jit(jax.vmap(lambda s, y, m: stats.subpopulation_test(s, y, m).kuiper.p_value))
    p = np.asarray(fn(jnp.asarray(s, jnp.float32), jnp.asarray(y), jnp.asarray(sub)))
    rate, band = np.mean(p < alpha), 4 * np.sqrt(alpha * (1 - alpha) / reps)
    assert rate <= alpha + band
