"""Writing ``jaxcal report``'s results (jaxcal/cli/_format.py): p-values, JSON nulls.

The full table and the JSON schema are checked on real runs in the other test_cli files.
"""

import math

import numpy as np

from jaxcal.cli import Model, format_p, report_json


def test_p_values_print_four_decimals_or_a_power_of_ten():
    assert format_p(0.5, math.log10(0.5)) == "0.5000"
    assert format_p(1e-4, -4.0) == "0.0001"
    # Below 1e-4 the mantissa and exponent come from log10(p): p itself underflows to 0.
    assert format_p(0.0, -689.47) == "3.4e-690"
    assert format_p(2.5e-7, math.log10(2.5e-7)) == "2.5e-7"
    assert format_p(0.0, -math.inf) == "0.0000"  # sigma = 0: no exponent to print


def test_json_writes_non_finite_numbers_as_null():
    model = Model("m", "m.npz", np.full(4, 0.5, np.float32), np.zeros(4, np.int32), None, "probs")
    results = {
        "metrics": {"ece": {"value": 0.25, "low": math.nan, "high": math.inf}},
        "tests": {"ks": {"statistic": math.inf, "p_value": 0.0, "log10_p_value": -math.inf}},
    }
    doc = report_json([model], [results], {"n_bins": 15})
    (entry,) = doc["models"]
    assert entry["metrics"] == {"ece": {"value": 0.25, "low": None, "high": None}}
    assert entry["tests"] == {"ks": {"statistic": None, "p_value": 0.0, "log10_p_value": None}}
    assert entry["n"] == 4 and entry["num_classes"] == 2 and entry["binary"] is True
    assert entry["fit"] is None and doc["schema"] == "jaxcal.report/1"
