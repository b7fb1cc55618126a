"""Tygert's cumulative-differences plot with its KS and Kuiper p-values."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jaxcal._core.checks import check_option, check_positive_int
from jaxcal.plot._axes import AXES_STATE, named_models, next_model, pyplot
from jaxcal.stats._paths.brownian import log_brownian_max_sf, log_brownian_range_sf
from jaxcal.stats._paths.cumulative import calibration_tests, cumulative_differences


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
            # Room for both labels ("0.6" and "0.999" overlapped 0.06 apart, finding E3):
            # about 0.025 of the axis per character, in the small font.
            room = 0.025 * max(len(f"{v:g}"), len(f"{ticks[-1][1]:g}")) if ticks else 0
            if not ticks or pos - ticks[-1][0] >= max(room, 0.06):
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
    that ends beyond it is unusual for a calibrated model (the legend names it, and the
    dashed zero line). The legend gives the Kolmogorov-Smirnov and Kuiper p-values (:func:`jaxcal.calibration_tests`; tiny
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
    plt = pyplot()
    new_figure = ax is None
    if new_figure:
        _, ax = plt.subplots(figsize=(6.0, 4.8))
    state = AXES_STATE.setdefault(ax, {"hist_ax": None, "n_models": 0})
    for name, s in named_models(scores, label):
        path = cumulative_differences(s, labels, weights=weights)
        tests = calibration_tests(s, labels, weights=weights)
        x = np.asarray(path.abscissa, dtype=np.float64)
        c = np.asarray(path.differences, dtype=np.float64)
        sigma = float(path.sigma)
        ks, kuiper = tests.ks, tests.kuiper
        ks_p = _p_text(float(ks.p_value), float(log_brownian_max_sf(ks.statistic)))
        kuiper_p = _p_text(float(kuiper.p_value), float(log_brownian_range_sf(kuiper.statistic)))
        color, first = next_model(state)
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
            ax.axhline(0, color="0.5", lw=0.8, ls="--", label="perfectly calibrated (C = 0)")
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
                    label=f"±2σ of C_N under calibration (σ = {sigma:.3g})",
                )
            if n_score_ticks:
                _score_axis(ax, np.asarray(path.scores, dtype=np.float64), x, n_score_ticks)
        ax.legend(loc="best", fontsize="small")
    if new_figure:
        ax.figure.tight_layout()
    return ax
