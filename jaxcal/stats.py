"""Statistical tests of calibration, Brownian-motion series and the bootstrap (public namespace)."""

from jaxcal._confidence import confidence_and_correctness

__all__ = [
    "confidence_and_correctness",
]
