"""Size of the kernel calibration tests (``jaxcal.stats.skce_test``, ``cme_test``) at
alpha = 0.05 on calibrated data, in the regimes users meet: predictions near 0 and 1,
LLM-like confidences near 1, rare events, Dirichlet(1) predictions; n = 50 to 1000,
K = 2 and 10.

Every data set is calibrated by construction (labels drawn from the predictions). For
each regime the script prints the rejection rate of each test and the mean expected
number of errors E (``SKCETestResult.expected_errors``) and the share of data sets the
result flags ``reliable``; the table of ``docs/guides/validity.md`` is its output.

    python scripts/kernel_test_size.py --reps 200 --big-reps 60 --resamples 100

Columns: ``asym`` the SKCE bootstrap (``method="asymptotic"``), ``block`` the SKCE block
z-test, ``cme`` the CME chi-square (5 test locations drawn uniformly on the simplex per
data set), and the same with ``null="consistency"`` (``asym/c``, ``block/c``, ``cme/c``).
A rate is within the binomial band of 0.05 when it is below 0.05 + 2 sqrt(0.05 0.95 / reps).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal import stats

ALPHA = 0.05


def _binary(p):
    return p.astype(np.float32)


def regime_data(name: str, n: int, reps: int, rng: np.random.Generator):
    """(probs ``(reps, n[, K])``, test_probs ``(reps, 5[, K])``) of one regime."""
    if name == "p in {1e-3, 1-1e-3}":
        p = np.where(rng.random((reps, n)) < 0.5, 1e-3, 1 - 1e-3)
        return _binary(p), _binary(rng.random((reps, 5)))
    if name == "rare events p ~ U(0, 0.02)":
        return _binary(rng.uniform(0, 0.02, (reps, n))), _binary(rng.random((reps, 5)))
    if name == "p ~ U(0, 1)":
        return _binary(rng.random((reps, n))), _binary(rng.random((reps, 5)))
    k = 10
    test = rng.dirichlet(np.ones(k), (reps, 5)).astype(np.float32)
    if name == "K = 10 Dirichlet(1)":
        return rng.dirichlet(np.ones(k), (reps, n)).astype(np.float32), test
    if name == "K = 10 confidence ~ U(0.95, 0.999)":
        conf = rng.uniform(0.95, 0.999, (reps, n, 1))
        rest = rng.dirichlet(np.ones(k - 1), (reps, n)) * (1 - conf)
        top = rng.integers(0, k, (reps, n))
        probs = np.concatenate([conf, rest], axis=-1)
        # move the confident class to a random position
        idx = (np.arange(k)[None, None, :] - top[..., None]) % k
        probs = np.take_along_axis(probs, idx, axis=-1)
        return (probs / probs.sum(-1, keepdims=True)).astype(np.float32), test
    raise ValueError(name)


def draw_labels(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if probs.ndim == 2:
        return (rng.random(probs.shape) < probs).astype(np.int32)
    cdf = np.cumsum(probs.astype(np.float64), axis=-1)
    u = rng.random(probs.shape[:-1])[..., None] * cdf[..., -1:]
    return np.minimum((u > cdf).sum(-1), probs.shape[-1] - 1).astype(np.int32)


def run_cell(probs, labels, test_probs, resamples: int, seed: int) -> dict:
    """Rejection rate of each test and the mean E / share reliable over the data sets."""
    reps = probs.shape[0]
    keys = jax.random.split(jax.random.key(seed), reps)
    binary = probs.ndim == 2
    m = test_probs.shape[1]
    test_labels = (
        (jnp.arange(m) % 2).astype(jnp.int32) if binary else jnp.arange(m, dtype=jnp.int32)
    )

    def one(args):
        p, y, tp, key = args
        out = {}
        a = stats.skce_test(p, y, key=key, n_resamples=resamples)
        out["asym"], out["E"], out["ok_skce"] = a.p_value, a.expected_errors, a.reliable
        out["block"] = stats.skce_test(p, y, method="block").p_value
        c = stats.cme_test(p, y, test_probs=tp, test_labels=test_labels)
        out["cme"], out["ok_cme"] = c.p_value, c.reliable
        out["asym/c"] = stats.skce_test(
            p, y, key=key, n_resamples=resamples, null="consistency"
        ).p_value
        out["block/c"] = stats.skce_test(
            p, y, method="block", key=key, n_resamples=resamples, null="consistency"
        ).p_value
        out["cme/c"] = stats.cme_test(
            p,
            y,
            test_probs=tp,
            test_labels=test_labels,
            null="consistency",
            key=key,
            n_resamples=resamples,
        ).p_value
        return out

    res = jax.jit(lambda *a: jax.lax.map(one, a))(probs, labels, test_probs, keys)
    res = jax.device_get(res)
    row = {k: float(np.mean(v <= ALPHA)) for k, v in res.items() if k not in ("E",)}
    row["ok_skce"] = float(np.mean(res["ok_skce"]))
    row["ok_cme"] = float(np.mean(res["ok_cme"]))
    row["E"] = float(np.mean(res["E"]))
    return row


REGIMES = (
    "p in {1e-3, 1-1e-3}",
    "rare events p ~ U(0, 0.02)",
    "p ~ U(0, 1)",
    "K = 10 confidence ~ U(0.95, 0.999)",
    "K = 10 Dirichlet(1)",
)
COLUMNS = ("asym", "block", "cme", "asym/c", "block/c", "cme/c")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200, help="data sets per cell, n < 1000")
    parser.add_argument("--big-reps", type=int, default=60, help="data sets per cell, n = 1000")
    parser.add_argument("--resamples", type=int, default=100)
    parser.add_argument("--sizes", default="50,100,1000")
    parser.add_argument("--regimes", default="all", help="comma-separated indices or 'all'")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    picked = (
        REGIMES if args.regimes == "all" else [REGIMES[int(i)] for i in args.regimes.split(",")]
    )
    print(f"alpha = {ALPHA}; R = {args.resamples} resamples for the bootstrap and the")
    print("consistency nulls; 'ok' = share of data sets flagged reliable (SKCE / CME).\n")
    print("| regime | n | reps | E | " + " | ".join(COLUMNS) + " | ok SKCE | ok CME |")
    print("|---|---:|---:|---:|" + "---:|" * (len(COLUMNS) + 2))
    for r, name in enumerate(picked):
        for n in sizes:
            reps = args.big_reps if n >= 1000 else args.reps
            rng = np.random.default_rng(1000 * r + n)
            probs, test_probs = regime_data(name, n, reps, rng)
            labels = draw_labels(probs, rng)
            t0 = time.perf_counter()
            row = run_cell(probs, labels, test_probs, args.resamples, seed=r * 7919 + n)
            cells = " | ".join(f"{row[c]:.3f}" for c in COLUMNS)
            print(
                f"| {name} | {n} | {reps} | {row['E']:.3g} | {cells} | "
                f"{row['ok_skce']:.2f} | {row['ok_cme']:.2f} |  <!-- {time.perf_counter() - t0:.0f} s -->",
                flush=True,
            )


if __name__ == "__main__":
    main()
