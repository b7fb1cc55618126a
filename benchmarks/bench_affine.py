"""Matrix scaling and Platt scaling fits: jaxcal's L-BFGS, optax's, SciPy's and scikit-learn's.

On float32 logits of an over-confident K-class model (labels drawn from softmax(z), the
model reports 3 z), one fit at each size of:

* ``matrix_scaling(l2=1e-3)`` (K(K+1) parameters, Kull et al.'s penalty);
* ``platt_scaling(inputs="logits")`` on the first class's margin (2 parameters).

Implementations (float32 unless said):

* ``jaxcal L-BFGS, jit``: the default solver (``jaxcal/calibrators/_lbfgs.py``), jitted,
  value checks skipped as under ``jit``; tol 1e-6 (the default) and 1e-8;
* ``jaxcal with optax.lbfgs(), jit``: ``optimizer=optax.lbfgs()`` (zoom line search on
  loss values), the previous default;
* ``scipy L-BFGS-B, float64 NumPy``: the same objective and gradient in NumPy float64
  (``gtol=1e-12, ftol=1e-16``), the reference every row is compared to;
* Platt only: ``sklearn LogisticRegression(C=inf, lbfgs)`` on the margins.

Each row reports max|grad| at its stop (the mean loss's gradient, in the solver's own
scaled parameters for jaxcal) and ``max |dp|``, the largest difference of its calibrated
probabilities from the float64 reference's on the same rows: how far from the optimum
the solver stopped. The floor is a jitted read of the logits and labels.

    python benchmarks/bench_affine.py                      # N = 1e4, 1e5, 1e6; K = 10
    python benchmarks/bench_affine.py --sizes 2000 --repeats 2   # seconds

Timings are steady-state medians after a warm-up call (``jax.block_until_ready``);
compile time (trace + lower + XLA compile of a fresh ``jax.jit``) is reported apart.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _timing import (
    Table,
    compile_seconds,
    environment,
    fmt_ms,
    read_floor,
    size_label,
    time_interleaved,
    write_tables,
)
from _timing import row as table_row
from scipy.optimize import minimize
from scipy.special import expit, log_softmax, softmax
from sklearn.linear_model import LogisticRegression

from jaxcal import calibrators

L2 = 1e-3
FLOOR = "floor: jax.jit read of logits, labels"
REFERENCE = "scipy L-BFGS-B, float64 NumPy"


def make_data(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * np.linspace(0.5, 2.0, k)
    u = rng.uniform(size=(n, 1))
    labels = (u > np.cumsum(softmax(z, axis=1), axis=1)).sum(axis=1)
    return (3 * z).astype(np.float32), np.minimum(labels, k - 1).astype(np.int32)


def matrix_scipy(z: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(W, b) of float64 matrix scaling with the L2 penalty, as one vector."""
    z = z.astype(np.float64)
    n, k = z.shape
    onehot = np.eye(k)[labels]

    def fun(theta):
        w, b = theta[: k * k].reshape(k, k), theta[k * k :]
        logp = log_softmax(z @ w.T + b, axis=1)
        r = (np.exp(logp) - onehot) / n
        loss = -np.sum(onehot * logp) / n + L2 * (np.sum(w * w) + np.sum(b * b))
        grad = np.concatenate([(r.T @ z + 2 * L2 * w).ravel(), r.sum(0) + 2 * L2 * b])
        return loss, grad

    theta0 = np.concatenate([np.eye(k).ravel(), np.zeros(k)])
    opts = {"maxiter": 20_000, "gtol": 1e-12, "ftol": 1e-16}
    return minimize(fun, theta0, jac=True, method="L-BFGS-B", options=opts).x


def matrix_probs(theta: np.ndarray, z: np.ndarray) -> np.ndarray:
    k = z.shape[1]
    w, b = theta[: k * k].reshape(k, k), theta[k * k :]
    return softmax(z.astype(np.float64) @ w.T + b, axis=1)


