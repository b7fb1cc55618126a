"""Calibration metrics and proper scoring rules (public namespace)."""

from jaxcal._binning import BinStats
from jaxcal._confidence import confidence_and_correctness
from jaxcal._corp import CorpCurve, corp_curve
from jaxcal._decomposition import ScoreDecomposition, score_decomposition
from jaxcal._ece import classwise_ece, ece, mce, top_label_ece
from jaxcal._edges import quantile_edges, uniform_edges
from jaxcal._mmce import mmce
from jaxcal._murphy import MurphyDiagram, murphy_diagram
from jaxcal._reliability import ReliabilityCurve, reliability_curve
from jaxcal._scoring import BrierDecomposition, brier_decomposition, brier_score, log_loss
from jaxcal._smooth_ece import smooth_ece
from jaxcal._soft_ece import soft_ece

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
    "log_loss",
    "mce",
    "mmce",
    "murphy_diagram",
    "quantile_edges",
    "reliability_curve",
    "score_decomposition",
    "smooth_ece",
    "soft_ece",
    "top_label_ece",
    "uniform_edges",
]
