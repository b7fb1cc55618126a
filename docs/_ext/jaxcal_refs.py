"""Resolve every public path of a jaxcal object to the one place it is documented.

Each public object is documented once, on the API page of the first namespace that
exports it (``jaxcal.metrics.ece``, ``jaxcal.stats.ks_test``, ...). Users and docstrings
also write the top-level alias (``jaxcal.ece``) and the paths of namespaces that re-export
an object from another (``jaxcal.stats.confidence_and_correctness``): a reference to any
of those paths resolves here to the documented object, instead of the object being
documented twice. ``canonical_paths`` is also what ``docs/api/*.rst`` and
``tests/test_docs.py`` use to decide where a name is documented.
"""

from __future__ import annotations

import importlib
import inspect

#: The public namespaces, in the order that decides where a shared object is documented.
NAMESPACES = (
    "metrics",
    "stats",
    "calibrators",
    "losses",
    "streaming",
    "coverage",
    "selective",
    "regression",
    "presets",
    "plot",
    "sklearn",
    "sql",
    "spark",
    "cli",
)


def canonical_paths() -> dict[int, str]:
    """``id(object) -> "jaxcal.<namespace>.<name>"``, the first namespace that exports it
    (``"jaxcal.<name>"`` for the few top-level names no namespace exports, such as
    ``set_executable_store``, documented on the API index page)."""
    out: dict[int, str] = {}
    for ns in NAMESPACES:
        module = importlib.import_module(f"jaxcal.{ns}")
        for name in module.__all__:
            obj = getattr(module, name)
            if not isinstance(obj, (int, float, str, tuple, dict)):  # constants: by path only
                out.setdefault(id(obj), f"jaxcal.{ns}.{name}")
    jaxcal = importlib.import_module("jaxcal")
    for name in jaxcal.__all__:
        obj = getattr(jaxcal, name)
        if callable(obj) and not inspect.isclass(obj):
            out.setdefault(id(obj), f"jaxcal.{name}")
    return out


def _documented_path(target: str, canonical: dict[int, str]) -> str | None:
    """The documented path of ``target`` (``jaxcal.ece``, ``jaxcal.X.attr``), if it moves."""
    import jaxcal

    parts = target.split(".")
    obj = jaxcal
    for i, part in enumerate(parts[1:], start=1):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
        if not inspect.ismodule(obj):
            path = canonical.get(id(obj))
            return None if path is None else ".".join([path, *parts[i + 1 :]])
    return None


def _missing_reference(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not target.startswith("jaxcal."):
        return None
    new = _documented_path(target, app.config._jaxcal_canonical)
    if new is None or new == target:
        return None
    domain = env.get_domain("py")
    return domain.resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], new, node, contnode
    )


def setup(app):
    app.config._jaxcal_canonical = canonical_paths()
    app.connect("missing-reference", _missing_reference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
