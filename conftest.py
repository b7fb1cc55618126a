"""Test configuration: JAX runs strict, as in equinox's suite (STYLE.md).

``jax.config.update`` belongs here and nowhere else. Float64 tests use the
``jax.enable_x64()`` context manager (see ``tests/helpers.py::x64``).
"""

import os

import jax

os.environ.setdefault("XLA_FLAGS", "")
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_collection_modifyitems(config, items):
    """Doctests run with the default (non-strict) promotion that users have."""
    del config, items
