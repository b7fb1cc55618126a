"""jaxcal's L-BFGS (calibrators/_lbfgs.py): accuracy against float64 SciPy, round-off, loops."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from jaxcal import calibrators as cal
from jaxcal.calibrators._lbfgs import lbfgs
from tests import reference_calibrators as ref
from tests.helpers import assert_close, x64


def _quadratic(scales, dtype=jnp.float32):
    """An ill-conditioned quadratic with minimum at 1 (condition number max/min scale)."""
    scales = jnp.asarray(scales, dtype)
    return lambda t: 0.5 * jnp.sum(scales * (t - 1.0) ** 2)


def test_minimises_rosenbrock_and_an_ill_conditioned_quadratic():
    def rosenbrock(t):
        return (1 - t[0]) ** 2 + 100 * (t[1] - t[0] ** 2) ** 2

    res = lbfgs(rosenbrock, jnp.asarray([-1.2, 1.0]), max_iter=500, tol=1e-6)
    assert bool(res.converged) and int(res.n_iter) < 100
    assert_close(res.params, np.ones(2, np.float32), atol=1e-4)  # float32 valley: |dx| ~ 1e-4
    res = lbfgs(_quadratic(np.logspace(-1.5, 1.5, 20)), jnp.zeros(20), max_iter=500, tol=1e-6)
    assert bool(res.converged) and float(res.grad_norm) <= 1e-6
    # |t - 1| <= grad / scale: 1e-6 / 10**-1.5 on the flattest axis
    assert_close(res.params, np.ones(20, np.float32), atol=4e-5)


def test_a_non_finite_start_is_not_converged_and_non_finite_trials_shrink_the_step():
    res = lbfgs(lambda t: jnp.sum(t) + jnp.nan, jnp.zeros(2), max_iter=10, tol=1e-6)
    assert not bool(res.converged) and int(res.n_iter) == 0

    def barrier(t):  # -inf..inf outside (0, 2): the first trial steps leave the domain
        return jnp.sum(jnp.where((t > 0) & (t < 2), -jnp.log(t) - jnp.log(2 - t), jnp.nan))

    res = lbfgs(barrier, jnp.full(3, 0.01), max_iter=100, tol=1e-6)
    assert bool(res.converged)
    assert_close(res.params, np.ones(3, np.float32), atol=1e-5)  # curvature 2 at the optimum


def test_max_iter_is_not_converged():
    res = lbfgs(_quadratic(np.logspace(-1.5, 1.5, 20)), jnp.zeros(20), max_iter=3, tol=1e-6)
    assert int(res.n_iter) == 3 and not bool(res.converged)


def test_the_slope_leads_on_where_loss_values_cannot_resolve_a_decrease():
    # 1 + 1e-9 q(t) rounds to 1 in float32 everywhere near the start: the loss values are
    # equal, and only the approximate Wolfe test (the slope) can accept a step.
    scales = jnp.asarray([1.0, 4.0, 0.25], jnp.float32)
    flat = lambda t: 1 + 1e-9 * jnp.sum(scales * (t - 1) ** 2)  # noqa: E731
    res = lbfgs(flat, jnp.zeros(3), max_iter=100, tol=1e-14)
    assert_close(res.params, np.ones(3, np.float32), atol=1e-3)  # from 1 away at the start


def test_stops_converged_at_the_round_off_floor():
    # tol = 0 is never met: the fit stops when neither the loss nor the gradient improves
    # at working precision, converged, long before max_iter.
    res = lbfgs(_quadratic(np.logspace(-1, 1, 8)), jnp.zeros(8), max_iter=1000, tol=0)
    assert bool(res.converged) and int(res.n_iter) < 200
    assert float(res.grad_norm) < 1e-6
    assert_close(res.params, np.ones(8, np.float32), atol=1e-6)  # float32 at 1


@pytest.fixture(scope="module")
def digits_logits():
    """Held-out logits of an under-regularised logistic regression on digits (K = 10)."""
    x, y = load_digits(return_X_y=True)
    xtr, xcal, ytr, ycal = train_test_split(x, y, train_size=700, random_state=0, stratify=y)
    clf = LogisticRegression(C=10.0, max_iter=3000).fit(xtr / 16, ytr)
    return clf.decision_function(xcal / 16).astype(np.float32), ycal.astype(np.int32)


@pytest.mark.parametrize("kind", ["matrix", "vector"])
def test_float32_fits_reach_the_float64_optimum_on_digits(digits_logits, kind):
    """float32 fits meet their gradient tolerance on real data, and a tighter one holds.

    With optax.lbfgs() the matrix fit stalled at max|grad| 2e-5, probabilities 3e-3 from
    the float64 optimum; here the default tol (1e-6) gives 2e-4 and tol=1e-8 2e-6.
    """
    z, y = digits_logits
    penalty = {"l2": 1e-3} if kind == "matrix" else {}
    loss, probs = ref.affine_scipy(kind, z, y, **penalty)
    factory = cal.matrix_scaling if kind == "matrix" else cal.vector_scaling
    for tol, atol in ((None, 5e-4), (1e-8, 1e-5)):  # probabilities: about tol / curvature
        calibrator = factory(**penalty, **({} if tol is None else {"tol": tol}))
        params = calibrator.fit(jnp.asarray(z), jnp.asarray(y))
        assert bool(params.info.converged) and float(params.info.grad_norm) <= (tol or 1e-6)
        assert_close(params.info.loss, loss, rtol=1e-6)  # float32 loss of O(0.1)
        assert_close(calibrator.apply(params, jnp.asarray(z)), probs(z), atol=atol)


def _registry_dirichlet():
    rng = np.random.default_rng(0)  # the registry's data shape: 24 rows, K = 3
    logits = 2.0 * rng.normal(size=(24, 3))
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = rng.integers(0, 3, 24)
    labels[:3] = np.arange(3)
    return (jnp.asarray(probs, jnp.float32), jnp.asarray(labels, jnp.int32),
            jnp.asarray(rng.uniform(0.5, 2.0, 24), jnp.float32))  # fmt: skip


def test_eager_and_a_jitted_closure_stop_at_the_same_point():
    """XLA rounds a closure differently; both must still reach the gradient tolerance.

    With optax.lbfgs() (Armijo on loss values) the eager fit stalled at max|grad| 3.6e-5,
    3e-4 from float64 in probabilities, while the closure went on to 1e-6.
    """
    x, y, w = _registry_dirichlet()
    calibrator = cal.dirichlet(l2=1e-3)
    eager = calibrator.fit(x, y, weights=w)
    closure = jax.jit(lambda: calibrator.fit(x, y, weights=w))()
    for fit in (eager, closure):
        assert float(fit.info.grad_norm) <= 1e-6, fit.info
    with x64():
        exact = calibrator.fit(x.astype(jnp.float64), y, weights=w.astype(jnp.float64))
        expected = np.asarray(calibrator.apply(exact, x.astype(jnp.float64)))
    for fit in (eager, closure):
        # gradient 1e-6 on a 24-row fit (smallest curvature ~0.1): probabilities ~1e-5
        assert_close(calibrator.apply(fit, x), expected, atol=3e-5)


def test_vmap_over_problems_equals_a_loop():
    scales = jnp.asarray(np.random.default_rng(0).uniform(0.1, 10, (4, 6)), jnp.float32)

    def solve(s):
        return lbfgs(lambda t: jnp.sum(s * (t - s) ** 2) + jnp.sum(t**4) / 4, jnp.zeros(6),
                     max_iter=200, tol=1e-6)  # fmt: skip

    batched = jax.jit(jax.vmap(solve))(scales)
    for b in range(4):
        one = solve(scales[b])
        assert_close(batched.params[b], one.params, atol=1e-6)  # both at gradient 1e-6
        assert bool(batched.converged[b]) and bool(one.converged)


def test_runs_inside_shard_map_with_check_vma():
    from jax.sharding import AxisType, PartitionSpec

    x, y, w = _registry_dirichlet()
    mesh = jax.make_mesh((1,), ("d",), axis_types=(AxisType.Auto,))

    def per_shard(a, b, c):
        return cal.dirichlet(l2=1e-3).fit(a, b, weights=c).bias[None]

    with jax.set_mesh(mesh):
        spec = PartitionSpec("d")
        fit = jax.jit(jax.shard_map(per_shard, mesh=mesh, in_specs=(spec,) * 3, out_specs=spec))
        bias = fit(x, y, w)[0]
    assert_close(bias, cal.dirichlet(l2=1e-3).fit(x, y, weights=w).bias, atol=1e-5)
    with jax.set_mesh(mesh), pytest.raises(ValueError, match="optimizer=None"):
        jax.jit(
            jax.shard_map(
                lambda a, b, c: cal.dirichlet(optimizer=optax.lbfgs()).fit(a, b).bias[None],
                mesh=mesh, in_specs=(spec,) * 3, out_specs=spec,
            )
        )(x, y, w)  # fmt: skip


def test_float64_tolerance_under_x64():
    with x64():
        res = lbfgs(_quadratic(np.logspace(-2, 2, 8), jnp.float64), jnp.zeros(8, jnp.float64),
                    max_iter=500, tol=1e-10)  # fmt: skip
        assert res.params.dtype == jnp.float64 and float(res.grad_norm) <= 1e-10
