"""The regression streaming state: streamed == batch jaxcal.regression, merge == one update."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import regression as R
from jaxcal import streaming

N, M = 300, 20


def _data(seed=0, n=N):
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=n).astype(np.float32)
    std = rng.uniform(0.5, 2.0, n).astype(np.float32)
    y = (mean + 1.3 * std * rng.normal(size=n)).astype(np.float32)
    w = rng.uniform(0.5, 2.0, n).astype(np.float32)
    return mean, std, y, w


def _forms(mean, std, y):
    z = np.array([-1.64, -0.67, 0.0, 0.67, 1.64], np.float32)
    levels = jnp.array([0.05, 0.25, 0.5, 0.75, 0.95])
    rng = np.random.default_rng(1)
    # 7 members: PIT values (r + 1/2) / 8, none on a level k / 20 (atoms: the next test)
    samples = mean[:, None] + std[:, None] * rng.normal(size=(len(y), 7)).astype(np.float32)
    return {
        "gaussian": R.Gaussian(jnp.asarray(mean), jnp.asarray(std)),
        "quantiles": R.Quantiles(jnp.asarray(mean[:, None] + std[:, None] * z), levels),
        "samples": R.Samples(jnp.asarray(samples)),
    }


def _crps(pred, y, w):
    if isinstance(pred, R.Gaussian):
        return R.crps_gaussian(pred.mean, pred.std, y, weights=w)
    if isinstance(pred, R.Quantiles):
        return R.crps_quantile(pred.values, pred.levels, y, weights=w)
    return R.crps_ensemble(pred.values, y, weights=w)


@pytest.mark.parametrize("form", ["gaussian", "quantiles", "samples"])
def test_streamed_equals_batch_at_the_bin_edges(form):
    """With ``n_levels = n_bins + 1`` (the same levels), the streamed curve and its three
    summaries are the batch values on the concatenated data, for both prop_types."""
    mean, std, y, w = _data()
    pred = _forms(mean, std, y)[form]
    state = streaming.regression_init(M)
    for rows in (slice(0, 100), slice(100, 300)):
        part = type(pred)(*(a[rows] if a.ndim and a.shape[0] == N else a for a in pred))
        state = streaming.regression_update(state, part, y[rows], w[rows])
    for prop_type in ("interval", "quantile"):
        out = streaming.regression_compute(state, prop_type=prop_type)
        kw = dict(n_levels=M + 1, prop_type=prop_type, weights=w)
        curve = R.calibration_curve(pred, y, **kw)
        np.testing.assert_allclose(out.levels, curve.expected, atol=0)
        np.testing.assert_allclose(out.observed, curve.observed, atol=3e-7)
        for name in (
            "miscalibration_area",
            "mean_absolute_calibration_error",
            "root_mean_squared_calibration_error",
        ):
            np.testing.assert_allclose(getattr(out, name), getattr(R, name)(pred, y, **kw), 1e-5)
    np.testing.assert_allclose(out.crps, _crps(pred, y, w), rtol=1e-5)
    assert int(out.count) == N
    np.testing.assert_allclose(out.weight, w.sum(), rtol=1e-6)
    np.testing.assert_allclose(jnp.sum(out.pit_histogram), 1.0, rtol=1e-6)
    if form == "gaussian":
        np.testing.assert_allclose(
            out.log_score, R.log_score_gaussian(mean, std, y, weights=w), 1e-5
        )
        mse = np.sum(w * (y.astype(np.float64) - mean) ** 2) / w.sum()
        np.testing.assert_allclose(out.squared_error, mse, rtol=1e-5)
    else:  # no Gaussian rows: documented zeros
        assert float(out.log_score) == float(out.squared_error) == float(out.ence) == 0.0


def test_atoms_on_the_edges_count_as_in_batch():
    """An ensemble of 3 members has PIT values on the grid k/8 (ties included), exact in
    floating point: every atom on an edge lands where the batch curve counts it."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, (64, 3)).astype(np.float32)
    y = rng.integers(0, 4, 64).astype(np.float32)
    pred = R.Samples(jnp.asarray(x))
    state = streaming.regression_update(streaming.regression_init(8), pred, y)
    for prop_type in ("interval", "quantile"):
        out = streaming.regression_compute(state, prop_type=prop_type)
        curve = R.calibration_curve(pred, y, n_levels=9, prop_type=prop_type)
        np.testing.assert_allclose(out.observed, curve.observed, atol=1e-7)


