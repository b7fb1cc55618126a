"""Plots: render with the Agg backend and check what was drawn against independent numbers.

Reliability-diagram markers against jaxcal.reliability_curve and a NumPy binning, Wilson
intervals against scipy.stats.binomtest, bands against the diagonal (calibrated data),
the cumulative path against a NumPy cumulative sum. Few shapes (N = 600, K in {1, 3}),
one n_bins and one n_resamples, so few compiles.
"""

import io
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.patches import StepPatch
from scipy.stats import binomtest

import jaxcal
from jaxcal.plot import (
    corp_diagram,
    cumulative_differences_plot,
    murphy_diagram,
    reliability_diagram,
)
from tests.helpers import assert_close

N, M, R = 600, 10, 200


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _binary(seed, power=1.0):
    """Scores in (0, 1); labels ~ Bernoulli(score ** power) (power 1: calibrated)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, size=N).astype(np.float32)
    y = (rng.uniform(size=N) < p.astype(np.float64) ** power).astype(np.int32)
    return p, y


def _multiclass(seed, k=3, sharpen=1.0):
    """Rows of a softmax; labels drawn from softmax(sharpen^-1 * logits) (1: calibrated)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(N, k)) * 2.0
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    q = np.exp(z / sharpen) / np.exp(z / sharpen).sum(1, keepdims=True)
    y = (rng.uniform(size=(N, 1)) > np.cumsum(q, 1)).sum(1).astype(np.int32)
    return p.astype(np.float32), np.minimum(y, k - 1)


def _numpy_bins(s, t, n_bins):
    """Right-closed uniform bins in float64: (count, mean score, mean target) per bin."""
    s = np.asarray(s, np.float64)
    idx = np.clip(np.ceil(s * n_bins).astype(int) - 1, 0, n_bins - 1)
    count = np.bincount(idx, minlength=n_bins)
    conf = np.bincount(idx, weights=s, minlength=n_bins) / np.maximum(count, 1)
    acc = np.bincount(idx, weights=np.asarray(t, float), minlength=n_bins) / np.maximum(count, 1)
    return count, conf, acc


def _markers(ax):
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "jaxcal-bins"]
    return np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)


def _all_markers(ax):
    return [
        (np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float))
        for ln in ax.get_lines()
        if ln.get_gid() == "jaxcal-bins"
    ]


def _bands(ax):
    """Per drawn band: {x: (low, high)} from the polygon's vertices."""
    out = []
    for c in ax.collections:
        if c.get_gid() == "jaxcal-band":
            v = c.get_paths()[0].vertices
            out.append({x: (v[v[:, 0] == x, 1].min(), v[v[:, 0] == x, 1].max()) for x in v[:, 0]})
    return out


def _counts(hist_ax):
    return [
        p for p in hist_ax.patches if isinstance(p, StepPatch) and p.get_gid() == "jaxcal-counts"
    ]


def test_binary_diagram_draws_one_marker_per_nonempty_bin():
    p, y = _binary(0)
    d = reliability_diagram(p, y, n_bins=M, n_resamples=R, label="model")
    count, conf, acc = _numpy_bins(p, y, M)
    x, yy = _markers(d.ax)
    nonempty = count > 0
    assert x.size == nonempty.sum()
    assert_close(x, conf[nonempty], rtol=1e-5)  # float32 bin means against float64
    assert_close(yy, acc[nonempty], rtol=1e-5)  # likewise
    curve = jaxcal.reliability_curve(p, y, n_bins=M)
    assert_close(x, np.asarray(curve.mean_confidence)[nonempty])
    # The histogram beneath: one step per bin, the bin counts, on the uniform edges.
    (stairs,) = _counts(d.hist_ax)
    values, edges, _ = stairs.get_data()
    np.testing.assert_array_equal(values, count)
    assert_close(edges, np.linspace(0, 1, M + 1), rtol=1e-7)  # edges are float32 values
    # Axis labels, the diagonal, the legend with the ECE of the same bins.
    assert d.ax.get_ylabel() == "observed frequency of the positive class"
    assert d.hist_ax.get_xlabel() == "predicted probability of the positive class"
    assert d.hist_ax.get_ylabel() == "count"
    assert any(ln.get_gid() == "jaxcal-diagonal" for ln in d.ax.get_lines())
    texts = [t.get_text() for t in d.ax.get_legend().get_texts()]
    assert sorted(texts) == sorted(
        [
            "perfectly calibrated",
            f"model (ECE = {float(jaxcal.ece(p, y, n_bins=M)):.4f})",
            "model: 95% band of a calibrated model",  # E3: every mark in the legend
        ]
    )
    assert d.figure is d.ax.figure