def platt_scipy(m: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(a, b) of float64 Platt scaling p = sigmoid(a m + b) on hard labels."""
    m = m.astype(np.float64)

    def fun(theta):
        s = theta[0] * m + theta[1]
        r = (expit(s) - y) / len(m)
        return np.mean(np.logaddexp(0, s) - y * s), np.array([r @ m, r.sum()])

    opts = {"maxiter": 20_000, "gtol": 1e-12, "ftol": 1e-16}
    return minimize(fun, np.array([1.0, 0.0]), jac=True, method="L-BFGS-B", options=opts).x


def fit_cases(kind: str, z: np.ndarray, labels: np.ndarray):
    """{name: (zero-argument fit, probabilities of its result, compile s, info)}."""
    if kind == "matrix":
        x, y = z, labels
        build = lambda **kw: calibrators.matrix_scaling(l2=L2, **kw)  # noqa: E731
    else:
        x, y = z[:, 0], (labels == 0).astype(np.int32)
        build = lambda **kw: calibrators.platt_scaling(inputs="logits", **kw)  # noqa: E731
    xj, yj = jnp.asarray(x), jnp.asarray(y)
    cases = {}
    for name, cal in (
        ("jaxcal L-BFGS, jit", build()),
        ("jaxcal L-BFGS tol=1e-8, jit", build(tol=1e-8)),
        ("jaxcal with optax.lbfgs(), jit", build(optimizer=optax.lbfgs())),
    ):
        fit = jax.jit(cal.fit)
        compile_s = sum(compile_seconds(cal.fit, xj, yj))
        cases[name] = (
            lambda fit=fit: fit(xj, yj),
            lambda params, cal=cal: np.asarray(cal.apply(params, xj), np.float64),
            compile_s,
        )
    if kind == "matrix":
        cases[REFERENCE] = (lambda: matrix_scipy(x, y), lambda t: matrix_probs(t, x), None)
    else:
        cases[REFERENCE] = (lambda: platt_scipy(x, y), lambda t: expit(t[0] * x + t[1]), None)
        sk = LogisticRegression(C=np.inf, solver="lbfgs", max_iter=10_000, tol=1e-10)
        cases["sklearn LogisticRegression(C=inf), float64"] = (
            lambda: sk.fit(x[:, None].astype(np.float64), y),
            lambda m: m.predict_proba(x[:, None].astype(np.float64))[:, 1],
            None,
        )
    cases[FLOOR] = (read_floor(xj, yj), None, None)
    return cases


def one_size(kind: str, n: int, k: int, repeats: int, clock: str):
    z, labels = make_data(n, k)
    cases = fit_cases(kind, z, labels)
    outputs: dict = {}
    times = time_interleaved(
        {name: c[0] for name, c in cases.items()},
        repeats=repeats,
        budget_s=20.0,
        outputs=outputs,
        max_call_s=60.0,
        clock=clock,
    )
    expected = cases[REFERENCE][1](outputs[REFERENCE])
    lines, rows = [], []
    for name, (_, probs_of, compile_s) in cases.items():
        note, value = "", None
        if probs_of is not None:
            gap = float(np.max(np.abs(probs_of(outputs[name]) - expected)))
            value = f"max |dp| {gap:.1e}"
            info = getattr(outputs[name], "info", None)
            if info is not None:
                note = (
                    f"{int(info.n_iter)} iterations, max|grad| {float(info.grad_norm):.1e}, "
                    f"converged {bool(info.converged)}"
                )
                value += f"; {note}"
        kind_of = "floor" if name == FLOOR else "jaxcal" if "jaxcal" in name else "peer"
        median = times[name].median
        lines.append(
            f"| {size_label(n)} | {name} | {fmt_ms(median)} | "
            f"{'' if compile_s is None else f'{compile_s:.2f}'} | {value or ''} |"
        )
        rows.append(table_row(n, name, median, kind=kind_of, compile_s=compile_s, value=value))
    return lines, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e4, 1e5, 1e6])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    start = time.perf_counter()
    env = environment()
    command = " ".join(["python benchmarks/bench_affine.py", *sys.argv[1:]])
    tables = []
    for kind, title in (
        ("matrix", f"Matrix scaling (l2 = {L2}), one fit, K = {args.k} (float32)"),
        ("platt", "Platt scaling on logits, one fit (float32)"),
    ):
        print(f"## {title}\n")
        print("| N | implementation | median ms | compile s | result |\n|---|---|---|---|---|")
        rows = []
        for n in args.sizes:
            lines, more = one_size(kind, int(n), args.k, args.repeats, args.clock)
            print("\n".join(lines), flush=True)
            rows += more
        print()
        tables.append(
            Table(
                f"affine-{kind}",
                title,
                command=command,
                environment=env,
                clock=args.clock,
                reference="jaxcal L-BFGS, jit",
                floor=FLOOR,
                rows=rows,
                notes=[
                    "max |dp|: the largest difference of the calibrated probabilities from "
                    "the float64 SciPy fit's on the same rows."
                ],
            )
        )
    print(f"{env}; total {time.perf_counter() - start:.0f} s")
    write_tables(args.json, tables)


if __name__ == "__main__":
    main()
