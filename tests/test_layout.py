"""The package's layout: the folders show the architecture and imports run one way.

Walks the source of every module of ``jaxcal`` (imports inside functions included) and
checks the floors of STYLE.md:

====================  ==============================================================
module in             may import (besides its own folder)
====================  ==============================================================
``jaxcal._core``      nothing else in jaxcal
``jaxcal.metrics``    ``_core``
``jaxcal.calibrators``  ``_core``
``jaxcal.coverage``   ``_core``
``jaxcal.selective``  ``_core``
``jaxcal.stats``      ``_core``, ``metrics``
``jaxcal.presets``    ``_core``, ``metrics``, ``calibrators``, ``selective``
``jaxcal.losses``     ``_core``, ``metrics``
``jaxcal.streaming``  ``_core``, ``metrics``, ``regression``
``jaxcal.sql``        ``_core``, ``metrics``, ``streaming``
``jaxcal.spark``      ``_core``, ``metrics``, ``streaming``, ``sql``
``jaxcal.plot``       every floor below it
``jaxcal.sklearn``    every floor below it (plot's floor)
``jaxcal.cli``        anything
``jaxcal`` (root)     the public namespaces it re-exports, and ``_core``'s store switch
====================  ==============================================================

Nothing imports ``jaxcal.cli``; no floor imports the root package ``jaxcal`` (whose
``__init__`` imports every namespace) except ``cli``. An exception to the table must be
listed in ``EXCEPTIONS`` with its reason. Also: no private module at the top of the
package, every module at most ``MAX_LINES`` lines, every module with a test file of its
own name or a line in ``tests/README.md``, and no docstring cross-reference into a private
module (the documentation build resolves only public names).
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

import jaxcal

PACKAGE = pathlib.Path(jaxcal.__file__).parent
TESTS = pathlib.Path(__file__).parent

FLOORS_BELOW = {
    "_core": set(),
    "metrics": {"_core"},
    "calibrators": {"_core"},
    "coverage": {"_core"},
    "selective": {"_core"},
    "regression": {"_core", "metrics"},
    "stats": {"_core", "metrics"},
    "presets": {"_core", "metrics", "calibrators", "selective"},
    "losses": {"_core", "metrics"},
    # streaming's regression state (issue 36) validates, computes the PIT statistics and
    # the per-row scores with jaxcal.regression's own code, so that streamed and batch
    # values are the same comparisons in the same dtype (as compute shares gap_norm with
    # metrics). regression's floor ({_core, metrics}) lies inside streaming's, so the edge
    # can close no cycle; moving the prediction forms, their validation and the score
    # kernels to _core instead would move most of jaxcal.regression there.
    "streaming": {"_core", "metrics", "regression"},
    # sql and spark compute the streaming state where the rows live (a SQL engine, Spark
    # executors) and read it back with streaming.from_table: one floor above streaming,
    # whose state, table schema and Poisson generator they reproduce; spark reuses sql's
    # checks. Nothing below imports them (their engines are optional extras).
    "sql": {"_core", "metrics", "streaming"},
    "spark": {"_core", "metrics", "streaming", "sql"},
    "plot": {
        "_core",
        "metrics",
        "calibrators",
        "coverage",
        "selective",
        "regression",
        "stats",
        "presets",
        "losses",
        "streaming",
    },
    "sklearn": {
        "_core",
        "metrics",
        "calibrators",
        "coverage",
        "selective",
        "regression",
        "stats",
        "presets",
        "losses",
        "streaming",
    },
    "cli": {
        "_core",
        "metrics",
        "calibrators",
        "coverage",
        "selective",
        "regression",
        "stats",
        "presets",
        "losses",
        "streaming",
        "plot",
        "sklearn",
        "sql",
        "spark",
        "jaxcal",
    },
    "jaxcal": {
        "_core",  # the process-wide switch of the executable store: set_executable_store
        "metrics",
        "calibrators",
        "coverage",
        "selective",
        "regression",
        "stats",
        "presets",
        "losses",
        "streaming",
    },
}

#: (importing module, imported module) -> why the table's rule does not apply. Empty: the
#: layout needs no exception today; a new one must say why here.
EXCEPTIONS: dict[tuple[str, str], str] = {}

#: The longest module, in lines (issue 24: "every module <= ~500 lines").
MAX_LINES = 500


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _floor(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "jaxcal"


def _imports(module: str, path: pathlib.Path) -> set[str]:
    """Every jaxcal module ``module`` imports, anywhere in its source."""
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                # `from jaxcal import stats` imports the module jaxcal.stats
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in MODULES else source)
    return {name for name in found if name == "jaxcal" or name.startswith("jaxcal.")}


def _edges():
    for module, path in MODULES.items():
        for target in sorted(_imports(module, path)):
            if target != module:
                yield module, target


def test_no_private_module_at_the_top_of_the_package():
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert top == [], f"modules at the top of jaxcal/ (move each into its floor): {top}"


def test_imports_run_one_way():
    broken = []
    for module, target in _edges():
        here, there = _floor(module), _floor(target)
        if here == there and there != "jaxcal":
            continue
        if (module, target) in EXCEPTIONS:
            continue
        if there == "cli" or there not in FLOORS_BELOW[here]:
            broken.append(f"{module} imports {target} ({here} -> {there})")
    assert broken == [], "imports against the layout (tests/test_layout.py):\n" + "\n".join(broken)


def test_the_walk_sees_the_imports_it_checks():
    """The rule test above is only as good as the walk: pin it on known edges."""
    edges = set(_edges())
    assert ("jaxcal.metrics._ece", "jaxcal._core.binning") in edges
    assert ("jaxcal.stats._resampling.binned_null", "jaxcal.metrics._ece") in edges
    assert ("jaxcal", "jaxcal.stats") in edges  # `from jaxcal.stats import ...`
    assert any(module.startswith("jaxcal.cli.") and target == "jaxcal" for module, target in edges)
    assert ("jaxcal.cli._format", "jaxcal.plot") in edges  # imported inside a function


def test_exceptions_are_still_needed():
    edges = set(_edges())
    stale = [pair for pair in EXCEPTIONS if pair not in edges]
    assert stale == [], f"EXCEPTIONS lists imports that no longer exist: {stale}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_length(module):
    lines = MODULES[module].read_text().count("\n")
    assert lines <= MAX_LINES, f"{module}: {lines} lines; split it by concept."


def _own_test_file(path: pathlib.Path) -> pathlib.Path:
    parts = path.relative_to(PACKAGE).parts
    floor = "core" if parts[0] == "_core" else parts[0]
    return TESTS / floor / f"test_{path.stem.lstrip('_')}.py"


def test_every_module_has_tests_or_a_line_saying_where():
    readme = (TESTS / "README.md").read_text()
    missing = []
    for path in MODULES.values():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        relative = path.relative_to(PACKAGE.parent).as_posix()
        if not _own_test_file(path).exists() and f"`{relative}`" not in readme:
            missing.append(relative)
    assert missing == [], (
        "modules without a test file of their own name (tests/<floor>/test_<name>.py) and "
        f"without a line in tests/README.md: {missing}"
    )


_ROLE = re.compile(r":(?:mod|func|class|data|attr|meth|obj|exc):`~?([^`<]+)`")


def test_docstrings_point_at_public_names():
    private = []
    for module, path in MODULES.items():
        for target in _ROLE.findall(path.read_text()):
            parts = target.strip().split(".")
            if parts[0] == "jaxcal" and any(p.startswith("_") for p in parts[1:]):
                private.append(f"{module}: {target}")
    assert private == [], "cross-references into private modules:\n" + "\n".join(private)