def test_merge_of_chunks_equals_one_update_and_is_associative():
    mean, std, y, w = _data(2)
    edges = (0.5, 1.0, 1.5, 2.0)
    init = streaming.regression_init(M, std_edges=edges)
    g = R.Gaussian(mean, std)
    whole = streaming.regression_update(init, g, y, w)
    cuts = ((0, 70), (70, 200), (200, 300))
    a, b, c = (
        streaming.regression_update(init, R.Gaussian(mean[i:j], std[i:j]), y[i:j], w[i:j])
        for i, j in cuts
    )
    left = streaming.merge(streaming.merge(a, b), c)
    right = streaming.merge(a, streaming.merge(b, c))
    for merged in (left, right):
        assert int(merged.count) == int(whole.count)
        for x, ref in zip(
            jax.tree_util.tree_leaves(streaming.regression_compute(merged)),
            jax.tree_util.tree_leaves(streaming.regression_compute(whole)),
            strict=True,
        ):
            np.testing.assert_allclose(x, ref, rtol=2e-6, atol=2e-7)


def test_jit_vmap_scan_and_psum_layout():
    """vmap over a stack of batches, then the sum of the stack, is the one-shot state;
    a lax.scan over the batches inside jit gives it too."""
    mean, std, y, w = _data(4)
    init = streaming.regression_init(M)
    whole = streaming.regression_compute(
        streaming.regression_update(init, R.Gaussian(mean, std), y, w)
    )
    stack = (mean.reshape(3, -1), std.reshape(3, -1), y.reshape(3, -1), w.reshape(3, -1))

    def one(m, s, t, v):
        return streaming.regression_update(init, R.Gaussian(m, s), t, v)

    states = jax.jit(jax.vmap(one))(*stack)
    summed = jax.tree_util.tree_map(lambda x: x.sum(axis=0), states)  # what psum computes
    out = streaming.regression_compute(summed)

    @jax.jit
    def scanned(batches):
        def step(state, b):
            return streaming.regression_update(state, R.Gaussian(b[0], b[1]), b[2], b[3]), None

        return jax.lax.scan(step, init, batches)[0]

    out_scan = streaming.regression_compute(scanned(stack))
    for res in (out, out_scan):
        np.testing.assert_allclose(res.observed, whole.observed, atol=3e-7)
        np.testing.assert_allclose(res.crps, whole.crps, rtol=1e-6)


def test_padding_rows_change_nothing():
    mean, std, y, w = _data(5, 40)
    init = streaming.regression_init(M)
    ref = streaming.regression_update(init, R.Gaussian(mean, std), y, w)
    nan = np.full(8, np.nan, np.float32)
    pad = [np.concatenate([a, nan]) for a in (mean, std, y)]
    padded = jax.jit(streaming.regression_update)(
        init, R.Gaussian(pad[0], pad[1]), pad[2], np.concatenate([w, np.zeros(8, np.float32)])
    )
    for x, r in zip(jax.tree_util.tree_leaves(padded), jax.tree_util.tree_leaves(ref), strict=True):
        np.testing.assert_allclose(x, r, rtol=1e-6)  # the sums' order differs, not their terms