def test_wilson_intervals_match_scipy():
    p, y = _binary(1)
    d = reliability_diagram(p, y, n_bins=M, n_resamples=R)
    count, _, acc = _numpy_bins(p, y, M)
    (container,) = [c for c in d.ax.containers if isinstance(c, ErrorbarContainer)]
    segments = container.lines[2][0].get_segments()
    nonempty = np.flatnonzero(count > 0)
    assert len(segments) == nonempty.size
    for seg, b in zip(segments, nonempty, strict=True):
        k = round(acc[b] * count[b])
        ci = binomtest(k, int(count[b])).proportion_ci(confidence_level=0.95, method="wilson")
        assert_close(seg[:, 1], [ci.low, ci.high], atol=1e-5)  # float32 Wilson bounds


def test_bands_enclose_the_diagonal_and_calibrated_points():
    p, y = _binary(2)
    d = reliability_diagram(p, y, n_bins=M, n_resamples=R)
    x, acc = _markers(d.ax)
    (band,) = _bands(d.ax)
    low = np.array([band[v][0] for v in x])
    high = np.array([band[v][1] for v in x])
    assert np.all((low <= x) & (x <= high))  # the diagonal point (conf_b, conf_b)
    inside = (low <= acc) & (acc <= high)
    assert inside.mean() >= 0.8  # calibrated: about 95% of bins inside their band
    assert np.all(high - low > 0)


def test_bands_flag_a_miscalibrated_model():
    p, y = _binary(3, power=3.0)  # P(y = 1 | p) = p^3: far below the diagonal mid-range
    d = reliability_diagram(p, y, n_bins=M, n_resamples=R, intervals=False)
    x, acc = _markers(d.ax)
    (band,) = _bands(d.ax)
    low = np.array([band[v][0] for v in x])
    assert np.sum(acc < low) >= 4
    assert not any(isinstance(c, ErrorbarContainer) for c in d.ax.containers)


def test_confidence_diagram_and_overlay_of_several_models():
    p, y = _multiclass(4)
    q, _ = _multiclass(4, sharpen=2.0)  # same labels, an over-confident model
    d = reliability_diagram({"good": p, "sharp": q}, y, n_bins=M, n_resamples=R)
    texts = [t.get_text() for t in d.ax.get_legend().get_texts()]
    assert "perfectly calibrated" in texts
    for name, probs in zip(("good", "sharp"), (p, q), strict=True):
        assert f"{name} (ECE = {float(jaxcal.ece(probs, y, n_bins=M)):.4f})" in texts
        assert f"{name}: 95% band of a calibrated model" in texts
    assert (
        d.ax.get_xlabel() == "" and d.hist_ax.get_xlabel() == "confidence (top-label probability)"
    )
    assert d.ax.get_ylabel() == "accuracy"
    drawn = _all_markers(d.ax)
    conf, correct = jaxcal.confidence_and_correctness(q, y)
    count, mean_conf, mean_acc = _numpy_bins(conf, correct, M)
    # The drawn markers are float32 bin means (as float64), the oracle float64 means.
    assert_close(drawn[1][0], mean_conf[count > 0], rtol=1e-5)
    assert_close(drawn[1][1], mean_acc[count > 0], rtol=1e-5)
    n_axes = len(d.figure.axes)
    # A third model on the same axes: same histogram panel, next colour, legend of 7 (the
    # diagonal, then each model's markers and band).
    again = reliability_diagram(p**1.0, y, n_bins=M, n_resamples=R, ax=d.ax, label="third")
    assert again.ax is d.ax and again.hist_ax is d.hist_ax and len(d.figure.axes) == n_axes
    assert len(d.ax.get_legend().get_texts()) == 7
    colors = [ln.get_color() for ln in d.ax.get_lines() if ln.get_gid() == "jaxcal-bins"]
    assert colors == ["C0", "C1", "C2"]
    assert len(_counts(d.hist_ax)) == 3 and len(_bands(d.ax)) == 3


def test_classwise_draws_one_panel_per_class():
    p, y = _multiclass(5)
    d = reliability_diagram(p, y, kind="classwise", n_bins=M, n_resamples=R)
    assert d.ax.shape == (3,) and d.hist_ax.shape == (3,)
    for k in range(3):
        count, conf, _ = _numpy_bins(p[:, k], y == k, M)
        x, _ = _markers(d.ax[k])
        assert_close(x, conf[count > 0], rtol=1e-5)  # float32 bin means against float64
        assert d.ax[k].get_title() == f"class {k}"
        texts = [t.get_text() for t in d.ax[k].get_legend().get_texts()]
        assert f"ECE = {float(jaxcal.ece(p[:, k], y == k, n_bins=M)):.4f}" in texts


