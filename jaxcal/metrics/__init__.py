"""Calibration metrics and proper scoring rules (public namespace)."""

from jaxcal._core.binning import BinStats
from jaxcal._core.confidence import confidence_and_correctness
from jaxcal.metrics._corp import CorpCurve, corp_curve
from jaxcal.metrics._corp_decomposition import ScoreDecomposition, score_decomposition
from jaxcal.metrics._corp_murphy import MurphyDiagram, murphy_diagram
from jaxcal.metrics._ece import classwise_ece, ece, mce, top_label_ece
from jaxcal.metrics._ece_kde import ece_kde, kde_bandwidth, proper_calibration_error
from jaxcal.metrics._ece_sweep import ece_sweep
from jaxcal.metrics._edges import quantile_edges, uniform_edges
from jaxcal.metrics._mmce import mmce
from jaxcal.metrics._reliability import ReliabilityCurve, reliability_curve
from jaxcal.metrics._scoring import BrierDecomposition, brier_decomposition, brier_score, log_loss
from jaxcal.metrics._skce import skce
from jaxcal.metrics._smooth_ece import smooth_ece
from jaxcal.metrics._soft_ece import soft_ece
from jaxcal.metrics._ucme import ucme

__all__ = [
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
]
