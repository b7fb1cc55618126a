"""Small timing helpers shared by the benchmark scripts (not part of the jaxcal package).

Timings on a shared CPU are noisy, so every benchmark times jaxcal and its peers side by
side, in one process, interleaved round by round (:func:`time_interleaved`), and reports
steady-state medians: a warm-up call first (it compiles, fills caches), then repeats, each
synchronised with ``jax.block_until_ready``. Compile time is measured on its own
(:func:`compile_seconds`): tracing + lowering + XLA compilation of a fresh ``jax.jit``
wrapper for the given shapes, which is what a user pays once per new input shape.

API:
  ``Timing(median, best, repeats)``: seconds; ``repeats`` is the number of timed calls.
  ``time_call(fn, *args, repeats=7, budget_s=10.0, clock="wall") -> Timing``
  ``time_interleaved(cases, repeats=7, budget_s=10.0, outputs=None, max_call_s=None,``
    ``clock="wall")``
    ``-> dict[str, Timing]``, where ``cases`` maps a name to a zero-argument callable;
    ``outputs`` (a dict) receives each case's warm-up result; a case whose warm-up call
    takes more than ``max_call_s`` is not repeated (its ``Timing.repeats`` is 0);
    ``clock="cpu"`` measures process CPU time instead of wall time (see ``CLOCKS``).
  ``compile_seconds(fn, *args, **static) -> tuple[float, float]``: (trace + lower, compile).
  ``environment() -> str``: one line with jax / jaxlib / numpy versions, CPU, cores, load.
  ``fmt_ms(seconds) -> str``: milliseconds with 3 significant digits.
  ``read_floor(*arrays) -> callable``: a jitted read of the same device arrays (one sum
    each), the floor every jaxcal kernel is compared with.
  ``sort_floor(scores, labels) -> callable``: ``np.sort`` of the packed (score bits,
    label) uint64 keys, the floor of the sort-based tests.
  ``Table``, ``write_tables(path, tables)``: the machine-readable results every script
    writes with ``--json PATH``, from which ``run_all.py`` renders README's tables.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# A call is always timed at least this many times, even when it exhausts its budget.
MIN_REPEATS = 3


class Timing(NamedTuple):
    """Steady-state timing of one case, in seconds (``repeats == 0``: one call, not repeated)."""

    median: float
    best: float
    repeats: int


def _sync(out: Any) -> Any:
    """Wait for JAX results (no-op for NumPy / PyTorch CPU results, already computed)."""
    return jax.block_until_ready(out)


#: ``"wall"``: elapsed time (what a user waits). ``"cpu"``: CPU time of the whole process,
#: all threads (the work done; on a loaded machine, under ``taskset -c 0``, it estimates the
#: time the call would take alone on one core).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _once(fn: Callable[[], Any], clock: str = "wall") -> float:
    now = CLOCKS[clock]
    start = now()
    _sync(fn())
    return now() - start


def time_interleaved(
    cases: dict[str, Callable[[], Any]],
    repeats: int = 7,
    budget_s: float = 10.0,
    outputs: dict[str, Any] | None = None,
    max_call_s: float | None = None,
    clock: str = "wall",
) -> dict[str, Timing]:
    """Time several zero-argument callables round-robin, after one warm-up call each.

    Interleaving spreads load changes of a shared machine over all cases alike. A case
    stops being repeated once it has run ``MIN_REPEATS`` times and spent ``budget_s``
    seconds in total, so slow peers do not dominate the run. When ``outputs`` is a dict,
    the warm-up results are stored in it by name (to check the values agree). A case
    whose warm-up call alone takes more than ``max_call_s`` seconds is not repeated: its
    :class:`Timing` is that one call, with ``repeats=0``. ``clock`` is a key of ``CLOCKS``.
    """
    warm: dict[str, float] = {}
    for name, fn in cases.items():  # warm-up: compilation, allocator and cache effects
        now = CLOCKS[clock]
        start = now()
        out = _sync(fn())
        warm[name] = now() - start
        if outputs is not None:
            outputs[name] = out
    slow = {name for name, t in warm.items() if max_call_s is not None and t > max_call_s}
    times: dict[str, list[float]] = {name: [] for name in cases if name not in slow}
    for _ in range(max(repeats, 1)):
        for name, ts in times.items():
            if len(ts) >= MIN_REPEATS and sum(ts) > budget_s:
                continue
            ts.append(_once(cases[name], clock))
    result = {name: Timing(warm[name], warm[name], 0) for name in slow}
    for name, ts in times.items():
        result[name] = Timing(float(np.median(ts)), float(np.min(ts)), len(ts))
    return {name: result[name] for name in cases}


def time_call(
    fn: Callable[..., Any],
    *args: Any,
    repeats: int = 7,
    budget_s: float = 10.0,
    clock: str = "wall",
) -> Timing:
    """Steady-state :class:`Timing` of ``fn(*args)`` (warm-up call first, then repeats)."""
    cases = {"case": lambda: fn(*args)}
    return time_interleaved(cases, repeats, budget_s, clock=clock)["case"]


def compile_seconds(fn: Callable[..., Any], *args: Any, **jit_kwargs: Any) -> tuple[float, float]:
    """Seconds to (trace + lower, XLA compile) a fresh ``jax.jit(fn, **jit_kwargs)`` on ``args``.

    A new ``jax.jit`` object is made each call, so nothing is reused from an earlier trace;
    pass arguments of a shape not compiled before to see a user's first-call cost.
    """
    jitted = jax.jit(fn, **jit_kwargs)
    start = time.perf_counter()
    lowered = jitted.lower(*args)
    traced = time.perf_counter()
    lowered.compile()
    return traced - start, time.perf_counter() - traced


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> str:
    """One line describing the software and machine the timings come from."""
    import jaxlib

    load = ""
    if hasattr(os, "getloadavg"):
        load = f", load average {os.getloadavg()[0]:.1f}"
    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) != os.cpu_count():
        load += f", pinned to {len(os.sched_getaffinity(0))} of them"
    devices = ", ".join(sorted({d.platform for d in jax.devices()}))
    return (
        f"jax {jax.__version__} (jaxlib {jaxlib.__version__}, {devices}), numpy {np.__version__},"
        f" Python {platform.python_version()}; CPU {_cpu_name()}, {os.cpu_count()} cores{load}"
    )


def fmt_ms(seconds: float) -> str:
    """Milliseconds with three significant digits (``1.23``, ``12.3``, ``123``)."""
    ms = seconds * 1e3
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def read_floor(*arrays: Any) -> Callable[[], Any]:
    """A zero-argument jitted read of ``arrays`` (one sum each, compiled here).

    Any kernel must read its inputs at least once, so this is the floor of a jaxcal
    kernel on the same device arrays (integer arrays are summed in int32: no conversion
    pass).
    """
    read = jax.jit(lambda *xs: tuple(jnp.sum(x) for x in xs))
    _sync(read(*arrays))
    return lambda: read(*arrays)


def sort_floor(scores: np.ndarray, labels: np.ndarray) -> Callable[[], Any]:
    """A zero-argument ``np.sort`` of the packed (float32 score bits, label) uint64 keys.

    The sort-based tests of calibration must order the samples by score: NumPy's sort of
    one integer key per sample is the floor of that step on CPU. Scores are in [0, 1], so
    their float32 bit patterns sort as the scores do.
    """
    bits = np.asarray(scores, np.float32).view(np.uint32).astype(np.uint64)
    keys = (bits << np.uint64(32)) | np.asarray(labels).astype(np.uint64)
    return lambda: np.sort(keys)


@dataclasses.dataclass
class Table:
    """One benchmark table, as ``run_all.py`` renders it into README.

    ``rows``: dicts with ``size`` (the group the row belongs to: a size such as ``"1e6"``,
    or what ``group`` names), ``name``, ``seconds`` (steady-state median, None when
    skipped), optional ``compile_s`` (trace + lower + XLA compile of a new shape), ``kind``
    (``"jaxcal"``, ``"peer"`` or ``"floor"``) and ``value`` (the result, to see that the
    rows agree). Ratios are taken within each group against the row named ``reference``
    (÷ jaxcal) and the row named ``floor`` (÷ floor); each row named in ``floors`` adds a
    column of ratios over it (``÷ NAME``), for tables with several floors. A table with
    ``markdown`` set is rendered as that Markdown table instead of from ``rows``.
    """

    key: str
    title: str
    command: str
    environment: str
    clock: str
    reference: str
    floor: str | None
    rows: list[dict[str, Any]]
    notes: list[str] = dataclasses.field(default_factory=list)
    unit: str = "ms"
    group: str = "N"
    floors: list[str] = dataclasses.field(default_factory=list)
    #: A table whose columns are not timings (``bench_compile.py``'s compile times and
    #: program sizes): its Markdown rows, rendered as they are in place of ``rows``.
    markdown: str | None = None


def size_label(n: float) -> str:
    """``1e6`` for 1_000_000, ``2e3`` for 2000 (one significant digit when exact)."""
    mantissa, exponent = f"{n:.0e}".split("e")
    label = f"{mantissa}e{int(exponent)}"
    return label if float(label) == n else f"{n:,}"


def row(size, name, seconds, *, kind="peer", compile_s=None, value=None) -> dict[str, Any]:
    """A row of a :class:`Table` (``size`` formatted by :func:`size_label` if a number)."""
    return dict(
        size=size if isinstance(size, str) else size_label(size),
        name=name,
        seconds=None if seconds is None else float(seconds),
        compile_s=None if compile_s is None else float(compile_s),
        kind=kind,
        value=value,
    )


def write_tables(path: str | None, tables: list[Table]) -> None:
    """Write ``tables`` as JSON to ``path`` (nothing when ``path`` is None)."""
    if path is None:
        return
    with open(path, "w", encoding="utf-8") as f:
        json.dump([dataclasses.asdict(t) for t in tables], f, indent=1)
