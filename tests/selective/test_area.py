"""AURC (both conventions), E-AURC, AUGRC and PRR against ports of their references."""

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxcal
from jaxcal import selective
from tests import reference_selective as ref
from tests.helpers import assert_close, x64


def _probs(seed, n=300, k=5):
    rng = np.random.default_rng(seed)
    logits = 2.5 * rng.normal(size=(n, k))
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    labels = np.array([rng.choice(k, p=p) for p in probs])
    return probs, labels


def _real():
    data = np.load("jaxcal/data/digits_mlp.npz")
    return data["probs"].astype(np.float64), data["labels"]


def test_torch_uncertainty_docstring_example():
    # torch-uncertainty AURC's docstring: tensor(0.0833)
    probs = np.array([[0.7, 0.3], [0.6, 0.4], [0.8, 0.2]], np.float32)
    targets = np.array([0, 1, 0])
    assert round(float(selective.aurc(probs, targets, convention="trapezoid")), 4) == 0.0833
    assert_close(selective.aurc(probs, targets), np.float32(1 / 9))


def test_against_torch_uncertainty_port():
    probs, labels = _probs(0)
    scores, errors = ref.tu_scores_errors(probs, labels)
    assert len(np.unique(scores)) == len(scores)  # no ties: the references are exact here
    with x64():
        assert_close(
            selective.aurc(probs, labels, convention="trapezoid"), ref.tu_aurc(scores, errors)
        )
        assert_close(
            selective.augrc(probs, labels, convention="trapezoid"), ref.tu_augrc(scores, errors)
        )
        assert_close(selective.aurc(probs, labels), ref.aurc_mean(scores, errors))


def test_real_data_against_torch_uncertainty_over_tie_orders():
    """Real predictions tie (29 of 899 top probabilities repeat): the references' value
    depends on the order of the ties; over random orders its mean is jaxcal's."""
    probs, labels = _real()
    scores, errors = ref.tu_scores_errors(probs, labels)
    assert len(np.unique(scores)) < len(scores)
    rng = np.random.default_rng(0)
    runs = []
    for _ in range(200):
        perm = rng.permutation(len(scores))  # the stable port keeps ties in input order
        runs.append(
            [ref.tu_aurc(scores[perm], errors[perm]), ref.aurc_mean(scores[perm], errors[perm])]
        )
    runs = np.array(runs)
    spread = runs.std(0) / np.sqrt(len(runs))
    with x64():
        ours = [selective.aurc(probs, labels, convention=c) for c in ("trapezoid", "mean")]
        for value, mean, se in zip(ours, runs.mean(0), spread, strict=True):
            assert abs(float(value) - mean) <= 4 * se + 1e-12
        # with the ties broken (distinct scores), exactly the reference
        distinct = scores + 1e-9 * rng.permutation(len(scores))
        correct = 1 - errors.astype(int)
        assert_close(
            selective.aurc(confidence=distinct, correct=correct, convention="trapezoid"),
            ref.tu_aurc(distinct, errors),
        )
        assert_close(
            selective.aurc(confidence=distinct, correct=correct), ref.aurc_mean(distinct, errors)
        )


def test_binary_probabilities_as_torch_uncertainty_reads_them():
    rng = np.random.default_rng(1)
    p, y = rng.random(100), rng.integers(0, 2, 100)
    scores, errors = ref.tu_scores_errors(p, y)  # it stacks (1 - p, p)
    with x64():
        for probs in (p, np.stack([1 - p, p], 1)):  # (N,) is the positive class's probability
            assert_close(
                selective.aurc(probs, y, convention="trapezoid"), ref.tu_aurc(scores, errors)
            )
            assert_close(selective.aurc(probs, y), ref.aurc_mean(scores, errors))


