"""jaxcal on a GPU: the main kernels, the per-backend formulation choices, torchmetrics.

Run on a machine with a CUDA GPU and JAX's CUDA plugin, from the repository root:

    PYTHONPATH=. python benchmarks/bench_gpu.py [--quick] [--out results.md]

Every timing is a steady-state median after a warm-up call (``block_until_ready``;
``torch.cuda.synchronize`` for torchmetrics), compile time apart. The floor column is a
jitted read of the same inputs. The formulation table times the two ways of summing per
bin that the kernels choose between by backend: a blocked scatter-add (the CPU choice:
XLA:CPU reduces a broadcast one-hot 40x slower) and a one-hot compare-and-sum.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import compile_seconds, environment, fmt_ms, time_interleaved

import jaxcal
from jaxcal import calibrators, streaming
from jaxcal._core.binning import bin_sums, uniform_anchors, uniform_bin_index


def softmax_rows(rng, n, k, scale=3.0):
    z = rng.normal(size=(n, k)).astype(np.float32) * scale
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def one_hot_sums(bins, scores, targets, m):
    """Per-bin count, hits and sum of scores by a one-hot compare-and-sum."""
    onehot = bins[:, None] == jnp.arange(m, dtype=jnp.int32)[None, :]
    count = jnp.sum(onehot, axis=0, dtype=jnp.float32)
    hits = jnp.sum(onehot & targets[:, None], axis=0, dtype=jnp.float32)
    total = jnp.sum(jnp.where(onehot, scores[:, None], 0), axis=0)
    return count, hits, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--out", default=None, help="also write the tables to this file")
    args = parser.parse_args()
    n = 10_000 if args.quick else 1_000_000
    rng = np.random.default_rng(0)
    lines = [f"`{environment()}`", f"devices: {jax.devices()}", ""]

    p10 = jnp.asarray(softmax_rows(rng, n, 10))
    y10 = jnp.asarray(rng.integers(0, 10, n), jnp.int32)
    p100 = jnp.asarray(softmax_rows(rng, n, 100))
    y100 = jnp.asarray(rng.integers(0, 100, n), jnp.int32)
    pb = jnp.asarray(rng.random(n), jnp.float32)
    yb = jnp.asarray((rng.random(n) < np.asarray(pb)).astype(np.int32))
    n5 = min(n, 100_000)
    n4 = min(n, 10_000)
    key = jax.random.key(0)
    state0 = streaming.init(15, 10)
    temperature = calibrators.temperature_scaling()
    iso = calibrators.isotonic()

    jit = jax.jit
    cases = {
        "floor: jitted read (N, 10) + labels": (jit(lambda p, y: (p.sum(), y.sum())), p10, y10),
        "ece, K = 10 (jit)": (jit(jaxcal.ece), p10, y10),
        "ece, K = 10 (eager, validated)": (jaxcal.ece, p10, y10),
        "ece, K = 100 (jit)": (jit(jaxcal.ece), p100, y100),
        "floor: jitted read (N,) + labels": (jit(lambda p, y: (p.sum(), y.sum())), pb, yb),
        "ece, binary (jit)": (jit(jaxcal.ece), pb, yb),
        "classwise_ece, K = 10 (jit)": (jit(jaxcal.classwise_ece), p10, y10),
        "brier_score, K = 10 (jit)": (jit(jaxcal.brier_score), p10, y10),
        "log_loss, K = 10 (jit)": (jit(jaxcal.log_loss), p10, y10),
        "brier_decomposition, K = 10 (jit)": (jit(jaxcal.brier_decomposition), p10, y10),
        "calibration_tests, binary (jit)": (jit(jaxcal.stats.calibration_tests), pb, yb),
        "calibration_tests, K = 10 (jit)": (jit(jaxcal.stats.calibration_tests), p10, y10),
        "isotonic().fit, binary": (iso.fit, pb, yb),
        "temperature_scaling().fit, K = 100": (temperature.fit, jnp.log(p100), y100),
        "streaming.update, K = 10 (jit)": (jit(streaming.update), state0, p10, y10),
        "soft_ece value_and_grad, K = 10": (
            jit(jax.value_and_grad(lambda p, y: jaxcal.soft_ece(p, y))),
            p10,
            y10,
        ),
        "consistency_test(ece), 1e5 x 1000": (
            partial(jaxcal.stats.consistency_test, jaxcal.ece, key=key, n_resamples=1000),
            pb[:n5],
            yb[:n5],
        ),
        "bootstrap_ci(ece), 1e4 x 1000": (
            partial(jaxcal.stats.bootstrap_ci, jaxcal.ece, key=key, n_resamples=1000),
            p10[:n4],
            y10[:n4],
        ),
    }
    if hasattr(jaxcal, "score_decomposition"):
        cases["score_decomposition (CORP, Brier), binary (jit)"] = (
            jit(jaxcal.score_decomposition),
            pb,
            yb,
        )
    timings = time_interleaved(
        {name: (lambda f=f, a=a: f(*a)) for name, (f, *a) in cases.items()}, repeats=9
    )
    lines += [f"### jaxcal kernels, N = {n:.0e}, float32", "", "| case | ms |", "|---|---:|"]
    lines += [f"| {name} | {fmt_ms(t.median)} |" for name, t in timings.items()]

    # Compile times of a few kernels (fresh jit, new shapes).
    lines += ["", "| compile (trace + lower, XLA) | s |", "|---|---:|"]
    for name, fn, fargs in [
        ("ece, K = 10", jaxcal.ece, (p10[:777], y10[:777])),
        ("calibration_tests", jaxcal.stats.calibration_tests, (pb[:777], yb[:777])),
        ("brier_decomposition", jaxcal.brier_decomposition, (p10[:777], y10[:777])),
    ]:
        trace, comp = compile_seconds(fn, *fargs)
        lines.append(f"| {name} | {trace:.2f} + {comp:.2f} |")

    # Formulation choice: blocked scatter-add against one-hot compare-and-sum.
    lines += ["", "### Per-bin sums: blocked scatter against one-hot compare-and-sum", ""]
    lines += ["| bins M | blocked scatter ms | compare-and-sum ms |", "|---:|---:|---:|"]
    for m in (15, 100):
        bins = uniform_bin_index(pb, m)
        targets = yb == 1
        scatter = jit(lambda b, s, t, m=m: bin_sums(b, s, t, m, None, uniform_anchors(m)))
        compare = jit(lambda b, s, t, m=m: one_hot_sums(b, s, t, m))
        t = time_interleaved(
            {
                "scatter": lambda f=scatter, b=bins, t=targets: f(b, pb, t),
                "compare": lambda f=compare, b=bins, t=targets: f(b, pb, t),
            },
            repeats=9,
        )
        lines.append(f"| {m} | {fmt_ms(t['scatter'].median)} | {fmt_ms(t['compare'].median)} |")

    # torchmetrics on the same GPU, when torch sees it.
    try:
        import torch
        from torchmetrics.functional.classification import (
            binary_calibration_error,
            multiclass_calibration_error,
        )

        if torch.cuda.is_available():
            tp = torch.as_tensor(np.asarray(p10), device="cuda")
            ty = torch.as_tensor(np.asarray(y10), device="cuda").long()
            tb = torch.as_tensor(np.asarray(pb), device="cuda")
            tyb = torch.as_tensor(np.asarray(yb), device="cuda").long()

            def synced(fn):
                def run():
                    out = fn()
                    torch.cuda.synchronize()
                    return out

                return run

            t = time_interleaved(
                {
                    "tm multiclass": synced(
                        lambda: multiclass_calibration_error(tp, ty, num_classes=10, n_bins=15)
                    ),
                    "jaxcal multiclass": lambda: jit(jaxcal.ece)(p10, y10),
                    "tm binary": synced(lambda: binary_calibration_error(tb, tyb, n_bins=15)),
                    "jaxcal binary": lambda: jit(jaxcal.ece)(pb, yb),
                },
                repeats=9,
            )
            lines += ["", "### Against torchmetrics on the same GPU (ECE, 15 bins)", ""]
            lines += ["| case | ms |", "|---|---:|"]
            lines += [f"| {name} | {fmt_ms(v.median)} |" for name, v in t.items()]
    except ImportError as err:
        lines.append(f"\n(torchmetrics not available: {err})")

    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"\n(total {time.perf_counter() - start:.0f} s)")