def _variance_oracle(mean, std, y, w, edges):
    """float64 NumPy: per std bin ([e_j, e_j+1), last closed, clipped) RMV, RMSE, ENCE, UCE."""
    mean, std, y, w = (np.asarray(a, np.float64) for a in (mean, std, y, w))
    e = np.asarray(edges, np.float64)
    idx = np.clip(np.searchsorted(e, std, side="right") - 1, 0, len(e) - 2)
    wb = np.bincount(idx, w, len(e) - 1)
    mv = np.bincount(idx, w * std**2, len(e) - 1) / np.where(wb > 0, wb, 1)
    mse = np.bincount(idx, w * (y - mean) ** 2, len(e) - 1) / np.where(wb > 0, wb, 1)
    used = wb > 0
    ence = np.mean(np.abs(np.sqrt(mv) - np.sqrt(mse))[used] / np.sqrt(mv)[used])
    uce = np.sum(wb / w.sum() * np.abs(mse - mv))
    return np.sqrt(mv), np.sqrt(mse), ence, uce


def test_variance_bins_equal_batch_with_its_edges_and_the_oracle():
    mean, std, y, w = _data(6)
    g = R.Gaussian(mean, std)
    batch_edges = np.asarray(jnp.linspace(std.min(), std.max(), 5))  # the batch's own bins
    out = streaming.regression_compute(
        streaming.regression_update(streaming.regression_init(M, std_edges=batch_edges), g, y, w)
    )
    curve = R.variance_curve(g, y, n_bins=4, weights=w)
    for name, ref in (("bin_weights", curve.weights), ("rmv", curve.rmv), ("rmse", curve.rmse)):
        np.testing.assert_allclose(getattr(out, name), ref, rtol=2e-6)
    np.testing.assert_allclose(out.ence, R.ence(g, y, n_bins=4, weights=w), rtol=2e-6)
    # fixed edges of the user's choice, values beyond both ends included, vs float64 NumPy
    edges = (0.8, 1.0, 1.3, 1.7)
    s = streaming.regression_update(streaming.regression_init(M, std_edges=edges), g, y, w)
    out = streaming.regression_compute(s)
    rmv, rmse, ence, uce = _variance_oracle(mean, std, y, w, edges)
    np.testing.assert_allclose(out.rmv, rmv, rtol=1e-5)
    np.testing.assert_allclose(out.rmse, rmse, rtol=1e-5)
    np.testing.assert_allclose(out.ence, ence, rtol=1e-5)
    np.testing.assert_allclose(out.uce, uce, rtol=1e-5)
    one_bin = streaming.regression_compute(
        streaming.regression_update(streaming.regression_init(M), g, y, w)
    )
    np.testing.assert_allclose(one_bin.uce, _variance_oracle(mean, std, y, w, (0, np.inf))[3], 1e-5)


def test_empty_state_is_finite():
    out = streaming.regression_compute(streaming.regression_init(4))
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in out if x is not out.std_edges)
    assert float(out.miscalibration_area) == 0.5 and float(out.crps) == 0.0


def test_bad_input_is_refused_on_every_call():
    state = streaming.regression_init(4)
    g = R.Gaussian(jnp.zeros(3), jnp.ones(3))
    for _ in range(2):
        with pytest.raises(ValueError, match="`y` must be finite"):
            streaming.regression_update(state, g, jnp.array([0.0, jnp.nan, 1.0]))
        with pytest.raises(ValueError, match="`std` must be > 0"):
            streaming.regression_update(state, R.Gaussian(jnp.zeros(3), -jnp.ones(3)), jnp.zeros(3))
    with pytest.raises(ValueError, match="must be a RegressionState"):
        streaming.regression_update(streaming.init(4, 2), g, jnp.zeros(3))
    with pytest.raises(ValueError, match="strictly increasing"):
        streaming.regression_init(4, std_edges=(1.0, 1.0, 2.0))
    with pytest.raises(ValueError, match="`std_edges` must be a Python sequence"):
        streaming.regression_init(4, std_edges=2.0)
    with pytest.raises(ValueError, match="same n_bins and std_edges"):
        streaming.merge(state, streaming.regression_init(5))
    with pytest.raises(ValueError, match="`prop_type` must be one of"):
        streaming.regression_compute(state, prop_type="central")
