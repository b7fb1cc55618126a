"""Reliability, CORP, Murphy and cumulative-differences plots (matplotlib, the ``plot`` extra).

matplotlib is imported inside the functions, never at import time, and nothing in the core
of jaxcal imports this module: ``pip install jaxcal`` works without matplotlib, and
``pip install "jaxcal[plot]"`` adds it. The functions draw on a given ``ax`` or on a new
figure and never call ``plt.show()``; with the non-interactive Agg backend
(``matplotlib.use("Agg")``) they render to files only.

Everything drawn is computed by jaxcal's own kernels: the per-bin statistics and their
binomial intervals by :func:`jaxcal.stats.reliability_intervals` (binned exactly as
:func:`jaxcal.ece`), the consistency bands by :func:`jaxcal.stats.consistency_bands`, the
ECE in the legend by :func:`jaxcal.ece`, the cumulative path and its tests by
:func:`jaxcal.cumulative_differences` and :func:`jaxcal.calibration_tests`, the CORP curve,
its bands and decomposition by :func:`jaxcal.corp_curve`, :func:`jaxcal.stats.corp_bands` and
:func:`jaxcal.score_decomposition`, the Murphy diagram by :func:`jaxcal.murphy_diagram`.

Modules: ``_axes`` (pyplot on demand, models by name, each Axes' drawing state),
``_bins`` (the numbers of a reliability diagram), ``_reliability`` (drawing it),
``_cumulative`` (the cumulative-differences plot), ``_corp`` (the CORP and Murphy diagrams).
"""

from jaxcal.plot._bins import KINDS as KINDS  # the values of reliability_diagram(kind=)
from jaxcal.plot._corp import corp_diagram, murphy_diagram
from jaxcal.plot._cumulative import cumulative_differences_plot
from jaxcal.plot._reliability import ReliabilityDiagram, reliability_diagram

__all__ = [
    "ReliabilityDiagram",
    "corp_diagram",
    "cumulative_differences_plot",
    "murphy_diagram",
    "reliability_diagram",
]
