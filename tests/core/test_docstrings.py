"""The shared-docstring mechanism (jaxcal/_core/docstrings.py)."""

import inspect

import pytest

import jaxcal
from jaxcal._core.docstrings import SHARED, fill, shared_doc


def test_fill_indents_every_line_of_the_block():
    doc = "Args:\n      {{renormalize}}\n\n    {{traced_validation}}\n"
    out = fill(doc)
    lines = out.splitlines()
    assert lines[1] == "      " + SHARED["renormalize"].splitlines()[0]
    assert (
        lines[2]
        == "        probabilities rounded on export (keyword-only; default False: rows must sum to"
    )
    assert "{{" not in out and out.count("\n") == doc.count("\n") + 3


def test_unknown_placeholder_is_refused():
    with pytest.raises(ValueError, match=r"\{\{renormalise\}\} names no shared block"):
        fill("  {{renormalise}}\n")


def test_decorator_keeps_the_function():
    def f():
        """{{traced_validation}}"""

    assert shared_doc(f) is f and f.__doc__.startswith("Validation runs only")


def test_no_public_docstring_keeps_a_placeholder():
    for ns in (jaxcal.metrics, jaxcal.losses):
        for name in ns.__all__:
            doc = inspect.getdoc(getattr(ns, name)) or ""
            assert "{{" not in doc, f"{ns.__name__}.{name}"
