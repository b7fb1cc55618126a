"""Differentiable objectives: soft-binned ECE, MMCE, smooth ECE.

Oracles are float64 NumPy transcriptions of the papers' formulas (below), independent of
the library's algebra: the soft ECE divides by the soft bin masses as Eq. (11) does, the
MMCE forms the full kernel matrix (MMCE_w term by term as the reference code), and the
smooth ECE sums the reflected kernel's mirror images explicitly. relplot is the external
reference for the smooth ECE.
"""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import relplot
import scipy.special
from helpers import assert_close, count_compiles, x64
from jax.test_util import check_grads

import jaxcal
from jaxcal._soft import (
    SMECE_MIN_BANDWIDTH,
    laplace_quadratic_form,
    mmce,
    smooth_ece,
    soft_ece,
    soft_membership,
)

# ---------------------------------------------------------------------------------------
# float64 oracles
# ---------------------------------------------------------------------------------------


def _scores(probs, labels):
    probs, labels = np.asarray(probs, np.float64), np.asarray(labels)
    if probs.ndim == 1:
        return probs, (labels == 1).astype(np.float64)
    return probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(np.float64)


def np_soft_ece(probs, labels, temperature, n_bins=15, norm="l1", weights=None):
    """Karandikar et al. (2021), Eq. (11), as written: soft masses, confidences, accuracies."""
    s, y = _scores(probs, labels)
    w = np.ones_like(s) if weights is None else np.asarray(weights, np.float64)
    anchors = (np.arange(n_bins) + 0.5) / n_bins
    u = scipy.special.softmax(-((s[:, None] - anchors[None, :]) ** 2) / temperature, axis=1)
    total = 0.0
    for j in range(n_bins):
        mass = np.sum(w * u[:, j])
        if mass == 0:
            continue
        conf = np.sum(w * u[:, j] * s) / mass
        acc = np.sum(w * u[:, j] * y) / mass
        gap = abs(acc - conf)
        total += mass / w.sum() * (gap if norm == "l1" else gap**2)
    return total if norm == "l1" else math.sqrt(total)


def np_mmce(probs, labels, bandwidth=0.4, variant="unweighted", weights=None):
    """Kumar et al. (2018): Eq. (2), and MMCE_w term by term as their reference code."""
    r, c = _scores(probs, labels)
    w = np.ones_like(r) if weights is None else np.asarray(weights, np.float64)
    k = np.exp(-np.abs(r[:, None] - r[None, :]) / bandwidth)
    if variant == "unweighted":
        a = w * (c - r)
        return math.sqrt(max(a @ k @ a, 0.0)) / w.sum()
    ok, bad = c == 1, c == 0
    m, n = w[ok].sum(), w[bad].sum()
    if m == 0 or n == 0:
        return 0.0
    p, q = w[ok] * (1 - r[ok]), w[bad] * r[bad]
    mmd = (
        p @ k[np.ix_(ok, ok)] @ p / m**2
        + q @ k[np.ix_(bad, bad)] @ q / n**2
        - 2 * p @ k[np.ix_(ok, bad)] @ q / (m * n)
    )
    return math.sqrt(max(mmd, 0.0))


def np_smooth_ece(probs, labels, sigma, weights=None, n_eval=8001):
    """integral_0^1 |sum_i w_i (y_i - s_i) K(t, s_i)| / W dt, K summed over mirror images."""
    s, y = _scores(probs, labels)
    w = np.ones_like(s) if weights is None else np.asarray(weights, np.float64)
    t = np.linspace(0, 1, n_eval)
    reps = int(np.ceil(1 + 8 * sigma))
    images = [sign * s + 2 * k for k in range(-reps, reps + 1) for sign in (1, -1)]
    kern = sum(np.exp(-0.5 * ((t[:, None] - im[None, :]) / sigma) ** 2) for im in images)
    kern /= sigma * math.sqrt(2 * math.pi)
    resid = kern @ (w * (y - s)) / w.sum()
    return float(np.trapezoid(np.abs(resid), t))


