"""jaxcal: measure, test and fix the calibration of probabilistic classifiers, in JAX.

The public namespaces (:mod:`jaxcal.metrics`, :mod:`jaxcal.stats`, ...) and the names
re-exported here (``jaxcal.ece``, ``jaxcal.kuiper_test``, ...) are loaded on first use
(PEP 562, as SciPy does): ``import jaxcal`` imports neither JAX's numerics nor any
namespace, so it costs about nothing beyond Python's start, and ``jaxcal.ece`` loads
:mod:`jaxcal.metrics` the first time it is read. ``from jaxcal import stats``,
``import jaxcal.metrics`` and ``dir(jaxcal)`` work as with eager imports. The tables below
are the whole mechanism: a new namespace is one line of ``_NAMESPACES``, a new top-level
name one entry of ``_EXPORTS``.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a few ms at start)

__version__ = "0.1.0"

#: The public namespaces ``jaxcal.NAME`` (each imported on first use).
_NAMESPACES = (
    "calibrators",
    "coverage",
    "losses",
    "metrics",
    "presets",
    "regression",
    "selective",
    "stats",
    "streaming",
)

#: The names re-exported at the top, by the namespace that defines them.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "_core.store": ("set_executable_store",),  # the process-wide switch of the store
    "calibrators": ("Calibrator",),
    "metrics": (
        "BinStats",
        "BrierDecomposition",
        "CorpCurve",
        "MurphyDiagram",
        "ReliabilityCurve",
        "ScoreDecomposition",
        "brier_decomposition",
        "brier_score",
        "classwise_ece",
        "confidence_and_correctness",
        "corp_curve",
        "ece",
        "ece_kde",
        "ece_sweep",
        "kde_bandwidth",
        "log_loss",
        "mce",
        "mmce",
        "murphy_diagram",
        "proper_calibration_error",
        "quantile_edges",
        "reliability_curve",
        "score_decomposition",
        "skce",
        "smooth_ece",
        "soft_ece",
        "top_label_ece",
        "ucme",
        "uniform_edges",
    ),
    "stats": (
        "ICI",
        "BinomialInterval",
        "BootstrapResult",
        "CalibrationRefinement",
        "CalibrationTests",
        "CMETestResult",
        "ConsistencyBands",
        "ConsistencyTestResult",
        "CorpBands",
        "CumulativeDifferences",
        "DecompositionIntervals",
        "L2ECEInterval",
        "PairedBootstrapResult",
        "ReliabilityIntervals",
        "SKCETestResult",
        "TCalResult",
        "TestResult",
        "bootstrap_ci",
        "brownian_max_cdf",
        "brownian_max_sf",
        "brownian_range_cdf",
        "brownian_range_sf",
        "calibration_refinement",
        "calibration_tests",
        "clopper_pearson_interval",
        "cme_test",
        "consistency_bands",
        "consistency_test",
        "corp_bands",
        "cumulative_differences",
        "ici",
        "ks_test",
        "kuiper_test",
        "l2_ece_interval",
        "log_brownian_max_sf",
        "log_brownian_range_sf",
        "paired_bootstrap",
        "reliability_intervals",
        "score_decomposition_ci",
        "skce_test",
        "spiegelhalter_test",
        "tcal_test",
        "tce",
        "wilson_interval",
    ),
}

_ORIGIN = {name: namespace for namespace, names in _EXPORTS.items() for name in names}

__all__ = sorted({*_NAMESPACES, *_ORIGIN, "__version__"})


def __getattr__(name: str) -> Any:
    """Import a namespace, or the namespace defining a re-exported name, on first use."""
    if name in _NAMESPACES:
        value = importlib.import_module(f"jaxcal.{name}")
    elif name in _ORIGIN:
        value = getattr(importlib.import_module(f"jaxcal.{_ORIGIN[name]}"), name)
    else:
        raise AttributeError(f"module 'jaxcal' has no attribute {name!r}")
    globals()[name] = value  # later reads are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # static checkers and the layout test see the namespaces
    from typing import Any

    from jaxcal import (  # noqa: F401
        calibrators,
        coverage,
        losses,
        metrics,
        presets,
        regression,
        selective,
        stats,
        streaming,
    )