def test_binary_kind_on_two_columns_equals_the_one_column_diagram():
    p, y = _binary(6)
    a = reliability_diagram(p, y, n_bins=M, n_resamples=R, show_histogram=False)
    b = reliability_diagram(
        np.stack([1 - p, p], 1), y, kind="binary", n_bins=M, n_resamples=R, show_histogram=False
    )
    assert a.hist_ax is None and b.hist_ax is None
    assert a.ax.get_xlabel() == "predicted probability of the positive class"
    assert_close(_markers(a.ax)[0], _markers(b.ax)[0], rtol=1e-6)  # 1 - (1 - p) rounds


def test_logit_axis_and_quantile_bins_render_without_warnings():
    p, y = _multiclass(7, sharpen=0.3)  # confidences near 1, bins with accuracy 1
    d = reliability_diagram(p, y, binning="quantile", n_bins=M, n_resamples=R, logit_axis=True)
    assert d.ax.get_xscale() == "logit" and d.ax.get_yscale() == "logit"
    x, yy = _markers(d.ax)
    assert x.size == M and np.all((0 < yy) & (yy < 1)) and np.all((0 < x) & (x < 1))
    (stairs,) = _counts(d.hist_ax)
    assert stairs.get_data().values.sum() == N  # equal-mass bins hold every sample
    ece = float(jaxcal.ece(p, y, n_bins=M, binning="quantile"))
    assert f"ECE = {ece:.4f}" in [t.get_text() for t in d.ax.get_legend().get_texts()]
    buf = io.BytesIO()
    d.figure.savefig(buf, format="png")  # warnings are errors in this suite
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n" and len(buf.getvalue()) > 10_000


def test_cumulative_plot_draws_the_path_and_its_p_values():
    p, y = _binary(8)
    ax = cumulative_differences_plot(p, y, label="model")
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "jaxcal-cumulative"]
    order = np.argsort(p, kind="stable")
    expected = np.concatenate([[0], np.cumsum(y[order] - p[order].astype(np.float64)) / N])
    assert_close(np.asarray(line.get_xdata()), np.arange(N + 1) / N, atol=1e-6)  # float32 k/N
    assert_close(np.asarray(line.get_ydata()), expected, atol=1e-5)  # float32 running sum
    ks, kuiper = jaxcal.ks_test(p, y), jaxcal.kuiper_test(p, y)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    text = f"model: KS p = {float(ks.p_value):.3g}, Kuiper p = {float(kuiper.p_value):.3g}"
    assert text in texts
    # The triangle at the origin spans +-2 sigma, sigma = sqrt(sum s(1 - s)) / N.
    (tri,) = [c for c in ax.patches if c.get_gid() == "jaxcal-triangle"]
    sigma = np.sqrt(np.sum(p.astype(np.float64) * (1 - p))) / N
    heights = tri.get_xy()[:, 1]
    # sigma is computed in float32 (drawn as float64), the oracle in float64.
    assert_close([heights.min(), heights.max()], [-2 * sigma, 2 * sigma], rtol=1e-5)


def test_cumulative_plot_shows_tiny_p_values_as_powers_of_ten():
    p, y = _binary(9, power=3.0)
    q, _ = _binary(9)
    ax = cumulative_differences_plot({"bad": p, "good": q}, y)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    bad = next(t for t in texts if t.startswith("bad: KS p = "))
    assert "e-" in bad and "p = 0," not in bad
    log10_p = float(jaxcal.log_brownian_max_sf(jaxcal.ks_test(p, y).statistic)) / np.log(10)
    assert f"e{int(np.floor(log10_p))}" in bad
    assert any(t.startswith("good: KS p = ") for t in texts)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "bars"}, "kind"),
        ({"n_bins": 0}, "n_bins"),
        ({"confidence": 1.5}, "confidence"),
        ({"interval_method": "exact"}, "interval_method"),
        ({"bands": "yes"}, "bands"),
        ({"n_resamples": 0}, "n_resamples"),
    ],
)
def test_bad_options_raise(kwargs, message):
    p, y = _binary(0)
    with pytest.raises(ValueError, match=message):
        reliability_diagram(p, y, **kwargs)


