"""Eager calls padded to size classes, their executables kept in the process and on disk
(jaxcal/_core/eager.py, issue 33)."""

import math

import jax
import numpy as np
import pytest

import jaxcal
from jaxcal import stats
from jaxcal._core import eager, store
from tests.helpers import assert_close, compiles_of, run_with_cache_folder


def _data(n, k=4, seed=0):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k), n).astype(np.float32)
    return probs, rng.integers(0, k, n)


def test_size_classes_are_a_geometric_ladder():
    sizes = sorted({eager.size_class(n) for n in range(1, 200_000)})
    assert sizes[0] == eager.MIN_ROWS
    for n in [1, 127, 128, 129, 1000, 4097, 65_536, 65_537, 99_999]:
        m = eager.size_class(n)
        assert m >= n and m in sizes
        assert m <= max(eager.MIN_ROWS, 1.5 * n)  # at most 50 % more rows
    per_decade = sum(1 for m in sizes if 10_000 < m <= 100_000)
    assert per_decade <= math.ceil(2 * math.log2(10))  # 7


#: Public functions whose eager calls run through the padded path (run_validated).
_PADDED = {
    "ece": lambda p, y: jaxcal.ece(p, y),
    "ece_quantile_l2_debiased": lambda p, y: jaxcal.ece(
        p, y, binning="quantile", norm="l2", debias=True
    ),
    "classwise_ece": lambda p, y: jaxcal.classwise_ece(p, y),
    "brier_score": lambda p, y: jaxcal.brier_score(p, y),
    "log_loss": lambda p, y: jaxcal.log_loss(p, y),
    "reliability_curve": lambda p, y: jaxcal.metrics.reliability_curve(p, y),
    "kuiper_test": lambda p, y: stats.kuiper_test(p, y),
    "ks_test": lambda p, y: stats.ks_test(p, y),
}


@pytest.mark.parametrize("name", sorted(_PADDED))
def test_a_new_n_inside_a_size_class_compiles_nothing_and_equals_the_unpadded_call(name):
    fn = _PADDED[name]
    first, second = _data(1500, seed=1), _data(1400, seed=2)  # both in the class 1536
    assert eager.size_class(1500) == eager.size_class(1400)
    jax.block_until_ready(fn(*first))
    assert compiles_of(lambda: fn(*second)) == 0, f"{name} compiled for a new N in its class"
    unpadded = jax.jit(fn)(*second)  # inside jit: no padding
    for a, b in zip(jax.tree.leaves(fn(*second)), jax.tree.leaves(unpadded), strict=True):
        assert_close(np.asarray(a), np.asarray(b), rtol=2e-6, atol=1e-7)


def test_jax_clear_caches_frees_the_executables_jaxcal_holds():
    # A process that compiles thousands of programs (the test suite) must be able to let
    # them go: kept, their machine code grew a test worker until XLA:CPU crashed.
    p, y = _data(300, seed=3)
    kernel = store.Kernel("clear_caches_test", lambda x: x * 2)
    jax.block_until_ready((jaxcal.ece(p, y), kernel(np.ones(3, np.float32))))
    held = list(eager._EXECUTABLES.values())
    assert held and kernel._ready
    jax.clear_caches()
    assert not eager._EXECUTABLES and not kernel._ready
    jax.block_until_ready(jaxcal.ece(p, y))  # a new executable (JAX's disk cache may serve it)
    assert not any(new is old for new in eager._EXECUTABLES.values() for old in held)


def test_bad_input_in_a_seen_size_class_is_refused_on_every_call():
    probs, labels = _data(1300, seed=3)
    jax.block_until_ready(jaxcal.ece(probs, labels))
    bad = probs.copy()
    bad[1299, 0] = np.nan  # the last row: padding repeats the first
    for _ in range(2):
        with pytest.raises(ValueError, match="probs"):
            jaxcal.ece(bad, labels)


_SCRIPT = """
import json, sys, jax, numpy as np, jaxcal
count = [0]
jax.monitoring.register_event_duration_secs_listener(
    lambda e, d, **_: count.__setitem__(0, count[0] + (e == "/jax/core/compile/backend_compile_duration")))
rng = np.random.default_rng(int(sys.argv[1]))
n = int(sys.argv[1])
probs = rng.dirichlet(np.ones(3), n).astype(np.float32)
labels = rng.integers(0, 3, n)
jaxcal.ece(probs, labels)  # warms the checks' own small programs, if any
before = count[0]
value = float(jaxcal.stats.kuiper_test(probs, labels).statistic)
cal = jaxcal.calibrators.temperature_scaling()  # a factory's closures, named by options
logits = np.log(probs)
value += float(np.asarray(cal.apply(cal.fit(logits, labels), logits))[0, 0])
state = jaxcal.streaming.update(jaxcal.streaming.init(10, 3), probs, labels)
value += float(jaxcal.streaming.compute(state)["ece"])
print(json.dumps({"compiles": count[0] - before, "value": value}))
"""


