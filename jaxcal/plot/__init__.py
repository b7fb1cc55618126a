"""Reliability diagrams and cumulative-differences plots (matplotlib, the ``plot`` extra).

matplotlib is imported inside the functions, never at import time, and nothing in the core
of jaxcal imports this module: ``pip install jaxcal`` works without matplotlib, and
``pip install "jaxcal[plot]"`` adds it. The functions draw on a given ``ax`` or on a new
figure and never call ``plt.show()``; with the non-interactive Agg backend
(``matplotlib.use("Agg")``) they render to files only.

Everything drawn is computed by jaxcal's own kernels: the per-bin statistics and their
binomial intervals by :func:`jaxcal.stats.reliability_intervals` (binned exactly as
:func:`jaxcal.ece`), the consistency bands by :func:`jaxcal.stats.consistency_bands`, the
ECE in the legend by :func:`jaxcal.ece`, the cumulative path and its tests by
:func:`jaxcal.cumulative_differences` and :func:`jaxcal.calibration_tests`.

Modules: ``_axes`` (pyplot on demand, models by name, each Axes' drawing state),
``_bins`` (the numbers of a reliability diagram), ``_reliability`` (drawing it),
``_cumulative`` (the cumulative-differences plot).
"""

from jaxcal.plot._bins import KINDS as KINDS  # the values of reliability_diagram(kind=)
from jaxcal.plot._cumulative import cumulative_differences_plot
from jaxcal.plot._reliability import ReliabilityDiagram, reliability_diagram

__all__ = ["ReliabilityDiagram", "cumulative_differences_plot", "reliability_diagram"]
