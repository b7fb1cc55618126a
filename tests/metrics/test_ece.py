"""The binned calibration-error family against the tutorial, oracles and peer libraries."""

from fractions import Fraction as F
from functools import partial

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxcal
from jaxcal._core import eager
from tests import reference
from tests.helpers import assert_close, count_compiles, x64

# The ECML-PKDD 2020 tutorial's toy example (shared/seeds/002): 30 samples, 3 classes.
TUTORIAL = [
    ("1", "0", "0"), (".9", ".1", "0"), (".8", ".1", ".1"), (".7", ".1", ".2"), (".6", ".3", ".1"),
    (".4", ".1", ".5"), ("1/3", "1/3", "1/3"), ("1/3", "1/3", "1/3"), (".2", ".4", ".4"), (".1", ".5", ".4"),
    (".8", ".2", "0"), (".7", "0", ".3"), (".5", ".2", ".3"), (".4", ".4", ".2"), (".4", ".2", ".4"),
    (".3", ".4", ".3"), (".2", ".3", ".5"), (".1", ".6", ".3"), (".1", ".3", ".6"), ("0", ".2", ".8"),
    (".8", ".2", "0"), (".8", ".1", ".1"), (".8", "0", ".2"), (".6", "0", ".4"), (".3", "0", ".7"),
    (".2", ".6", ".2"), (".2", ".4", ".4"), ("0", ".4", ".6"), ("0", ".3", ".7"), ("0", ".3", ".7"),
]  # fmt: skip
TUTORIAL_EXACT = [[F(v) for v in row] for row in TUTORIAL]
TUTORIAL_PROBS = np.array([[float(v) for v in row] for row in TUTORIAL_EXACT])
TUTORIAL_LABELS = np.repeat([0, 1, 2], 10)


