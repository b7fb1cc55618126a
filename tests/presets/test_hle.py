"""HLE's calib_err, quirk included, against the float64 port of its code."""

import numpy as np
import pytest

from jaxcal import presets
from tests import reference_harness as ref
from tests.helpers import assert_close, x64


@pytest.mark.parametrize(
    ("n", "beta"), [(1000, 100), (1234, 100), (257, 50), (100, 100), (199, 100)]
)
def test_against_the_reference_port(n, beta):
    rng = np.random.default_rng(n)
    conf = rng.random(n)
    correct = (rng.random(n) < conf**1.5).astype(int)
    with x64():
        assert_close(
            presets.hle_calibration_error(conf, correct, beta=beta).value,
            ref.hle_calib_err(conf, correct, beta=beta),
        )


def test_verbalised_percentages_with_ties():
    """Whole percentages tie; a stable sort gives the reference's stable-order value."""
    rng = np.random.default_rng(1)
    conf = rng.integers(0, 101, 731) / 100  # HLE's confidence / 100
    correct = rng.integers(0, 2, 731)
    with x64():
        ours = presets.hle_calibration_error(conf, correct).value
        assert_close(ours, ref.hle_calib_err(conf, correct, kind="stable"))
        # the reference's own quicksort may order ties differently: then only close
        assert abs(float(ours) - ref.hle_calib_err(conf, correct, kind="quicksort")) < 0.02


def test_the_quirk_skips_the_last_bin_but_divides_by_n():
    conf = np.concatenate([np.full(100, 0.5), np.full(150, 0.9)])
    correct = np.concatenate([np.ones(50), np.zeros(50), np.zeros(150)]).astype(int)
    # sorted: bin 0 = the 0.5s (accuracy 0.5: gap 0); the last bin (150 at 0.9, all
    # wrong) is skipped: the reported error is 0 for a grossly overconfident model
    with x64():
        assert float(presets.hle_calibration_error(conf, correct).value) == 0.0
        fixed = presets.hle_calibration_error(conf, correct, skip_last_bin=False).value
        assert_close(fixed, np.sqrt(150 / 250 * 0.9**2))
        assert ref.hle_calib_err(conf, correct) == 0.0


def test_errors():
    with pytest.raises(ValueError, match="at least `beta` = 100 samples"):
        presets.hle_calibration_error(np.full(50, 0.5), np.ones(50, int))
    with pytest.raises(ValueError, match=r"`confidence` must lie in \[0, 1\]; got 87.0"):
        presets.hle_calibration_error(np.full(100, 87.0), np.ones(100, int))
    with pytest.raises(ValueError, match="`correct` must lie in"):
        presets.hle_calibration_error(np.full(100, 0.5), np.full(100, 2))


@pytest.mark.parametrize("n", [100, 150, 199, 200, 350])
def test_a_value_from_the_skipped_bin_alone_is_flagged(n):
    """Issue 34.7: beta <= N < 2 beta returned 0.0, "0 % calibration error", silently;
    the value is kept (the reference's) and flagged."""
    rng = np.random.default_rng(n)
    conf = np.full(n, 0.95)
    correct = (rng.random(n) < 0.5).astype(int)  # grossly overconfident
    res = presets.hle_calibration_error(conf, correct)
    assert bool(res.last_bin_only) == (n < 200)
    if n < 200:
        assert float(res.value) == 0.0
    assert not bool(presets.hle_calibration_error(conf, correct, skip_last_bin=False).last_bin_only)