def _run(n: int, folder, **env) -> dict:
    return run_with_cache_folder(_SCRIPT, n, folder, **env)


@pytest.mark.slow  # two fresh processes, one of which compiles (~15 s on 2 loaded cores)
def test_a_second_process_loads_the_executable_instead_of_compiling(tmp_path):
    first = _run(1900, tmp_path)
    assert first["compiles"] >= 1
    assert list((tmp_path / "kernels").glob("eager-*.bin"))
    assert list((tmp_path / "kernels").glob("apply-*.bin"))
    second = _run(1800, tmp_path)  # another N in the class 2048: loaded from the store
    assert second["compiles"] == 0
    unstored = _run(1800, tmp_path / "off", JAXCAL_KERNEL_STORE="0")
    assert unstored["compiles"] >= 1 and unstored["value"] == second["value"]
    assert not (tmp_path / "off" / "kernels").exists()


def test_set_executable_store_turns_the_store_off_and_back(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXCAL_CACHE_DIR", str(tmp_path))
    try:
        jaxcal.set_executable_store(None)
        assert store.store_folder() is None
        jaxcal.set_executable_store(tmp_path / "mine")
        assert store.store_folder() == tmp_path / "mine"
        jaxcal.set_executable_store(True)
        assert store.store_folder() == tmp_path / "kernels"
    finally:
        jaxcal.set_executable_store(None)  # the test session stores nothing (conftest)


def test_calibrator_fit_and_apply_compile_nothing_for_a_new_n_in_their_class():
    from jaxcal import calibrators

    cal = calibrators.temperature_scaling()
    rng = np.random.default_rng(4)

    def data(n):
        return rng.normal(size=(n, 3)).astype(np.float32) * 3, rng.integers(0, 3, n)

    jax.block_until_ready(cal.apply(cal.fit(*data(1500)), data(1500)[0]))
    logits, labels = data(1400)
    assert compiles_of(lambda: cal.apply(cal.fit(logits, labels), logits)) == 0
    params = cal.fit(logits, labels)
    probs = cal.apply(params, logits)
    assert probs.shape == (1400, 3)
    expected = jax.jit(cal.apply)(jax.jit(cal.fit)(logits, labels), logits)
    assert_close(np.asarray(probs), np.asarray(expected), rtol=1e-5, atol=1e-6)


def test_a_fit_whose_parameters_hold_its_rows_is_not_padded():
    from jaxcal import calibrators

    cal = calibrators.isotonic()
    scores = np.linspace(0.01, 0.99, 300, dtype=np.float32)
    labels = (np.random.default_rng(5).random(300) < scores).astype(np.int32)
    params = cal.fit(scores, labels)
    assert jax.tree.leaves(params)[0].shape[0] == 300  # the unpadded buffers, as under jit
    assert_close(
        np.asarray(cal.apply(params, scores)), np.asarray(jax.jit(cal.apply)(params, scores))
    )


def test_streaming_update_compiles_nothing_for_a_new_batch_size_in_its_class():
    # The state is carried unpadded (its K or R may equal N: here K = 3 and a batch of 3);
    # the batch is padded with zero-weight rows, which never touch the state.
    from jaxcal import streaming

    rng = np.random.default_rng(6)

    def batch(n):
        return rng.dirichlet(np.ones(3), n).astype(np.float32), rng.integers(0, 3, n)

    state = streaming.update(streaming.init(10, 3), *batch(1500))
    for n in (1400, 1536, 3):
        probs, labels = batch(n)
        if n != 3:
            assert compiles_of(lambda p=probs, y=labels: streaming.update(state, p, y)) == 0
        got = streaming.update(state, probs, labels)
        want = jax.jit(streaming.update)(state, probs, labels)
        for field in ("top_count", "class_count"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
        # the float sums as values (high + low parts: the split is round-off's)
        for field, low_got, low_want in zip(
            ("top_sums", "class_sums", "totals"), got.compensation, want.compensation, strict=True
        ):
            value_got = np.asarray(getattr(got, field), np.float64) + np.asarray(low_got)
            value_want = np.asarray(getattr(want, field), np.float64) + np.asarray(low_want)
            assert_close(value_got, value_want, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="`labels`"):  # refused in a seen class too
        streaming.update(state, probs, labels + 3)


def test_stable_names_tell_options_apart_and_refuse_what_they_cannot_name():
    import optax

    from jaxcal import calibrators
    from jaxcal._core.eager import stable_name

    def name(cal):
        return stable_name(cal.fit.kernel)

    assert name(calibrators.temperature_scaling()) == name(calibrators.temperature_scaling())
    assert name(calibrators.temperature_scaling(max_iter=50)) != name(
        calibrators.temperature_scaling()
    )
    assert name(calibrators.vector_scaling()) != name(calibrators.matrix_scaling())
    # an optimizer object, a function outside jaxcal: compiled, never loaded
    assert name(calibrators.temperature_scaling(optimizer=optax.adam(0.1))) is None
    assert stable_name(np.mean) is None and stable_name(lambda x: x) is None
