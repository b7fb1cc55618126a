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
    "jaxcal.losses",
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


def _jaxcal_imports(path, package):
    """Names of the jaxcal modules that the module at ``path`` imports (any depth)."""
    import ast

    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("jaxcal"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("jaxcal"):
                found.add(node.module)
                # `from jaxcal import streaming` imports the submodule
                found.update(f"{node.module}.{a.name}" for a in node.names)
    return {name for name in found if name in package}


def test_imports_form_layers_without_cycles():
    """The module import graph of jaxcal is acyclic (a package imports its own parts)."""
    import pathlib

    import jaxcal

    root = pathlib.Path(jaxcal.__file__).parent
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph = {name: _jaxcal_imports(path, modules) - {name} for name, path in modules.items()}
    # A package's __init__ re-exports its parts; a part importing its own package's
    # namespace back would be a cycle, which is what this test is for.
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                cycle = [*stack[stack.index(dep) :], dep] if dep in stack else [node, dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, [*stack, dep])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
