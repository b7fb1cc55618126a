"""Test configuration: JAX runs strict, as in equinox's suite (STYLE.md).

``jax.config.update`` belongs here and nowhere else. Float64 tests use the
``jax.enable_x64()`` context manager (see ``tests/helpers.py::x64``).

Tests run with strict dtype promotion and rank promotion raising, so that a kernel that
relies on an implicit promotion fails here before a user with those settings meets it.
Doctests are the examples users copy: they run with JAX's default (standard) dtype
promotion, the setting users have.
"""

import importlib.util
import os

import jax
import pytest
from _pytest.doctest import DoctestItem

os.environ.setdefault("XLA_FLAGS", "")
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

# Modules whose doctests need an optional extra (tests/ skip with importorskip instead).
collect_ignore = [] if importlib.util.find_spec("flax") else ["jaxcal/streaming/_nnx.py"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Run doctests under the default ("standard") dtype promotion users have."""
    if not isinstance(item, DoctestItem):
        return (yield)
    with jax.numpy_dtype_promotion("standard"):
        return (yield)
