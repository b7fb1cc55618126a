"""Fine-histogram states: exact re-binning, equal-mass bins within their bound, CORP and
isotonic fits from the buckets, against float64 NumPy oracles and the one-shot functions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from jaxcal import streaming
from jaxcal.calibrators import isotonic
from tests import reference
from tests.helpers import assert_close, x64
from tests.streaming.test_state import _data

N, K, R = 600, 4, 240  # R divisible by M = 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 16, ...
COARSE = (10, 15, 16, 48)


def _fine(probs, labels, weights=None, *, binary=False, closed="right", resolution=R):
    k = 2 if binary else probs.shape[1]
    m = 15 if resolution % 15 == 0 else 16
    state = streaming.init(m, k, binary=binary, closed=closed, resolution=resolution)
    return streaming.update(state, probs, labels, weights)


@pytest.mark.parametrize("binary", [False, True])
def test_compute_at_any_divisor_equals_a_state_binned_so_from_the_start(binary):
    probs, labels, weights = _data(binary=binary)
    k = 2 if binary else K
    fine = _fine(probs, labels, weights, binary=binary)
    for m in COARSE:
        direct = streaming.update(streaming.init(m, k, binary=binary), probs, labels, weights)
        coarse = streaming.rebin(fine, m)
        np.testing.assert_array_equal(coarse.top_count, direct.top_count)
        np.testing.assert_array_equal(coarse.class_count, direct.class_count)
        got, want = streaming.compute(fine, n_bins=m), streaming.compute(direct)
        for name in streaming.OUTPUTS:
            # Sums re-anchored on the bins' anchors: a few float32 ulps of the moments.
            assert_close(got[name], want[name], atol=1e-6, err_msg=f"{name} at M={m}")
        # ... and a rebinned state merges with a state of M bins.
        merged = streaming.compute(streaming.merge(coarse, direct))
        assert_close(merged["ece"], want["ece"], atol=1e-6)  # as above


def test_rebinned_decomposition_matches_the_float64_oracle():
    probs, labels, _ = _data()
    with x64():
        fine = _fine(jnp.asarray(probs, jnp.float64), labels)
        for m in (10, 16):
            got = streaming.compute(fine, n_bins=m)
            want = reference.brier_decomposition(probs.astype(np.float64), labels, m)
            assert_close(got["ece"], reference.ece(probs.astype(np.float64), labels, m))
            for name, value in zip(jaxcal.BrierDecomposition._fields, want, strict=True):
                if name != "brier":
                    assert_close(got[name], value, err_msg=name)


@pytest.mark.parametrize("closed", ["right", "left"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("binary", [False, True])
def test_equal_mass_ece_is_within_its_bound_of_quantile_binning(closed, weighted, binary):
    probs, labels, weights = _data(seed=1, binary=binary)
    w = weights if weighted else None
    fine = _fine(probs, labels, w, binary=binary, closed=closed, resolution=4096)
    for m in (5, 15):
        out = streaming.equal_mass_ece(fine, m)
        exact = reference.ece(probs, labels, m, binning="quantile", closed=closed, weights=w)
        assert abs(float(out.ece) - exact) <= float(out.bound) + 1e-6
        assert out.edges.shape == (m + 1,) and np.all(np.diff(out.edges) >= 0)


def test_equal_mass_bound_is_small_for_spread_out_scores():
    rng = np.random.default_rng(4)
    p = rng.random(N).astype(np.float32)
    y = (rng.random(N) < p).astype(np.int32)
    out = streaming.equal_mass_ece(_fine(p, y, binary=True, resolution=4096), 15)
    # 14 edge buckets of about one sample each among 600.
    assert float(out.bound) <= 2 * 14 * 2 / N
    assert abs(float(out.ece) - reference.ece(p, y, 15, binning="quantile")) <= out.bound


def test_equal_mass_ece_is_exact_when_no_sample_sits_in_an_edge_bucket():
    # 4 distinct forecasts on bucket centres, 100 each: the quantile edges are whole buckets.
    p = np.repeat(np.array([0.1, 0.3, 0.6, 0.9], np.float32), 100)
    y = (np.arange(400) % 3 == 0).astype(np.int32)
    out = streaming.equal_mass_ece(_fine(p, y, binary=True, resolution=4096), 4)
    assert_close(out.ece, reference.ece(p, y, 4, binning="quantile"))


def _grid_data(seed=2, n=2000, r=256):
    """Binary forecasts on the bucket centres of R = r: buckets never mix forecasts."""
    rng = np.random.default_rng(seed)
    p = ((rng.integers(0, r, n) + 0.5) / r).astype(np.float32)
    y = (rng.random(n) < p**1.3).astype(np.int32)
    return p, y


def _pav_oracle(p, y):
    """Float64 CORP: distinct forecasts, then PAV of their means (scikit-learn)."""
    from sklearn.isotonic import IsotonicRegression

    xs, inverse = np.unique(p.astype(np.float64), return_inverse=True)
    w = np.bincount(inverse).astype(np.float64)
    s = np.bincount(inverse, weights=y.astype(np.float64))
    fitted = IsotonicRegression().fit(xs, s / w, sample_weight=w).predict(xs)
    return xs, fitted, w


def test_corp_curve_and_decomposition_equal_exact_corp_on_grid_forecasts():
    p, y = _grid_data()
    state = _fine(p, y, binary=True, resolution=256)
    curve = streaming.corp_curve(state)
    xs, fitted, w = _pav_oracle(p, y)
    size = int(curve.size)
    assert size == xs.size
    assert_close(curve.forecasts[:size], xs)
    assert_close(curve.calibrated[:size], fitted)
    assert_close(curve.weight[:size], w)
    dec = streaming.corp_decomposition(state)
    score = np.mean((p.astype(np.float64) - y) ** 2)
    recal = np.sum(w * fitted * (1 - fitted)) / w.sum()
    base = y.mean()
    want = (score, score - recal, base * (1 - base) - recal, base * (1 - base))
    for got, value in zip(dec, want, strict=True):
        assert_close(got, value)
    log = streaming.corp_decomposition(state, score="log")
    assert_close(log.score, jaxcal.log_loss(p, y))
    assert_close(log.score, log.miscalibration - log.discrimination + log.uncertainty)


@pytest.mark.parametrize("score", ["brier", "log"])
def test_bucket_corp_equals_jaxcal_corp_on_grid_forecasts(score):
    p, y = _grid_data(seed=5)
    state = _fine(p, y, binary=True, resolution=256)
    curve, exact = streaming.corp_curve(state), jaxcal.corp_curve(p, y)
    size = int(exact.size)
    assert int(curve.size) == size
    assert_close(curve.calibrated[:size], exact.calibrated[:size])
    assert_close(curve.forecasts[:size], exact.forecasts[:size])
    got = streaming.corp_decomposition(state, score=score)
    want = jaxcal.score_decomposition(p, y, score=score)
    assert type(got) is type(want)
    for a, b in zip(got, want, strict=True):
        assert_close(a, b)


def test_coarser_buckets_lower_miscalibration_and_discrimination_alike():
    p, y = _grid_data()
    fine = streaming.corp_decomposition(_fine(p, y, binary=True, resolution=256))
    coarse = streaming.corp_decomposition(_fine(p, y, binary=True, resolution=16))
    short = float(fine.miscalibration) - float(coarse.miscalibration)
    assert short >= -1e-7
    # Differences of float32 scores of ~0.2: absolute round-off.
    assert_close(float(fine.discrimination) - float(coarse.discrimination), short, atol=1e-6)
    assert_close(coarse.score, fine.score)


def test_isotonic_params_apply_as_scikit_learn_on_the_bucket_points():
    from sklearn.isotonic import IsotonicRegression

    p, y = _grid_data(seed=3)
    params = streaming.isotonic_params(_fine(p, y, binary=True, resolution=256))
    x_new = np.linspace(0, 1, 101, dtype=np.float32)
    ref = IsotonicRegression(out_of_bounds="clip").fit(p.astype(np.float64), y)
    assert_close(isotonic().apply(params, jnp.asarray(x_new)), ref.predict(x_new))


def test_multiclass_corp_curve_is_the_top_label_view():
    probs, labels, _ = _data()
    curve = streaming.corp_curve(_fine(probs, labels, resolution=4096))
    conf = probs.max(axis=1)
    size = int(curve.size)
    assert int(curve.counts.sum()) == N and size <= np.unique(conf).size
    assert np.all(np.diff(np.asarray(curve.calibrated[:size])) >= 0)
    assert np.all(np.diff(np.asarray(curve.forecasts[:size])) > 0)


def test_bad_options_name_the_argument():
    with pytest.raises(ValueError, match="`resolution` must be a multiple of `n_bins`"):
        streaming.init(15, 2, resolution=100)
    state = streaming.init(15, 2, resolution=240)
    with pytest.raises(ValueError, match="`n_bins` must divide the state's resolution 240"):
        streaming.compute(state, n_bins=7)
    with pytest.raises(ValueError, match="same n_bins, num_classes, closed, binary and res"):
        streaming.merge(state, streaming.init(15, 2))
    with pytest.raises(ValueError, match="`state` must be binary"):
        streaming.corp_decomposition(state)
    with pytest.raises(ValueError, match="`score`"):
        streaming.corp_decomposition(streaming.init(15, 2, binary=True), score="crps")


def test_fine_state_works_under_jit_scan_and_vmap():
    probs, labels, weights = _data(binary=True)
    state = streaming.init(15, 2, binary=True, resolution=R)

    def step(s, batch):
        return streaming.update(s, *batch), None

    chunks = [x.reshape(3, N // 3) for x in (probs, labels, weights)]
    scanned, _ = jax.lax.scan(step, state, tuple(jnp.asarray(c) for c in chunks))
    whole = streaming.update(state, probs, labels, weights)
    np.testing.assert_array_equal(scanned.class_count, whole.class_count)
    out = jax.jit(lambda s: streaming.compute(s, n_bins=16))(scanned)
    assert_close(out["ece"], streaming.compute(whole, n_bins=16)["ece"])
    stacked = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), scanned, whole)
    eces = jax.vmap(lambda s: streaming.compute(s)["ece"])(stacked)
    assert_close(eces[0], eces[1])
