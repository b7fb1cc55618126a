"""Post-hoc calibrators as ``Calibrator(fit, apply)`` pairs of pure functions (optax style).

``params = cal.fit(x, labels, *, weights=None)`` and ``probs = cal.apply(params, x)``;
``fit`` jits and vmaps (its optimiser runs inside ``jax.lax`` loops), so many calibrators
(bootstrap replicates, folds, classes) fit in one call. Each calibrator states the space
of its input with ``inputs=`` (``"logits"``, ``"log_probs"``, ``"probs"``); nothing is
guessed from the values. :func:`~jaxcal.calibrators.to_probs` and :func:`~jaxcal.calibrators.to_logits` convert between spaces.

Multiclass on ``(N, K)``: :func:`~jaxcal.calibrators.temperature_scaling`, :func:`~jaxcal.calibrators.vector_scaling`,
:func:`~jaxcal.calibrators.matrix_scaling`, :func:`~jaxcal.calibrators.dirichlet`. Binary on ``(N,)`` scores:
:func:`~jaxcal.calibrators.platt_scaling`, :func:`~jaxcal.calibrators.beta_calibration`, :func:`~jaxcal.calibrators.histogram_binning`,
:func:`~jaxcal.calibrators.isotonic`, :func:`~jaxcal.calibrators.centred_isotonic`, :func:`~jaxcal.calibrators.scaling_binning`, :func:`~jaxcal.calibrators.venn_abers`
(with :func:`~jaxcal.calibrators.venn_abers_interval`). Reductions of multiclass to binary:
:func:`~jaxcal.calibrators.top_label`, :func:`~jaxcal.calibrators.classwise`.
"""

from jaxcal._core.isotonic import IsotonicParams
from jaxcal.calibrators._affine import AffineParams, dirichlet, matrix_scaling, vector_scaling
from jaxcal.calibrators._base import Calibrator, FitInfo, minimize
from jaxcal.calibrators._binary import BetaParams, PlattParams, beta_calibration, platt_scaling
from jaxcal.calibrators._centred_isotonic import centred_isotonic
from jaxcal.calibrators._inputs import to_logits, to_probs
from jaxcal.calibrators._nonparametric import (
    HistogramParams,
    ScalingBinningParams,
    histogram_binning,
    isotonic,
    scaling_binning,
)
from jaxcal.calibrators._reductions import classwise, top_label
from jaxcal.calibrators._temperature import TemperatureParams, temperature_scaling
from jaxcal.calibrators._venn_abers import VennAbersParams, venn_abers, venn_abers_interval

__all__ = [
    "AffineParams",
    "BetaParams",
    "Calibrator",
    "FitInfo",
    "HistogramParams",
    "IsotonicParams",
    "PlattParams",
    "ScalingBinningParams",
    "TemperatureParams",
    "VennAbersParams",
    "beta_calibration",
    "centred_isotonic",
    "classwise",
    "dirichlet",
    "histogram_binning",
    "isotonic",
    "matrix_scaling",
    "minimize",
    "platt_scaling",
    "scaling_binning",
    "temperature_scaling",
    "to_logits",
    "to_probs",
    "top_label",
    "vector_scaling",
    "venn_abers",
    "venn_abers_interval",
]
