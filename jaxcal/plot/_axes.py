"""What both plots share: pyplot on demand, models by name, each Axes' drawing state.

matplotlib is imported by ``pyplot()`` when a plot is drawn, never when jaxcal or
:mod:`jaxcal.plot` is imported.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from jaxcal.stats._resampling.consistency import check_key

# Per main Axes: the histogram Axes beneath it and how many models are drawn on it, so
# that repeated calls on the same ``ax`` overlay models in new colours.
AXES_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def pyplot():
    """``matplotlib.pyplot``, or an ImportError that says how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            'jaxcal.plot needs matplotlib: pip install "jaxcal[plot]" (or matplotlib).'
        ) from err
    return plt


def named_models(probs: Any, label: str | None) -> list[tuple[str | None, Any]]:
    """``[(name, probs)]`` from one array or a mapping name -> array."""
    if isinstance(probs, Mapping):
        if not probs:
            raise ValueError("`probs` must not be an empty mapping; give at least one model.")
        if label is not None:
            raise ValueError(
                "`label` must be None when `probs` is a mapping (its keys name models)."
            )
        return [(str(name), value) for name, value in probs.items()]
    return [(label, probs)]


def next_model(state: dict) -> tuple[str, bool]:
    """The next model's colour on an Axes and whether it is the first model there.

    ``state`` is the Axes' entry in ``AXES_STATE``; its model count goes up by one.
    """
    n = state["n_models"]
    state["n_models"] = n + 1
    return f"C{n}", n == 0


def as_key(key: Any) -> jax.Array:
    """A JAX PRNG key from a key or an int seed in [0, 2**63) (checked as the stats check)."""
    return check_key(key, seeds=True)


def hist_axes(ax, show_histogram: bool):
    """The histogram Axes under ``ax``, created on the first call (None if not wanted)."""
    state = AXES_STATE.get(ax)
    if state is None:
        state = {"hist_ax": None, "n_models": 0}
        if show_histogram:
            from mpl_toolkits.axes_grid1 import make_axes_locatable

            hist_ax = make_axes_locatable(ax).append_axes("bottom", size="28%", pad=0.12, sharex=ax)
            hist_ax.set_gid("jaxcal-histogram")
            state["hist_ax"] = hist_ax
        AXES_STATE[ax] = state
    return state


#: Bin counts spanning at least this ratio (two decades) are drawn on a log axis.
LOG_COUNT_RATIO = 100.0


def set_count_scale(state: dict, counts: Any) -> None:
    """The count axis of the histogram beneath a diagram, for every model drawn so far.

    Linear from 0 (a bin of 235 must not look empty next to one of 305, as it did on a
    log axis from 2.35e2, finding E2), unless the positive counts span two decades or
    more (``LOG_COUNT_RATIO``): then logarithmic, and the axis label says so.
    """
    hist_ax = state["hist_ax"]
    seen = state.setdefault("counts", [])
    seen.extend(float(c) for c in np.ravel(np.asarray(counts, dtype=np.float64)) if c > 0)
    if seen and max(seen) / min(seen) >= LOG_COUNT_RATIO:
        hist_ax.set_yscale("log")
        hist_ax.set_ylabel("count (log scale)")
        hist_ax.set_ylim(bottom=min(seen) / 2, top=max(seen) * 2)
    else:
        hist_ax.set_yscale("linear")
        hist_ax.set_ylabel("count")
        hist_ax.set_ylim(bottom=0, top=1.05 * max(seen, default=1.0))
