"""Statistical tests of calibration, Brownian-motion series and the bootstrap (public namespace)."""

from jaxcal._bootstrap import ConsistencyTestResult, consistency_test
from jaxcal._bootstrap_ci import (
    BootstrapResult,
    PairedBootstrapResult,
    bootstrap_ci,
    paired_bootstrap,
)
from jaxcal._brownian import (
    brownian_max_cdf,
    brownian_max_sf,
    brownian_range_cdf,
    brownian_range_sf,
    log_brownian_max_sf,
    log_brownian_range_sf,
)
from jaxcal._confidence import confidence_and_correctness
from jaxcal._corp_resampling import (
    CorpBands,
    DecompositionIntervals,
    corp_bands,
    score_decomposition_ci,
)
from jaxcal._cumulative import (
    CalibrationTests,
    CumulativeDifferences,
    TestResult,
    calibration_tests,
    cumulative_differences,
    ks_test,
    kuiper_test,
    spiegelhalter_test,
)
from jaxcal._intervals import (
    BinomialInterval,
    ConsistencyBands,
    ReliabilityIntervals,
    clopper_pearson_interval,
    consistency_bands,
    reliability_intervals,
    wilson_interval,
)
from jaxcal._segments import MulticalibrationResult, multicalibration_error
from jaxcal._subpopulation import SubpopulationTest, subpopulation_test

__all__ = [
    "BinomialInterval",
    "BootstrapResult",
    "CalibrationTests",
    "ConsistencyBands",
    "ConsistencyTestResult",
    "CorpBands",
    "CumulativeDifferences",
    "DecompositionIntervals",
    "MulticalibrationResult",
    "PairedBootstrapResult",
    "ReliabilityIntervals",
    "SubpopulationTest",
    "TestResult",
    "bootstrap_ci",
    "brownian_max_cdf",
    "brownian_max_sf",
    "brownian_range_cdf",
    "brownian_range_sf",
    "calibration_tests",
    "clopper_pearson_interval",
    "confidence_and_correctness",
    "consistency_bands",
    "consistency_test",
    "corp_bands",
    "cumulative_differences",
    "ks_test",
    "kuiper_test",
    "log_brownian_max_sf",
    "log_brownian_range_sf",
    "multicalibration_error",
    "paired_bootstrap",
    "reliability_intervals",
    "score_decomposition_ci",
    "spiegelhalter_test",
    "subpopulation_test",
    "wilson_interval",
]
