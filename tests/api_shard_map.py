"""Run as a script (a new process with 4 CPU devices): the loop-based kernels under
``jax.shard_map`` with ``check_vma=True`` (D03), a closure under ``jax.set_mesh`` (D04) and
explicitly sharded inputs (D26). Prints one ``name: ok`` or ``name: Error: message`` line
per case; ``tests/test_api.py::test_shard_map_on_four_devices`` runs it and reads them.
"""

import os

os.environ["XLA_FLAGS"] = (  # the test session's flags (conftest.py), and 4 devices
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
)

import jax
import jax.numpy as jnp
import optax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxcal
from jaxcal import calibrators as C
from jaxcal import coverage

z = jax.random.normal(jax.random.key(0), (64, 5))
y = jnp.arange(64) % 5
probs = jax.nn.softmax(z)
p1, y1 = probs[:, 0], (y == 0).astype(jnp.int32)
s = jax.random.normal(jax.random.key(1), (64,))
AUTO = jax.make_mesh((4,), ("d",), axis_types=(AxisType.Auto,))
EXPLICIT = jax.make_mesh((4,), ("d",), axis_types=(AxisType.Explicit,))


def check(name, fn):
    try:
        jax.block_until_ready(fn())
        print(f"{name}: ok")
    except Exception as err:  # reported here, asserted by the test
        print(f"{name}: {type(err).__name__}: {' '.join(str(err).split())[:300]}")


def sharded(f, *args):
    """pmean over the 4 devices of ``f`` on each device's rows, check_vma=True."""

    def per_device(*a):
        return jax.tree.map(lambda v: jax.lax.pmean(v.astype(jnp.float32), "d"), f(*a))

    specs = tuple(P("d") for _ in args)
    return jax.jit(jax.shard_map(per_device, mesh=AUTO, in_specs=specs, out_specs=P()))(*args)


check(
    "temperature fit",
    lambda: sharded(lambda a, b: C.temperature_scaling().fit(a, b).temperature, z, y),
)
check("isotonic fit", lambda: sharded(lambda a, b: C.isotonic().fit(a, b).y, p1, y1))
check(
    "histogram fit", lambda: sharded(lambda a, b: C.histogram_binning(4).fit(a, b).values, p1, y1)
)
check("platt fit", lambda: sharded(lambda a, b: C.platt_scaling().fit(a, b).a, p1, y1))
check(
    "platt fit, optax.lbfgs",
    lambda: sharded(lambda a, b: C.platt_scaling(optimizer=optax.lbfgs()).fit(a, b).a, p1, y1),
)
check("dirichlet fit", lambda: sharded(lambda a, b: C.dirichlet().fit(a, b).bias, probs, y))
check("smooth_ece auto", lambda: sharded(jaxcal.smooth_ece, probs, y))
check(
    "score_decomposition",
    lambda: sharded(lambda a, b: jaxcal.score_decomposition(a, b).score, probs, y),
)
check(
    "clopper_pearson",
    lambda: sharded(lambda k: jaxcal.clopper_pearson_interval(k, k + 20.0).low, jnp.abs(s)),
)
check("hsic", lambda: sharded(coverage.hsic, s, s - 1, s + 1))
check(
    "regression_ssc",
    lambda: sharded(
        lambda a, b, c: coverage.regression_ssc(a, b, c, num_bins=2).coverage, s, s - 1, s + 1
    ),
)
with jax.set_mesh(AUTO):
    closure = jax.shard_map(
        lambda x: jaxcal.ece(probs, y)[None] + 0 * x, mesh=AUTO, in_specs=P("d"), out_specs=P("d")
    )
    check("closure under set_mesh", lambda: jax.jit(closure)(jnp.ones(4)))
with jax.set_mesh(EXPLICIT):
    ps = jax.device_put(probs, NamedSharding(EXPLICIT, P("d")))
    ys = jax.device_put(y, NamedSharding(EXPLICIT, P("d")))
    check("explicit ece", lambda: jaxcal.ece(ps, ys))
    check("explicit jit ece", lambda: jax.jit(jaxcal.ece)(ps, ys))
    check("explicit brier", lambda: jaxcal.brier_score(ps, ys))
    check(
        "explicit temperature fit",
        lambda: C.temperature_scaling(inputs="probs").fit(ps, ys).temperature,
    )
