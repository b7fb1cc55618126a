"""Property-based fuzzing of every public metric and test (issue 20, item 5).

Each example draws valid-but-extreme inputs (probabilities exactly 0 and 1, on bin edges,
tied, one class only; weights with zeros, all zero, or scaled by 1e-30..1e30) or breaks
one rule (NaN, a row off the simplex, a label out of range, a negative weight). Each call
either raises a ``ValueError`` whose message names an argument in backquotes, or returns
finite values equal to a float64 NumPy oracle (tests/reference.py, tests/reference_soft.py
and the cumulative-differences oracle of tests/stats/test_cumulative.py).

Compile budget: one shape per view (binary N = 24, multiclass N = 24 x K = 4), float32,
weights always passed (an array, never None), so each function compiles at most twice.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxcal
from jaxcal import stats
from tests import reference, reference_soft
from tests.helpers import assert_close
from tests.stats.test_cumulative import oracle as cumulative_oracle

N, K, BINS = 24, 4, 5
NAMED = r"`\w+`"  # every error names the argument it is about
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def cases(draw, multiclass: bool):
    """(probs float32, labels, weights float32, broken rule or None)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["smooth", "sharp", "edges", "ties"]))
    if multiclass:
        scale = {"smooth": 0.5, "sharp": 60.0, "edges": 3.0, "ties": 1.0}[kind]
        logits = rng.normal(size=(N, K)) * scale
        if kind == "ties":
            logits = np.round(logits)
        p = np.exp(logits - logits.max(1, keepdims=True))
        probs = (p / p.sum(1, keepdims=True)).astype(np.float32)
        if kind == "edges":  # one-hot rows: confidence exactly 1
            probs[: N // 3] = np.eye(K, dtype=np.float32)[rng.integers(0, K, N // 3)]
        labels = rng.integers(0, K, N)
    else:
        if kind == "edges":
            probs = (rng.integers(0, BINS + 1, N) / BINS).astype(np.float32)
        elif kind == "ties":
            probs = np.full(N, rng.uniform(), np.float32)
        elif kind == "sharp":
            probs = rng.choice([0.0, 1.0, 1e-7, 1 - 1e-7], N).astype(np.float32)
        else:
            probs = rng.uniform(size=N).astype(np.float32)
        labels = (rng.uniform(size=N) < probs).astype(np.int64)
    if draw(st.booleans()):
        labels = np.full(N, labels[0])  # one class only
    weights = rng.uniform(0.5, 2.0, N)
    weights[rng.uniform(size=N) < 0.25] = 0
    if draw(st.booleans()):
        weights[:] = 1
    weights = (weights * 10.0 ** draw(st.integers(-30, 30))).astype(np.float32)
    broken = draw(st.sampled_from([None] * 6 + ["nan", "simplex", "label", "weight"]))
    i = int(rng.integers(0, N))
    if broken == "nan":
        probs[i] = np.nan
    elif broken == "simplex":
        if multiclass:
            probs[i] = probs[i] * 0.5
        else:
            probs[i] = 1.5
    elif broken == "label":
        labels[i] = K if multiclass else 2
    elif broken == "weight":
        weights[i] = -1
    return probs, labels, weights, broken


def _oracle_inputs(probs, weights):
    return probs.astype(np.float64), weights.astype(np.float64)


def check(call, broken, expected):
    """``call()`` raises a ValueError naming an argument (``broken``), or equals ``expected()``."""
    if broken is not None:
        with pytest.raises(ValueError, match=NAMED):
            call()
        return
    result = call()
    for value in np.atleast_1d(np.asarray(result, np.float64)):
        assert np.isfinite(value)
    if expected is not None:
        # float32 kernels against float64 oracles: sums of N = 24 terms in [0, 1]
        assert_close(np.asarray(result, np.float64), expected(), rtol=1e-4, atol=2e-5)


BINNED = {
    "ece": (jaxcal.ece, reference.ece),
    "mce": (jaxcal.mce, lambda p, y, n, **kw: reference.ece(p, y, n, norm="max", **kw)),
    "ece_l2": (
        lambda p, y, **kw: jaxcal.ece(p, y, norm="l2", **kw),
        lambda p, y, n, **kw: reference.ece(p, y, n, norm="l2", **kw),
    ),
}
MULTICLASS_BINNED = {
    "classwise_ece": (jaxcal.classwise_ece, reference.classwise_ece),
    "top_label_ece": (jaxcal.top_label_ece, reference.top_label_ece),
}


def _binned(metric, ref, probs, labels, weights, broken):
    def expected():
        p, w = _oracle_inputs(probs, weights)
        if w.sum() == 0:
            return 0.0
        return ref(p, labels, BINS, weights=w, dtype=np.float32)

    check(lambda: metric(probs, labels, n_bins=BINS, weights=weights), broken, expected)


@pytest.mark.parametrize("name", sorted(BINNED))
@pytest.mark.parametrize("multiclass", [False, True], ids=["binary", "multiclass"])
@SETTINGS
@given(data=st.data())
def test_binned_errors(name, multiclass, data):
    probs, labels, weights, broken = data.draw(cases(multiclass))
    _binned(*BINNED[name], probs, labels, weights, broken)


@pytest.mark.parametrize("name", sorted(MULTICLASS_BINNED))
@SETTINGS
@given(case=cases(True))
def test_multiclass_binned_errors(name, case):
    metric, ref = MULTICLASS_BINNED[name]
    if name == "classwise_ece":  # the oracle takes no dtype: columns binned in float64
        ref = lambda p, y, n, dtype, **kw: reference.classwise_ece(p, y, n, **kw)  # noqa: E731
    _binned(metric, ref, *case)


def _scoring_oracle(name, probs, labels, weights):
    p, w = _oracle_inputs(probs, weights)
    if w.sum() == 0:
        return 0.0
    one_hot = np.eye(K)[labels] if p.ndim == 2 else (labels == 1).astype(np.float64)
    if name == "brier_score":
        per = np.sum((p - one_hot) ** 2, axis=-1) if p.ndim == 2 else (p - one_hot) ** 2
    else:
        eps = np.finfo(np.float32).eps
        q = p[np.arange(N), labels] if p.ndim == 2 else np.where(labels == 1, p, 1 - p)
        per = -np.log(np.clip(q, eps, 1 - eps))
    return np.sum(w * per) / np.sum(w)


@pytest.mark.parametrize("name", ["brier_score", "log_loss"])
@pytest.mark.parametrize("multiclass", [False, True], ids=["binary", "multiclass"])
@SETTINGS
@given(data=st.data())
def test_scoring_rules(name, multiclass, data):
    probs, labels, weights, broken = data.draw(cases(multiclass))
    metric = getattr(jaxcal, name)
    check(
        lambda: metric(probs, labels, weights=weights),
        broken,
        lambda: _scoring_oracle(name, probs, labels, weights),
    )


@pytest.mark.parametrize("multiclass", [False, True], ids=["binary", "multiclass"])
@SETTINGS
@given(data=st.data())
def test_soft_objectives(multiclass, data):
    probs, labels, weights, broken = data.draw(cases(multiclass))
    p, w = _oracle_inputs(probs, weights)
    empty = w.sum() == 0
    check(
        lambda: jaxcal.mmce(probs, labels, weights=weights),
        broken,
        lambda: 0.0 if empty else reference_soft.np_mmce(p, labels, weights=w),
    )
    check(
        lambda: jaxcal.soft_ece(probs, labels, n_bins=BINS, temperature=0.01, weights=weights),
        broken,
        lambda: 0.0 if empty else reference_soft.np_soft_ece(p, labels, 0.01, BINS, weights=w),
    )
    # smooth_ece picks its bandwidth by a fixed-point search: finite and in [0, 1] only.
    check(lambda: jaxcal.smooth_ece(probs, labels, weights=weights), broken, None)


@pytest.mark.parametrize("multiclass", [False, True], ids=["binary", "multiclass"])
@SETTINGS
@given(data=st.data())
def test_brier_decomposition_and_curve(multiclass, data):
    probs, labels, weights, broken = data.draw(cases(multiclass))

    def identity():
        d = jaxcal.brier_decomposition(probs, labels, n_bins=BINS, weights=weights)
        rebuilt = (
            d.reliability - d.resolution + d.uncertainty
            + d.within_bin_variance - d.within_bin_covariance
        )  # fmt: skip
        return np.array([float(d.brier), float(rebuilt)])

    check(
        identity,
        broken,
        lambda: np.full(2, _scoring_oracle("brier_score", probs, labels, weights)),
    )

    def curve():
        c = jaxcal.reliability_curve(probs, labels, n_bins=BINS, weights=weights)
        return np.array([c.counts.sum(), *np.asarray(c.mean_accuracy)])

    def curve_oracle():
        p, w = _oracle_inputs(probs, weights)
        s, t = reference_soft.scores_targets(p, labels)
        rows = reference._gaps(s, t, reference.uniform_bin(s, BINS, "right", np.float32), BINS, w)
        return np.array([sum(r[1] for r in rows), *(r[3] for r in rows)])

    check(curve, broken, curve_oracle)


@SETTINGS
@given(case=cases(False))
def test_cumulative_tests(case):
    probs, labels, weights, broken = case
    probs = np.clip(probs, 0.01, 0.99) if broken != "nan" and broken != "simplex" else probs
    p, w = _oracle_inputs(probs, weights)
    if broken is None and w.sum() == 0:
        result = stats.calibration_tests(probs, labels, weights=weights)
        assert float(result.ks.statistic) == 0 and float(result.ks.p_value) == 1
        return

    def statistics():
        r = stats.calibration_tests(probs, labels, weights=weights)
        for test in r:
            assert 0 <= float(test.p_value) <= 1
        return np.array([float(t.statistic) for t in r])

    def expected():
        ks, kuiper, z, _, _ = cumulative_oracle(p, labels, w)
        return np.array([ks, kuiper, z])

    check(statistics, broken, expected)


def test_every_public_metric_and_test_is_fuzzed():
    fuzzed = {
        *BINNED, *MULTICLASS_BINNED, "brier_score", "log_loss", "mmce", "soft_ece",
        "smooth_ece", "brier_decomposition", "reliability_curve", "calibration_tests",
    }  # fmt: skip
    fuzzed.discard("ece_l2")
    covered_by_calibration_tests = {"ks_test", "kuiper_test", "spiegelhalter_test"}
    metrics = {"brier_decomposition", "brier_score", "classwise_ece", "ece", "log_loss", "mce",
               "mmce", "reliability_curve", "smooth_ece", "soft_ece", "top_label_ece",
               "calibration_tests", *covered_by_calibration_tests}  # fmt: skip
    assert metrics - covered_by_calibration_tests <= fuzzed
