"""Data, keys and metric-like functions shared by the resampling tests.

test_random, test_binned_null, test_bootstrap and test_bootstrap_ci use the same arrays
and resample count, so that one compiled kernel serves several tests.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import jaxcal
from jaxcal._core.random import label_plan, resampled_labels

N = 501  # odd: exercises the padding position of the last Threefry block
KEY = jax.random.key(20240607)
R = 64  # resamples of the mechanical tests: one compiled kernel serves several tests


def binary_data(n=N, seed=0, power=1.0):
    """Scores p and labels ~ Bernoulli(p ** power) (power 1: calibrated)."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n).astype(np.float32)
    y = (rng.random(n) < p**power).astype(np.int32)
    return jnp.asarray(p), jnp.asarray(y)


def multiclass_data(n=N, k=4, seed=1):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k), n).astype(np.float32)
    labels = np.array([rng.choice(k, p=row / row.sum()) for row in probs.astype(np.float64)])
    return jnp.asarray(probs), jnp.asarray(labels.astype(np.int32))


P, Y = binary_data()
PM, YM = multiclass_data()

#: Metrics with a declared binned form (the fast path), one per option family.
ECE_VARIANTS = [
    jaxcal.ece,
    partial(jaxcal.ece, n_bins=6, binning="quantile", norm="l2", debias=True),
    partial(jaxcal.mce, n_bins=5, closed="left"),
]


def mean_label(probs, labels, *, weights=None):
    """A metric-like function: the (weighted) mean label."""
    y = labels.astype(jnp.float32)
    if weights is None:
        return jnp.mean(y)
    return jnp.sum(weights * y) / jnp.sum(weights)


def mean_prob(probs, labels, *, weights=None):
    """A metric-like function of the predictions only: the (weighted) mean of probs."""
    del labels
    w = jnp.ones_like(probs) if weights is None else weights.astype(probs.dtype)
    return jnp.sum(w * probs) / jnp.sum(w)


def consistency_labels(seeds, probs):
    """The labels ``(b, N)`` consistency resampling draws for ``seeds`` ``(b, 2)``: samples
    paired in order of the positive-class probability or the top-label confidence."""
    scores = probs if probs.ndim == 1 else jnp.max(probs, axis=1)
    return resampled_labels(seeds, label_plan(probs, scores))
