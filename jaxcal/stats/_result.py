"""The result every test of calibration returns: a statistic, its p-value and the log."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


def format_p(p: float, log_p: float) -> str:
    """A p-value as text, read from its log where the float underflowed or lost digits
    (below 1e-30): ``3.4e-690``; ``0`` only where log p is -inf."""
    if math.isnan(p) or math.isnan(log_p):
        return "nan"
    if p >= 1e-30 or not math.isfinite(log_p):
        return f"{p:.4g}"
    log10 = log_p / math.log(10)
    exponent = math.floor(log10)
    mantissa = 10 ** (log10 - exponent)
    if mantissa >= 9.995:  # rounds up to the next decade
        mantissa, exponent = 1.0, exponent + 1
    return f"{mantissa:.2f}e{exponent}"


def _text(x, fmt) -> str | None:
    """``x`` as text when concrete and at most 16 values, else None."""
    try:
        arr = np.asarray(jax.device_get(x))
    except (TypeError, jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None
    if arr.size > 16 or not np.issubdtype(arr.dtype, np.floating):
        return None
    if arr.ndim == 0:
        return fmt(arr)
    return "[" + ", ".join(fmt(v) for v in arr.reshape(-1)) + "]"


class TestResult(NamedTuple):
    """Outcome of a test of calibration.

    Attributes:
      statistic: 0-d array, the test statistic (``(G,)``, one per segment, with
        ``groups=``).
      p_value: array of the same shape in [0, 1], from the null law's survival function (never ``1 -
        CDF``, never negative). Never 0 for a finite statistic: where the exact value
        is below the smallest normal float (``jnp.finfo(dtype).tiny``: 1.2e-38 in
        float32) it holds that float, and ``log_p_value`` the exact value. 0 only where
        the statistic is infinite (an outcome impossible under the model, log p = -inf).
      log_p_value: array of the same shape, the natural log of the p-value from the log
        survival function, evaluated where its series converge: finite far below the
        smallest float (a KS statistic of 56: -1587.9, p = 3.4e-690). The repr prints
        the p-value from it.
    """

    __test__ = False  # not a pytest test class

    statistic: jax.Array
    p_value: jax.Array
    log_p_value: jax.Array

    def __repr__(self) -> str:
        stat = _text(self.statistic, lambda v: f"{float(v):.6g}")
        p = _text(self.p_value, lambda v: "")
        if stat is None or p is None or _text(self.log_p_value, str) is None:
            return (
                f"TestResult(statistic={self.statistic!r}, p_value={self.p_value!r}, "
                f"log_p_value={self.log_p_value!r})"
            )
        ps = np.asarray(jax.device_get(self.p_value), np.float64).reshape(-1)
        logs = np.asarray(jax.device_get(self.log_p_value), np.float64).reshape(-1)
        texts = [format_p(float(a), float(b)) for a, b in zip(ps, logs, strict=True)]
        p = texts[0] if np.ndim(self.p_value) == 0 else "[" + ", ".join(texts) + "]"
        log_p = _text(self.log_p_value, lambda v: f"{float(v):.6g}")
        return f"TestResult(statistic={stat}, p_value={p}, log_p_value={log_p})"


def make_result(statistic: jax.Array, p_value: jax.Array, log_p_value: jax.Array) -> TestResult:
    """``TestResult`` with the p-value floored at the smallest normal float where its log
    is finite (the float underflowed; the log holds the value), 0 where the log is -inf."""
    tiny = jnp.asarray(jnp.finfo(p_value.dtype).tiny, p_value.dtype)
    log_p_value = log_p_value.astype(p_value.dtype)
    p = jnp.where(log_p_value == -jnp.inf, jnp.zeros((), p_value.dtype), jnp.maximum(p_value, tiny))
    return TestResult(statistic, p, log_p_value)


def summary_repr(result: Any) -> str:
    """The repr of a resampling result (a NamedTuple): its 0-d fields as numbers, a field of
    many values (the resamples) as their count, mean and range, not a thousand numbers.
    Traced or batched results fall back to the fields' own reprs.

    Example:
      >>> from typing import Any, NamedTuple
      >>> class R(NamedTuple):
      ...     estimate: jax.Array
      ...     samples: jax.Array
      >>> summary_repr(R(jnp.asarray(0.25), jnp.linspace(0.2, 0.3, 1000)))
      'R(estimate=0.25, samples=<1000 values: mean 0.25, min 0.2, max 0.3>)'
    """
    parts = []
    for name, value in zip(result._fields, result, strict=True):
        text = _text(value, lambda v: f"{float(v):.6g}")
        if text is None:
            try:
                arr = np.asarray(jax.device_get(value), np.float64)
            except Exception:  # a tracer: nothing concrete to summarise
                arr = None
            if arr is None or arr.ndim != 1:
                text = repr(value)
            else:
                text = (
                    f"<{arr.size} values: mean {arr.mean():.6g}, min {arr.min():.6g}, "
                    f"max {arr.max():.6g}>"
                )
        parts.append(f"{name}={text}")
    return f"{type(result).__name__}({', '.join(parts)})"
