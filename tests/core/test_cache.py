"""Keys of options and cached factories: equal options share one object, hence its programs.

The check over every public factory (two calls with equal options, a call each, one
compilation) is the registry's: ``tests/test_api.py::test_equal_factory_calls_compile_once``.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from jaxcal import calibrators
from jaxcal._core.cache import FACTORY_CACHE_SIZE, cached_factory, option_key
from tests.helpers import x64


def test_option_keys_compare_by_value_and_type():
    assert option_key(0.5) == option_key(0.5)
    assert option_key(1) != option_key(1.0) and option_key(True) != option_key(1)
    assert option_key((1e-4, 1e4)) == option_key((1e-4, 1e4))
    assert option_key([1, 2]) != option_key((1, 2))  # a list is not a tuple
    assert option_key({"a": 1, "b": 2}) == option_key({"b": 2, "a": 1})
    f, g = partial(jaxcal.ece, n_bins=10), partial(jaxcal.ece, n_bins=10)
    assert f is not g and option_key(f) == option_key(g)
    assert option_key(f) != option_key(partial(jaxcal.ece, n_bins=11))
    assert option_key(partial(jaxcal.ece, norm="l2")) != option_key(partial(jaxcal.mce))
    hash(option_key(f))


def test_unhashable_options_compare_by_identity():
    a = np.arange(3)
    assert option_key(a) == option_key(a)
    assert option_key(a) != option_key(a.copy())
    key = option_key(partial(jaxcal.ece, weights=jnp.ones(3)))
    hash(key)
    assert key == key


def test_cached_factory_binds_defaults_and_keeps_errors():
    calls = []

    @cached_factory
    def make(n_bins: int = 10, *, inputs: str = "probs"):
        if n_bins < 1:
            raise ValueError("`n_bins` must be >= 1")
        calls.append(n_bins)
        return object()

    assert make() is make(10) is make(n_bins=10) is make(inputs="probs")
    assert make(11) is not make()
    assert calls == [10, 11]
    for _ in range(2):  # a failing call caches nothing and fails again
        with pytest.raises(ValueError, match="n_bins"):
            make(0)
    assert make.__name__ == "make" and "n_bins" in str(make.__wrapped__.__code__.co_varnames)


def test_cache_is_bounded_and_keyed_on_x64():
    @cached_factory
    def make(x: int):
        return [x, jax.config.jax_enable_x64]

    first = make(0)
    with x64():
        assert make(0) is not first and make(0)[1] is True
    for i in range(FACTORY_CACHE_SIZE + 1):
        make(i + 1)
    assert make(0) is not first  # the oldest was dropped


def test_a_second_calibrator_compiles_nothing():
    rng = np.random.default_rng(0)
    s = jnp.asarray(rng.uniform(size=64), jnp.float32)
    y = jnp.asarray((rng.uniform(size=64) < s).astype(np.int32))
    assert calibrators.isotonic() is calibrators.isotonic(inputs="probs")
    assert calibrators.top_label(calibrators.isotonic()) is calibrators.top_label(
        calibrators.isotonic()
    )
    params = calibrators.isotonic().fit(s, y)
    compiles = []

    def listen(event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        again = calibrators.isotonic().fit(s, y)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert not compiles
    np.testing.assert_array_equal(np.asarray(again.y), np.asarray(params.y))