def test_one_dimensional_probabilities_are_not_confidence_scores():
    """Issue 34.5: binary probabilities passed to aurc give the binary answer (~0.12 on a
    thousand calibrated predictions), not the confidence-score reading (~0.23)."""
    rng = np.random.default_rng(0)
    p = rng.random(1000)
    y = (rng.random(1000) < p).astype(int)
    rows = np.stack([1 - p, p], 1)
    conf, correct = np.maximum(p, 1 - p), ((p > 0.5) == y).astype(int)
    with x64():
        binary = selective.aurc(p, y)
        assert 0.08 < float(binary) < 0.18
        as_scores = selective.aurc(confidence=p, correct=y)  # the old (N,) reading
        assert float(as_scores) > float(binary) + 0.08
        for fn in (
            selective.aurc,
            selective.e_aurc,
            selective.augrc,
            selective.prediction_rejection_ratio,
            selective.correctness_auroc,
            selective.risk_at_coverage,
            selective.coverage_at_risk,
        ):
            a, b = fn(p, y), fn(rows, y)
            assert_close(a, b, err_msg=fn.__name__)
            assert_close(a, fn(confidence=conf, correct=correct), err_msg=fn.__name__)
        curve = selective.risk_coverage_curve(p, y)
        assert_close(curve.risk, selective.risk_coverage_curve(rows, y).risk)
    # p = 1/2 predicts class 0, as argmax of the rows (1/2, 1/2) does
    assert float(selective.aurc(np.array([0.5]), np.array([0]))) == 0.0
    assert float(selective.aurc(np.array([0.5]), np.array([1]))) == 1.0


@pytest.mark.parametrize(
    ("conf", "correct", "max_rejection"),
    [
        ([0.9, 0.5, 0.1], [0, 1, 1], 0.3),
        ([0.9, 0.5], [1, 0], 0.4),
        ([0.9, 0.5], [0, 1], 0.4),
        ([0.5], [0], 0.5),
        (np.random.default_rng(21).random(60), (np.arange(60) % 3 > 0).astype(int), 0.01),
    ],
)
def test_prr_refuses_an_empty_rejection_window(conf, correct, max_rejection):
    """Issue 34.3 (Q1): no point in the rejection window gave 1.0, a perfect ranking's
    score, whatever the ranking; it is undefined: refused, on every call."""
    conf, correct = np.asarray(conf), np.asarray(correct)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"rejects no sample.*raise `max_rejection`"):
            selective.prediction_rejection_ratio(
                confidence=conf, correct=correct, max_rejection=max_rejection
            )
    # under jit values are not checked: NaN, never the perfect score 1.0
    jitted = jax.jit(
        lambda c, k: selective.prediction_rejection_ratio(
            confidence=c, correct=k, max_rejection=max_rejection
        )
    )
    assert np.isnan(float(jitted(conf, correct)))
    # one more sample in the window is enough: a finite value
    n = len(conf)
    if n > 1:
        value = selective.prediction_rejection_ratio(
            confidence=conf, correct=correct, max_rejection=1 / n
        )
        assert np.isfinite(float(value))


def test_prr_refusal_by_weight_and_per_segment():
    conf, correct = np.array([0.9, 0.8, 0.7, 0.1]), np.array([1, 0, 1, 0])
    # the least confident sample carries 0.7 of the weight: no point has 0.5 before it
    w = np.array([0.1, 0.1, 0.1, 0.7])
    with pytest.raises(ValueError, match="rejects no sample"):
        selective.prediction_rejection_ratio(
            confidence=conf, correct=correct, weights=w, max_rejection=0.5
        )
    # a segment of one sample at max_rejection 0.5: named; a segment of zero weight is not
    ids = np.array([0, 0, 0, 1])
    with pytest.raises(ValueError, match="in segment\\(s\\) \\[1\\]"):
        selective.prediction_rejection_ratio(
            confidence=conf, correct=correct, groups=ids, n_groups=2, max_rejection=0.5
        )
    out = selective.prediction_rejection_ratio(
        confidence=conf,
        correct=correct,
        groups=ids,
        n_groups=2,
        weights=np.array([1.0, 1.0, 1.0, 0.0]),
        max_rejection=0.5,
    )
    assert np.all(np.isfinite(np.asarray(out)))