# ---------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------


N = 256  # one sample size for most tests: each new shape is a compilation
N_GRAD = 96  # finite-difference checks evaluate the function O(10) times per direction


def _multiclass(n=N, k=5, seed=0, scale=2.0):
    """Overconfident softmax outputs: labels drawn from the logits at temperature 1.5."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * scale
    probs = scipy.special.softmax(logits, axis=1)
    truth = scipy.special.softmax(logits / 1.5, axis=1).cumsum(axis=1)
    labels = np.minimum((truth < rng.random(n)[:, None]).sum(axis=1), k - 1)
    return logits, probs, labels


def _binary(n=N, seed=1, shift=0.1):
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n)
    truth = np.clip(p + shift * np.sin(3 * p), 0, 1)
    return p, (rng.random(n) < truth).astype(np.int32)


def _temperature(n_bins, ratio):
    """T at which a score on a bin centre gives each adjacent bin ``ratio`` of its own."""
    return 1.0 / (n_bins**2 * math.log(1.0 / ratio))


# ---------------------------------------------------------------------------------------
# soft-binned ECE
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("temperature", [1e-4, 2e-3, 0.05])
def test_soft_ece_matches_paper_formula(norm, temperature):
    _, probs, labels = _multiclass()
    p, y = _binary()
    w = np.random.default_rng(2).random(N)
    with x64():
        for args in [(probs, labels), (p, y)]:
            for weights in [None, w]:
                got = soft_ece(
                    *args, temperature=temperature, norm=norm, weights=weights, n_bins=12
                )
                want = np_soft_ece(*args, temperature, 12, norm, weights)
                assert_close(got, want, rtol=1e-9)  # float64 sums over 400 x 12 terms


def test_soft_ece_float32_against_float64_oracle():
    _, probs, labels = _multiclass()
    got = soft_ece(jnp.asarray(probs, jnp.float32), labels)
    want = np_soft_ece(probs, labels, _temperature(15, 0.01))
    assert got.dtype == jnp.float32
    assert_close(got, want, rtol=1e-5)  # float32 exp and sums over 6000 terms


@pytest.mark.parametrize("ratio", [0.5, 0.1, 1e-3])
def test_temperature_gives_the_adjacent_bin_ratio_not_the_reference_sign_error(ratio):
    n_bins = 15
    anchors = (np.arange(n_bins) + 0.5) / n_bins
    with x64():
        u = np.asarray(soft_membership(jnp.asarray(anchors), n_bins, _temperature(n_bins, ratio)))
    own = np.diag(u)
    assert_close(np.diag(u, 1) / own[:-1], np.full(n_bins - 1, ratio), rtol=1e-9)
    assert_close(np.diag(u, -1) / own[1:], np.full(n_bins - 1, ratio), rtol=1e-9)
    assert np.all(u.argmax(axis=1) == np.arange(n_bins))
    # The reference code's decay form, T = 1 / (log(decay) M^2), is negative: it puts the
    # most mass on the farthest bin. soft_ece refuses a non-positive temperature.
    t_ref = 1.0 / (math.log(ratio) * n_bins**2)
    assert t_ref < 0
    logits = -((anchors[:, None] - anchors[None, :]) ** 2) / t_ref
    bad = scipy.special.softmax(logits, axis=1)  # the reference's membership, stably
    far = np.where(np.arange(n_bins) < n_bins // 2, n_bins - 1, 0)
    middle = n_bins // 2  # equidistant from both ends
    assert np.all(np.delete(bad.argmax(axis=1) == far, middle))
    with pytest.raises(ValueError, match="temperature"):
        soft_ece(jnp.asarray(anchors), jnp.ones(n_bins, jnp.int32), temperature=t_ref)


def test_default_temperature_is_the_documented_one():
    p, y = _binary()
    assert_close(soft_ece(p, y), soft_ece(p, y, temperature=_temperature(15, 0.01)))
    assert_close(
        soft_ece(p, y, n_bins=7), soft_ece(p, y, n_bins=7, temperature=_temperature(7, 0.01))
    )


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_soft_ece_tends_to_hard_ece_as_temperature_vanishes(norm):
    n_bins = 10
    rng = np.random.default_rng(3)
    # Scores at least 0.2 bin widths from every edge; a miscalibration whose sign changes
    # across bins (with one sign everywhere the l1 soft ECE is the global gap for any T).
    centres = (rng.integers(0, n_bins, 2000) + 0.5) / n_bins
    s = centres + rng.uniform(-0.3, 0.3, 2000) / n_bins
    y = (rng.random(2000) < s + 0.15 * np.sin(2 * np.pi * s)).astype(np.int32)
    with x64():
        hard = float(jaxcal.ece(s, y, n_bins=n_bins, norm=norm))
        errors = [
            abs(float(soft_ece(s, y, n_bins=n_bins, temperature=t, norm=norm)) - hard)
            for t in (1e-2, 1e-3, 3e-4, 1e-4)
        ]
    assert all(a > b for a, b in itertools.pairwise(errors))
    assert errors[-1] < 1e-12
    assert errors[0] > 1e-3  # the limit is not reached trivially


def test_soft_ece_tends_to_global_gap_as_temperature_grows():
    p, y = _binary()
    w = np.random.default_rng(4).random(N)
    with x64():
        global_gap = abs(np.sum(w * (y - p)) / w.sum())
        for norm in ("l1", "l2"):
            got = soft_ece(p, y, temperature=1e9, norm=norm, weights=w)
            assert_close(got, global_gap, rtol=1e-7)  # residual O(1/T) spread over bins


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_soft_ece_gradients_match_finite_differences(norm):
    # d/d(probs), d/d(weights) and d/d(temperature) of the closed-form JVP, forward and
    # reverse mode; l1 on confidences (through softmax), l2 on binary scores (sigmoid).
    rng = np.random.default_rng(5)
    w = rng.random(N_GRAD) + 0.5
    if norm == "l1":
        z, _, y = _multiclass(n=N_GRAD)
        link = jax.nn.softmax
    else:
        z, y = rng.normal(size=N_GRAD), (rng.random(N_GRAD) < 0.5).astype(np.int32)
        link = jax.nn.sigmoid

    # log T: a relative step, so the finite difference is accurate at small T too
    def f(z, w, log_t):
        return soft_ece(link(z), y, temperature=jnp.exp(log_t), norm=norm, weights=w)

    with x64():
        for t in (1e-3, 2e-2):
            # eps 1e-6: |excess_j| and the argmax have kinks; keep steps far inside them
            check_grads(f, (jnp.asarray(z), jnp.asarray(w), jnp.log(t)), 1, eps=1e-6)


def test_soft_ece_gradients_match_autodiff_of_the_plain_formula():
    # The closed-form JVP against autodiff through a direct jnp transcription.
    p, y = _binary()
    w = np.random.default_rng(8).random(N)
    t = 3e-3
    with x64():
        p, w = jnp.asarray(p), jnp.asarray(w)
        yf = jnp.asarray(y, jnp.float64)

        def plain(p, w):
            anchors = (jnp.arange(15.0) + 0.5) / 15
            u = jax.nn.softmax(-((p[:, None] - anchors[None, :]) ** 2) / t, axis=1)
            mass = (w[:, None] * u).sum(0)
            gap = ((w * (yf - p))[:, None] * u).sum(0) / mass
            return jnp.sqrt(jnp.sum(mass / w.sum() * gap**2))

        got = jax.grad(lambda p, w: soft_ece(p, y, temperature=t, norm="l2", weights=w), (0, 1))
        want = jax.grad(plain, (0, 1))
        for a, b in zip(got(p, w), want(p, w), strict=True):
            assert_close(a, b, rtol=1e-8, atol=1e-12)  # different float64 operation order


def test_soft_ece_chunked_path_matches_single_pass(monkeypatch):
    import jaxcal._soft as soft

    logits, _, labels = _multiclass()
    w = np.random.default_rng(9).random(N)
    with x64():

        def value_and_grad():
            f = lambda z: soft_ece(jax.nn.softmax(z), labels, norm="l2", weights=w)  # noqa: E731
            return jax.value_and_grad(f)(jnp.asarray(logits))

        whole = value_and_grad()
        monkeypatch.setattr(soft, "_CHUNK", 60)  # 256 samples -> 5 chunks, the last padded
        chunked = value_and_grad()
    assert_close(chunked[0], whole[0])
    assert_close(chunked[1], whole[1])


# ---------------------------------------------------------------------------------------
# finite everywhere
# ---------------------------------------------------------------------------------------


def _objectives():
    return {
        "soft_l1": lambda p, y, w: soft_ece(p, y, weights=w),
        # a cold l2: every bin but the data's has exactly zero mass (0/0 guarded)
        "soft_l2_cold": lambda p, y, w: soft_ece(p, y, norm="l2", temperature=1e-7, weights=w),
        "mmce": lambda p, y, w: mmce(p, y, weights=w),
        "mmce_w": lambda p, y, w: mmce(p, y, variant="weighted", weights=w),
        "smooth": lambda p, y, w: smooth_ece(p, y, weights=w),
    }


BOUNDARY_CASES = {
    # probabilities of exactly 0 and 1, right and wrong
    "binary_extremes": (np.array([0.0, 1.0, 0.0, 1.0, 0.5, 1.0]), np.array([0, 1, 1, 0, 1, 1])),
    # every confidence is 1 (one-hot rows): all mass in the last bin, the others empty
    "one_hot_rows": (np.eye(4)[[0, 1, 2, 3, 1, 2]], np.array([0, 1, 2, 1, 1, 0])),
    # perfectly calibrated: every residual 0, every objective 0 (sqrt at 0)
    "perfect": (np.array([0.0, 1.0, 1.0, 0.0, 0.0, 1.0]), np.array([0, 1, 1, 0, 0, 1])),
    # all scores in one bin, uniform rows (ties in the top label)
    "ties": (np.full((6, 4), 0.25), np.array([0, 1, 2, 3, 0, 1])),
}


@pytest.mark.parametrize("case", list(BOUNDARY_CASES))
def test_values_and_gradients_are_finite_at_the_boundaries(case):
    probs, labels = BOUNDARY_CASES[case]
    probs = jnp.asarray(probs, jnp.float32)
    for zero_weights in (False, True):
        w = jnp.zeros(6) if zero_weights else jnp.ones(6)
        for name, f in _objectives().items():
            value, grad = jax.value_and_grad(f)(probs, labels, w)
            assert np.isfinite(value), (case, name)
            assert np.all(np.isfinite(grad)), (case, name, grad)
            if zero_weights or case == "perfect":
                assert float(value) == 0.0, (case, name)


def test_documented_degenerate_values():
    p = jnp.array([0.2, 0.9, 0.7, 0.4, 0.6, 0.1])  # the boundary cases' shape: no compile
    assert float(mmce(p, jnp.ones(6, jnp.int32), variant="weighted")) == 0.0  # all correct
    assert float(mmce(p, jnp.zeros(6, jnp.int32), variant="weighted")) == 0.0  # all wrong


# ---------------------------------------------------------------------------------------
# MMCE
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["unweighted", "weighted"])
@pytest.mark.parametrize("bandwidth", [0.4, 0.05])
def test_mmce_matches_kernel_matrix_oracle(variant, bandwidth):
    _, probs, labels = _multiclass()
    p, y = _binary()
    w = np.random.default_rng(10).random(N)
    with x64():
        for args in [(probs, labels), (p, y)]:
            for weights in [np.ones(N), w]:  # (weights=None: the float32 test below)
                got = mmce(*args, bandwidth=bandwidth, variant=variant, weights=weights)
                want = np_mmce(*args, bandwidth, variant, weights)
                assert_close(got, want, rtol=1e-9)  # float64, sums over 6.6e4 kernel terms


def test_mmce_float32_against_float64_oracle():
    _, probs, labels = _multiclass()
    got = mmce(jnp.asarray(probs, jnp.float32), labels)
    assert_close(got, np_mmce(probs, labels), rtol=1e-5)  # float32 scan over 256 terms


def test_laplace_quadratic_form_with_ties_signs_and_narrow_kernels():
    rng = np.random.default_rng(11)
    x = np.round(rng.random(N), 1)  # 11 distinct values: heavy ties, segment edges, 0 and 1
    a = rng.normal(size=N)
    with x64():
        quad = jax.jit(laplace_quadratic_form)
        for h in (0.3, 0.01, 1e-3):
            got = quad(jnp.asarray(x), jnp.asarray(a), jnp.asarray(h))
            want = a @ np.exp(-np.abs(x[:, None] - x[None, :]) / h) @ a
            assert_close(got, want, rtol=1e-10)


def test_mmce_integer_weights_repeat_samples():
    p, y = _binary(n=50)
    reps = np.random.default_rng(12).integers(0, 4, 50)
    with x64():
        for variant in ("unweighted", "weighted"):
            got = mmce(p, y, variant=variant, weights=reps.astype(np.float64))
            want = mmce(np.repeat(p, reps), np.repeat(y, reps), variant=variant)
            assert_close(got, want, rtol=1e-9)


def test_mmce_gradients_match_finite_differences():
    logits, _, labels = _multiclass(n=N_GRAD)
    w = np.random.default_rng(13).random(N_GRAD) + 0.5

    def f(z, w, h):  # both variants in one function: one compilation
        p = jax.nn.softmax(z)
        return mmce(p, labels, bandwidth=h, weights=w) + 0.7 * mmce(
            p, labels, bandwidth=h, variant="weighted", weights=w
        )

    with x64():
        # eps 1e-6: the Laplacian kernel has a kink at r_i = r_j, and 96 confidences lie
        # closer than the default step of 1e-4. Reverse mode: plain autodiff here (no
        # custom rule), and forward mode would double the compilations.
        args = (jnp.asarray(logits), jnp.asarray(w), jnp.asarray(0.4))
        check_grads(f, args, 1, modes=("rev",), eps=1e-6)


def _blocked_np_mmce(probs, labels):
    r, c = _scores(probs, labels)
    a = (c - r) / r.size
    q = sum(
        a[i : i + 1000] @ np.exp(-np.abs(r[i : i + 1000, None] - r[None, :]) / 0.4) @ a
        for i in range(0, r.size, 1000)
    )
    return math.sqrt(q)


def test_mmce_twenty_thousand_samples_fit_and_differentiate():
    _, probs, labels = _multiclass(n=20_000, k=10, seed=14)
    value, grad = jax.value_and_grad(lambda p: mmce(p, labels))(jnp.asarray(probs, jnp.float32))
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    assert float(jnp.max(jnp.abs(grad))) > 0


@pytest.mark.slow
def test_mmce_twenty_thousand_samples_against_blocked_oracle():
    _, probs, labels = _multiclass(n=20_000, k=10, seed=14)
    want = _blocked_np_mmce(probs, labels)
    assert_close(mmce(jnp.asarray(probs, jnp.float32), labels), want, rtol=1e-4)  # 2e4 terms
    with x64():
        assert_close(mmce(probs, labels), want, rtol=1e-9)


# ---------------------------------------------------------------------------------------
# smooth ECE
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.02, 0.1, 0.3, 1.0])
def test_smooth_ece_matches_mirror_image_oracle(sigma):
    p, y = _binary()
    w = np.random.default_rng(15).random(N)
    with x64():
        for weights in (None, w):
            got = smooth_ece(p, y, bandwidth=sigma, weights=weights)
            # grid assignment widens the kernel by (1/4096)^2/6 in variance: ~1e-5 at 0.02
            assert_close(got, np_smooth_ece(p, y, sigma, weights), rtol=2e-5, atol=1e-7)


@pytest.mark.parametrize("seed,shift", [(0, 0.0), (1, 0.1), (2, -0.2), (3, 0.3)])
def test_smooth_ece_matches_relplot(seed, shift):
    p, y = _binary(n=3000, seed=seed, shift=shift)
    got_auto = smooth_ece(jnp.asarray(p, jnp.float32), y)
    # relplot stops its bandwidth bisection at 2**-10 and reports the upper end.
    assert_close(got_auto, relplot.smECE(p, y), atol=1e-3, rtol=0)
    for sigma in (0.02, 0.05, 0.1):
        got = smooth_ece(jnp.asarray(p, jnp.float32), y, bandwidth=sigma)
        # relplot: 200 equal-weight evaluation points and a kernel truncated at +-0.5
        assert_close(got, relplot.smECE_sigma(p, y, sigma), atol=5e-4, rtol=0)


def test_smooth_ece_multiclass_matches_relplot_on_confidences():
    logits, probs, labels = _multiclass(n=3000, k=10, seed=16)
    f, correct = relplot.multiclass_logits_to_confidences(logits, labels)
    assert_close(
        smooth_ece(jnp.asarray(probs, jnp.float32), labels),
        relplot.smECE(f, correct),
        atol=1e-3,
        rtol=0,
    )  # relplot's bisection precision, as above


def test_smooth_ece_is_its_own_bandwidth_and_monotone_in_sigma():
    p, y = _binary(shift=0.15)
    with x64():
        star = float(smooth_ece(p, y))
        assert_close(smooth_ece(p, y, bandwidth=star), star, rtol=1e-9)
        values = [float(smooth_ece(p, y, bandwidth=s)) for s in np.geomspace(1e-3, 1, 25)]
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(values))


def test_smooth_ece_floor_bandwidth_when_calibrated_at_grid_level():
    # Residuals all zero: smECE_sigma = 0 < sigma everywhere, so the search clamps at 1e-3.
    p = jnp.array([0.0, 1.0, 0.0, 1.0])
    assert float(smooth_ece(p, jnp.array([0, 1, 0, 1]))) == 0.0
    assert SMECE_MIN_BANDWIDTH == 1e-3


def test_smooth_ece_gradients_match_finite_differences():
    rng = np.random.default_rng(17)
    z, w = rng.normal(size=N_GRAD), rng.random(N_GRAD) + 0.5
    y = (rng.random(N_GRAD) < 0.6).astype(np.int32)

    def f(z, w, h):
        p = jax.nn.sigmoid(z)
        # fixed bandwidth, plus the fixed point, whose bandwidth moves with the data
        # (implicit-function gradient); one function, one compilation
        return smooth_ece(p, y, bandwidth=h, weights=w) + 0.5 * smooth_ece(p, y, weights=w)

    with x64():
        # eps 1e-6: scores move across the 1/4096 grid nodes (kinks of the linear
        # assignment) and |r(t)| has kinks at its zeros; keep steps far inside them.
        args = (jnp.asarray(z), jnp.asarray(w), jnp.asarray(0.05))
        check_grads(f, args, 1, modes=("rev",), eps=1e-6)


def test_smooth_ece_integer_weights_repeat_samples():
    p, y = _binary(n=60)
    reps = np.random.default_rng(20).integers(0, 4, 60)
    with x64():
        got = smooth_ece(p, y, weights=reps.astype(np.float64))
        assert_close(got, smooth_ece(np.repeat(p, reps), np.repeat(y, reps)), rtol=1e-9)


# ---------------------------------------------------------------------------------------
# jit, vmap, training loop
# ---------------------------------------------------------------------------------------


def test_hyperparameters_are_traced_no_retrace():
    _, probs, labels = _multiclass()
    probs = jnp.asarray(probs, jnp.float32)
    for f in (
        lambda p, y, h: soft_ece(p, y, temperature=h),
        lambda p, y, h: mmce(p, y, bandwidth=h),
        lambda p, y, h: smooth_ece(p, y, bandwidth=h),
    ):
        jitted = count_compiles(f)
        first = jitted(probs, labels, 0.01)
        second = jitted(probs[::-1], labels[::-1], 0.02)
        assert jitted.compiles() == 1
        assert float(first) != float(second)
        assert_close(first, f(probs, labels, 0.01))
    jitted = count_compiles(lambda p, y: smooth_ece(p, y))
    jitted(probs, labels)
    jitted(probs[::-1], labels)
    assert jitted.compiles() == 1


def test_vmap_over_a_batch_of_models():
    rng = np.random.default_rng(21)
    logits = rng.normal(size=(3, N, 5)) * np.array([0.5, 2.0, 4.0])[:, None, None]
    probs = jnp.asarray(scipy.special.softmax(logits, axis=2), jnp.float32)
    labels = jnp.asarray(rng.integers(0, 5, N))
    for f, with_grad in (
        (lambda p, y: soft_ece(p, y, norm="l2"), True),
        (lambda p, y: mmce(p, y, variant="weighted"), False),
        (lambda p, y: smooth_ece(p, y), False),
    ):
        batched = jax.jit(jax.vmap(f, in_axes=(0, None)))(probs, labels)
        assert_close(batched, jnp.stack([f(p, labels) for p in probs]))
        assert len(set(np.asarray(batched).tolist())) == 3
        if with_grad:
            grads = jax.jit(jax.vmap(jax.grad(f), in_axes=(0, None)))(probs, labels)
            assert_close(grads[1], jax.grad(f)(probs[1], labels), atol=1e-6)  # float32 grads


def test_jitted_optax_loop_reduces_calibration_error():
    # Overconfident logits: fitting a temperature by soft ECE alone (in a jitted optax loop
    # under lax.scan) must bring the *hard* ECE down.
    logits, _, labels = _multiclass(n=1000, seed=22, scale=4.0)
    logits = jnp.asarray(logits, jnp.float32)
    opt = optax.adam(0.05)

    def loss(log_t, logits, labels):
        return soft_ece(jax.nn.softmax(logits / jnp.exp(log_t)), labels)

    @jax.jit
    def fit(log_t, logits, labels):
        def step(carry, _):
            log_t, state = carry
            value, g = jax.value_and_grad(loss)(log_t, logits, labels)
            updates, state = opt.update(g, state)
            return (optax.apply_updates(log_t, updates), state), value

        (log_t, _), trace = jax.lax.scan(step, (log_t, opt.init(log_t)), length=150)
        return log_t, trace

    with jax.numpy_dtype_promotion("standard"):  # optax.adam mixes int and float (users' mode)
        log_t, trace = fit(jnp.zeros(()), logits, labels)
    before = jaxcal.ece(jax.nn.softmax(logits), labels)
    after = jaxcal.ece(jax.nn.softmax(logits / jnp.exp(log_t)), labels)
    assert np.all(np.isfinite(trace))
    assert float(trace[-1]) < 0.5 * float(trace[0])
    assert float(after) < 0.5 * float(before)


def test_regulariser_changes_training_of_a_linear_model():
    rng = np.random.default_rng(23)
    x = jnp.asarray(rng.normal(size=(N, 8)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, N))
    opt = optax.sgd(0.5)

    def loss(w, lam, x, y):
        logits = x @ w
        probs = jax.nn.softmax(logits)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return ce + lam * (soft_ece(probs, y) + mmce(probs, y) + smooth_ece(probs, y))

    @jax.jit
    def train(lam, x, y):
        def step(carry, _):
            w, state = carry
            value, g = jax.value_and_grad(loss)(w, lam, x, y)
            updates, state = opt.update(g, state)
            return (optax.apply_updates(w, updates), state), value

        w0 = jnp.zeros((8, 3))
        (w, _), trace = jax.lax.scan(step, (w0, opt.init(w0)), length=20)
        return w, trace

    w_plain, _ = train(0.0, x, y)
    w_reg, trace_reg = train(1.0, x, y)
    assert np.all(np.isfinite(trace_reg)) and np.all(np.isfinite(w_reg))
    assert float(jnp.max(jnp.abs(w_reg - w_plain))) > 1e-3


# ---------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------

P, Y = jnp.array([0.2, 0.7, 0.9]), jnp.array([0, 1, 1])


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: soft_ece(P, Y, n_bins=0), "n_bins"),
        (lambda: soft_ece(P, Y, n_bins=2.5), "n_bins"),
        (lambda: soft_ece(P, Y, norm="max"), "norm"),
        (lambda: soft_ece(P, Y, temperature=0.0), "temperature"),
        (lambda: soft_ece(P, Y, temperature=-1e-3), "temperature"),
        (lambda: soft_ece(P, Y, temperature=float("nan")), "temperature"),
        (lambda: soft_ece(P, Y, temperature=float("inf")), "temperature"),
        (lambda: soft_ece(P, Y, temperature="hot"), "temperature"),
        (lambda: soft_ece(P, Y, temperature=True), "temperature"),
        (lambda: soft_ece(P, Y, temperature=jnp.ones(2)), "temperature"),
        (lambda: soft_ece(P, Y, temperature=jnp.asarray(-1.0)), "temperature"),
        (lambda: soft_ece(jnp.array([0.2, 1.5, 0.9]), Y), "probs"),
        (lambda: soft_ece(jnp.array([[0.2, 0.9]]), jnp.array([0])), "probs"),
        (lambda: soft_ece(P, jnp.array([0, 1])), "labels"),
        (lambda: soft_ece(P, jnp.array([0, 2, 1])), "labels"),
        (lambda: soft_ece(P, Y, weights=jnp.array([1.0, -1.0, 1.0])), "weights"),
        (lambda: mmce(P, Y, variant="w"), "variant"),
        (lambda: mmce(P, Y, bandwidth=0), "bandwidth"),
        (lambda: mmce(P, Y, bandwidth=-0.4), "bandwidth"),
        (lambda: mmce(P, Y, bandwidth=1e-4), "bandwidth"),
        (lambda: mmce(jnp.array([0.2, float("nan"), 0.9]), Y), "probs"),
        (lambda: mmce(P, Y, weights=jnp.ones(4)), "weights"),
        (lambda: smooth_ece(P, Y, bandwidth=1e-4), "bandwidth"),
        (lambda: smooth_ece(P, Y, bandwidth=-0.1), "bandwidth"),
        (lambda: smooth_ece(jnp.zeros((3, 2, 2)), Y), "probs"),
        (lambda: smooth_ece(jnp.zeros((0,)), jnp.zeros((0,), jnp.int32)), "probs"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_value_checks_are_skipped_under_jit():
    # Documented: inside jit the kernels trust their input (no ValueError, no host sync).
    for f in (soft_ece, mmce, smooth_ece):
        out = jax.jit(f)(jnp.array([0.2, 1.5, 0.9]), Y)
        assert out.shape == ()


def test_labels_closed_over_inside_jit():
    # Training loops often close over a fixed label batch: the metrics must trace.
    for f in (soft_ece, mmce, smooth_ece):
        assert_close(jax.jit(lambda p, f=f: f(p, Y))(P), f(P, Y))
