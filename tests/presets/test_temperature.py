"""Temperature-tuned Brier and RMS calibration error against ports of tune_temp and lm-eval."""

import numpy as np
import pytest

from jaxcal import presets
from tests import reference_harness as ref
from tests.helpers import assert_close, x64


def _case(seed, n=400, k=4, scale=4.0):
    rng = np.random.default_rng(seed)
    z = scale * rng.normal(size=(n, k))
    y = np.argmax(z / scale + rng.normal(size=(n, k)), axis=1)  # logits twice too sharp
    return z, y


@pytest.mark.parametrize("seed", [0, 1])
def test_against_the_ports(seed):
    z, y = _case(seed)
    t = ref.tune_temp(z, y)
    p = np.exp(z / t - (z / t).max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    with x64():
        out = presets.temperature_tuned(z, y)
        assert_close(out.temperature, t)
        assert_close(out.brier, ref.lm_eval_brier_score(list(zip(y, p, strict=True))))
        conf, right = p.max(1), (p.argmax(1) == y).astype(int)
        assert_close(out.rms_calibration_error, ref.hle_calib_err(conf, right))


def test_real_digits_logits():
    data = np.load("jaxcal/data/digits_mlp.npz")
    z, y = data["logits"].astype(np.float64), data["labels"]
    with x64():
        out = presets.temperature_tuned(z, y)
        assert_close(out.temperature, ref.tune_temp(z, y))


def test_errors():
    z, y = _case(2, n=50)
    with pytest.raises(ValueError, match="at least `beta` = 100 items"):
        presets.temperature_tuned(z, y)
    with pytest.raises(ValueError, match="`lower` must be below `upper`"):
        presets.temperature_tuned(z, y, beta=10, lower=5.0, upper=1.0)


def test_a_temperature_on_its_bracket_is_flagged():
    """Issue 34.7 (Q9): logits 100x too confident ended on upper = 5 without a word."""
    rng = np.random.default_rng(21)
    s = rng.standard_normal((150, 4))
    y = np.argmax(s + rng.standard_normal((150, 4)), axis=1)
    out = presets.temperature_tuned(100 * s, y)
    assert float(out.temperature) == pytest.approx(5.0, abs=1e-4) and bool(out.at_bound)
    wide = presets.temperature_tuned(100 * s, y, upper=1000.0)  # the minimiser, ~100
    assert 20 < float(wide.temperature) < 900 and not bool(wide.at_bound)
    cold = presets.temperature_tuned(s / 100, y)  # 100x too cautious: T on lower = 0.2
    assert float(cold.temperature) == pytest.approx(0.2, abs=1e-4) and bool(cold.at_bound)
    assert not bool(presets.temperature_tuned(s, y).at_bound)
