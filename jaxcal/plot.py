"""Reliability diagrams and cumulative-differences plots (matplotlib, the ``plot`` extra).

matplotlib is imported inside the functions, never at import time, and nothing in the core
of jaxcal imports this module: ``pip install jaxcal`` works without matplotlib, and
``pip install "jaxcal[plot]"`` adds it. The functions draw on a given ``ax`` or on a new
figure and never call ``plt.show()``; with the non-interactive Agg backend
(``matplotlib.use("Agg")``) they render to files only.

Everything drawn is computed by jaxcal's own kernels: the per-bin statistics and their
binomial intervals by :func:`jaxcal.stats.reliability_intervals` (binned exactly as
:func:`jaxcal.ece`), the consistency bands by :func:`jaxcal.stats.consistency_bands`, the
cumulative path and its tests by :func:`jaxcal.cumulative_differences` and
:func:`jaxcal.calibration_tests`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._binning import check_binning
from jaxcal._checks import (
    check_option,
    check_positive_float,
    check_positive_int,
    check_probs_labels,
)
from jaxcal._confidence import confidence_and_correctness
from jaxcal._cumulative import calibration_tests, cumulative_differences
from jaxcal._intervals import INTERVAL_METHODS, consistency_bands, reliability_intervals

KINDS = ("confidence", "binary", "classwise")

# Per main Axes: the histogram Axes beneath it and how many models are drawn on it, so
# that repeated calls on the same ``ax`` overlay models in new colours.
_AXES_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class ReliabilityDiagram(NamedTuple):
    """What :func:`reliability_diagram` drew.

    Attributes:
      figure: the matplotlib ``Figure``.
      ax: the diagram's ``Axes`` (``kind="classwise"``: a NumPy array of them, one per
        class). Pass it back as ``ax=`` to overlay another model.
      hist_ax: the bin-count histogram's ``Axes`` beneath ``ax`` (array for classwise),
        or ``None`` with ``show_histogram=False``.
    """

    figure: Any
    ax: Any
    hist_ax: Any


class _BinSummary(NamedTuple):
    """Per-bin numbers of one model in one panel (host NumPy arrays over non-empty bins)."""

    edges: np.ndarray
    counts: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    interval_low: np.ndarray
    interval_high: np.ndarray
    band_low: np.ndarray
    band_high: np.ndarray
    ece: float


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            'jaxcal.plot needs matplotlib: pip install "jaxcal[plot]" (or matplotlib).'
        ) from err
    return plt


def _models(probs: Any, label: str | None) -> list[tuple[str | None, Any]]:
    """``[(name, probs)]`` from one array or a mapping name -> array."""
    if isinstance(probs, Mapping):
        if not probs:
            raise ValueError("`probs` must not be an empty mapping; give at least one model.")
        if label is not None:
            raise ValueError(
                "`label` must be None when `probs` is a mapping (its keys name models)."
            )
        return [(str(name), value) for name, value in probs.items()]
    return [(label, probs)]


def _key(key: Any) -> jax.Array:
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return jax.random.key(int(key))
    return key


# ----------------------------------------------------------------------------- panels


class _Panel(NamedTuple):
    """One binary reliability problem: scores (N,) against 0/1 targets (N,)."""

    scores: jax.Array
    targets: jax.Array
    xlabel: str
    ylabel: str
    title: str


def _panels(probs: Any, labels: Any, kind: str | None) -> tuple[str, list[_Panel]]:
    """Validate and reduce the predictions of one model to binary panels."""
    probs, labels, _ = check_probs_labels(probs, labels)
    if kind is None:
        kind = "binary" if probs.ndim == 1 else "confidence"
    check_option("kind", kind, KINDS)
    if kind == "confidence":
        conf, correct = confidence_and_correctness(probs, labels)
        panel = _Panel(
            conf,
            correct.astype(jnp.int32),
            "confidence (top-label probability)",
            "accuracy",
            "confidence reliability diagram",
        )
        return kind, [panel]
    if kind == "binary":
        if probs.ndim == 2:
            if probs.shape[1] != 2:
                raise ValueError(
                    f'kind="binary" needs (N,) or (N, 2) `probs`; got shape {probs.shape}. '
                    'Use kind="confidence" or kind="classwise" for K > 2 classes.'
                )
            probs = probs[:, 1]
        panel = _Panel(
            probs,
            labels,
            "predicted probability of the positive class",
            "observed frequency of the positive class",
            "reliability diagram",
        )
        return kind, [panel]
    if probs.ndim == 1:
        probs = jnp.stack([1 - probs, probs], axis=1)
    k = probs.shape[1]
    classes = jnp.arange(k, dtype=jnp.int32)
    targets = (labels[:, None] == classes[None, :]).astype(jnp.int32)
    return kind, [
        _Panel(
            probs[:, c],
            targets[:, c],
            f"predicted probability of class {c}",
            f"frequency of class {c}",
            f"class {c}",
        )
        for c in range(k)
    ]


def _summary(
    panel: _Panel,
    *,
    n_bins: int,
    binning: str,
    closed: str,
    bands: bool,
    interval_method: str,
    confidence: float,
    n_resamples: int,
    key: jax.Array,
) -> _BinSummary:
    """The per-bin numbers drawn for one panel (host arrays, non-empty bins only)."""
    binned = dict(n_bins=n_bins, binning=binning, closed=closed, confidence=confidence)
    rel = reliability_intervals(panel.scores, panel.targets, method=interval_method, **binned)
    counts = np.asarray(rel.counts)
    conf = np.asarray(rel.mean_confidence, dtype=np.float64)
    acc = np.asarray(rel.mean_accuracy, dtype=np.float64)
    ece = float(np.sum(counts / counts.sum() * np.abs(acc - conf)))
    if bands:
        band = consistency_bands(panel.scores, key=key, n_resamples=n_resamples, **binned)
        band_low, band_high = np.asarray(band.low), np.asarray(band.high)
    else:
        band_low = band_high = np.full(counts.shape, np.nan)
    keep = counts > 0
    return _BinSummary(
        edges=np.asarray(rel.edges, dtype=np.float64),
        counts=counts,
        confidence=conf[keep],
        accuracy=acc[keep],
        interval_low=np.asarray(rel.low, dtype=np.float64)[keep],
        interval_high=np.asarray(rel.high, dtype=np.float64)[keep],
        band_low=np.asarray(band_low, dtype=np.float64)[keep],
        band_high=np.asarray(band_high, dtype=np.float64)[keep],
        ece=ece,
    )


# ----------------------------------------------------------------------------- drawing


def _new_axes(plt, n_panels: int, show_histogram: bool):
    if n_panels == 1:
        fig, ax = plt.subplots(figsize=(5.5, 6.5 if show_histogram else 5.0))
        return fig, np.array([ax])
    cols = min(n_panels, 5)
    rows = math.ceil(n_panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.8 * rows), squeeze=False)
    for extra in axes.ravel()[n_panels:]:
        extra.set_visible(False)
    return fig, axes.ravel()[:n_panels]


def _hist_axes(ax, show_histogram: bool):
    """The histogram Axes under ``ax``, created on the first call (None if not wanted)."""
    state = _AXES_STATE.get(ax)
    if state is None:
        state = {"hist_ax": None, "n_models": 0}
        if show_histogram:
            from mpl_toolkits.axes_grid1 import make_axes_locatable

            hist_ax = make_axes_locatable(ax).append_axes("bottom", size="28%", pad=0.12, sharex=ax)
            hist_ax.set_gid("jaxcal-histogram")
            state["hist_ax"] = hist_ax
        _AXES_STATE[ax] = state
    return state


def _logit_floor(summaries: list[_BinSummary]) -> float:
    """Distance from 0 and 1 at which a logit diagram stops (0 and 1 lie at infinity)."""
    values = np.concatenate(
        [np.concatenate([s.confidence, s.accuracy, s.band_low, s.band_high]) for s in summaries]
    )
    inner = values[np.isfinite(values) & (values > 0) & (values < 1)]
    if inner.size == 0:
        return 1e-3
    return float(np.clip(min(inner.min(), 1 - inner.max()) / 2, 1e-6, 0.05))


def _draw_panel(ax, state, panel: _Panel, summary: _BinSummary, name, *, bands, intervals):
    color = f"C{state['n_models']}"
    first = state["n_models"] == 0
    state["n_models"] += 1
    hist_ax = state["hist_ax"]
    floor = state.get("logit_floor")

    def shown(v):  # logit axes: values at 0 or 1 are drawn at the edge of the plot
        v = np.asarray(v, dtype=np.float64)
        return v if floor is None else np.clip(v, floor, 1 - floor)

    if first:
        ends = shown([0.0, 1.0])
        ax.plot(
            ends,
            ends,
            ls="--",
            color="0.5",
            lw=1,
            gid="jaxcal-diagonal",
            label="perfectly calibrated",
        )
        ax.set_ylabel(panel.ylabel)
        ax.set_title(panel.title)
        if floor is not None:
            ax.set_xscale("logit")
            ax.set_yscale("logit")
        ax.set_xlim(*ends)
        ax.set_ylim(*ends)
        ax.grid(True, alpha=0.3)
    x, y = shown(summary.confidence), shown(summary.accuracy)
    if bands and x.size:
        ax.fill_between(
            x,
            shown(summary.band_low),
            shown(summary.band_high),
            color=color,
            alpha=0.18,
            lw=0,
            gid="jaxcal-band",
        )
    text = f"ECE = {summary.ece:.4f}"
    legend = text if name is None else f"{name} ({text})"
    style = dict(ms=4, lw=1, color=color, label=legend)
    if intervals:
        yerr = np.stack([y - shown(summary.interval_low), shown(summary.interval_high) - y])
        bars = ax.errorbar(x, y, yerr=np.maximum(yerr, 0), fmt="o-", capsize=2, **style)
        (line, *_) = bars.lines
        bars.lines[2][0].set_gid("jaxcal-intervals")
    else:
        (line,) = ax.plot(x, y, "o-", **style)
    line.set_gid("jaxcal-bins")
    ax.legend(loc="best", fontsize="small")
    if hist_ax is not None:
        edges = shown(summary.edges)
        hist_ax.stairs(
            summary.counts, edges, color=color, fill=True, alpha=0.25, gid="jaxcal-counts"
        )
        hist_ax.stairs(summary.counts, edges, color=color, lw=1)
        if first:
            hist_ax.set_yscale("log")
            hist_ax.set_xlabel(panel.xlabel)
            hist_ax.set_ylabel("count")
            ax.tick_params(labelbottom=False)
    elif first:
        ax.set_xlabel(panel.xlabel)


def reliability_diagram(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    binning: str = "uniform",
    kind: str | None = None,
    ax: Any = None,
    show_histogram: bool = True,
    bands: bool = True,
    intervals: bool = True,
    logit_axis: bool = False,
    label: str | None = None,
    interval_method: str = "wilson",
    closed: str = "right",
    confidence: float = 0.95,
    n_resamples: int = 1000,
    key: Any = 0,
) -> ReliabilityDiagram:
    """Reliability diagram with consistency bands, Wilson intervals and bin counts.

    For each non-empty bin a marker at (mean score, observed frequency); vertical error
    bars are the bin's Wilson score interval for the observed frequency at level
    ``confidence``; the shaded band is the Bröcker & Smith (2007) consistency band: the
    range of frequencies a *calibrated* model with these very predictions would show in
    each bin at that level (a marker outside the band is evidence of miscalibration in
    that bin). The dashed diagonal is perfect calibration, the panel beneath holds the
    number of samples per bin, and the legend gives each model's ECE with the same bins
    (``sum_b n_b / N |acc_b - conf_b|``, equal to :func:`jaxcal.ece`).

    Several models: pass a mapping ``{name: probs}`` (same ``labels``), or call again with
    ``ax=`` the ``ax`` of the first result (the labels may then differ); each model gets
    the next colour of the cycle, its own markers, band and histogram outline. With
    ``kind="classwise"`` a new figure holds a grid of K panels (five per row). The
    histogram's count axis is logarithmic; on a logit axis, frequencies of exactly 0 or 1
    are drawn at the edge of the plot.

    Args:
      probs: ``(N,)`` positive-class probabilities, ``(N, K)`` rows on the simplex, or a
        mapping of model names to such arrays.
      labels: ``(N,)`` integer labels (0/1, or in [0, K)).
      n_bins: number of bins M.
      binning: ``"uniform"`` or ``"quantile"`` (equal-mass), as :func:`jaxcal.ece`.
      kind: ``"confidence"``: top-label confidence against accuracy (2-D probs);
        ``"binary"``: positive-class probability against its frequency ((N,) or (N, 2));
        ``"classwise"``: one panel per class, column k against ``labels == k``. ``None``
        (default): ``"binary"`` for 1-D ``probs``, ``"confidence"`` for 2-D.
      ax: an Axes to draw on (``kind="classwise"``: an array of K Axes), e.g. the ``ax`` of
        an earlier result to overlay models; ``None``: a new figure.
      show_histogram: draw the bin-count histogram beneath the diagram.
      bands: draw the consistency bands.
      intervals: draw the binomial interval of each bin's observed frequency.
      logit_axis: logit scale on both axes (details near 0 and 1 become visible).
      label: the model's name in the legend (not with a mapping).
      interval_method: ``"wilson"`` (score interval) or ``"clopper-pearson"`` (exact).
      closed: bin edge convention, as :func:`jaxcal.ece`.
      confidence: level of the bands and intervals, in (0, 1).
      n_resamples: consistency resamples for the bands.
      key: a JAX PRNG key or an int seed for the bands (default 0: the same figure on
        every call).

    Returns:
      :class:`ReliabilityDiagram` ``(figure, ax, hist_ax)``.

    Example:
      >>> import matplotlib
      >>> matplotlib.use("Agg")
      >>> import numpy as np
      >>> from jaxcal.plot import reliability_diagram
      >>> rng = np.random.default_rng(0)
      >>> p = rng.uniform(size=200)
      >>> y = (rng.uniform(size=200) < p).astype(np.int32)
      >>> d = reliability_diagram(p, y, n_bins=5, label="model", n_resamples=100)
      >>> d.ax.get_legend().get_texts()[1].get_text()[:13]
      'model (ECE = '
      >>> import io
      >>> d.figure.savefig(io.BytesIO(), format="png")

    References:
      DeGroot & Fienberg (1983); Bröcker & Smith (2007), "Increasing the reliability of
      reliability diagrams", Weather and Forecasting 22(3); Wilson (1927), "Probable
      inference, the law of succession, and statistical inference", JASA 22(158).
    """
    n_bins = check_binning(n_bins, binning, closed)
    if kind is not None:
        check_option("kind", kind, KINDS)
    for name, flag in (
        ("show_histogram", show_histogram),
        ("bands", bands),
        ("intervals", intervals),
        ("logit_axis", logit_axis),
    ):
        check_option(name, flag, (False, True))
    confidence = check_positive_float("confidence", confidence)
    if not confidence < 1:
        raise ValueError(f"`confidence` must lie strictly between 0 and 1; got {confidence}.")
    check_option("interval_method", interval_method, INTERVAL_METHODS)
    n_resamples = check_positive_int("n_resamples", n_resamples)
    key = _key(key)
    models = [(name, *_panels(p, labels, kind)) for name, p in _models(probs, label)]
    kinds = {k for _, k, _ in models}
    n_panels = {len(panels) for _, _, panels in models}
    if len(kinds) > 1 or len(n_panels) > 1:
        raise ValueError(
            "every model in `probs` must give the same panels: the same number of classes "
            'for kind="classwise", and all 1-D or all 2-D when `kind` is None.'
        )
    (n_panel,) = n_panels
    plt = _pyplot()
    if ax is None:
        fig, axes = _new_axes(plt, n_panel, show_histogram)
    else:
        axes = np.atleast_1d(np.asarray(ax, dtype=object)).ravel()
        if axes.size != n_panel:
            raise ValueError(f"`ax` must hold {n_panel} Axes for this kind; got {axes.size}.")
        fig = axes[0].figure
    states = [_hist_axes(a, show_histogram) for a in axes]
    options = dict(
        n_bins=n_bins,
        binning=binning,
        closed=closed,
        bands=bands,
        interval_method=interval_method,
        confidence=confidence,
        n_resamples=n_resamples,
    )
    drawn = []
    for name, _, panels in models:
        for a, state, panel in zip(axes, states, panels, strict=True):
            key, sub = jax.random.split(key)
            drawn.append((a, state, panel, _summary(panel, key=sub, **options), name))
    for state in states:
        if logit_axis and state["n_models"] == 0:
            state["logit_floor"] = _logit_floor([d[3] for d in drawn if d[1] is state])
    for a, state, panel, summary, name in drawn:
        _draw_panel(a, state, panel, summary, name, bands=bands, intervals=intervals)
    hist = [s["hist_ax"] for s in states]
    if n_panel == 1:
        return ReliabilityDiagram(fig, axes[0], hist[0])
    if ax is None:
        fig.tight_layout()
    return ReliabilityDiagram(fig, axes, None if hist[0] is None else np.array(hist, dtype=object))


# ----------------------------------------------------------------------------- cumulative


def _p_text(p: float, log_p: float) -> str:
    """A p-value for a legend: 3 significant digits, or a power of ten when tiny."""
    if p >= 1e-4 or not math.isfinite(log_p):  # -inf: the data are impossible (sigma = 0)
        return f"{p:.3g}"
    exponent = log_p / math.log(10)
    mantissa = 10 ** (exponent - math.floor(exponent))
    return f"{mantissa:.1f}e{math.floor(exponent)}"


#: Candidate scores for the top axis of the cumulative plot.
_NICE_SCORES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999, 0.9999)


def _score_axis(ax, scores: np.ndarray, abscissa: np.ndarray, n_ticks: int) -> None:
    """Top axis: where the sorted scores pass round values (at most ``n_ticks`` labels)."""
    where = abscissa[1:]
    ticks: list[tuple[float, float]] = []
    for v in _NICE_SCORES:
        k = int(np.searchsorted(scores, v, side="right"))  # samples with score <= v
        if 0 < k < len(scores):
            pos = float(where[k - 1])
            if not ticks or pos - ticks[-1][0] >= 0.06:
                ticks.append((pos, v))
    if len(ticks) > n_ticks:
        step = math.ceil(len(ticks) / n_ticks)
        ticks = ticks[::step]
    top = ax.secondary_xaxis("top")
    top.set_xticks([p for p, _ in ticks], [f"{v:g}" for _, v in ticks])
    top.set_xlabel("score ≤", fontsize="small")


def cumulative_differences_plot(
    scores: Any,
    labels: Any,
    *,
    ax: Any = None,
    label: str | None = None,
    weights: Any = None,
    show_triangle: bool = True,
    n_score_ticks: int = 6,
) -> Any:
    """Tygert's cumulative plot: the cumulative differences with their KS and Kuiper tests.

    Draws the path ``C_k = (1/N) sum_{i<=k} (y_i - s_i)`` of
    :func:`jaxcal.cumulative_differences` (scores sorted ascending, ties aggregated)
    against ``k/N``. A calibrated model gives a path that wanders like a Brownian motion
    of scale sigma (sqrt(sum s(1 - s)) / N); miscalibration on a range of scores is a
    *slope* over that range (the slope is the average gap acc - conf there). The
    triangle at the origin has height 4 sigma (+-2 sigma), as in Tygert's plots: a path
    that ends beyond it is unusual for a calibrated model. The legend gives the
    Kolmogorov-Smirnov and Kuiper p-values (:func:`jaxcal.calibration_tests`; tiny
    values from the log survival functions, never a bare 0). The top axis shows the
    scores at those fractions of the data (first model).

    Args:
      scores: ``(N,)`` positive-class probabilities, ``(N, K)`` rows on the simplex (top
        confidence against correctness), or a mapping of model names to such arrays.
      labels: ``(N,)`` integer labels.
      ax: an Axes to draw on (another model's plot to overlay), or None: a new figure.
      label: the model's name in the legend (not with a mapping).
      weights: optional ``(N,)`` sample weights (Tygert's weighted variant).
      show_triangle: draw the +-2 sigma triangle at the origin.
      n_score_ticks: number of score ticks on the top axis (0 for none).

    Returns:
      The matplotlib ``Axes`` (its figure is ``ax.figure``).

    Example:
      >>> import matplotlib
      >>> matplotlib.use("Agg")
      >>> import numpy as np
      >>> from jaxcal.plot import cumulative_differences_plot
      >>> rng = np.random.default_rng(0)
      >>> p = rng.uniform(size=200)
      >>> y = (rng.uniform(size=200) < p).astype(np.int32)
      >>> ax = cumulative_differences_plot(p, y, label="model")
      >>> "KS p" in ax.get_legend().get_texts()[0].get_text()
      True

    References:
      Arrieta-Ibarra, Gujral, Tannen, Tygert & Xu (2022), "Metrics of calibration for
      probabilistic predictions", JMLR 23(351); Tygert (2021), "Plots of the cumulative
      differences between observed and expected values of ordered Bernoulli variates",
      arXiv:2006.02504.
    """
    check_option("show_triangle", show_triangle, (False, True))
    n_score_ticks = check_positive_int("n_score_ticks", n_score_ticks, minimum=0)
    plt = _pyplot()
    new_figure = ax is None
    if new_figure:
        _, ax = plt.subplots(figsize=(6.0, 4.8))
    state = _AXES_STATE.setdefault(ax, {"hist_ax": None, "n_models": 0})
    from jaxcal._brownian import log_brownian_max_sf, log_brownian_range_sf

    for name, s in _models(scores, label):
        path = cumulative_differences(s, labels, weights=weights)
        tests = calibration_tests(s, labels, weights=weights)
        x = np.asarray(path.abscissa, dtype=np.float64)
        c = np.asarray(path.differences, dtype=np.float64)
        sigma = float(path.sigma)
        ks, kuiper = tests.ks, tests.kuiper
        ks_p = _p_text(float(ks.p_value), float(log_brownian_max_sf(ks.statistic)))
        kuiper_p = _p_text(float(kuiper.p_value), float(log_brownian_range_sf(kuiper.statistic)))
        color = f"C{state['n_models']}"
        first = state["n_models"] == 0
        state["n_models"] += 1
        text = f"KS p = {ks_p}, Kuiper p = {kuiper_p}"
        ax.plot(
            x,
            c,
            color=color,
            lw=1.2,
            gid="jaxcal-cumulative",
            label=text if name is None else f"{name}: {text}",
        )
        if first:
            ax.axhline(0, color="0.5", lw=0.8, ls="--")
            ax.set_xlim(0, 1)
            ax.set_xlabel("k / N (samples sorted by score)")
            ax.set_ylabel("cumulative difference $C_k$ (labels − scores)")
            ax.set_title("cumulative differences")
            if show_triangle and sigma > 0:
                ax.fill(
                    [0, 0, 0.04],
                    [-2 * sigma, 2 * sigma, 0],
                    color="k",
                    alpha=0.8,
                    lw=0,
                    gid="jaxcal-triangle",
                )
            if n_score_ticks:
                _score_axis(ax, np.asarray(path.scores, dtype=np.float64), x, n_score_ticks)
        ax.legend(loc="best", fontsize="small")
    if new_figure:
        ax.figure.tight_layout()
    return ax
