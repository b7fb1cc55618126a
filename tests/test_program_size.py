"""The lowered-program size of the twenty most used kernels, pinned (issue 33).

What a first call costs is mostly XLA compiling the program a public function lowers to,
and compile time grows with the program. Each kernel of ``program_size.json`` (a registry
entry of ``tests/api_registry.py``, on the registry's data) is lowered with a fresh
``jax.jit(...).trace(...).lower()`` (no XLA compile: cheap), and the lines of its
StableHLO text are compared with the pinned count: more than ``TOLERANCE`` above it fails,
so growth is seen in review; more than ``TOLERANCE`` below fails too, so that a program
made smaller is pinned at its new size. A change that means to resize a program re-pins::

    python tests/test_program_size.py --update     # rewrites tests/program_size.json

``benchmarks/bench_compile.py`` reports the same kernels' trace, lower and compile times.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

PINS = pathlib.Path(__file__).with_name("program_size.json")

#: Relative change of a program's line count that fails the test (either way).
TOLERANCE = 0.10


def lowered_lines(name: str) -> int:
    """Lines of the StableHLO text of the registry entry ``name`` (data seed 0, float32)."""
    import jax
    import jax.numpy as jnp

    from tests.api_registry import ENTRIES, make_data

    entry = next(e for e in ENTRIES if e.name == name)
    args = entry.args(make_data(0), jnp.float32)
    return jax.jit(entry.fn).trace(*args).lower().as_text().count("\n")


def _pins() -> dict:
    return json.loads(PINS.read_text())


def _cpu() -> bool:
    import jax

    return jax.default_backend() == "cpu"


@pytest.mark.skipif("not _cpu()", reason="pinned on CPU (the sorts lower differently elsewhere)")
@pytest.mark.parametrize("name", sorted(_pins()["lines"]))
def test_lowered_program_size_is_pinned(name):
    import jax

    pinned, pins = _pins()["lines"][name], _pins()
    lines = lowered_lines(name)
    how = (
        f"If the change is meant, re-pin: `python tests/test_program_size.py --update` "
        f"(pinned with jax {pins['jax']}; this is jax {jax.__version__})."
    )
    assert lines <= pinned * (1 + TOLERANCE), (
        f"{name} lowers to {lines} lines of StableHLO, {lines / pinned - 1:+.0%} over the "
        f"{pinned} pinned in tests/program_size.json: a larger program compiles longer on "
        f"every user's first call. {how}"
    )
    assert lines >= pinned * (1 - TOLERANCE), (
        f"{name} lowers to {lines} lines of StableHLO, {lines / pinned - 1:+.0%} under the "
        f"{pinned} pinned: pin the smaller size so that growth from here is seen. {how}"
    )


def test_the_pins_name_registry_entries():
    from tests.api_registry import ENTRIES

    names = {e.name for e in ENTRIES}
    unknown = sorted(set(_pins()["lines"]) - names)
    assert unknown == [], f"tests/program_size.json pins entries the registry lacks: {unknown}"


def update() -> None:
    """Re-measure every pinned kernel and rewrite ``program_size.json``."""
    import jax

    pins = _pins()
    pins["jax"] = jax.__version__
    pins["lines"] = {name: lowered_lines(name) for name in sorted(pins["lines"])}
    PINS.write_text(json.dumps(pins, indent=1) + "\n")
    print(json.dumps(pins["lines"], indent=1))


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_program_size.py --update")
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    update()
