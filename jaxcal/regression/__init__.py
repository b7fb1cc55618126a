"""Calibration of regression and quantile models (public namespace).

Predictions come in three forms, each a pytree: :class:`Gaussian` ``(mean, std)``,
:class:`Quantiles` ``(values, levels)`` and :class:`Samples` ``(values,)``. The measures:

* average calibration: :func:`pit`, :func:`calibration_curve`, :func:`miscalibration_area`,
  :func:`mean_absolute_calibration_error`, :func:`root_mean_squared_calibration_error`
  (uncertainty-toolbox's), :func:`qce` (netcal's M-QCE), and the differentiable
  :func:`soft_miscalibration_area`;
* variance calibration: :func:`variance_curve` (binned RMV against RMSE), :func:`ence`,
  :func:`uce` and :func:`conditional_qce` (netcal's binning);
* proper scores: :func:`crps_gaussian`, :func:`crps_ensemble`, :func:`crps_quantile`,
  :func:`pinball_loss`, :func:`interval_score`, :func:`log_score_gaussian`.

Conditional calibration of the mean (Gneiting & Resin 2023): :func:`mean_reliability`
(the CORP isotonic curve) and :func:`mean_score_decomposition` (MCB - DSC + UNC of the
squared error, model-diagnostics'); of a quantile forecast: :func:`quantile_reliability`
(the isotonic quantile regression) and :func:`quantile_score_decomposition` (of the
pinball loss).

Recalibrators, ``RegressionCalibrator(fit, apply)`` pairs: :func:`isotonic_recalibration`
(Kuleshov et al. 2018), :func:`std_scaling` (Laves et al. 2020) and
:func:`conformal_quantile_regression` (CQR, Romano et al. 2019).

The uniformity of the PIT is tested by :func:`jaxcal.stats.pit_test`.

Modules: ``_inputs`` (the prediction forms and their validation), ``_pit``,
``_calibration`` (the calibration curve and its summaries), ``_variance`` (binned
variance calibration), ``_scores``, ``_recalibrate`` (the recalibrators),
``_corp`` (CORP reliability and decomposition of a mean forecast), ``_corp_quantile``
(the same for a quantile forecast).
"""

from jaxcal.regression._calibration import (
    CalibrationCurve,
    calibration_curve,
    mean_absolute_calibration_error,
    miscalibration_area,
    qce,
    root_mean_squared_calibration_error,
    soft_miscalibration_area,
)
from jaxcal.regression._corp import (
    MeanReliability,
    MeanScoreDecomposition,
    mean_reliability,
    mean_score_decomposition,
)
from jaxcal.regression._corp_quantile import (
    QuantileReliability,
    QuantileScoreDecomposition,
    quantile_reliability,
    quantile_score_decomposition,
)
from jaxcal.regression._inputs import Gaussian, Quantiles, Samples
from jaxcal.regression._pit import pit
from jaxcal.regression._recalibrate import (
    ConformalParams,
    IsotonicRecalibrationParams,
    RegressionCalibrator,
    StdScalingParams,
    conformal_quantile_regression,
    isotonic_recalibration,
    std_scaling,
)
from jaxcal.regression._scores import (
    crps_ensemble,
    crps_gaussian,
    crps_quantile,
    interval_score,
    log_score_gaussian,
    pinball_loss,
)
from jaxcal.regression._variance import VarianceCurve, conditional_qce, ence, uce, variance_curve

__all__ = [
    "CalibrationCurve",
    "ConformalParams",
    "Gaussian",
    "IsotonicRecalibrationParams",
    "MeanReliability",
    "MeanScoreDecomposition",
    "QuantileReliability",
    "QuantileScoreDecomposition",
    "Quantiles",
    "RegressionCalibrator",
    "Samples",
    "StdScalingParams",
    "VarianceCurve",
    "calibration_curve",
    "conditional_qce",
    "conformal_quantile_regression",
    "crps_ensemble",
    "crps_gaussian",
    "crps_quantile",
    "ence",
    "interval_score",
    "isotonic_recalibration",
    "log_score_gaussian",
    "mean_absolute_calibration_error",
    "mean_reliability",
    "mean_score_decomposition",
    "miscalibration_area",
    "pinball_loss",
    "pit",
    "qce",
    "quantile_reliability",
    "quantile_score_decomposition",
    "root_mean_squared_calibration_error",
    "soft_miscalibration_area",
    "std_scaling",
    "uce",
    "variance_curve",
]
