"""Poisson bootstrap keyed by example id: the draws, their independence of batching and
order, and interval coverage against the resampling bootstrap on real data."""

from importlib import resources

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats as scipy_stats

import jaxcal
from jaxcal import streaming
from jaxcal.streaming._poisson import poisson_weights
from tests.helpers import assert_close
from tests.streaming.test_state import _data

KEY = jax.random.key(7)


def test_multiplicities_follow_poisson_one():
    counts = np.asarray(poisson_weights(KEY, jnp.arange(100_000), 4)).ravel()
    n = counts.size
    for k in range(5):
        p = scipy_stats.poisson.pmf(k, 1.0)
        assert abs(np.mean(counts == k) - p) < 5 * np.sqrt(p * (1 - p) / n), k
    assert counts.max() < 12
    # Replicates are independent of each other: correlation near 0.
    c = np.asarray(poisson_weights(KEY, jnp.arange(100_000), 4)).astype(np.float64)
    assert abs(np.corrcoef(c)[0, 1]) < 0.02 and abs(np.corrcoef(c)[0, 3]) < 0.02


def test_multiplicities_are_a_function_of_key_id_and_replicate_alone():
    ids = jnp.arange(1000, dtype=jnp.int32)
    whole = np.asarray(poisson_weights(KEY, ids, 5))
    perm = np.random.default_rng(0).permutation(1000)
    np.testing.assert_array_equal(np.asarray(poisson_weights(KEY, ids[perm], 5)), whole[:, perm])
    np.testing.assert_array_equal(np.asarray(poisson_weights(KEY, ids, 3)), whole[:3])
    pairs = jnp.stack([jnp.zeros(1000, jnp.uint32), ids.astype(jnp.uint32)], axis=1)
    np.testing.assert_array_equal(np.asarray(poisson_weights(KEY, pairs, 5)), whole)
    high = pairs.at[:, 0].set(1)  # ids beyond 2**32 draw other weights
    assert not np.array_equal(np.asarray(poisson_weights(KEY, high, 5)), whole)


def test_replicates_do_not_depend_on_batching_order_or_sharding():
    probs, labels, weights = _data()
    ids = np.arange(len(labels))
    reps = streaming.poisson_init(10, 4, 16)
    whole = streaming.poisson_update(reps, probs, labels, ids, key=KEY, weights=weights)
    perm = np.random.default_rng(1).permutation(len(labels))
    shards = []
    for part in np.array_split(perm, 3):  # three "machines", shuffled rows
        shards.append(
            streaming.poisson_update(
                reps, probs[part], labels[part], ids[part], key=KEY, weights=weights[part]
            )
        )
    merged = jax.tree_util.tree_map(lambda *x: sum(x[1:], x[0]), *shards)
    np.testing.assert_array_equal(merged.top_count, whole.top_count)
    np.testing.assert_array_equal(merged.class_count, whole.class_count)
    got, want = streaming.poisson_compute(merged), streaming.poisson_compute(whole)
    for name in streaming.OUTPUTS:
        assert_close(got[name], want[name], err_msg=name)
    a = streaming.poisson_interval(merged)["ece"]
    b = streaming.poisson_interval(whole)["ece"]
    assert_close(a, b)


@pytest.mark.parametrize("binary", [True, False])
def test_replicate_is_the_state_of_the_poisson_weighted_stream(binary):
    probs, labels, weights = _data(binary=binary)
    k = 2 if binary else probs.shape[1]
    ids = jnp.arange(len(labels))
    options = dict(binary=binary, resolution=40, closed="left")
    reps = streaming.poisson_update(
        streaming.poisson_init(10, k, 3, **options), probs, labels, ids, key=KEY, weights=weights
    )
    w = np.asarray(poisson_weights(KEY, ids, 3), np.float32) * weights
    got = streaming.poisson_compute(reps)
    for b in range(3):
        one = streaming.update(streaming.init(10, k, **options), probs, labels, w[b])
        np.testing.assert_array_equal(reps.top_count[b], one.top_count)
        np.testing.assert_array_equal(reps.class_count[b], one.class_count)
        want = streaming.compute(one)
        for name in streaming.OUTPUTS:
            assert_close(got[name][b], want[name], err_msg=name)


def test_bad_arguments_name_them():
    reps = streaming.poisson_init(10, 2, 4, binary=True)
    p, y = jnp.array([0.2, 0.7]), jnp.array([0, 1])
    with pytest.raises(ValueError, match="`ids` must be"):
        streaming.poisson_update(reps, p, y, jnp.arange(3), key=KEY)
    with pytest.raises(ValueError, match="does not fit the states"):
        streaming.poisson_update(reps, jnp.array([[0.2, 0.8]] * 2), y, jnp.arange(2), key=KEY)
    with pytest.raises(ValueError, match="replicate states from poisson_init"):
        streaming.poisson_compute(streaming.init(10, 2))
    with pytest.raises(ValueError, match="`n_replicates`"):
        streaming.poisson_init(10, 2, 0)


def _digits():
    with resources.as_file(resources.files("jaxcal") / "data" / "digits_mlp.npz") as path:
        data = np.load(path)
        return data["probs"].astype(np.float32), data["labels"].astype(np.int32)


@pytest.mark.slow
def test_coverage_matches_the_resampling_bootstrap_on_real_data():
    """Population: the digits MLP's 899 held-out predictions. Each trial draws a sample of
    899 from it with replacement and builds 95% intervals of the Brier score and the log
    loss both ways; both cover the population value at about the nominal rate, with
    intervals of about the same width."""
    probs, labels = _digits()
    truth = {
        "brier": float(jaxcal.brier_score(probs, labels)),
        "log_loss": float(jaxcal.log_loss(probs, labels)),
    }
    n, trials, b = len(labels), 200, 200
    rng = np.random.default_rng(0)
    reps0 = streaming.poisson_init(15, probs.shape[1], b)
    ids = jnp.arange(n)

    @jax.jit
    def both(p, y, key):
        poisson_key, boot_key = jax.random.split(key)
        reps = streaming.poisson_update(reps0, p, y, ids, key=poisson_key)
        values = streaming.poisson_compute(reps)
        out = {}
        for name, metric in (("brier", jaxcal.brier_score), ("log_loss", jaxcal.log_loss)):
            ci = jaxcal.stats.bootstrap_ci(metric, p, y, key=boot_key, n_resamples=b)
            poisson = jnp.quantile(values[name], jnp.array([0.025, 0.975]))
            out[name] = (poisson, jnp.stack([ci.low, ci.high]))
        return out

    covered = {(name, kind): 0 for name in truth for kind in ("poisson", "resampling")}
    widths = {key: [] for key in covered}
    for t in range(trials):
        idx = rng.integers(0, n, n)
        out = jax.device_get(both(probs[idx], labels[idx], jax.random.fold_in(KEY, t)))
        for name, (poisson, resampling) in out.items():
            for kind, (low, high) in (("poisson", poisson), ("resampling", resampling)):
                covered[(name, kind)] += int(low <= truth[name] <= high)
                widths[(name, kind)].append(high - low)
    for name in truth:
        for kind in ("poisson", "resampling"):
            rate = covered[(name, kind)] / trials
            assert 0.89 <= rate <= 0.99, (name, kind, rate)  # 95% +- 4 binomial sd
        ratio = np.mean(widths[(name, "poisson")]) / np.mean(widths[(name, "resampling")])
        assert 0.9 < ratio < 1.1, (name, ratio)