def test_bad_inputs_raise():
    p, y = _multiclass(0)
    with pytest.raises(ValueError, match='kind="binary"'):
        reliability_diagram(p, y, kind="binary")
    with pytest.raises(ValueError, match="labels"):
        reliability_diagram(p, y[:-1])
    with pytest.raises(ValueError, match="mapping"):
        reliability_diagram({}, y)
    with pytest.raises(ValueError, match="label"):
        reliability_diagram({"a": p}, y, label="b")
    two = p[:, :2] / p[:, :2].sum(1, keepdims=True)
    with pytest.raises(ValueError, match="same number of classes"):
        reliability_diagram({"a": p, "b": two}, y % 2, kind="classwise")
    _, axes = plt.subplots(1, 2)
    with pytest.raises(ValueError, match="3 Axes"):
        reliability_diagram(p, y, kind="classwise", ax=axes)


def test_matplotlib_is_imported_lazily():
    code = "import sys, jaxcal, jaxcal.plot, jaxcal.cli; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cumulative_plot_of_certain_scores_has_no_nan():
    """sigma = 0: p-values 1 (labels agree with 0/1 scores) or 0 (they do not); no triangle."""
    s = np.array([0.0, 1.0, 1.0, 0.0], np.float32)
    ax = cumulative_differences_plot({"agree": s, "disagree": 1 - s}, np.array([0, 1, 1, 0]))
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(texts) == [
        "agree: KS p = 1, Kuiper p = 1",
        "disagree: KS p = 0, Kuiper p = 0",
        "perfectly calibrated (C = 0)",
    ]
    assert not [c for c in ax.patches if c.get_gid() == "jaxcal-triangle"]
    ax.figure.savefig(io.BytesIO(), format="png")


def test_corp_diagram_draws_curve_band_histogram_and_overlays():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=N)
    y = (rng.uniform(size=N) < p).astype(np.int32)
    d = corp_diagram({"a": p, "b": p**2}, y, n_resamples=20)
    gids = [artist.get_gid() for artist in d.ax.get_children()]
    assert gids.count("jaxcal-corp") == 2 and gids.count("jaxcal-band") == 2
    texts = [t.get_text() for t in d.ax.get_legend().get_texts()]
    assert sum(t.startswith("a: Brier: MCB =") for t in texts) == 1
    assert sum("UNC =" in t for t in texts) == 2
    assert {"perfectly calibrated", "a: 90% band of a calibrated model"} <= set(texts)
    assert d.hist_ax is not None
    curve = jaxcal.corp_curve(p, y)
    line = next(a for a in d.ax.get_lines() if a.get_gid() == "jaxcal-corp")
    n = int(curve.size)
    assert_close(line.get_ydata(), np.asarray(curve.calibrated)[:n].astype(np.float64))
    plain = corp_diagram(p, y, bands=None, show_histogram=False, score="log")
    assert plain.hist_ax is None
    assert all(a.get_gid() != "jaxcal-band" for a in plain.ax.get_children())
    with pytest.raises(ValueError, match="`bands`"):
        corp_diagram(p, y, bands="wide")


def test_murphy_diagram_plots_the_library_values():
    rng = np.random.default_rng(1)
    y = (rng.uniform(size=N) < 0.3).astype(np.int32)
    p = np.where(y == 1, 0.7, 0.2)
    ax = murphy_diagram(p, y, label="model", n_thresholds=9)
    (line,) = [a for a in ax.get_lines() if a.get_gid() == "jaxcal-murphy"]
    expected = np.asarray(jaxcal.murphy_diagram(p, y, n_thresholds=9).scores, np.float64)
    assert_close(line.get_ydata(), expected)


@pytest.mark.parametrize(
    ("key", "match"),
    [
        (None, r"`key` must be a JAX PRNG key .*or an int seed; got None"),
        ("a", r"`key` must be a JAX PRNG key .*or an int seed; got 'a'"),
        (2**70, r"`key` as an int seed must lie in \[0, 2\*\*63\)"),
        (-1, r"`key` as an int seed must lie in \[0, 2\*\*63\)"),
    ],
)
def test_plot_keys_checked_as_the_stats_check_them(key, match):
    # D18: plot keys None, str or 2**70 gave raw JAX TypeError / OverflowError. Plots take
    # int seeds (their default 0 draws the same figure each time); stats take keys only.
    probs = np.array([0.2, 0.7, 0.9, 0.4])
    with pytest.raises(ValueError, match=match):
        reliability_diagram(probs, np.array([0, 1, 1, 0]), key=key)
    plt.close("all")


