"""The calibration numbers of evaluation harnesses, reproduced exactly.

Each preset follows one harness's code, quirks included, and its docstring quotes the
file and function it reproduces: :func:`~jaxcal.presets.hle_calibration_error`
(Humanity's Last Exam's ``calib_err``), :func:`~jaxcal.presets.helm_calibration`
(HELM's ``ece_10_bin``, ``ece_1_bin``, ``platt_ece``, ``selective_acc@10``) and
:func:`~jaxcal.presets.temperature_tuned` (the temperature-tuned Brier score and RMS
calibration error asked of lm-evaluation-harness). For the library's own measures, with
documented conventions, weights and intervals, see :mod:`jaxcal.metrics`,
:mod:`jaxcal.selective` and :mod:`jaxcal.stats`.
"""

from jaxcal.presets._helm import HelmCalibration, helm_calibration
from jaxcal.presets._hle import HleCalibrationError, hle_calibration_error
from jaxcal.presets._temperature import TemperatureTuned, temperature_tuned

__all__ = [
    "HelmCalibration",
    "HleCalibrationError",
    "TemperatureTuned",
    "helm_calibration",
    "hle_calibration_error",
    "temperature_tuned",
]