@pytest.mark.parametrize("data", ["random", "real"])
def test_augrc_against_fd_shifts_port_with_ties(data):
    if data == "random":
        rng = np.random.default_rng(2)
        conf, correct = rng.integers(0, 8, 400) / 7.0, rng.integers(0, 2, 400)  # many ties
    else:
        d = np.load("jaxcal/data/digits_gaussian_nb.npz")  # saturated: ties at 1.0
        probs, labels = d["probs"].astype(np.float64), d["labels"]
        conf, correct = probs.max(1), (probs.argmax(1) == labels).astype(int)
    assert len(np.unique(conf)) < len(conf)
    with x64():
        assert_close(
            selective.augrc(confidence=conf, correct=correct), ref.fds_augrc(conf, 1 - correct)
        )


def test_ties_are_averaged_over_orders():
    conf = np.array([0.3, 0.7, 0.7, 0.3, 0.7, 0.1, 0.3])
    correct = np.array([1, 0, 1, 0, 1, 1, 0])
    with x64():
        for convention, fn in [
            ("mean", lambda s, r: ref.aurc_mean(s, r)),
            ("trapezoid", lambda s, r: ref.tu_aurc(s, r)),
        ]:
            expected = ref.tie_average(fn, conf, 1.0 - correct)
            assert_close(
                selective.aurc(confidence=conf, correct=correct, convention=convention), expected
            )
        expected = ref.tie_average(lambda s, r: ref.tu_augrc(s, r), conf, 1.0 - correct)
        assert_close(
            selective.augrc(confidence=conf, correct=correct, convention="trapezoid"), expected
        )


def test_e_aurc_exact_and_closed_form():
    probs, labels = _real()
    scores, errors = ref.tu_scores_errors(probs, labels)
    with x64():
        exact = selective.e_aurc(probs, labels)
        assert_close(exact, ref.aurc_mean(scores, errors) - ref.oracle_aurc_mean(errors))
        closed = selective.e_aurc(probs, labels, optimal="closed_form")
        # fd-shifts adds eps inside its log; CRL's code does not: 1e-16 apart
        assert_close(
            closed, ref.aurc_mean(scores, errors) - ref.fds_aurc_optimal(errors), atol=1e-13
        )
        oracle_scores = -errors + 1e-3 * np.arange(errors.size) / errors.size
        assert_close(
            selective.e_aurc(confidence=oracle_scores, correct=1 - errors.astype(int)), 0.0
        )
        trap = selective.e_aurc(probs, labels, convention="trapezoid")
        oracle = np.sort(errors)
        assert_close(
            trap, ref.tu_aurc(scores, errors) - ref.tu_aurc(-np.arange(oracle.size), oracle)
        )


def test_e_aurc_is_non_negative_and_zero_for_constant_risk():
    rng = np.random.default_rng(3)
    for _ in range(5):
        conf, correct = rng.integers(0, 4, 30) / 3.0, rng.integers(0, 2, 30)
        assert float(selective.e_aurc(confidence=conf, correct=correct)) >= -1e-6
    assert float(selective.e_aurc(confidence=np.arange(5.0), correct=np.ones(5, int))) == 0.0


@pytest.mark.parametrize("max_rejection", [1.0, 0.5, 0.3])
def test_prr_against_lm_polygraph_port(max_rejection):
    rng = np.random.default_rng(4)
    uncertainty, quality = rng.normal(size=150), rng.random(150)
    with x64():
        value = selective.prediction_rejection_ratio(
            confidence=-uncertainty, correct=quality, max_rejection=max_rejection
        )
        exact_random = np.mean(ref.lmp_normalize(quality))  # E of a shuffle, exactly
        assert_close(value, ref.lmp_prr(uncertainty, quality, max_rejection, random=exact_random))
        # the reference's own Monte-Carlo baseline (1000 shuffles, seed 42) is close
        mc = ref.lmp_prr(uncertainty, quality, max_rejection)
        assert abs(float(value) - mc) < 0.02


