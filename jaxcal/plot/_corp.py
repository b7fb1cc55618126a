"""The CORP reliability diagram and the Murphy diagram."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jaxcal._core.checks import check_option, check_positive_int
from jaxcal.metrics._corp import corp_curve
from jaxcal.metrics._corp_decomposition import SCORES, score_decomposition
from jaxcal.metrics._corp_murphy import murphy_diagram as murphy_values
from jaxcal.plot._axes import (
    AXES_STATE,
    as_key,
    hist_axes,
    named_models,
    next_model,
    pyplot,
    set_count_scale,
)
from jaxcal.plot._reliability import ReliabilityDiagram
from jaxcal.stats._resampling.corp import BAND_KINDS, corp_bands

SCORE_NAMES = {"brier": "Brier", "log": "log score"}


def _host(x, n):
    return np.asarray(x, dtype=np.float64)[:n]


def _draw_corp(ax, state, name, probs, labels, weights, *, bands, score, options):
    curve = corp_curve(probs, labels, weights=weights)
    n = int(curve.size)
    x, c = _host(curve.forecasts, n), _host(curve.calibrated, n)
    color, first = next_model(state)
    if first:
        ax.plot(
            [0, 1],
            [0, 1],
            ls="--",
            color="0.5",
            lw=1,
            gid="jaxcal-diagonal",
            label="perfectly calibrated",
        )
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_ylabel("CORP calibrated probability (PAV)")
        ax.set_title("CORP reliability diagram")
        ax.grid(True, alpha=0.3)
    if bands is not None:
        b = corp_bands(probs, labels, kind=bands, weights=weights, **options)
        what = "band of a calibrated model" if bands == "consistency" else "confidence band"
        level = round(100 * options["confidence"])
        ax.fill_between(
            x,
            _host(b.low, n),
            _host(b.high, n),
            color=color,
            alpha=0.2,
            lw=0,
            gid="jaxcal-band",
            label=f"{'' if name is None else name + ': '}{level}% {what}",
        )
    d = score_decomposition(probs, labels, score=score, reduction="top_label", weights=weights)
    text = (
        f"{SCORE_NAMES[score]}: MCB = {float(d.miscalibration):.4f}, DSC = {float(d.discrimination):.4f}, "
        f"UNC = {float(d.uncertainty):.4f}"
    )
    ax.plot(
        x,
        c,
        color=color,
        lw=1.5,
        gid="jaxcal-corp",
        label=text if name is None else f"{name}: {text}",
    )
    ax.legend(loc="upper left", fontsize="small")
    hist_ax = state["hist_ax"]
    if hist_ax is not None:
        counts = np.asarray(curve.counts)[:n]
        binned, _ = np.histogram(x, bins=50, range=(0, 1), weights=counts)
        hist_ax.hist(
            x, bins=50, range=(0, 1), weights=counts, color=color, alpha=0.3, gid="jaxcal-counts"
        )
        set_count_scale(state, binned)
        if first:
            hist_ax.set_xlabel("forecast")
            ax.tick_params(labelbottom=False)
    elif first:
        ax.set_xlabel("forecast")


def corp_diagram(
    probs: Any,
    labels: Any,
    *,
    ax: Any = None,
    bands: str | None = "consistency",
    show_histogram: bool = True,
    label: str | None = None,
    score: str = "brier",
    confidence: float = 0.9,
    n_resamples: int = 200,
    key: Any = 0,
    weights: Any = None,
) -> ReliabilityDiagram:
    """CORP reliability diagram: the PAV curve, its bands, the histogram and MCB/DSC/UNC.

    Draws the CORP curve of :func:`jaxcal.corp_curve` (the calibrated value at each
    distinct forecast, joined by straight lines: a staircase, flat within each PAV
    block) against the dashed diagonal, the band of :func:`jaxcal.stats.corp_bands`
    (``"consistency"``: where a calibrated model's curve would lie; ``"confidence"``:
    the bootstrap band of the curve; ``None``: no band), a histogram of the forecasts
    beneath, and in the legend the score decomposition of :func:`jaxcal.score_decomposition`
    (``score``; the same view as the curve). 1-D ``probs``: the positive class; 2-D: the
    top-label confidence against correctness. Several models: a mapping ``{name:
    probs}``, or call again with ``ax=`` the ``ax`` of the first result.

    Args:
      probs: ``(N,)`` or ``(N, K)`` predictions, or a mapping of model names to them.
      labels: ``(N,)`` integer labels.
      ax: an Axes to draw on; ``None``: a new figure.
      bands: ``"consistency"``, ``"confidence"`` or ``None``.
      show_histogram: draw the histogram of the forecasts beneath.
      label: the model's name in the legend (not with a mapping).
      score: ``"brier"`` or ``"log"``: the decomposition in the legend.
      confidence: level of the band (``reliabilitydiag``'s default 0.9).
      n_resamples: resamples of the band.
      key: a JAX PRNG key or an int seed in [0, 2**63) for the band (default 0: the same
        figure each call).
      weights: optional ``(N,)`` sample weights.

    Returns:
      :class:`~jaxcal.plot.ReliabilityDiagram` ``(figure, ax, hist_ax)``.

    Example:
      >>> import matplotlib
      >>> matplotlib.use("Agg")
      >>> import numpy as np
      >>> from jaxcal.plot import corp_diagram
      >>> rng = np.random.default_rng(0)
      >>> p = rng.uniform(size=300)
      >>> y = (rng.uniform(size=300) < p).astype(np.int32)
      >>> d = corp_diagram(p, y, label="model", n_resamples=50)
      >>> texts = [t.get_text() for t in d.ax.get_legend().get_texts()]
      >>> sorted(t[:21] for t in texts)  # the curve, its band, the diagonal
      ['model: 90% band of a ', 'model: Brier: MCB = 0', 'perfectly calibrated']

    References:
      Dimitriadis, Gneiting & Jordan (2021), "Stable reliability diagrams for
      probabilistic classifiers", PNAS 118(8) e2016191118.
    """
    if bands is not None:
        check_option("bands", bands, BAND_KINDS)
    check_option("show_histogram", show_histogram, (False, True))
    check_option("score", score, SCORES)
    n_resamples = check_positive_int("n_resamples", n_resamples)
    key = as_key(key)
    plt = pyplot()
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 6.5 if show_histogram else 5.0))
    else:
        fig = ax.figure
    state = hist_axes(ax, show_histogram)
    for name, p in named_models(probs, label):
        key, sub = jax.random.split(key)
        options = dict(key=sub, n_resamples=n_resamples, confidence=confidence)
        _draw_corp(ax, state, name, p, labels, weights, bands=bands, score=score, options=options)
    return ReliabilityDiagram(fig, ax, state["hist_ax"])


def murphy_diagram(
    probs: Any,
    labels: Any,
    *,
    ax: Any = None,
    label: str | None = None,
    thresholds: Any = None,
    n_thresholds: int = 99,
    reduction: str = "classwise",
    weights: Any = None,
) -> Any:
    """Murphy diagram: each model's mean elementary score against the threshold θ.

    The curves of :func:`jaxcal.murphy_diagram` (Ehm et al. 2016): lower is better at
    every θ; a model whose curve lies below another's everywhere is preferred by every
    proper scoring rule. Several models: a mapping ``{name: probs}`` or repeated calls
    with ``ax=``.

    Args:
      probs: ``(N,)`` or ``(N, K)`` predictions, or a mapping of model names to them.
      labels: ``(N,)`` integer labels.
      ax: an Axes to draw on; ``None``: a new figure.
      label: the model's name in the legend (not with a mapping).
      thresholds, n_thresholds, reduction, weights: as :func:`jaxcal.murphy_diagram`.

    Returns:
      The matplotlib ``Axes``.

    Example:
      >>> import matplotlib
      >>> matplotlib.use("Agg")
      >>> import numpy as np
      >>> from jaxcal.plot import murphy_diagram
      >>> rng = np.random.default_rng(0)
      >>> y = (rng.uniform(size=300) < 0.4).astype(np.int32)
      >>> ax = murphy_diagram({"sharp": np.where(y == 1, 0.8, 0.2), "flat": np.full(300, 0.4)}, y)
      >>> [t.get_text() for t in ax.get_legend().get_texts()]
      ['sharp', 'flat']

    References:
      Ehm, Gneiting, Jordan & Krüger (2016), "Of quantiles and expectiles: consistent
      scoring functions, Choquet representations and forecast rankings", JRSS B 78(3).
    """
    plt = pyplot()
    new_figure = ax is None
    if new_figure:
        _, ax = plt.subplots(figsize=(6.0, 4.5))
    state = AXES_STATE.setdefault(ax, {"hist_ax": None, "n_models": 0})
    for name, p in named_models(probs, label):
        m = murphy_values(
            p,
            labels,
            thresholds=thresholds,
            n_thresholds=n_thresholds,
            reduction=reduction,
            weights=weights,
        )
        color, first = next_model(state)
        ax.plot(
            np.asarray(m.thresholds),
            np.asarray(m.scores),
            color=color,
            lw=1.5,
            label=name,
            gid="jaxcal-murphy",
        )
        if first:
            ax.set_xlim(0, 1)
            ax.set_xlabel("threshold θ")
            ax.set_ylabel("mean elementary score")
            ax.set_title("Murphy diagram")
            ax.grid(True, alpha=0.3)
        if name is not None:
            ax.legend(loc="best", fontsize="small")
    if new_figure:
        ax.figure.tight_layout()
    return ax
