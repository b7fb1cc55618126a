"""jaxcal: measure, test and fix the calibration of probabilistic classifiers, in JAX."""

from jaxcal.metrics import (
    BinStats,
    BrierDecomposition,
    ReliabilityCurve,
    brier_decomposition,
    brier_score,
    classwise_ece,
    confidence_and_correctness,
    ece,
    log_loss,
    mce,
    quantile_edges,
    reliability_curve,
    top_label_ece,
    uniform_edges,
)

__version__ = "0.1.0"

__all__ = [
    "BinStats",
    "BrierDecomposition",
    "ReliabilityCurve",
    "__version__",
    "brier_decomposition",
    "brier_score",
    "classwise_ece",
    "confidence_and_correctness",
    "ece",
    "log_loss",
    "mce",
    "quantile_edges",
    "reliability_curve",
    "top_label_ece",
    "uniform_edges",
]
