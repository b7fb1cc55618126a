"""The result every test of calibration returns: a statistic and its p-value."""

from __future__ import annotations

from typing import NamedTuple

import jax


class TestResult(NamedTuple):
    """Outcome of a test of calibration.

    Attributes:
      statistic: 0-d array, the test statistic (``(G,)``, one per segment, with
        ``groups=``).
      p_value: array of the same shape in [0, 1], from the null law's survival function (never ``1 -
        CDF``, never negative).
    """

    __test__ = False  # not a pytest test class

    statistic: jax.Array
    p_value: jax.Array