def test_prr_on_real_data_and_its_relation_to_e_aurc():
    probs, labels = _real()
    scores, errors = ref.tu_scores_errors(probs, labels)
    with x64():
        prr = selective.prediction_rejection_ratio(probs, labels)
        assert_close(prr, ref.lmp_prr(-scores, 1 - errors, random=1 - errors.mean()))
        # PRR = 1 - E-AURC / (r - AURC*) in the mean convention
        r = errors.mean()
        e = selective.e_aurc(probs, labels)
        assert_close(prr, 1 - e / (r - ref.oracle_aurc_mean(errors)))


def test_lm_polygraph_rcc_auc_is_the_mean_convention_of_the_normalised_target():
    rng = np.random.default_rng(5)
    uncertainty, quality = rng.normal(size=80), rng.random(80)
    with x64():
        value = selective.aurc(confidence=-uncertainty, correct=ref.lmp_normalize(quality))
        assert_close(value, ref.lmp_rcc_auc(uncertainty, quality))


def test_degenerate_inputs_have_documented_values():
    conf = np.array([0.9, 0.8, 0.7])
    for correct in (np.ones(3, int), np.zeros(3, int)):
        assert float(selective.prediction_rejection_ratio(confidence=conf, correct=correct)) == 0.0
        assert float(selective.e_aurc(confidence=conf, correct=correct)) == pytest.approx(
            0.0, abs=1e-7
        )
    one = selective.aurc(confidence=np.array([0.4]), correct=np.array([0]), convention="trapezoid")
    assert float(one) == 1.0  # one point: its risk (torch-uncertainty: NaN)
    zero_w = selective.aurc(confidence=conf, correct=np.array([1, 0, 1]), weights=np.zeros(3))
    assert float(zero_w) == 0.0


def test_weights_scale_free_and_augrc_equal_to_repeated_rows():
    rng = np.random.default_rng(6)
    conf, correct = rng.random(30), rng.integers(0, 2, 30)
    reps = rng.integers(0, 4, 30)
    w = reps.astype(float)
    with x64():
        for fn in (selective.aurc, selective.augrc, selective.e_aurc, selective.correctness_auroc):
            assert_close(
                fn(confidence=conf, correct=correct, weights=w),
                fn(confidence=conf, correct=correct, weights=1e-3 * w),
            )
        # the generalized risk is linear in the weight within a sample: a weight k is k
        # copies; the selective risk is not (copies add intermediate steps), see aurc
        big_c, big_y = np.repeat(conf, reps), np.repeat(correct, reps)
        for fn in (selective.augrc, selective.correctness_auroc):
            assert_close(
                fn(confidence=conf, correct=correct, weights=w),
                fn(confidence=big_c, correct=big_y),
            )
        assert_close(
            selective.aurc(confidence=conf, correct=correct, weights=w),
            ref.aurc_mean(conf, 1 - correct, w),
        )


def test_groups_equal_per_segment_calls():
    probs, labels = _probs(7, n=90)
    ids = np.arange(90) % 3
    for fn in (
        selective.aurc,
        selective.augrc,
        selective.e_aurc,
        selective.prediction_rejection_ratio,
    ):
        out = fn(probs, labels, groups=ids, n_groups=3)
        assert out.shape == (3,)
        for g in range(3):
            assert_close(out[g], fn(probs[ids == g], labels[ids == g]), err_msg=fn.__name__)


def test_jit_vmap_and_grad_with_respect_to_weights():
    probs, labels = _probs(8, n=64)
    w = np.random.default_rng(8).random(64)
    f = jax.jit(lambda p, y, w: selective.aurc(p, y, weights=w))
    assert_close(f(probs, labels, w), selective.aurc(probs, labels, weights=w))
    batched = jax.vmap(lambda w: selective.augrc(probs, labels, weights=w))(np.stack([w, 2 * w]))
    assert_close(batched[0], batched[1])
    # d AURC / d w_i by finite differences (float64), through the tie interpolation too
    conf = np.round(probs.max(1), 1)  # ties
    correct = (probs.argmax(1) == labels).astype(int)
    with x64():
        g = jax.grad(lambda w: selective.aurc(confidence=conf, correct=correct, weights=w))(w)
        h = 1e-6
        for i in (0, 5, 17):
            step = np.zeros(64)
            step[i] = h
            up = selective.aurc(confidence=conf, correct=correct, weights=w + step)
            down = selective.aurc(confidence=conf, correct=correct, weights=w - step)
            assert_close(g[i], (up - down) / (2 * h), rtol=1e-5, atol=1e-9)  # differences