@pytest.mark.parametrize(
    "draw",
    [
        lambda p, y, b, t: reliability_diagram(p, y, n_bins=M, n_resamples=R),
        lambda p, y, b, t: reliability_diagram(b, t, n_bins=M, n_resamples=R),
        lambda p, y, b, t: cumulative_differences_plot(b, t),
        lambda p, y, b, t: corp_diagram(b, t, n_resamples=R),
        lambda p, y, b, t: murphy_diagram(b, t),
    ],
    ids=["reliability", "reliability_binary", "cumulative", "corp", "murphy"],
)
def test_a_second_plot_compiles_nothing(draw):
    """Plots call jaxcal's kernels, whose programs are kept by shape (issue 30): the
    second figure of data of the same shapes compiles nothing."""
    import jax

    first, second = (_multiclass(0), _binary(1)), (_multiclass(2), _binary(3))
    draw(*first[0], *first[1])
    compiles = []

    def listen(event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        draw(*second[0], *second[1])
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert not compiles


# ---------------------------------------------- counts on a linear axis, marks named (E2, E3)


def test_near_uniform_counts_on_a_linear_axis_from_zero():
    """E2: on a log axis from 2.35e2 a bin of 235 looked empty next to one of 305."""
    p, y = _binary(20)  # uniform scores: every bin holds 50 to 70 of the 600
    for d in (
        reliability_diagram(p, y, n_bins=M, n_resamples=R),
        corp_diagram(p, y, n_resamples=20),
    ):
        assert d.hist_ax.get_yscale() == "linear" and d.hist_ax.get_ylabel() == "count"
        low, high = d.hist_ax.get_ylim()
        if _counts(d.hist_ax):  # the reliability diagram's steps
            tallest = max(c.get_data().values.max() for c in _counts(d.hist_ax))
        else:  # the CORP diagram's bars
            tallest = max(b.get_height() for b in d.hist_ax.patches)
        assert low == 0 and high >= tallest > 0


def test_counts_spanning_decades_on_a_labelled_log_axis():
    rng = np.random.default_rng(21)
    p = np.concatenate([rng.uniform(0.0, 0.1, N - 5), rng.uniform(0.9, 1.0, 5)])
    y = (rng.uniform(size=N) < p).astype(np.int32)  # bins of 595 and of 5 samples
    d = reliability_diagram(p.astype(np.float32), y, n_bins=M, n_resamples=R)
    assert d.hist_ax.get_yscale() == "log" and d.hist_ax.get_ylabel() == "count (log scale)"
    # A second model of balanced counts on the same axes keeps the log scale (both shown).
    reliability_diagram(_binary(22)[0], y, n_bins=M, n_resamples=R, ax=d.ax, label="b")
    assert d.hist_ax.get_yscale() == "log"


def _unnamed_marks(ax):
    """The lines, bands and patches of a panel that the legend does not name."""
    marks = [*ax.get_lines(), *ax.collections, *ax.patches]
    return [m for m in marks if m.get_label().startswith("_") and m.get_visible()]


def test_every_mark_is_in_the_legend():
    """E3: the cumulative plot's +-2 sigma triangle and the bands had no legend entry."""
    p, y = _binary(23)
    ax = cumulative_differences_plot(p, y, label="model")
    assert not _unnamed_marks(ax)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("±2σ of C_N under calibration") for t in texts)
    d = reliability_diagram(p, y, n_bins=M, n_resamples=R)
    # matplotlib's error bars are parts of the markers' legend entry (an ErrorbarContainer).
    bars = {id(a) for c in d.ax.containers for part in c for a in np.atleast_1d(part)}
    assert not [m for m in _unnamed_marks(d.ax) if id(m) not in bars]
    assert not _unnamed_marks(corp_diagram(p, y, n_resamples=20).ax)


def test_score_axis_labels_do_not_overlap():
    """E3: "0.6" and "0.999" sat 0.06 of the axis apart on the demo's GaussianNB."""
    data = np.load("jaxcal/data/digits_gaussian_nb.npz")
    rng = np.random.default_rng(24)
    near_one = 1 - rng.beta(0.3, 8, N)  # scores crowding near 1: 0.9, 0.95, 0.99, 0.999
    for scores, labels, least in (
        (data["probs"], data["labels"], 1),
        (near_one, (rng.uniform(size=N) < near_one).astype(np.int32), 3),
    ):
        ax = cumulative_differences_plot(scores, labels)
        ax.figure.canvas.draw()
        (top,) = [c for c in ax.child_axes if c.get_xlabel() == "score ≤"]
        boxes = [t.get_window_extent() for t in top.get_xticklabels() if t.get_text()]
        assert len(boxes) >= least
        # At least 20 pixels (~2.5 characters of the small font) between two labels: the
        # demo's 0.6 and 0.999 were 14 apart, 0.999 and 0.9999 here 7.
        for left, right in itertools.pairwise(boxes):
            assert right.x0 - left.x1 >= 20, (left, right)
