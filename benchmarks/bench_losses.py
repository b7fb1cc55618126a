"""Benchmark the training losses of jaxcal.losses: their gradients and a training step.

    python benchmarks/bench_losses.py
    taskset -c 0 python benchmarks/bench_losses.py --clock cpu   # on a loaded machine

Everything is timed side by side in one run (``benchmarks/_timing.time_interleaved``:
steady-state medians after a warm-up call, ``block_until_ready``), and reported as ratios:

1. each loss at logits of N = 1e4 x K = 10 (float32): the forward pass against
   ``jax.value_and_grad`` with respect to the logits, both jitted. Target: <= 3x.
2. one Adam training step (``jax.value_and_grad`` of the loss, the optax update) of an
   MLP at a minibatch of 512 x K = 10: cross-entropy alone against cross-entropy +
   lambda * regulariser (and the focal loss in place of the cross-entropy). Target:
   <= 1.5x. Two MLPs: the experiment's (64 -> 128 -> 10, ``train_calibration.py``), the
   smallest network these losses are likely to train, where the loss's share of the step
   is largest; and an MNIST-sized one (784 -> 512 -> 512 -> 10).
"""

from __future__ import annotations

import argparse
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _timing import CLOCKS, environment, fmt_ms, time_interleaved

from jaxcal import losses

K = 10
N_LOSS = 10_000
BATCH = 512
LAMBDA = 1.0

LOSSES = {
    "soft_ece_loss": losses.soft_ece_loss,
    "mmce_loss": losses.mmce_loss,
    "dca_loss": losses.dca_loss,
    "focal_loss (gamma=3)": losses.focal_loss,
    'focal_loss (gamma="flsd53")': lambda z, y: losses.focal_loss(z, y, gamma="flsd53"),
}


def cross_entropy(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def loss_gradients(clock: str, budget: float) -> None:
    rng = np.random.default_rng(0)
    logits = jnp.asarray(rng.normal(size=(N_LOSS, K)) * 3, jnp.float32)
    labels = jnp.asarray(rng.integers(0, K, N_LOSS), jnp.int32)
    cases = {}
    for name, fn in LOSSES.items():
        forward = jax.jit(fn)
        both = jax.jit(jax.value_and_grad(fn))
        cases[f"{name} forward"] = lambda f=forward: f(logits, labels)
        cases[f"{name} value_and_grad"] = lambda f=both: f(logits, labels)
    times = time_interleaved(cases, repeats=15, budget_s=budget, clock=clock)
    print(f"\n### Loss at N = {N_LOSS} x K = {K}, float32 (ms)\n")
    print("| loss | forward | value_and_grad | ratio (target <= 3) |")
    print("|---|---:|---:|---:|")
    for name in LOSSES:
        fwd, vg = times[f"{name} forward"].median, times[f"{name} value_and_grad"].median
        print(f"| `{name}` | {fmt_ms(fwd)} | {fmt_ms(vg)} | {vg / fwd:.2f} |")


def _mlp_init(widths, key):
    params = []
    for d_in, d_out in itertools.pairwise(widths):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (d_in, d_out)) * (2 / d_in) ** 0.5, jnp.zeros(d_out)))
    return params


def _mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


OBJECTIVES = {
    "cross-entropy": cross_entropy,
    "CE + λ·soft_ece_loss": lambda z, y: cross_entropy(z, y) + LAMBDA * losses.soft_ece_loss(z, y),
    "CE + λ·mmce_loss": lambda z, y: cross_entropy(z, y) + LAMBDA * losses.mmce_loss(z, y),
    "CE + λ·dca_loss": lambda z, y: cross_entropy(z, y) + LAMBDA * losses.dca_loss(z, y),
    "focal_loss (gamma=3)": losses.focal_loss,
    'focal_loss (gamma="flsd53")': lambda z, y: losses.focal_loss(z, y, gamma="flsd53"),
}


def _step_case(objective, optimizer, params, state, x, labels):
    """A zero-argument call of one jitted Adam step on ``objective``."""

    @jax.jit
    def step(params, state):
        value, grads = jax.value_and_grad(lambda p: objective(_mlp(p, x), labels))(params)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, value

    return lambda: step(params, state)


def training_steps(clock: str, budget: float) -> None:
    rng = np.random.default_rng(1)
    labels = jnp.asarray(rng.integers(0, K, BATCH), jnp.int32)
    optimizer = optax.adam(1e-3)
    for widths in [(64, 128, K), (784, 512, 512, K)]:
        x = jnp.asarray(rng.normal(size=(BATCH, widths[0])), jnp.float32)
        params = _mlp_init(widths, jax.random.key(0))
        state = optimizer.init(params)
        cases = {
            name: _step_case(objective, optimizer, params, state, x, labels)
            for name, objective in OBJECTIVES.items()
        }
        times = time_interleaved(cases, repeats=25, budget_s=budget, clock=clock)
        base = times["cross-entropy"].median
        arch = " -> ".join(str(w) for w in widths)
        print(f"\n### One Adam step, MLP {arch}, batch {BATCH} (ms)\n")
        print("| objective | step | ÷ cross-entropy step (target <= 1.5) |")
        print("|---|---:|---:|")
        for name in OBJECTIVES:
            t = times[name].median
            print(f"| {name} | {fmt_ms(t)} | {t / base:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per case")
    args = parser.parse_args()
    print(environment())
    print(f"clock: {args.clock}")
    loss_gradients(args.clock, args.budget)
    training_steps(args.clock, args.budget)


if __name__ == "__main__":
    main()
