"""Histogram binning, isotonic regression and scaling-binning against their definitions
and scikit-learn's IsotonicRegression."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from jaxcal import calibrators as cal
from tests import reference
from tests import reference_calibrators as ref
from tests.helpers import assert_close, count_compiles, x64

N = 600
ISO = cal.isotonic()  # built once: each factory call is a new compile
HIST = cal.histogram_binning(10)


def _scores(seed, n=N, ties=True, dtype=np.float32):
    rng = np.random.default_rng(seed)
    s = rng.uniform(size=n)
    if ties:
        s[: n // 3] = np.round(s[: n // 3], 2)  # many exact ties
    s = s.astype(dtype)
    y = (rng.uniform(size=n) < s**2).astype(np.int64)
    return s, y


def _sklearn_iso(s, y, w=None):
    return IsotonicRegression(out_of_bounds="clip").fit(s, y.astype(s.dtype), sample_weight=w)


def _new_points(seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.uniform(-0.2, 1.2, 300), [0.0, 1.0]]).clip(0, 1).astype(dtype)


def test_isotonic_matches_sklearn_float32_with_ties_and_zero_weights():
    s, y = _scores(0)
    w = np.random.default_rng(0).integers(0, 4, N).astype(np.float32)  # zeros drop samples
    ir = _sklearn_iso(s, y, w)
    params = ISO.fit(s, y, weights=w)
    assert int(params.size) == len(np.unique(s[w > 0]))
    for x in (s, _new_points(0)):
        assert_close(ISO.apply(params, x), ir.predict(x), atol=1e-6)


@pytest.mark.slow
def test_isotonic_matches_sklearn_float64():
    s, y = _scores(1, dtype=np.float64)
    w = np.random.default_rng(1).uniform(0, 2, N)
    ir = _sklearn_iso(s, y, w)
    with x64():
        params = ISO.fit(s, y, weights=w)
        preds = [ISO.apply(params, x) for x in (s, _new_points(1, np.float64))]
    assert params.y.dtype == jnp.float64
    assert_close(preds[0], ir.predict(s), atol=1e-12)
    assert_close(preds[1], ir.predict(_new_points(1, np.float64)), atol=1e-12)


def test_isotonic_near_ties_follow_sklearn_grouping():
    # float32 scores closer than finfo.resolution (1e-6) to their group's first score merge;
    # a chain of 4e-7 gaps spans more than 1e-6, so the sequential grouping path runs.
    s, y = _scores(2, ties=False)
    chain = (0.5 + 4e-7 * np.arange(8)).astype(np.float32)
    s[:8] = chain
    y[:8] = [1, 0, 1, 0, 0, 1, 1, 0]
    ir = _sklearn_iso(s, y)
    params = ISO.fit(s, y, weights=np.ones(N, np.float32))
    xs = np.asarray(params.x[: int(params.size)])
    starts = [chain[0]]  # scikit-learn's rule, by a loop: new group once >= resolution away
    for x in chain[1:]:
        if x - starts[-1] >= np.finfo(np.float32).resolution:
            starts.append(x)
    assert len(starts) == 3  # neither 8 (exact ties) nor 1 (gaps below the resolution)
    np.testing.assert_array_equal(xs[(xs >= chain[0]) & (xs <= chain[-1])], starts)
    for x in (s, chain, _new_points(2)):
        assert_close(ISO.apply(params, x), ir.predict(x), atol=1e-6)


def test_isotonic_fit_is_monotone_and_pooled():
    s, y = _scores(3)
    params = ISO.fit(s, y, weights=np.ones(N, np.float32))
    u = int(params.size)
    fitted = np.asarray(params.y[:u])
    assert np.all(np.diff(fitted) >= 0)
    assert np.all(np.diff(np.asarray(params.x[:u])) > 0)
    assert fitted.min() >= 0 and fitted.max() <= 1
    # the weighted mean is preserved by pooling
    counts = np.array([np.sum(s == x) for x in np.asarray(params.x[:u])])
    assert_close(np.sum(counts * fitted), y.sum(), rtol=1e-5)


def test_isotonic_degenerate_inputs():
    s, y = _scores(4)
    w = np.ones(N, np.float32)
    const = ISO.fit(np.full(N, 0.3, np.float32), y, weights=w)  # one distinct score
    assert int(const.size) == 1
    assert_close(ISO.apply(const, np.array([0.0, 0.3, 1.0])), np.full(3, y.mean()), atol=1e-6)
    one_class = ISO.fit(s, np.zeros(N, np.int64), weights=w)
    np.testing.assert_array_equal(ISO.apply(one_class, s), np.zeros(N))
    empty = ISO.fit(s, y, weights=np.zeros(N, np.float32))  # zero weight: identity
    assert int(empty.size) == 0
    assert_close(ISO.apply(empty, s), s)


@pytest.mark.slow
def test_isotonic_vmap_over_bootstrap_and_no_recompile():
    s, y = _scores(5)
    counts = np.random.default_rng(5).multinomial(N, np.full(N, 1 / N), size=4)
    counts = counts.astype(np.float32)
    fit = count_compiles(lambda w: ISO.fit(s, y, weights=w))
    singles = [fit(w) for w in counts]
    assert fit.compiles() == 1
    batched = jax.jit(jax.vmap(lambda w: ISO.fit(s, y, weights=w)))(counts)
    for i, single in enumerate(singles):
        assert int(batched.size[i]) == int(single.size)
        assert_close(batched.y[i], single.y, atol=1e-6)
        ir = _sklearn_iso(s, y, counts[i])
        assert_close(ISO.apply(single, s), ir.predict(s), atol=1e-6)


@pytest.mark.parametrize("binning", ["uniform", "quantile"])
def test_histogram_binning_outputs_bin_means(binning):
    s, y = _scores(6, ties=False)
    w = np.random.default_rng(6).uniform(0.5, 2, N).astype(np.float32)
    c = HIST if binning == "uniform" else cal.histogram_binning(10, "quantile")
    params = c.fit(s, y, weights=w)
    if binning == "uniform":
        bins = reference.uniform_bin(s, 10, "right", np.float32)
    else:
        bins = reference.quantile_bin(s, 10, "right", w)
    means = ref.histogram_means(bins, y, 10, w)
    assert_close(c.apply(params, s), means[bins], atol=1e-6)
    if binning == "quantile":  # equal-mass: each bin holds about a tenth of the weight
        shares = np.bincount(bins, weights=w, minlength=10) / w.sum()
        assert np.all(np.abs(shares - 0.1) < 0.01)


def test_histogram_binning_empty_bins_are_the_identity():
    s = np.array([0.05, 0.07, 0.93, 0.95], np.float32)
    params = HIST.fit(s, [0, 1, 1, 1])
    new = np.array([0.02, 0.5, 0.77, 0.99], np.float32)
    assert_close(HIST.apply(params, new), [0.5, 0.5, 0.77, 1.0])
    none = HIST.fit(s, [0, 1, 1, 1], weights=np.zeros(4))
    assert_close(HIST.apply(none, new), new)
    # edges follow the metrics' right-closed convention: 0.2 is in bin 1 ([0.1, 0.2])
    p = HIST.fit(np.array([0.2, 0.25], np.float32), [1, 0])
    assert_close(HIST.apply(p, np.array([0.2, 0.25], np.float32)), [1.0, 0.0])


def test_histogram_binning_logits_inputs():
    s, y = _scores(7, ties=False)
    z = np.log(s / (1 - s)).astype(np.float32)
    c = cal.histogram_binning(10, inputs="logits")
    assert_close(c.apply(c.fit(z, y), z), HIST.apply(HIST.fit(s, y), s), atol=1e-6)


def test_scaling_binning_averages_platt_outputs_in_equal_mass_bins():
    s, y = _scores(8, ties=False)
    c = cal.scaling_binning(5)
    params = c.fit(s, y)
    g = np.asarray(cal.platt_scaling().apply(params.platt, s), np.float64)
    bins = reference.quantile_bin(g, 5, "right")
    means = np.array([g[bins == b].mean() for b in range(5)])
    out = c.apply(params, s)
    assert_close(out, means[bins], atol=1e-6)
    assert len(np.unique(np.asarray(out))) == 5


@pytest.mark.parametrize(
    "make, args, match",
    [
        (lambda: ISO, (np.zeros((3, 2)), [0, 1, 0]), "scores.*1-D"),
        (lambda: ISO, (np.array([0.5, 2.0]), [0, 1]), r"scores.*\[0, 1\]"),
        (lambda: HIST, (np.array([0.5, 0.2]), [0, 3]), r"labels.*\[0, 2\)"),
        (lambda: cal.histogram_binning(0), (), "n_bins"),
        (lambda: cal.histogram_binning(5, "equal"), (), "binning"),
        (lambda: cal.histogram_binning(5, closed="both"), (), "closed"),
        (lambda: cal.scaling_binning(0), (), "n_bins"),
        (lambda: cal.isotonic(inputs="log_probs"), (), "inputs"),
    ],
)
def test_nonparametric_bad_inputs(make, args, match):
    with pytest.raises(ValueError, match=match):
        make().fit(*args)
