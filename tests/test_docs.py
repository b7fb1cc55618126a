"""Every public name has an entry on an API page of the documentation site (docs/api/).

optax's coverage check, as a test: a name added to a public ``__all__`` without its page
entry fails here (regenerate the pages with ``python docs/_ext/make_api_pages.py``). The
site itself is built in CI with ``-W -n``, which checks that every cross-reference
resolves; this test needs no Sphinx.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import pkgutil
import re
import sys

import pytest

import jaxcal

DOCS = pathlib.Path(__file__).parents[1] / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

from jaxcal_refs import NAMESPACES, canonical_paths  # noqa: E402

_DIRECTIVE = re.compile(r"^\.\. (?:autofunction|autoclass|py:data|autodata):: (\S+)$", re.M)
_MODULE = re.compile(r"^\.\. py:module:: (\S+)$", re.M)


def _documented() -> set[str]:
    out = set()
    for page in (DOCS / "api").glob("*.rst"):
        text = page.read_text()
        modules = _MODULE.findall(text)
        for name in _DIRECTIVE.findall(text):
            out.add(name if name.startswith("jaxcal.") else f"{modules[0]}.{name}")
    return out


DOCUMENTED = _documented()
CANONICAL = canonical_paths()


def _where(module, name: str, ns_path: str) -> str:
    return CANONICAL.get(id(getattr(module, name)), f"{ns_path}.{name}")


def test_every_public_namespace_has_a_page():
    public = {
        m.name
        for m in pkgutil.iter_modules(jaxcal.__path__)
        if not m.name.startswith("_") and m.ispkg
    }
    assert public <= set(NAMESPACES), f"namespaces without an API page: {public - set(NAMESPACES)}"
    for ns in NAMESPACES:
        assert (DOCS / "api" / f"{ns}.rst").exists(), ns


@pytest.mark.parametrize("ns", NAMESPACES)
def test_every_name_of_a_namespace_is_documented(ns):
    module = importlib.import_module(f"jaxcal.{ns}")
    missing = [
        name for name in module.__all__ if _where(module, name, f"jaxcal.{ns}") not in DOCUMENTED
    ]
    assert missing == [], (
        f"jaxcal.{ns} names without an API entry (python docs/_ext/make_api_pages.py): {missing}"
    )


def test_every_top_level_name_is_documented():
    missing = [
        name
        for name in jaxcal.__all__
        if not inspect.ismodule(getattr(jaxcal, name))
        and name != "__version__"
        and CANONICAL.get(id(getattr(jaxcal, name))) not in DOCUMENTED
    ]
    assert missing == [], f"top-level names without an API entry: {missing}"


def test_the_check_sees_a_missing_entry():
    """The coverage check is only as good as its reading of the pages: pin it."""
    assert "jaxcal.metrics.ece" in DOCUMENTED
    assert "jaxcal.stats.ks_test" in DOCUMENTED
    assert "jaxcal.cli.ROW_ORDER" in DOCUMENTED
    assert "jaxcal.stats.confidence_and_correctness" not in DOCUMENTED  # linked, not repeated
    assert CANONICAL[id(jaxcal.stats.confidence_and_correctness)] in DOCUMENTED
