"""The validity summaries (``jaxcal/_core/validity.py``) and the backend behaviour they guard.

Never rely on a reduction carrying NaN (STYLE.md): on jax 0.10.2, XLA:CPU, ``jnp.max`` of
4096 or more float32 values drops a NaN (it returns the largest other value, or -inf when
the NaN is last; NaN below 4096, and with ``--xla_cpu_enable_fast_min_max=false`` alike),
and the metrics' in-kernel summary took such a max (finding A1). The summaries now read
NaN as +inf element by element before any max, and the stand-alone checks flag non-finite
input from ``isfinite``. ``test_the_backend_max_and_nan`` pins what the backend does, so
that a jax upgrade that changes it is noticed; the guard is right either way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal._core import checks, validity

SIZES = (1000, 2048, 4095, 4096, 8192, 65536)


def _with_nan(n: int, position: int, k: int = 1) -> np.ndarray:
    x = np.random.default_rng(n).random((n, k) if k > 1 else n).astype(np.float32)
    x[(position,) + (0,) * (x.ndim - 1)] = np.nan
    return x


def _positions(n):
    return (0, 5, n // 2, n - 1)


def test_the_backend_max_and_nan():
    """What the guard relies on (isnan, isfinite, and a sum carrying NaN) holds at every
    size and position; what it guards against (a max dropping NaN) is pinned on CPU."""
    dropped = []
    for n in SIZES:
        for position in _positions(n):
            x = jnp.asarray(_with_nan(n, position))
            assert bool(jnp.isnan(x).any()) and not bool(jnp.isfinite(x).all()), (n, position)
            assert bool(jnp.isnan(jnp.sum(x))), (n, position)  # IEEE addition: relied on
            rows = jnp.asarray(_with_nan(n, position, k=3))
            assert bool(jnp.isnan(rows.sum(axis=1)[position])), (n, position)  # row sums
            if not bool(jnp.isnan(jnp.max(x))):
                dropped.append((n, position))
    if jax.default_backend() != "cpu":
        return  # the guard holds everywhere; the defect was measured on XLA:CPU only
    # Below 4096 values the max carries the NaN; from 4096 on it drops it wherever it is.
    assert all(n >= 4096 for n, _ in dropped), dropped
    expected = [(n, p) for n in SIZES if n >= 4096 for p in _positions(n)]
    assert dropped == expected, (
        f"XLA:CPU's jnp.max now treats NaN differently (jax {jax.__version__}): it dropped "
        f"NaN at {dropped}, where jax 0.10.2 dropped it at every position from 4096 values "
        "on. The validity guard does not depend on it; update this test and STYLE.md's note."
    )


@pytest.mark.parametrize("n", [24, 4104, 65536])
def test_summary_flags_nan_and_inf_at_every_position(n):
    """``summarize()``: the probabilities' excess is +inf (not finite, never dropped) for a
    NaN or inf at the first, a middle or the last row, 1-D and 2-D."""
    labels = jnp.zeros(n, jnp.int32)
    for k in (1, 3):
        for bad in (np.nan, np.inf, -np.inf):
            for position in (0, n // 2, n - 1):
                x = _with_nan(n, position, k)
                if k > 1:
                    x = np.full((n, k), 1 / k, np.float32)
                x[(position,) + (0,) * (x.ndim - 1)] = bad
                summary = jax.jit(validity.summarize)(jnp.asarray(x), labels, None)
                assert float(summary.probs) == np.inf, (n, k, bad, position)


def test_summary_of_valid_input_passes():
    p = jnp.asarray(np.random.default_rng(0).random(8192).astype(np.float32))
    summary = validity.summarize(p, jnp.ones(8192, jnp.int32), jnp.ones(8192))
    assert float(summary.probs) <= 0 and float(summary.labels) == 1
    assert float(summary.weights) <= 0


@pytest.mark.parametrize("n", [24, 8192])
def test_stand_alone_checks_flag_nan_from_isfinite(n):
    for position in (0, n // 2, n - 1):
        x = _with_nan(n, position)
        total = checks._host_summary(jnp.asarray(x))[0]
        assert not np.isfinite(total), (n, position)
        with pytest.raises(ValueError, match=f"must be finite; got nan at index \\({position},\\)"):
            checks.check_probs(x)
