"""The public API, checked as a whole: every name of every namespace's ``__all__``.

Each public function has a docstring with a doctested example (``>>>``); each public class
documents its attributes; each public namespace has a module docstring. A name added to an
``__all__`` without them fails here.
"""

import importlib
import inspect

import pytest

NAMESPACES = (
    "jaxcal",
    "jaxcal.metrics",
    "jaxcal.stats",
    "jaxcal.calibrators",
    "jaxcal.streaming",
    "jaxcal.coverage",
    "jaxcal.plot",
)


def _public(namespace):
    module = importlib.import_module(namespace)
    return [(name, getattr(module, name)) for name in module.__all__ if name != "__version__"]


PUBLIC = [(ns, name, obj) for ns in NAMESPACES for name, obj in _public(ns)]


def test_every_namespace_has_a_docstring_and_a_sorted_unique_all():
    for namespace in NAMESPACES:
        module = importlib.import_module(namespace)
        assert (module.__doc__ or "").strip(), namespace
        names = list(module.__all__)
        assert len(names) == len(set(names)), namespace
        for name in names:
            assert hasattr(module, name), f"{namespace}.__all__ names a missing {name}"


@pytest.mark.parametrize(
    ("namespace", "name", "obj"), PUBLIC, ids=[f"{ns}.{name}" for ns, name, _ in PUBLIC]
)
def test_every_public_name_is_documented(namespace, name, obj):
    doc = inspect.getdoc(obj) or ""
    assert doc.strip(), f"{namespace}.{name} has no docstring"
    if inspect.ismodule(obj):
        return
    if inspect.isclass(obj):
        has_fields = hasattr(obj, "_fields") or hasattr(obj, "__dataclass_fields__")
        if has_fields:
            assert "Attributes" in doc or ">>>" in doc, f"{namespace}.{name}: no Attributes"
        return
    assert ">>>" in doc, f"{namespace}.{name} has no doctested example"
