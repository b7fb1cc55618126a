"""scikit-learn interoperability: jaxcal's calibrators and curves behind scikit-learn's API.

:class:`~jaxcal.sklearn.CalibratedClassifierCV` is a drop-in for scikit-learn's
estimator of that name, calibrated by jaxcal's jitted calibrators (sigmoid, isotonic,
temperature, Venn-Abers, or any jaxcal ``Calibrator``);
:func:`~jaxcal.sklearn.calibration_curve` and :class:`~jaxcal.sklearn.CalibrationDisplay`
return and draw what scikit-learn's do, with ``n_bins="cube_root"`` and multiclass
inputs. Needs scikit-learn (the ``sklearn`` extra: ``pip install jaxcal[sklearn]``);
``import jaxcal`` does not import this namespace.
"""

from jaxcal.sklearn._calibrated import CalibratedClassifierCV, expected_failed_checks
from jaxcal.sklearn._curve import CalibrationDisplay, calibration_curve

__all__ = [
    "CalibratedClassifierCV",
    "CalibrationDisplay",
    "calibration_curve",
    "expected_failed_checks",
]
