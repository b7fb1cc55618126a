"""The reliability diagram: markers, intervals, consistency bands and bin histogram."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxcal._core.binning import check_binning
from jaxcal._core.checks import check_option, check_positive_float, check_positive_int
from jaxcal.plot._axes import as_key, hist_axes, named_models, next_model, pyplot, set_count_scale
from jaxcal.plot._bins import KINDS, BinSummary, Panel, bin_summary, binary_panels
from jaxcal.stats._resampling.intervals import INTERVAL_METHODS


class ReliabilityDiagram(NamedTuple):
    """What :func:`~jaxcal.plot.reliability_diagram` drew.

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


def _logit_floor(summaries: list[BinSummary]) -> float:
    """Distance from 0 and 1 at which a logit diagram stops (0 and 1 lie at infinity)."""
    values = np.concatenate(
        [np.concatenate([s.confidence, s.accuracy, s.band_low, s.band_high]) for s in summaries]
    )
    inner = values[np.isfinite(values) & (values > 0) & (values < 1)]
    if inner.size == 0:
        return 1e-3
    return float(np.clip(min(inner.min(), 1 - inner.max()) / 2, 1e-6, 0.05))


def _draw_panel(
    ax, state, panel: Panel, summary: BinSummary, name, *, bands, intervals, confidence
):
    color, first = next_model(state)
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
            label=f"{'' if name is None else name + ': '}{round(100 * confidence)}% band of a "
            "calibrated model",
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
    # Upper left: over-confident models (the common case) put their points below the
    # diagonal, where "best" could still land the legend on them (N13).
    ax.legend(loc="upper left", fontsize="small")
    if hist_ax is not None:
        edges = shown(summary.edges)
        hist_ax.stairs(
            summary.counts, edges, color=color, fill=True, alpha=0.25, gid="jaxcal-counts"
        )
        hist_ax.stairs(summary.counts, edges, color=color, lw=1)
        set_count_scale(state, summary.counts)
        if first:
            hist_ax.set_xlabel(panel.xlabel)
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
    histogram's count axis is linear from 0, logarithmic (and labelled so) only when the
    counts span two decades or more; every mark is in the legend; on a logit axis,
    frequencies of exactly 0 or 1 are drawn at the edge of the plot.

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
      key: a JAX PRNG key or an int seed in [0, 2**63) for the bands (default 0: the same figure on
        every call).

    Returns:
      :class:`~jaxcal.plot.ReliabilityDiagram` ``(figure, ax, hist_ax)``.

    Example:
      >>> import matplotlib
      >>> matplotlib.use("Agg")
      >>> import numpy as np
      >>> from jaxcal.plot import reliability_diagram
      >>> rng = np.random.default_rng(0)
      >>> p = rng.uniform(size=200)
      >>> y = (rng.uniform(size=200) < p).astype(np.int32)
      >>> d = reliability_diagram(p, y, n_bins=5, label="model", n_resamples=100)
      >>> texts = [t.get_text() for t in d.ax.get_legend().get_texts()]
      >>> sorted(t[:13] for t in texts)  # the markers, their band, the diagonal
      ['model (ECE = ', 'model: 95% ba', 'perfectly cal']
      >>> import io
      >>> d.figure.savefig(io.BytesIO(), format="png")

    References:
      DeGroot & Fienberg (1983); Bröcker & Smith (2007), "Increasing the reliability of
      reliability diagrams", Weather and Forecasting 22(3); Wilson (1927), "Probable
      inference, the law of succession, and statistical inference", JASA 22(158).
    """
    n_bins = check_binning(n_bins, binning, closed, probs)
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
    key = as_key(key)
    models = [(name, *binary_panels(p, labels, kind)) for name, p in named_models(probs, label)]
    kinds = {k for _, k, _ in models}
    n_panels = {len(panels) for _, _, panels in models}
    if len(kinds) > 1 or len(n_panels) > 1:
        raise ValueError(
            "every model in `probs` must give the same panels: the same number of classes "
            'for kind="classwise", and all 1-D or all 2-D when `kind` is None.'
        )
    (n_panel,) = n_panels
    plt = pyplot()
    if ax is None:
        fig, axes = _new_axes(plt, n_panel, show_histogram)
    else:
        axes = np.atleast_1d(np.asarray(ax, dtype=object)).ravel()
        if axes.size != n_panel:
            raise ValueError(f"`ax` must hold {n_panel} Axes for this kind; got {axes.size}.")
        fig = axes[0].figure
    states = [hist_axes(a, show_histogram) for a in axes]
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
    for name, _, model_panels in models:
        for a, state, panel in zip(axes, states, model_panels, strict=True):
            key, sub = jax.random.split(key)
            drawn.append((a, state, panel, bin_summary(panel, key=sub, **options), name))
    for state in states:
        if logit_axis and state["n_models"] == 0:
            state["logit_floor"] = _logit_floor([d[3] for d in drawn if d[1] is state])
    for a, state, panel, summary, name in drawn:
        _draw_panel(
            a, state, panel, summary, name, bands=bands, intervals=intervals, confidence=confidence
        )
    hist = [s["hist_ax"] for s in states]
    if n_panel == 1:
        return ReliabilityDiagram(fig, axes[0], hist[0])
    if ax is None:
        fig.tight_layout()
    return ReliabilityDiagram(fig, axes, None if hist[0] is None else np.array(hist, dtype=object))