def _exact_binary_ce(scores, targets, n_bins=5, norm="l1"):
    """Exact rational ECE / MCE with right-closed bins (values are exact fractions)."""
    bins = {}
    for s, t in zip(scores, targets, strict=True):
        b = max(0, -(-s * n_bins // 1) - 1)  # ceil(s M) - 1, exactly
        bins.setdefault(int(b), []).append((s, t))
    gaps = {b: (abs(sum(t for _, t in v) / F(len(v)) - sum(s for s, _ in v) / F(len(v))), len(v))
            for b, v in bins.items()}  # fmt: skip
    if norm == "max":
        return max(g for g, _ in gaps.values())
    return sum(g * n for g, n in gaps.values()) / len(scores)


def _exact_confidence(rows, labels):
    conf, correct = [], []
    for row, y in zip(rows, labels, strict=True):
        top = max(row)
        conf.append(top)
        correct.append(int(row.index(top) == y))
    return conf, correct


class TestTutorialExample:
    """Exact values derived here; the tutorial rounds per-bin means to 2 digits."""

    def test_binary_ece_and_mce(self):
        col, y = [r[0] for r in TUTORIAL_EXACT], [int(v == 0) for v in TUTORIAL_LABELS]
        exact_ece, exact_mce = _exact_binary_ce(col, y), _exact_binary_ce(col, y, norm="max")
        assert exact_ece == F(169, 900)  # 5.6333... / 30
        assert_close(jaxcal.ece(TUTORIAL_PROBS[:, 0], np.array(y), n_bins=5), float(exact_ece))
        assert_close(jaxcal.mce(TUTORIAL_PROBS[:, 0], np.array(y), n_bins=5), float(exact_mce))
        # The tutorial's 0.1873 and 0.48 come from per-bin means rounded to 2 digits.
        rounded = [
            (0.10, 0.18, 11),
            (0.35, 0.43, 7),
            (0.57, 0.33, 3),
            (0.77, 0.29, 7),
            (0.95, 1.0, 2),
        ]
        tutorial = sum(n * round(abs(p - a), 2) for p, a, n in rounded) / 30
        assert round(tutorial, 4) == 0.1873
        assert round(float(exact_mce), 2) == 0.49 and round(0.77 - 0.29, 2) == 0.48

    def test_confidence_ece_and_mce(self):
        conf, correct = _exact_confidence(TUTORIAL_EXACT, list(TUTORIAL_LABELS))
        exact_ece = _exact_binary_ce(conf, correct)
        assert_close(jaxcal.ece(TUTORIAL_PROBS, TUTORIAL_LABELS, n_bins=5), float(exact_ece))
        assert_close(jaxcal.mce(TUTORIAL_PROBS, TUTORIAL_LABELS, n_bins=5), 0.3)
        assert round(float(exact_ece), 2) == round(0.2117, 2)
        curve = jaxcal.reliability_curve(TUTORIAL_PROBS, TUTORIAL_LABELS, n_bins=5)
        assert curve.counts.tolist() == [0, 7, 10, 11, 2]  # the tutorial's bin sizes
        assert_close(curve.mean_accuracy, [0, 3 / 7, 3 / 10, 5 / 11, 1])

    def test_classwise_ece_and_mce(self):
        per_class = [
            _exact_binary_ce([r[k] for r in TUTORIAL_EXACT], [int(v == k) for v in TUTORIAL_LABELS])
            for k in range(3)
        ]
        got = jaxcal.classwise_ece(TUTORIAL_PROBS, TUTORIAL_LABELS, n_bins=5)
        assert_close(got, float(sum(per_class) / 3))
        worst = max(
            _exact_binary_ce(
                [r[k] for r in TUTORIAL_EXACT], [int(v == k) for v in TUTORIAL_LABELS], norm="max"
            )
            for k in range(3)
        )
        assert_close(
            jaxcal.classwise_ece(TUTORIAL_PROBS, TUTORIAL_LABELS, n_bins=5, norm="max"),
            float(worst),
        )


def _random_case(seed, n=400, k=4):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = np.array([rng.choice(k, p=p) for p in probs**0.7 / (probs**0.7).sum(1, keepdims=True)])
    weights = rng.random(n) * (rng.random(n) < 0.9)
    return probs, labels, weights


OPTIONS = [
    dict(norm="l1"), dict(norm="l2"), dict(norm="max"), dict(norm="l2", debias=True),
    dict(binning="quantile"), dict(closed="left"), dict(binning="quantile", closed="left", norm="l2"),
]  # fmt: skip


@pytest.mark.parametrize("opts", OPTIONS, ids=str)
def test_against_float64_reference(opts):
    probs, labels, weights = _random_case(0)
    n_bins = 10
    with x64():
        for w in (None, weights):
            kw = dict(opts, weights=w)
            assert_close(
                jaxcal.ece(probs, labels, n_bins=n_bins, **kw),
                reference.ece(probs, labels, n_bins, **kw),
            )
            binary = probs[:, 1] / probs[:, :2].sum(1)
            assert_close(
                jaxcal.ece(binary, (labels == 1).astype(int), n_bins=n_bins, **kw),
                reference.ece(binary, (labels == 1).astype(int), n_bins, **kw),
            )
            assert_close(
                jaxcal.top_label_ece(probs, labels, n_bins=n_bins, **kw),
                reference.top_label_ece(probs, labels, n_bins, **kw),
            )
            assert_close(
                jaxcal.top_label_ece(probs, labels, n_bins=n_bins, average="sample", **kw),
                reference.top_label_ece(probs, labels, n_bins, average="sample", **kw),
            )
        assert_close(
            jaxcal.classwise_ece(probs, labels, n_bins=n_bins, **opts),
            reference.classwise_ece(probs, labels, n_bins, **opts),
        )


def test_float32_matches_float64_reference():
    probs, labels, _ = _random_case(1, n=2000, k=10)
    got = jaxcal.ece(probs.astype(np.float32), labels)
    assert got.dtype == jnp.float32
    # float32 sums of 2000 terms of size ~0.1: a few ulps of 1e-1 absolute
    assert_close(got, reference.ece(probs.astype(np.float32), labels, dtype=np.float32), atol=1e-6)


class TestPeers:
    def test_mapie_confidence_binary_classwise_and_top_label(self):
        from mapie.metrics.calibration import expected_calibration_error, top_label_ece

        probs, labels, _ = _random_case(2, n=600, k=5)
        probs = np.clip(probs, 1e-6, 1)  # MAPIE puts exact zeros in an extra bin
        probs /= probs.sum(1, keepdims=True)
        correct = (probs.argmax(1) == labels).astype(int)
        with x64():
            # MAPIE's num_bins counts edges: num_bins = M + 1 gives our M right-closed bins.
            assert_close(
                jaxcal.ece(probs, labels, n_bins=10),
                expected_calibration_error(correct, probs, num_bins=11),
                rtol=1e-9,  # MAPIE sums per sample in another order: float64 round-off
            )
            binary = probs[:, 0]
            assert_close(
                jaxcal.ece(binary, (labels == 0).astype(int), n_bins=10),
                expected_calibration_error((labels == 0).astype(int), binary, num_bins=11),
                rtol=1e-9,  # MAPIE sums per sample in another order: float64 round-off
            )
            assert_close(
                jaxcal.classwise_ece(probs, labels, n_bins=10),
                expected_calibration_error(
                    None, probs, num_bins=11, classwise=True, class_labels=labels
                ),
                rtol=1e-9,  # MAPIE sums per sample in another order: float64 round-off
            )
            assert_close(
                jaxcal.top_label_ece(probs, labels, n_bins=10),
                top_label_ece(labels, probs, num_bins=11),
                rtol=1e-9,  # MAPIE sums per sample in another order: float64 round-off
            )

    def test_sklearn_calibration_curve(self):
        from sklearn.calibration import calibration_curve

        probs, labels, _ = _random_case(3, n=500, k=2)
        p, y = probs[:, 1], (labels == 1).astype(int)
        with x64():
            curve = jaxcal.reliability_curve(p, y, n_bins=8, closed="left")
        prob_true, prob_pred = calibration_curve(y, p, n_bins=8, strategy="uniform")
        keep = np.asarray(curve.counts) > 0  # scikit-learn drops empty bins
        assert_close(np.asarray(curve.mean_accuracy)[keep], prob_true)
        assert_close(np.asarray(curve.mean_confidence)[keep], prob_pred)


@pytest.fixture(scope="module")
def digits_models():
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB
    from sklearn.tree import DecisionTreeClassifier

    x, y = load_digits(return_X_y=True)
    x_fit, x_test, y_fit, y_test = train_test_split(x / 16, y, test_size=0.4, random_state=0)
    models = [
        GaussianNB(),
        LogisticRegression(C=0.05, max_iter=500),
        DecisionTreeClassifier(max_depth=6, random_state=0),
    ]
    return [(type(m).__name__, m.fit(x_fit, y_fit).predict_proba(x_test), y_test) for m in models]


def test_real_data_with_exact_zeros_ones_and_ties(digits_models):
    from mapie.metrics.calibration import top_label_ece

    for name, probs, labels in digits_models:
        with x64():
            for opts in ({}, {"norm": "max"}, {"binning": "quantile"}, {"closed": "left"}):
                assert_close(
                    jaxcal.ece(probs, labels, n_bins=15, **opts),
                    reference.ece(probs, labels, 15, **opts),
                    err_msg=name,
                )
            assert_close(
                jaxcal.classwise_ece(probs, labels, n_bins=15),
                reference.classwise_ece(probs, labels, 15),
            )
            if (probs.max(1) > 0).all():  # top confidence is never exactly 0
                assert_close(
                    jaxcal.top_label_ece(probs, labels, n_bins=15),
                    top_label_ece(labels, probs, num_bins=16),
                    rtol=1e-9,  # MAPIE sums per sample in another order: float64 round-off
                )
        assert 0 <= float(jaxcal.ece(probs.astype(np.float32), labels)) <= 1


class TestTransformations:
    def test_jit_no_recompile_and_vmap(self):
        probs, labels, _ = _random_case(4, n=300, k=3)
        fn = count_compiles(partial(jaxcal.ece, n_bins=10))
        a = fn(probs, labels)
        b = fn(probs[::-1].copy(), labels[::-1].copy())
        assert fn.compiles() == 1
        assert_close(a, b)
        batch_p = np.stack([probs, probs[::-1], np.roll(probs, 7, axis=0)])
        batch_y = np.stack([labels, labels[::-1], np.roll(labels, 7)])
        for metric in (jaxcal.ece, jaxcal.classwise_ece, jaxcal.top_label_ece):
            got = jax.vmap(partial(metric, n_bins=10))(batch_p, batch_y)
            want = [metric(p, y, n_bins=10) for p, y in zip(batch_p, batch_y, strict=True)]
            assert_close(got, want)

    def test_grad_is_finite_and_matches_finite_differences(self):
        probs, labels, _ = _random_case(5, n=200, k=2)
        p, y = probs[:, 1], (labels == 1).astype(np.int32)
        with x64():
            g = jax.grad(lambda q: jaxcal.ece(q, y, n_bins=5))(jnp.asarray(p))
            assert np.isfinite(np.asarray(g)).all()
            # d ECE / d p_i = sign(conf_b - acc_b) / N for the bin of sample i.
            curve = jaxcal.reliability_curve(p, y, n_bins=5)
            bins = reference.uniform_bin(p, 5, "right")
            sign = np.sign(np.asarray(curve.mean_confidence) - np.asarray(curve.mean_accuracy))
            assert_close(g, sign[bins] / len(p))
        for norm in ("l2", "max"):
            g = jax.grad(lambda q, norm=norm: jaxcal.ece(q, y, n_bins=5, norm=norm))(
                jnp.asarray(p, jnp.float32)
            )
            assert np.isfinite(np.asarray(g)).all()

    def test_x64_gives_float64(self):
        probs, labels, _ = _random_case(6, n=50, k=3)
        with x64():
            for metric in (
                jaxcal.ece,
                jaxcal.classwise_ece,
                jaxcal.top_label_ece,
                jaxcal.brier_score,
            ):
                assert metric(probs, labels).dtype == jnp.float64

    def test_low_precision_inputs_accumulate_in_float32(self):
        probs, labels, _ = _random_case(7, n=300, k=3)
        for dtype in (jnp.bfloat16, jnp.float16):
            low = jnp.asarray(probs, dtype)
            got = jaxcal.ece(low, labels)
            assert got.dtype == jnp.float32
            want = reference.ece(
                np.asarray(low.astype(jnp.float32)), labels, 15, dtype=np.dtype(dtype)
            )
            assert_close(got, want, atol=1e-6)  # float32 accumulation of ~0.1-sized terms


class TestWeights:
    def test_integer_weights_equal_repetition(self):
        # Both calls weighted (the repeated rows by ones; weights=None equals ones in
        # test_zero_weight_padding_is_invisible) and in one eager size class: each metric
        # and option compiles one program, not two.
        probs, labels, _ = _random_case(8, n=140, k=3)
        reps = np.random.default_rng(0).integers(0, 3, 140)
        rep_p, rep_y = np.repeat(probs, reps, 0), np.repeat(labels, reps)
        assert eager.size_class(len(rep_y)) == eager.size_class(140)
        assert len(rep_y) != 140 and set(reps.tolist()) == {0, 1, 2}
        ones = np.ones(len(rep_y), np.float32)
        for metric in (jaxcal.ece, jaxcal.classwise_ece, jaxcal.top_label_ece):
            for opts in ({}, {"norm": "l2"}, {"norm": "max"}, {"binning": "quantile"}):
                assert_close(
                    metric(probs, labels, weights=reps.astype(np.float32), **opts),
                    metric(rep_p, rep_y, weights=ones, **opts),
                )

    def test_zero_weight_padding_is_invisible(self):
        probs, labels, _ = _random_case(9, n=100, k=4)
        pad_p = np.concatenate([probs, np.full((28, 4), 0.25)])
        pad_y = np.concatenate([labels, np.zeros(28, int)])
        mask = np.concatenate([np.ones(100), np.zeros(28)]).astype(np.float32)
        for metric in (
            jaxcal.ece,
            jaxcal.classwise_ece,
            jaxcal.top_label_ece,
            jaxcal.brier_score,
            jaxcal.log_loss,
        ):
            assert_close(jax.jit(metric)(pad_p, pad_y, weights=mask), metric(probs, labels))

    def test_zero_total_weight_gives_zero(self):
        probs, labels, _ = _random_case(10, n=10, k=3)
        zero = np.zeros(10, np.float32)
        for metric in (
            jaxcal.ece,
            jaxcal.mce,
            jaxcal.classwise_ece,
            jaxcal.top_label_ece,
            jaxcal.brier_score,
            jaxcal.log_loss,
        ):
            assert float(metric(probs, labels, weights=zero)) == 0.0


class TestDegenerate:
    def test_one_class_only(self):
        probs = np.array([[1.0], [1.0], [1.0]])
        assert float(jaxcal.ece(probs, np.zeros(3, int))) == 0.0
        assert float(jaxcal.ece(np.array([0.2, 0.7, 0.9]), np.ones(3, int))) == pytest.approx(
            np.mean([0.8, 0.3, 0.1]), abs=1e-6
        )

    def test_all_in_one_bin_and_perfectly_calibrated(self):
        p = np.full(10, 0.3)
        y = np.array([1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
        for norm in ("l1", "l2", "max"):
            assert float(jaxcal.ece(p, y, norm=norm)) == pytest.approx(0, abs=1e-6)

    def test_debias_with_singleton_bins_is_finite(self):
        p = np.array([0.05, 0.5, 0.95])
        value = jaxcal.ece(p, np.array([0, 1, 1]), norm="l2", debias=True, n_bins=10)
        assert float(value) == 0.0  # every bin has one sample: each contributes 0

    def test_more_bins_than_samples(self):
        assert np.isfinite(float(jaxcal.ece(np.array([0.4]), np.array([1]), n_bins=1000)))
        assert np.isfinite(
            float(jaxcal.ece(np.array([0.4]), np.array([1]), n_bins=50, binning="quantile"))
        )


@settings(max_examples=25, deadline=None)
@given(
    p=hnp.arrays(np.float64, 24, elements=st.floats(0, 1)),
    y=hnp.arrays(np.int64, 24, elements=st.integers(0, 1)),
    perm_seed=st.integers(0, 1000),
    scale_exponent=st.integers(-8, 8),
)
def test_properties_bounds_permutation_and_weight_scale(p, y, perm_seed, scale_exponent):
    # Weights whose partial sums can reach b/M of the total exactly in real arithmetic
    # (this case was found by hypothesis: 7 zeros and a 0.5 weigh exactly 2/6 of the mass),
    # so quantile edges hinge on float rounding: a permutation must not change it
    # (quantile_edges sums in the order of (score, weight)), and the rescaling is by a
    # power of two, which rounds nothing; any other factor may decide such a tie otherwise.
    scale = 2.0**scale_exponent
    perm = np.random.default_rng(perm_seed).permutation(24)
    w = np.linspace(0.5, 2, 24)
    for opts in ({}, {"binning": "quantile"}, {"norm": "max"}):
        value = float(jaxcal.ece(p, y, n_bins=6, weights=w, **opts))
        assert 0 <= value <= 1
        # a permutation or a rescaling changes the float32 summation order and the
        # rounding of the weights: a few ulps of the O(1) per-bin means
        assert_close(
            jaxcal.ece(p[perm], y[perm], n_bins=6, weights=w[perm], **opts), value, atol=1e-6
        )
        assert_close(jaxcal.ece(p, y, n_bins=6, weights=w * scale, **opts), value, atol=1e-6)


def test_weighted_quantile_edges_do_not_depend_on_sample_order():
    # The mass of the 7 zeros and the 0.5 is exactly 10 = 2/6 of 30 in real arithmetic;
    # whether float32 cumulative sums reach it decides the edge (0.5 or 1.0). CI once saw
    # the ECE move by 0.019 under a permutation; edges now sum in (score, weight) order.
    p = np.array([1, 0.5, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0])
    y = np.ones(24, np.int64)
    y[0] = 0
    w = np.linspace(0.5, 2, 24)
    edges = np.asarray(jaxcal.quantile_edges(p, 6, weights=w))
    value = float(jaxcal.ece(p, y, n_bins=6, weights=w, binning="quantile"))
    for seed in range(20):
        perm = np.random.default_rng(seed).permutation(24)
        np.testing.assert_array_equal(
            np.asarray(jaxcal.quantile_edges(p[perm], 6, weights=w[perm])), edges
        )
        got = jaxcal.ece(p[perm], y[perm], n_bins=6, weights=w[perm], binning="quantile")
        assert_close(got, value, atol=1e-6)


def test_reliability_curve_reproduces_ece():
    probs, labels, _ = _random_case(11, n=300, k=3)
    curve = jaxcal.reliability_curve(probs, labels, n_bins=12)
    gaps = np.abs(np.asarray(curve.mean_accuracy) - np.asarray(curve.mean_confidence))
    assert_close(
        np.sum(np.asarray(curve.counts) / 300 * gaps), jaxcal.ece(probs, labels, n_bins=12)
    )
    assert curve.edges.shape == (13,)
