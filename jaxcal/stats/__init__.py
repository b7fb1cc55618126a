"""Statistical tests of calibration, clinical calibration measures, Brownian-motion series
and the bootstrap (public namespace)."""

from jaxcal._core.confidence import confidence_and_correctness
from jaxcal.metrics._l2_interval import L2ECEInterval
from jaxcal.stats._binned.l2_interval import l2_ece_interval
from jaxcal.stats._binned.tcal import TCalResult, tcal_test
from jaxcal.stats._binned.tce import tce
from jaxcal.stats._clinical.hosmer_lemeshow import hosmer_lemeshow_test, log_chi2_sf
from jaxcal.stats._clinical.ici import ICI, ici
from jaxcal.stats._clinical.observed_expected import (
    ObservedExpected,
    observed_expected_ratio,
    prevalence_weights,
)
from jaxcal.stats._clinical.slope import (
    CalibrationSlopeIntercept,
    WaldEstimate,
    calibration_slope_intercept,
)
from jaxcal.stats._kernel.cme_test import CMETestResult, cme_test
from jaxcal.stats._kernel.skce_test import SKCETestResult, skce_test
from jaxcal.stats._paths.brownian import (
    brownian_max_cdf,
    brownian_max_sf,
    brownian_range_cdf,
    brownian_range_sf,
    log_brownian_max_sf,
    log_brownian_range_sf,
)
from jaxcal.stats._paths.cumulative import (
    CalibrationTests,
    CumulativeDifferences,
    calibration_tests,
    cumulative_differences,
    ks_test,
    kuiper_test,
    spiegelhalter_test,
)
from jaxcal.stats._paths.multicalibration import MulticalibrationResult, multicalibration_error
from jaxcal.stats._paths.pit import PITTestResult, pit_test
from jaxcal.stats._paths.subpopulation import SubpopulationTest, subpopulation_test
from jaxcal.stats._resampling.bootstrap import (
    BootstrapResult,
    PairedBootstrapResult,
    bootstrap_ci,
    paired_bootstrap,
)
from jaxcal.stats._resampling.consistency import ConsistencyTestResult, consistency_test
from jaxcal.stats._resampling.corp import (
    CorpBands,
    DecompositionIntervals,
    corp_bands,
    score_decomposition_ci,
)
from jaxcal.stats._resampling.intervals import (
    BinomialInterval,
    ConsistencyBands,
    ReliabilityIntervals,
    clopper_pearson_interval,
    consistency_bands,
    reliability_intervals,
    wilson_interval,
)
from jaxcal.stats._resampling.recalibrated import (
    CalibrationRefinement,
    calibration_refinement,
    cross_fit,
    recalibrated,
)
from jaxcal.stats._result import TestResult

__all__ = [
    "ICI",
    "BinomialInterval",
    "BootstrapResult",
    "CMETestResult",
    "CalibrationRefinement",
    "CalibrationSlopeIntercept",
    "CalibrationTests",
    "ConsistencyBands",
    "ConsistencyTestResult",
    "CorpBands",
    "CumulativeDifferences",
    "DecompositionIntervals",
    "L2ECEInterval",
    "MulticalibrationResult",
    "ObservedExpected",
    "PITTestResult",
    "PairedBootstrapResult",
    "ReliabilityIntervals",
    "SKCETestResult",
    "SubpopulationTest",
    "TCalResult",
    "TestResult",
    "WaldEstimate",
    "bootstrap_ci",
    "brownian_max_cdf",
    "brownian_max_sf",
    "brownian_range_cdf",
    "brownian_range_sf",
    "calibration_refinement",
    "calibration_slope_intercept",
    "calibration_tests",
    "clopper_pearson_interval",
    "cme_test",
    "confidence_and_correctness",
    "consistency_bands",
    "consistency_test",
    "corp_bands",
    "cross_fit",
    "cumulative_differences",
    "hosmer_lemeshow_test",
    "ici",
    "ks_test",
    "kuiper_test",
    "l2_ece_interval",
    "log_brownian_max_sf",
    "log_brownian_range_sf",
    "log_chi2_sf",
    "multicalibration_error",
    "observed_expected_ratio",
    "paired_bootstrap",
    "pit_test",
    "prevalence_weights",
    "recalibrated",
    "reliability_intervals",
    "score_decomposition_ci",
    "skce_test",
    "spiegelhalter_test",
    "subpopulation_test",
    "tcal_test",
    "tce",
    "wilson_interval",
]
