"""``import jaxcal`` is lazy (PEP 562): namespaces and re-exported names load on first use.

``import jaxcal`` must cost about what Python's start does (issue 33: within 0.15 s of
``import jax``), so it imports no namespace, no optional extra and no plotting library;
``jaxcal.ece``, ``from jaxcal import stats`` and ``dir(jaxcal)`` still work. Each check runs
in a new interpreter, since this one has imported everything already.
"""

from __future__ import annotations

import json
import pathlib
import pkgutil
import subprocess
import sys

import jaxcal

ROOT = pathlib.Path(jaxcal.__file__).parents[1]

#: Libraries ``import jaxcal`` must not import (optional extras, plotting, heavy peers).
HEAVY = ("matplotlib", "pandas", "pyarrow", "sklearn", "scipy", "dask", "polars", "torch")

#: Public subpackages reached only by an explicit import (host-side, optional extras):
#: every other public subpackage must be one line of ``jaxcal._NAMESPACES``.
EXPLICIT_ONLY = {"cli", "plot", "sklearn", "spark", "sql"}  # host-side extras


def _run(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


_LOADED = (
    "import json, sys; "
    "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} | "
    "{m for m in sys.modules if m.startswith('jaxcal')})))"
)


def test_import_jaxcal_loads_no_namespace_and_no_extra():
    loaded = set(_run("import jaxcal; " + _LOADED))
    heavy = sorted(loaded & set(HEAVY))
    subpackages = sorted(m for m in loaded if m.startswith("jaxcal."))
    assert heavy == [], f"`import jaxcal` imports {heavy}: import them where they are used"
    assert subpackages == [], (
        f"`import jaxcal` imports {subpackages} eagerly: list a namespace in "
        "jaxcal._NAMESPACES / a name in jaxcal._EXPORTS instead of importing it"
    )


def test_names_load_on_first_use_and_namespaces_stay_free_of_extras():
    code = (
        "import jaxcal, sys\n"
        "assert 'jaxcal.metrics' not in sys.modules\n"
        "ece = jaxcal.ece\n"
        "from jaxcal import stats\n"
        "import jaxcal.metrics\n"
        "assert ece is jaxcal.metrics.ece and stats.kuiper_test is jaxcal.kuiper_test\n"
        "assert set(jaxcal.__all__) <= set(dir(jaxcal))\n"
        "for ns in jaxcal._NAMESPACES:\n"
        "    assert getattr(jaxcal, ns).__name__ == 'jaxcal.' + ns\n" + _LOADED
    )
    heavy = sorted(set(_run(code)) & set(HEAVY))
    assert heavy == [], f"importing jaxcal's namespaces imports {heavy}"


def test_unknown_names_raise_attribute_error():
    try:
        jaxcal.not_a_name  # noqa: B018
    except AttributeError as err:
        assert "not_a_name" in str(err)
    else:
        raise AssertionError("jaxcal.not_a_name did not raise AttributeError")


def test_the_tables_cover_every_public_subpackage():
    public = {m.name for m in pkgutil.iter_modules(jaxcal.__path__) if not m.name.startswith("_")}
    missing = sorted(public - set(jaxcal._NAMESPACES) - EXPLICIT_ONLY)
    assert missing == [], (
        f"public subpackages {missing} are not reachable as jaxcal.NAME: add each to "
        "jaxcal._NAMESPACES (or, for a host-side extra, to EXPLICIT_ONLY here)"
    )
    for namespace, names in jaxcal._EXPORTS.items():
        if namespace == "_core.store":  # the store's switch: a setting, not a namespace
            assert names == ("set_executable_store",)
            continue
        assert namespace in jaxcal._NAMESPACES, namespace
        module = getattr(jaxcal, namespace)
        assert set(names) <= set(module.__all__), f"{namespace}: {set(names) - set(module.__all__)}"
