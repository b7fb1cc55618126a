"""The one sort of jaxcal (jaxcal/_core/sort.py): NumPy's order and tie rule, on both paths.

On CPU, rows of at least ``HOST_ARGSORT_MIN_SIZE`` (argsort) or ``HOST_SORT_MIN_SIZE``
(sort of values) keys are sorted by NumPy through a host callback, shorter ones by XLA;
the XLA path is also what GPU and TPU run. Both are checked against NumPy here: the long
rows through the public functions, and the XLA path of the long rows directly.
"""

import textwrap

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from jaxcal._core import sort as _sort
from jaxcal._core.sort import argsort, monotone_bits, sort
from tests.helpers import run_on_cpu_devices, x64

SHORT = 300  # XLA sorts on every backend
# Host sorts on CPU.
LONG = max(_sort.HOST_ARGSORT_MIN_SIZE, _sort.HOST_SORT_MIN_SIZE, _sort.HOST_SEGMENT_SORT_MIN_SIZE)


def _awkward(n, dtype=np.float32, seed=0):
    """Negatives, -0.0 and 0.0, ties, +-inf and NaNs of both signs, shuffled."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(dtype)
    x[rng.integers(0, n, n // 3)] = x[: n // 10][rng.integers(0, n // 10, n // 3)]  # ties
    special = np.array([-0.0, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, np.nan, 0.0])
    x[rng.choice(n, 45, replace=False)] = np.tile(special, 5).astype(dtype)
    return x


def _expected_order(x):
    return np.argsort(np.asarray(x), axis=-1, kind="stable")


@pytest.mark.parametrize("n", [SHORT, LONG])
def test_argsort_is_numpys_stable_argsort(n):
    x = _awkward(n)
    np.testing.assert_array_equal(jax.jit(argsort)(x), _expected_order(x))
    assert jax.jit(argsort)(x).dtype == jnp.int32


def test_nan_policy_nans_last_in_input_order_and_signed_zeros_tie():
    x = np.array([np.nan, 1.0, -np.nan, -0.0, 0.0, -np.inf, -0.0], np.float32)
    assert argsort(x).tolist() == [5, 3, 4, 6, 1, 0, 2]
    assert np.isnan(sort(x)[-2:]).all()
    assert not np.signbit(sort(x)[1:4]).any()  # -0.0 comes back as +0.0


@pytest.mark.parametrize("n", [SHORT, LONG])
def test_host_and_xla_paths_agree(n):
    x = _awkward(n, seed=1)
    bits = monotone_bits(jnp.asarray(x))
    np.testing.assert_array_equal(jax.jit(_sort._xla_argsort)(bits), _expected_order(x))
    np.testing.assert_array_equal(_sort._host_argsort(np.asarray(bits)), _expected_order(x))


@pytest.mark.parametrize(
    "kind", ["spread", "narrow", "few values", "all equal", "extremes", "skewed"]
)
def test_host_argsort_within_buckets_is_the_stable_argsort(kind):
    # From HOST_BUCKET_ARGSORT_MIN_SIZE keys the host sorts within buckets of the key; the
    # shift adapts to the keys' range, so every spread of keys must give the same order.
    n = _sort.HOST_BUCKET_ARGSORT_MIN_SIZE + 17
    rng = np.random.default_rng(3)
    keys = {
        "spread": rng.integers(0, 2**32, n, dtype=np.uint64),
        "narrow": 2**31 + rng.integers(0, 1000, n),
        "few values": rng.integers(0, 4, n) * 2**30,
        "all equal": np.full(n, 7),
        "extremes": rng.choice([0, 1, 2**32 - 2, 2**32 - 1], n),
        "skewed": np.where(rng.random(n) < 0.99, 5, rng.integers(0, 2**32, n, dtype=np.uint64)),
    }[kind]
    bits = np.asarray(keys, np.uint64).astype(np.uint32)
    expected = np.argsort(bits, kind="stable")
    np.testing.assert_array_equal(_sort._bucketed_argsort_row(bits), expected)
    np.testing.assert_array_equal(_sort._host_argsort(np.stack([bits, bits[::-1]]))[0], expected)


def test_the_size_picks_the_path():
    def lowered(fn, n, dtype=jnp.float32):
        return jax.jit(fn).lower(jax.ShapeDtypeStruct((n,), dtype)).as_text()

    small, large = _sort.HOST_ARGSORT_MIN_SIZE - 1, _sort.HOST_ARGSORT_MIN_SIZE
    assert "callback" not in lowered(argsort, small)
    assert "callback" in lowered(argsort, large)
    with x64():  # 64-bit keys: XLA sorts them as a pair, slower, so the host from fewer
        small, large = _sort.HOST_ARGSORT_64_MIN_SIZE - 1, _sort.HOST_ARGSORT_64_MIN_SIZE
        assert "callback" not in lowered(argsort, small, jnp.float64)
        assert "callback" in lowered(argsort, large, jnp.float64)
    assert "callback" not in lowered(sort, _sort.HOST_SORT_MIN_SIZE - 1, jnp.int32)
    assert "callback" in lowered(sort, _sort.HOST_SORT_MIN_SIZE, jnp.int32)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int16, np.uint8, np.bool_])
def test_argsort_of_integers(dtype):
    rng = np.random.default_rng(2)
    info = np.iinfo(dtype) if dtype != np.bool_ else None
    if info is None:
        x = rng.random(LONG) < 0.5
    else:
        x = rng.integers(info.min, info.max, LONG, endpoint=True).astype(dtype)
        x[:20] = info.min
        x[20:40] = info.max
    np.testing.assert_array_equal(jax.jit(argsort)(x), _expected_order(x))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_argsort_of_half_floats(dtype):
    x = _awkward(LONG, dtype, seed=3)
    np.testing.assert_array_equal(argsort(x), _expected_order(x.astype(np.float32)))


@pytest.mark.parametrize("n", [SHORT, LONG])
def test_float64_under_x64(n):
    with x64():
        x = _awkward(n, np.float64, seed=4)
        x[::7] = x[1] + 1e-16  # ties at a distance float32 would not resolve
        order = jax.jit(argsort)(jnp.asarray(x))
        np.testing.assert_array_equal(order, _expected_order(x))
        assert order.dtype == jnp.int32
        values = jax.jit(sort)(jnp.asarray(x))
        assert values.dtype == jnp.float64
        np.testing.assert_array_equal(values, np.sort(x) + 0.0)  # -0.0 canonical
        keys = np.random.default_rng(5).integers(-(2**62), 2**62, n)
        np.testing.assert_array_equal(jax.jit(sort)(jnp.asarray(keys)), np.sort(keys))


@pytest.mark.parametrize("n", [SHORT, LONG])
def test_sort_of_values(n):
    rng = np.random.default_rng(6)
    keys = rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32)
    got = jax.jit(sort)(keys)
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(got, np.sort(keys))
    x = _awkward(n, seed=7)
    np.testing.assert_array_equal(jax.jit(sort)(x), np.sort(x) + np.float32(0))


@pytest.mark.parametrize("n", [SHORT, LONG])
def test_vmap_sorts_each_row(n):
    x = np.stack([_awkward(n, seed=s) for s in range(3)])
    np.testing.assert_array_equal(jax.jit(jax.vmap(argsort))(x), _expected_order(x))
    np.testing.assert_array_equal(jax.vmap(argsort, in_axes=1)(x.T), _expected_order(x))
    keys = x.view(np.int32)
    np.testing.assert_array_equal(jax.jit(jax.vmap(sort))(keys), np.sort(keys, axis=-1))
    nested = jax.vmap(jax.vmap(argsort))(x.reshape(3, 1, n))
    np.testing.assert_array_equal(nested.reshape(3, n), _expected_order(x))


def test_gathers_by_the_order_are_differentiable():
    x = jnp.asarray(np.random.default_rng(8).random(LONG).astype(np.float32))
    ramp = jnp.arange(LONG, dtype=jnp.float32)

    def weighted_sorted_sum(v):
        return jnp.sum(v[argsort(v)] * ramp) + jnp.sum(sort(v) * ramp)

    grad = jax.jit(jax.grad(weighted_sorted_sum))(x)
    rank = np.empty(LONG, np.float32)
    rank[_expected_order(x)] = np.arange(LONG)
    # Each sample meets the ramp at its rank, once through the gather and once through sort.
    np.testing.assert_array_equal(grad, 2 * rank)


def test_too_many_keys_raise_at_trace_time():
    with pytest.raises(ValueError, match="fewer than 2\\*\\*31 keys"):
        jax.eval_shape(argsort, jax.ShapeDtypeStruct((2**31,), jnp.float32))


_SHARD_MAP_SCRIPT = textwrap.dedent(
    """
    import json
    from functools import partial
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    from jaxcal._core.sort import argsort, sort

    mesh = jax.make_mesh((4,), ("d",))
    x = np.random.default_rng(0).standard_normal((4, 3000)).astype(np.float32)
    xs = jax.device_put(x, NamedSharding(mesh, P("d")))

    @jax.jit
    @partial(jax.shard_map, mesh=mesh, in_specs=P("d"), out_specs=P("d"))
    def per_shard(a):
        return argsort(a), sort(jax.lax.bitcast_convert_type(a, jnp.int32))

    order, keys = per_shard(xs)
    replicated = jax.jit(jax.shard_map(argsort, mesh=mesh, in_specs=P(), out_specs=P()))
    print(json.dumps({
        "order": bool((np.asarray(order) == np.argsort(x, axis=-1, kind="stable")).all()),
        "keys": bool((np.asarray(keys) == np.sort(x.view(np.int32), axis=-1)).all()),
        "replicated": bool((np.asarray(replicated(x[0])) == np.argsort(x[0], kind="stable")).all()),
    }))
    """
)


def test_inside_shard_map_on_four_cpu_devices(tmp_path):
    script = tmp_path / "shard_map_sort.py"
    script.write_text(_SHARD_MAP_SCRIPT)
    assert run_on_cpu_devices(script) == {
        "order": True,
        "keys": True,
        "replicated": True,
    }


def test_x64_keys_survive_a_callback_thread_without_x64():
    # enable_x64 is thread-local: a host callback running on a thread where it is off had
    # its uint64 keys truncated to 32 bits by JAX (14 wrong orders in 20 calls).
    rng = np.random.default_rng(5)
    with x64():
        for _ in range(10):
            x = rng.random(LONG)
            order = jax.jit(argsort)(jnp.asarray(x))
            np.testing.assert_array_equal(order, np.argsort(x, kind="stable"))
            np.testing.assert_array_equal(jax.jit(sort)(jnp.asarray(x)), np.sort(x))


# ------------------------------------------------------------------ sorts within segments


def _segment_data(n, key_dtype=np.float32, segments=40, seed=9):
    """Awkward keys (ties, -0.0 and 0.0, NaNs) and segment ids in arbitrary order."""
    ids = np.random.default_rng(seed).integers(0, segments, n).astype(np.int32)
    return ids, _awkward(n, key_dtype, seed=seed)


@pytest.mark.parametrize("n", [SHORT, LONG])
def test_segment_argsort_is_lexsort(n):
    ids, keys = _segment_data(n)
    want = np.lexsort((keys + np.float32(0), ids))  # -0.0 ties with 0.0
    np.testing.assert_array_equal(jax.jit(_sort.segment_argsort)(ids, keys), want)
    bits = monotone_bits(jnp.asarray(keys))
    np.testing.assert_array_equal(
        jax.jit(_sort._xla_segment_sort)(ids, bits, jnp.arange(n))[2], want
    )
    (host,) = _sort._host_segment_argsort(ids, np.asarray(bits))
    np.testing.assert_array_equal(host, want)
    assert host.dtype == np.int32


@pytest.mark.parametrize("n", [SHORT, LONG])
def test_segment_sort_is_the_values_of_lexsort(n):
    rng = np.random.default_rng(10)
    ids, _ = _segment_data(n)
    for keys in (
        rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32),
        rng.integers(0, 2**32 - 1, n, dtype=np.uint32),
        rng.integers(-3, 3, n).astype(np.int32),  # ties
    ):
        want = np.lexsort((keys, ids))
        got_ids, got_keys = jax.jit(_sort.segment_sort)(ids, keys)
        assert got_keys.dtype == keys.dtype and got_ids.dtype == jnp.int32
        np.testing.assert_array_equal(got_ids, ids[want])
        np.testing.assert_array_equal(got_keys, keys[want])


def test_segment_sorts_of_many_short_and_of_large_ids():
    rng = np.random.default_rng(11)
    keys = rng.integers(-5, 5, LONG).astype(np.int32)
    for ids in (
        rng.integers(0, LONG, LONG),  # mostly runs of one or two: np.lexsort
        rng.choice([3, 70_000, 2**20], LONG),  # ids past 16 bits, three long runs
        np.zeros(LONG, np.int64),
    ):
        want = np.lexsort((keys, ids))
        np.testing.assert_array_equal(_sort.segment_argsort(ids, keys), want)
        got_ids, got_keys = _sort.segment_sort(ids, keys)
        np.testing.assert_array_equal(got_ids, ids[want])
        np.testing.assert_array_equal(got_keys, keys[want])


def test_segment_sorts_of_64_bit_keys_under_x64():
    # 64-bit keys cross the callback as uint32 pairs (see test_x64_keys_survive_...).
    ids, x = _segment_data(LONG, np.float64, seed=12)
    x[::7] = x[1] + 1e-16  # ties at a distance float32 would not resolve
    keys = np.random.default_rng(13).integers(-(2**62), 2**62, LONG)
    keys[::5] = keys[3]
    with x64():
        for _ in range(5):
            order = jax.jit(_sort.segment_argsort)(jnp.asarray(ids), jnp.asarray(x))
            np.testing.assert_array_equal(order, np.lexsort((x + 0.0, ids)))
            got_ids, got_keys = jax.jit(_sort.segment_sort)(jnp.asarray(ids), jnp.asarray(keys))
            assert got_keys.dtype == jnp.int64
            want = np.lexsort((keys, ids))
            np.testing.assert_array_equal(got_ids, ids[want])
            np.testing.assert_array_equal(got_keys, keys[want])


@pytest.mark.parametrize("n", [SHORT, LONG])
def test_segment_sorts_vmap_each_row(n):
    rows = [_segment_data(n, seed=s) for s in range(3)]
    ids, x = (np.stack(a) for a in zip(*rows, strict=True))
    want = np.stack([np.lexsort((k + np.float32(0), i)) for i, k in zip(ids, x, strict=True)])
    np.testing.assert_array_equal(jax.jit(jax.vmap(_sort.segment_argsort))(ids, x), want)
    shared = np.stack([np.lexsort((k + np.float32(0), ids[0])) for k in x])
    batched = jax.vmap(_sort.segment_argsort, in_axes=(None, 0))(ids[0], x)
    np.testing.assert_array_equal(batched, shared)
    keys = x.view(np.int32)
    got_ids, got_keys = jax.vmap(_sort.segment_sort)(ids, keys)
    want = np.stack([np.lexsort((k, i)) for i, k in zip(ids, keys, strict=True)])
    np.testing.assert_array_equal(got_keys, np.take_along_axis(keys, want, -1))
    np.testing.assert_array_equal(got_ids, np.take_along_axis(ids, want, -1))


def test_segment_sorts_size_picks_the_path_and_reject_float_values():
    def lowered(fn, n, dtype):
        spec = jax.ShapeDtypeStruct((n,), jnp.int32), jax.ShapeDtypeStruct((n,), dtype)
        return jax.jit(fn).lower(*spec).as_text()

    small, large = _sort.HOST_SEGMENT_SORT_MIN_SIZE - 1, _sort.HOST_SEGMENT_SORT_MIN_SIZE
    for fn in (_sort.segment_argsort, _sort.segment_sort):
        assert "callback" not in lowered(fn, small, jnp.int32)
        assert "callback" in lowered(fn, large, jnp.int32)
    with pytest.raises(ValueError, match="integer keys"):
        _sort.segment_sort(jnp.zeros(3, jnp.int32), jnp.zeros(3))
    with pytest.raises(ValueError, match="ids must be integers"):
        _sort.segment_argsort(jnp.zeros(3), jnp.zeros(3))


def test_device_sorts_keep_the_sorts_in_xla():
    """Inside ``device_sorts()`` no sort calls back into Python (the command line stores such
    programs: issue 30); outside, large CPU sorts do. Same order either way."""
    n = _sort.HOST_ARGSORT_MIN_SIZE  # large enough for the host sort outside the block
    keys = jnp.asarray(np.random.default_rng(0).permutation(n).astype(np.float32))

    def text():
        return jax.jit(lambda k: _sort.argsort(k)).lower(keys).as_text()

    with _sort.device_sorts():
        inside = text()
        order = np.asarray(jax.jit(lambda k: _sort.argsort(k))(keys))
    outside = text()
    assert "callback" not in inside
    if jax.default_backend() == "cpu":
        assert "callback" in outside
    np.testing.assert_array_equal(order, np.argsort(np.asarray(keys), kind="stable"))