def test_bootstrap_interval_through_bootstrap_ci():
    probs, labels = _probs(9, n=200)
    res = jaxcal.stats.bootstrap_ci(
        selective.aurc, probs, labels, key=jax.random.key(0), n_resamples=200
    )
    assert float(res.low) <= float(res.estimate) <= float(res.high)
    assert_close(res.estimate, selective.aurc(probs, labels))


def test_option_errors_name_the_option():
    p, y = np.array([0.2, 0.9]), np.array([0, 1])
    with pytest.raises(ValueError, match="`convention` must be one of 'mean', 'trapezoid'"):
        selective.aurc(p, y, convention="trapz")
    with pytest.raises(ValueError, match="`convention` must be one of 'traub', 'trapezoid'"):
        selective.augrc(p, y, convention="mean")
    with pytest.raises(ValueError, match="closed_form"):
        selective.e_aurc(confidence=p, correct=np.array([0.5, 1.0]), optimal="closed_form")
    with pytest.raises(ValueError, match="`max_rejection` must lie in"):
        selective.prediction_rejection_ratio(p, y, max_rejection=0.0)


@st.composite
def _extreme(draw):
    """Confidences with ties or extremes, correctness of one class or both, weights with
    zeros, all zero, or scaled by 1e-30..1e30 (float32)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = 24
    kind = draw(st.sampled_from(["smooth", "ties", "one_value", "huge"]))
    conf = {
        "smooth": rng.random(n),
        "ties": rng.integers(0, 3, n) / 2.0,
        "one_value": np.full(n, 0.7),
        "huge": rng.choice([-1e30, 0.0, 1e30, -0.0], n),
    }[kind].astype(np.float32)
    correct = rng.integers(0, 2, n) if draw(st.booleans()) else np.full(n, rng.integers(0, 2))
    w = rng.uniform(0.5, 2.0, n)
    w[rng.uniform(size=n) < 0.25] = 0
    if draw(st.booleans()):
        w = np.zeros(n)
    scale = 10.0 ** draw(st.sampled_from([-30, 0, 30]))
    return conf, correct, (w * scale).astype(np.float32)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_extreme())
def test_extreme_inputs_finite_and_equal_to_the_definition(case):
    conf, correct, w = case
    values = [
        selective.aurc(confidence=conf, correct=correct, weights=w),
        selective.aurc(confidence=conf, correct=correct, weights=w, convention="trapezoid"),
        selective.augrc(confidence=conf, correct=correct, weights=w),
        selective.e_aurc(confidence=conf, correct=correct, weights=w),
        selective.prediction_rejection_ratio(confidence=conf, correct=correct, weights=w),
        selective.correctness_auroc(confidence=conf, correct=correct, weights=w),
        selective.risk_at_coverage(confidence=conf, correct=correct, weights=w),
        selective.coverage_at_risk(confidence=conf, correct=correct, weights=w, risk=0.3),
    ]
    assert all(np.isfinite(np.asarray(v)) for v in values)
    if w.sum() == 0:
        return
    if len(np.unique(conf)) == len(conf):  # no ties: the definition directly
        expected = ref.aurc_mean(conf, 1.0 - correct, w.astype(np.float64))
        assert_close(values[0], np.float32(expected), rtol=1e-4)
    # within [0, 1] and [0, 1/2] up to float32 round-off (a weighted mean of ones)
    assert 0 <= float(values[0]) <= 1 + 1e-6 and 0 <= float(values[2]) <= 0.5 + 1e-6
    assert float(values[3]) >= -1e-6 or w.min() < w.max()  # E-AURC >= 0 with equal weights
