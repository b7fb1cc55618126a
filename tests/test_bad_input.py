"""Bad input gets the same ValueError on every call, at every size (issue 26, finding A1).

On jax 0.10.2, XLA:CPU, ``jnp.max`` of 4096 or more float32 values drops a NaN (it returns
the largest of the others, or -inf when the NaN is last; ``tests/core/test_validity.py``
pins the backend's behaviour). The metrics validate a repeated eager call of a shape from
a summary their kernel computes in the same pass (``jaxcal/_core/validity.py``), and that
summary took a max: the second call of a shape with a NaN probability returned NaN, or a
plausible finite wrong value, where the first raised. Every public function of the
registry (``tests/api_registry.py``) is called here twice with the same shapes: first on
bad input with a fresh record of the validated shapes (the path of a first call), then,
after a good call of those shapes, on the same bad input again (the path of every later
call); both must raise the same ValueError. Bad input: a NaN, an inf and, for
probabilities, a value outside [0, 1] in a float argument; a label outside [0, K) (-1
and 99) in an integer one; NaN, inf and a negative weight; each at the first, a middle
and the last row; at N = 24 (the registry's data) and N = 4104 (>= 4096, tiled).

Cost: each entry compiles its kernel once per size. The fast suite covers
``FAST`` (one entry per kind of validity summary) at N = 4104; the sweep over every entry
and both sizes is ``slow``. The streaming update, ``array_state``, ``parquet_state``,
``dask_state`` and the streamed reports are in ``tests/streaming/test_bad_batches.py``.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal._core import validity
from tests import api_registry as R

SMALL, LARGE = R.N, 4104

#: One entry per kind of validity summary: 2-D rows (the row sums of the top-label pass),
#: 1-D scores, the cumulative paths, the segments (ids and masks), the streaming update,
#: the scoring rules, and the stand-alone checks every call of the clinical tests and the
#: calibrators run.
FAST = (
    "ece",
    "ece.binary",
    "calibration_tests",
    "multicalibration_error",
    "ece.group_masks",
    "streaming.update",
    "brier_score",
    "hosmer_lemeshow_test",
    "isotonic.fit",
)

#: Values an argument accepts on purpose, by entry and argument index, with the reason.
ACCEPTED = {
    **{
        (name, 0): {"inf": "x = inf is the law's limit (CDF 1, SF 0, log SF -inf)"}
        for name in (
            "brownian_max_cdf",
            "brownian_max_sf",
            "brownian_range_cdf",
            "brownian_range_sf",
            "log_brownian_max_sf",
            "log_brownian_range_sf",
        )
    },
    ("log_chi2_sf", 0): {"inf": "x = inf: log p = -inf"},
    **{
        (name, i): {"range": "a model input x: any real feature value (the registry reuses probs)"}
        for name, i in (("heldout_objective", 3), ("meta_calibration.step", 4))
    },
    ("aurc.scores", 0): {"range": "(N,) confidence scores are any real number, not probabilities"},
    ("streaming.poisson_update", 3): {
        "label": "example ids: any integer names an example",
        "negative": "example ids: any integer names an example",
    },
}

_VALUES = {"nan": np.nan, "inf": np.inf, "range": 1.5, "label": 99, "negative": -1}


@functools.cache
def _data(n: int) -> R.Data:
    """The registry's data set tiled to ``n`` rows (one object per size: fits are cached)."""
    base = R.make_data(0)
    reps = -(-n // R.N)
    return R.Data(*(np.concatenate([f] * reps)[:n] for f in base))


def _is_probability(arg: np.ndarray, data: R.Data) -> bool:
    return any(
        arg.shape == ref.shape and np.array_equal(arg, ref.astype(arg.dtype))
        for ref in (data.p, data.probs)
    )


def _variants(entry, args, data):
    """(argument index, kind of bad value) pairs the entry must refuse."""
    out = []
    for i, (arg, role) in enumerate(zip(args, entry.roles, strict=True)):
        if role not in (R.ROWS, R.LABELS, R.WEIGHTS) or not hasattr(arg, "dtype"):
            continue
        if arg.dtype == jnp.bool_ or arg.ndim == 0:  # masks hold no bad value
            continue
        if role == R.LABELS:
            kinds = ["label", "negative"]
        elif role == R.WEIGHTS:
            kinds = ["nan", "inf", "negative"]
        else:
            kinds = ["nan", "inf"] + (["range"] if _is_probability(np.asarray(arg), data) else [])
        out += [(i, k) for k in kinds if k not in ACCEPTED.get((entry.name, i), {})]
    return out


def _with(args, i, kind, position):
    bad = list(args)
    x = np.array(args[i])
    row = (position,) + (0,) * (x.ndim - 1)  # column 0 of a row of (N, K) probabilities
    x[row] = _VALUES[kind]
    bad[i] = jnp.asarray(x)
    return bad


def _error(entry, args) -> str | None:
    try:
        entry.fn(*args)
    except ValueError as err:
        return str(err)
    return None


def check_every_call(entry, n: int) -> None:
    """Each bad variant: the first call's ValueError, then the same after a good call.

    Every first call runs in a process state that never saw these shapes; then one good
    call (which registers the shapes, as a user's earlier call would), then every bad
    variant again. One good call per entry and size, not one per variant: for the kernel
    measures at 4104 rows (O(N^2)) the good calls were most of the suite's time.
    """
    data = _data(n)
    args = entry.args(data, jnp.float32)
    bad_calls = []
    for i, kind in _variants(entry, args, data):
        rows = np.asarray(args[i]).shape[0]
        for position in (0, rows // 2, rows - 1):
            bad = _with(args, i, kind, position)
            validity._SEEN.clear()  # a process that never saw these shapes
            first = _error(entry, bad)
            assert first is not None, f"{entry.name}: {kind} in argument {i} row {position}"
            bad_calls.append((bad, first, (entry.name, kind, i, position, n)))
    assert _error(entry, args) is None, f"{entry.name}: the good call failed"
    for bad, first, where in bad_calls:
        again = _error(entry, bad)
        assert again == first, (*where, first, again)


_BY_NAME = {e.name: e for e in R.ENTRIES}


@pytest.mark.parametrize("name", FAST)
def test_bad_input_raises_on_every_call_above_4096_rows(name):
    check_every_call(_BY_NAME[name], LARGE)


@pytest.mark.slow
@pytest.mark.parametrize("entry", R.ENTRIES, ids=lambda e: e.name)
def test_every_public_function_raises_on_every_call_at_both_sizes(entry):
    for n in (SMALL, LARGE):
        check_every_call(entry, n)


def test_the_fast_entries_are_registered():
    assert set(FAST) <= set(_BY_NAME), set(FAST) - set(_BY_NAME)
    assert {name for name, _ in ACCEPTED} <= set(_BY_NAME)
