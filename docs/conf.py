"""Sphinx configuration of the jaxcal documentation (Sphinx + myst-nb + sphinx-book-theme).

Built in CI with ``python -m sphinx -W --keep-going -n -b html docs docs/_build/html``:
warnings and unresolved references are errors, and the notebooks in ``docs/notebooks/``
are executed during the build (an error in a cell fails it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))

import jaxcal  # noqa: E402

project = "jaxcal"
author = "the jaxcal developers"
copyright = "2026, the jaxcal developers"
release = version = jaxcal.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    # MathJax served from the built site (_static/mathjax), not a CDN: the API pages'
    # formulas render offline (the docs extra installs it).
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
    "myst_nb",
    "jaxcal_refs",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "README.md"]
root_doc = "index"

# --- API pages: one per public namespace (docs/api/), written from the docstrings.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": False}
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_custom_sections = [("References", "notes_style")]
add_module_names = False
python_use_unqualified_type_names = True

# --- Every reference must resolve (-n). Other projects' objects (jax.Array, optax.lbfgs,
# numpy.ndarray, ...) cannot: CI has no network for intersphinx inventories, so they are
# named in code font and not linked. Everything in jaxcal must resolve.
nitpicky = True
nitpick_ignore_regex = [
    (
        r"py:.*",
        r"(jax|jaxlib|jnp|np|numpy|optax|chex|flax|nnx|matplotlib|plt|pyarrow|pa|dask|"
        r"distributed|clu|sklearn|scipy|typing|collections|types|os|pathlib|io|enum|argparse)(\..*)?",
    ),
    (
        r"py:.*",
        r"(Any|Callable|Sequence|Mapping|Iterable|Iterator|NamedTuple|ArrayLike|Array|"
        r"PRNGKeyArray|Path|PathLike|Literal|Optional|Union|Self|TypeVar|optional)",
    ),
    # builtins autodoc writes into signatures
    (r"py:class", r"(int|float|bool|str|bytes|tuple|list|dict|set|object|None|type|callable)"),
]

# --- Notebooks: executed on every build, an error fails it (errors are never allowed).
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_timeout = 600
nb_execution_show_tb = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# --- HTML
html_theme = "sphinx_book_theme"
html_title = f"jaxcal {version}"
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_static_path = ["_static"]
html_css_files = ["jaxcal.css"]  # long code lines wrap (docs/_static/jaxcal.css)

# Smart quotes, but no smart dashes: "--demo" outside a code span stays two hyphens (it
# became an en dash, "–demo", on the benchmarks page: a flag that fails when copied).
smartquotes_action = "qe"

# Notebooks with four CPU devices (psum) can be slow on a loaded machine: XLA:CPU aborts a
# collective whose participants take more than 40 s to arrive; a slow machine is not a
# stuck one (the test session sets the same, conftest.py).
_collective_timeout = "--xla_cpu_collective_call_terminate_timeout_seconds=600"
if _collective_timeout not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_collective_timeout}".strip()
