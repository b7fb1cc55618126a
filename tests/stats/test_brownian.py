"""Laws of max|B| and of the range of B: series against mpmath, moments, tails, jit/vmap/grad."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from scipy import integrate

from jaxcal import stats
from jaxcal.stats._paths import brownian as _brownian
from jaxcal.stats._paths.brownian import _MAX_SWITCH, _RANGE_SWITCH
from tests.helpers import assert_close, count_compiles, x64

SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)

# ----------------------------------------------------------------- mpmath references
# Both classical series at 60 digits with as many terms as each needs: the theta series
# (fast for small x) and the Gaussian-tail series (fast for large x). Where both are
# evaluated they must agree to 1e-40, which checks the reference itself.

_DPS = 60


def _q(z):
    return mp.erfc(z / mp.sqrt(2)) / 2


def _max_theta_cdf(x):
    h = mp.mpf(1) / 2
    return (
        2
        / mp.pi
        * mp.fsum(
            (-1) ** k / (k + h) * mp.exp(-((k + h) ** 2) * mp.pi**2 / (2 * x**2)) for k in range(80)
        )
    )


def _max_gauss_sf(x):
    terms = int(45 / float(x)) + 5  # until (2k - 1) x > 90: Q below 1e-1700
    return 4 * mp.fsum((-1) ** (k - 1) * _q((2 * k - 1) * x) for k in range(1, terms))


def _range_theta_cdf(x):
    h = mp.mpf(1) / 2
    return mp.fsum(
        (8 / x**2 + 2 / ((k + h) ** 2 * mp.pi**2)) * mp.exp(-2 * (k + h) ** 2 * mp.pi**2 / x**2)
        for k in range(80)
    )


def _range_gauss_sf(x):
    terms = int(90 / float(x)) + 5
    return 8 * mp.fsum((-1) ** (k - 1) * k * _q(k * x) for k in range(1, terms))


@functools.cache
def reference(kind: str, x: float):
    """(cdf, sf, log sf) of max|B| (kind "max") or of the range (kind "range") at x."""
    with mp.workdps(_DPS):
        xm = mp.mpf(x)
        theta, gauss = (
            (_max_theta_cdf, _max_gauss_sf)
            if kind == "max"
            else (_range_theta_cdf, _range_gauss_sf)
        )
        # Theta series converges for all x but needs many terms past ~10; Gaussian series
        # needs ~1/x terms: use each where it is cheap, and cross-check in between.
        sf = gauss(xm) if x >= 0.5 else 1 - theta(xm)
        cdf = theta(xm) if x <= 5 else 1 - gauss(xm)
        if 0.5 <= x <= 5:
            assert abs(theta(xm) + gauss(xm) - 1) < mp.mpf(10) ** -40
        return float(cdf), float(sf), float(mp.log(sf))


GRID = [0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0, 1.1, 1.19, 1.2, 1.21, 1.5, 1.75, 1.99, 2.0]
GRID += [2.01, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 8.5, 10.0, 12.0, 15.0, 20.0, 21.0, 25.0]
GRID += [30.0, 35.0, 37.0, 37.5, 38.0, 40.0, 45.0, 50.0]

FUNCS = {
    "max": (stats.brownian_max_cdf, stats.brownian_max_sf, stats.log_brownian_max_sf),
    "range": (stats.brownian_range_cdf, stats.brownian_range_sf, stats.log_brownian_range_sf),
}
# The unchecked kernels behind them. Evaluating all six at once on fixed-length vectors
# keeps this file to a handful of compiles.
KERNELS = {
    "max": (_brownian.max_cdf, _brownian.max_sf, _brownian.log_max_sf),
    "range": (_brownian.range_cdf, _brownian.range_sf, _brownian.log_range_sf),
}
SWITCH = {"max": _MAX_SWITCH, "range": _RANGE_SWITCH}
_VALUES_LENGTH, _DERIVATIVES_LENGTH = 4096, 64


@jax.jit
def _values(x):
    return {kind: tuple(f(x) for f in fs) for kind, fs in KERNELS.items()}


@jax.jit
def _derivatives(x):
    # The SF's derivative is minus the CDF's in the code too (1 - cdf below the switch,
    # the tail series above it), so the CDF and the log SF cover every branch.
    out = {}
    for kind, (cdf, _, log_sf) in KERNELS.items():
        first = tuple(jax.vmap(jax.grad(f)) for f in (cdf, log_sf))
        second = tuple(jax.vmap(jax.grad(jax.grad(f))) for f in (cdf, log_sf))
        out[kind] = (tuple(g(x) for g in first), tuple(g(x) for g in second))
    return out


def _ours(kind, xs, order=0):
    """(cdf, sf, log sf) in float64 at xs, or the ``order``-th derivatives of (cdf, log sf)."""
    xs = np.asarray(xs, np.float64)
    length = _VALUES_LENGTH if order == 0 else _DERIVATIVES_LENGTH
    assert xs.ndim == 1 and len(xs) <= length
    padded = np.ones(length)
    padded[: len(xs)] = xs
    with x64():
        x = jnp.asarray(padded)
        out = _values(x)[kind] if order == 0 else _derivatives(x)[kind][order - 1]
    return tuple(np.asarray(v)[: len(xs)] for v in out)


@pytest.mark.parametrize("kind", ["max", "range"])
def test_series_match_mpmath_from_0_05_to_50(kind):
    cdf, sf, log_sf = _ours(kind, GRID)
    ref = np.array([reference(kind, x) for x in GRID])
    assert cdf.dtype == np.float64
    # CDF: 1e-12 absolute (the contract).
    assert_close(cdf, ref[:, 0], rtol=0, atol=1e-12)
    # SF: 1e-8 relative wherever the true value is a normal float64 (the contract; we see
    # ~1e-13). Below that XLA flushes subnormals to zero: the value is 0, never negative.
    normal = ref[:, 1] >= SMALLEST_NORMAL
    assert_close(sf[normal], ref[normal, 1], rtol=1e-8, atol=0)
    assert np.all(sf >= 0)
    assert np.all(sf[~normal] < SMALLEST_NORMAL)
    # log SF: finite everywhere on the grid, 1e-10 relative (1e-12 absolute near 0).
    assert np.all(np.isfinite(log_sf))
    assert_close(log_sf, ref[:, 2], rtol=1e-10, atol=1e-12)


def test_public_functions_match_the_kernels_and_a_statistic_of_40_has_a_log_p_value():
    with x64():
        x = jnp.asarray(GRID)
        for kind in ("max", "range"):
            for public, values in zip(FUNCS[kind], _ours(kind, GRID), strict=True):
                # Same kernel, other length: XLA may vectorise the last lanes differently.
                assert_close(public(x), values, rtol=2e-15, atol=0)
        log_p = float(stats.log_brownian_max_sf(40.0))
        log_p_range = float(stats.log_brownian_range_sf(40.0))
    assert -804 < log_p < -803
    assert log_p == pytest.approx(reference("max", 40.0)[2], rel=1e-12)
    assert log_p_range == pytest.approx(reference("range", 40.0)[2], rel=1e-12)


def test_sf_is_positive_where_mapie_goes_negative():
    # MAPIE (and Tygert's code) form 1 - CDF: past x ~ 8.5 that is round-off, sometimes
    # negative. Ours is the Gaussian tail itself.
    from mapie.metrics.calibration import kolmogorov_smirnov_cdf, kuiper_cdf

    xs = np.array([9.0, 12.0, 21.0, 30.0])
    mapie_ks = np.array([1 - kolmogorov_smirnov_cdf(x) for x in xs])
    mapie_ku = np.array([1 - kuiper_cdf(x) for x in xs])
    ref_ks = np.array([reference("max", x)[1] for x in xs])
    ref_ku = np.array([reference("range", x)[1] for x in xs])
    assert np.all(np.abs(mapie_ks - ref_ks) > 0.5 * ref_ks)  # not one digit right
    assert np.all(np.abs(mapie_ku - ref_ku) > 0.5 * ref_ku)
    _, sf, _ = _ours("max", xs)
    _, sf_range, _ = _ours("range", xs)
    assert np.all(sf > 0) and np.all(sf_range > 0)
    # relative accuracy of tiny tails (atol=0: absolute would pass any value near 0)
    assert_close(sf, ref_ks, rtol=1e-8, atol=0)
    assert_close(sf_range, ref_ku, rtol=1e-8, atol=0)


@pytest.mark.parametrize("kind", ["max", "range"])
def test_cdfs_agree_with_mapie_where_its_series_is_accurate(kind):
    from mapie.metrics.calibration import kolmogorov_smirnov_cdf, kuiper_cdf

    mapie_cdf = kolmogorov_smirnov_cdf if kind == "max" else kuiper_cdf
    xs = np.linspace(0.2, 6.0, 30)
    cdf, _, _ = _ours(kind, xs)
    # MAPIE sums the theta series everywhere; past x ~ 2 its own truncation and
    # cancellation leave ~5e-12 errors (ours matches mpmath to 1e-15, test above).
    assert_close(cdf, np.array([mapie_cdf(x) for x in xs]), rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    ("kind", "mean"), [("max", np.sqrt(np.pi / 2)), ("range", 2 * np.sqrt(2 / np.pi))]
)
def test_means_by_quadrature(kind, mean):
    # E[X] = integral of the survival function: E[max|B|] = sqrt(pi/2) and
    # E[range] = 2 sqrt(2/pi) (Feller 1951).
    sf = KERNELS[kind][1]
    with x64():
        # Split at the switch between the two series; beyond x = 60 the SF is < 1e-700.
        pieces = [
            integrate.quad(lambda x: float(sf(x)), a, b, epsabs=1e-14, epsrel=1e-13, limit=200)
            for a, b in [(0, SWITCH[kind]), (SWITCH[kind], 60)]
        ]
    assert all(err < 1e-11 for _, err in pieces)
    assert sum(v for v, _ in pieces) == pytest.approx(mean, rel=1e-12, abs=0)


@pytest.mark.parametrize("kind", ["max", "range"])
def test_density_from_grad_integrates_to_one_and_matches_mpmath(kind):
    # The density is the gradient of the CDF: integrate it by 64-point Gauss-Legendre on
    # [0, switch] and [switch, 12] (beyond 12 it is < 1e-30), and compare it with mpmath's
    # derivative of the theta series.
    nodes, wts = np.polynomial.legendre.leggauss(_DERIVATIVES_LENGTH)
    total = 0.0
    for a, b in [(0.0, SWITCH[kind]), (SWITCH[kind], 12.0)]:
        density, _ = _ours(kind, (b - a) / 2 * nodes + (a + b) / 2, order=1)
        total += (b - a) / 2 * np.dot(wts, density)
    assert total == pytest.approx(1.0, abs=1e-12)
    theta = _max_theta_cdf if kind == "max" else _range_theta_cdf
    points = [0.6, 1.3, 2.5]
    density, _ = _ours(kind, points, order=1)
    with mp.workdps(_DPS):
        ref = [float(mp.diff(theta, mp.mpf(x))) for x in points]
    # mpmath's numerical derivative at 50 digits: float64 round-off of the series
    assert_close(density, np.array(ref), rtol=1e-10, atol=0)


@pytest.mark.parametrize("kind", ["max", "range"])
def test_gradients_match_finite_differences_on_both_sides_of_the_switch(kind):
    switch = SWITCH[kind]
    x = np.array([0.3, switch - 1e-3, switch + 1e-3, 6.0, 30.0, 45.0])
    h = 1e-6 * x
    for order in (1, 2):
        grads = _ours(kind, x, order=order)
        up, down = _ours(kind, x + h, order=order - 1), _ours(kind, x - h, order=order - 1)
        if order == 1:  # values are (cdf, sf, log sf); derivatives (cdf, log sf)
            up, down = (up[0], up[2]), (down[0], down[2])
        for g, u, d in zip(grads, up, down, strict=True):
            # Central differences, h = 1e-6 x: truncation ~1e-12 relative, round-off
            # ~1e-10 |f| / h; 1e-5 relative, with a floor for slopes near 0.
            assert_close(g, (u - d) / (2 * h), rtol=1e-5, atol=1e-12 + 1e-9 * np.abs(g).max())
    # Finite derivatives of both orders at and beyond the edges of the support.
    edges = [-1.0, 0.0, 0.01, 200.0, 1e300, np.inf]
    for order in (1, 2):
        for g in _ours(kind, edges, order=order):
            assert np.all(np.isfinite(g)), g


@pytest.mark.parametrize("kind", ["max", "range"])
def test_continuous_at_the_switch(kind):
    below = np.nextafter(SWITCH[kind], 0)
    for values in _ours(kind, [below, SWITCH[kind]]):
        assert abs(values[1] - values[0]) < 1e-14


@pytest.mark.parametrize("kind", ["max", "range"])
def test_limits_monotonicity_and_complement(kind):
    xs = np.concatenate([[-np.inf, -1.0, 0.0], np.linspace(0.01, 45, 4000), [1e30, np.inf]])
    cdf, sf, log_sf = _ours(kind, xs)
    assert cdf[0] == cdf[1] == cdf[2] == 0 and sf[0] == sf[1] == sf[2] == 1 and log_sf[2] == 0
    assert cdf[-1] == 1 and sf[-1] == 0 and log_sf[-1] == -np.inf
    assert np.isfinite(log_sf[-2]) and log_sf[-2] < -1e59
    assert np.all(np.diff(cdf) >= 0) and np.all(np.diff(sf) <= 0) and np.all(np.diff(log_sf) <= 0)
    assert np.all((cdf >= 0) & (cdf <= 1) & (sf >= 0) & (sf <= 1))
    # one float64 rounding of each of cdf and sf (eps/2 = 1.1e-16)
    assert_close(cdf + sf, np.ones_like(cdf), rtol=0, atol=2e-16)


def test_float32():
    xs = np.array([0.3, 1.0, 1.5, 3.0, 8.0, 12.0, 40.0], np.float32)
    out = _values(jnp.asarray(xs))
    for kind in ("max", "range"):
        cdf, sf, log_sf = (np.asarray(v) for v in out[kind])
        assert cdf.dtype == np.float32
        ref = np.array([reference(kind, float(v)) for v in xs])
        # float32 round-off of exp/erfc and of the input (d log SF / d log x = -x^2 turns
        # the input's 6e-8 into 1e-5 at x = 12): 1e-5 relative.
        assert_close(cdf, ref[:, 0], rtol=0, atol=1e-6)
        live = ref[:, 1] > 1e-37  # float32 SF underflows below that
        assert_close(sf[live], ref[live, 1], rtol=1e-5, atol=0)
        assert np.all(np.isfinite(log_sf))
        assert_close(log_sf, ref[:, 2], rtol=1e-5, atol=1e-6)


def test_jit_vmap_and_no_recompilation():
    xs = jnp.linspace(0.1, 10.0, 12).reshape(3, 4)
    for f in (stats.brownian_max_sf, stats.log_brownian_range_sf):
        jitted = count_compiles(f)
        a = jitted(xs)
        b = jitted(xs + 1)
        assert jitted.compiles() == 1
        assert a.shape == (3, 4) and b.shape == (3, 4)
        np.testing.assert_array_equal(jax.vmap(f)(xs), a)


@pytest.mark.parametrize("f", [*FUNCS["max"], *FUNCS["range"]])
def test_bad_inputs_raise(f):
    with pytest.raises(ValueError, match="`x` must not contain NaN"):
        f(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="`x` must"):
        f("1.0")
    with pytest.raises(ValueError, match="`x` must hold real numbers"):
        f(np.array([1 + 1j]))
