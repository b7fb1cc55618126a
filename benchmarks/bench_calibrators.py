"""Temperature scaling: jaxcal against SciPy/NumPy and scikit-learn, in one run.

Two cases, on float32 logits of an over-confident model (labels drawn from softmax(z), the
model reports 3 z):

1. one fit at N = 1e5, K = 100;
2. B = 1000 fits of independent data sets at N = 1e4, K = 10: jaxcal fits all of them in
   one ``jax.jit(jax.vmap(cal.fit))`` call; the peers fit them one after another.

Implementations:

* ``jaxcal (Newton)``: ``temperature_scaling()``, the default safeguarded Newton on 1/T
  (one pass over the logits per iteration), jitted, value validation skipped as under
  ``jit``; the eager call with validation is timed too (single fit).
* ``jaxcal (optax L-BFGS on log T)``: ``temperature_scaling(optimizer=optax.lbfgs())``.
* ``scipy minimize_scalar``: ``scipy.optimize.minimize_scalar(method="bounded",
  bounds=(1e-4, 1e4))`` on T of a NumPy NLL (``scipy.special.logsumexp``, float32 data,
  default xatol 1e-5) - the classic reference implementation.
* ``sklearn CalibratedClassifierCV(method="temperature")`` (scikit-learn >= 1.8; skipped
  with a note otherwise): a frozen classifier whose ``decision_function`` returns the
  logits, so that only the calibrator is fitted (bounded Brent on log(1/T), float32;
  with a frozen estimator scikit-learn still runs its 5-fold ``cross_val_predict`` of the
  decision function, then fits one calibrator on all rows).

Sequential peers in case 2 are timed on the first ``--sequential`` data sets (default 50)
and scaled to B, which the table says; ``--sequential 1000`` times all of them. Every
implementation's temperatures are checked against SciPy's (NLL within 1e-5).

    python benchmarks/bench_calibrators.py           # the issue's sizes
    python benchmarks/bench_calibrators.py --quick   # small sizes, seconds

The floor is a jitted read of the same logits and labels (one sum each).

Timings are steady-state medians after a warm-up call (``jax.block_until_ready``);
compile time (trace + lower + XLA compile of a fresh ``jax.jit``) is reported apart.
"""

from __future__ import annotations

import argparse
import importlib.metadata
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
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

from jaxcal import calibrators

BOUNDS = (1e-4, 1e4)
FLOOR = "floor: jax.jit read of logits, labels"


def make_data(rng: np.random.Generator, b: int, n: int, k: int):
    """``b`` data sets of over-confident float32 logits (b, n, k) and int32 labels (b, n)."""
    z = rng.standard_normal((b, n, k), dtype=np.float32)
    # inverse-CDF sampling of labels from softmax(z), row by row, vectorised
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    cum = np.cumsum(p / p.sum(axis=-1, keepdims=True), axis=-1)
    u = rng.random((b, n, 1), dtype=np.float32)
    labels = np.minimum((cum < u).sum(axis=-1), k - 1).astype(np.int32)
    return 3.0 * z, labels


def numpy_nll(t: float, z: np.ndarray, labels: np.ndarray) -> float:
    zt = z / np.float32(t)
    return float(np.mean(logsumexp(zt, axis=1) - zt[np.arange(len(labels)), labels]))


def scipy_fit(z: np.ndarray, labels: np.ndarray) -> float:
    res = minimize_scalar(numpy_nll, bounds=BOUNDS, method="bounded", args=(z, labels))
    return float(res.x)


def sklearn_fitter():
    """A function (z, labels) -> T using CalibratedClassifierCV(method="temperature"), or None."""
    try:
        from sklearn.base import BaseEstimator, ClassifierMixin
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.frozen import FrozenEstimator
    except ImportError:
        return None, "scikit-learn without FrozenEstimator"
    version = importlib.metadata.version("scikit-learn")
    if tuple(int(v) for v in version.split(".")[:2]) < (1, 8):
        return None, f"scikit-learn {version} has no method='temperature' (added in 1.8)"

    class Logits(ClassifierMixin, BaseEstimator):
        """A 'classifier' whose decision function is its input: the logits themselves."""

        def fit(self, x, y):
            self.classes_ = np.arange(x.shape[1])
            return self

        def decision_function(self, x):
            return x

        def predict(self, x):
            return np.argmax(x, axis=1)

    def fit(z, labels):
        frozen = FrozenEstimator(Logits().fit(z[:1], labels[:1]))
        ccv = CalibratedClassifierCV(frozen, method="temperature").fit(z, labels)
        return 1.0 / float(ccv.calibrated_classifiers_[0].calibrators[0].beta_)

    return fit, f"scikit-learn {version}"


def check(name: str, temps, z, labels, t_ref) -> None:
    """Each fitted T must reach SciPy's NLL within 1e-5 (float64 evaluation)."""
    for t, zi, yi, tr in zip(np.atleast_1d(temps), z, labels, np.atleast_1d(t_ref), strict=False):
        z64 = zi.astype(np.float64)
        gap = numpy_nll(float(t), z64, yi) - numpy_nll(float(tr), z64, yi)
        if gap > 1e-5:
            raise AssertionError(f"{name}: NLL {gap:.2e} above scipy's (T={t}, scipy {tr})")


def row(name, t, ref, compile_s=None, note=""):
    ratio = ref / t
    comp = "" if compile_s is None else f"{compile_s:.2f}"
    return f"| {name} | {fmt_ms(t)} | {ratio:.2f}x | {comp} | {note} |"


def single_fit(n: int, k: int, repeats: int, clock: str = "wall") -> tuple[list[str], list]:
    z, labels = make_data(np.random.default_rng(0), 1, n, k)
    z, labels = z[0], labels[0]
    zj, yj = jnp.asarray(z), jnp.asarray(labels)
    newton = calibrators.temperature_scaling()
    lbfgs = calibrators.temperature_scaling(optimizer=optax.lbfgs())
    fit_newton = jax.jit(newton.fit)
    fit_lbfgs = jax.jit(lbfgs.fit)
    compile_newton = sum(compile_seconds(newton.fit, zj, yj))
    compile_lbfgs = sum(compile_seconds(lbfgs.fit, zj, yj))
    sk_fit, sk_note = sklearn_fitter()
    cases = {
        "jaxcal (Newton), jit": lambda: fit_newton(zj, yj).temperature,
        "jaxcal (Newton), eager with validation": lambda: newton.fit(zj, yj).temperature,
        "jaxcal (optax L-BFGS on log T), jit": lambda: fit_lbfgs(zj, yj).temperature,
        "scipy minimize_scalar on NumPy NLL": lambda: scipy_fit(z, labels),
    }
    if sk_fit is not None:
        cases["sklearn CalibratedClassifierCV(method='temperature')"] = lambda: sk_fit(z, labels)
    cases[FLOOR] = read_floor(zj, yj)
    outputs: dict = {}
    times = time_interleaved(cases, repeats=repeats, budget_s=20.0, outputs=outputs, clock=clock)
    t_ref = outputs["scipy minimize_scalar on NumPy NLL"]
    for name, out in outputs.items():
        if name != FLOOR:
            check(name, [out], [z], [labels], [t_ref])
    iters = int(fit_newton(zj, yj).info.n_iter)
    ref = times["scipy minimize_scalar on NumPy NLL"].median
    lines = [
        f"### One fit, N = {n:,}, K = {k} (float32; T = {float(t_ref):.4f})",
        "",
        "| implementation | median ms | speed-up vs scipy | compile s | note |",
        "|---|---|---|---|---|",
    ]
    rows = []
    for name, tm in times.items():
        compile_s = compile_newton if "Newton" in name and "jit" in name else None
        compile_s = compile_lbfgs if "L-BFGS" in name else compile_s
        note = f"{iters} Newton iterations" if compile_s is compile_newton else ""
        lines.append(row(name, tm.median, ref, compile_s, note))
        kind = "floor" if name == FLOOR else "jaxcal" if "jaxcal" in name else "peer"
        value = None if name == FLOOR else f"T = {float(outputs[name]):.4f}"
        rows.append(table_row(n, name, tm.median, kind=kind, compile_s=compile_s, value=value))
    if sk_fit is None:
        lines.append(f"\nsklearn skipped: {sk_note}.")
    return lines, rows


def many_fits(
    b: int, n: int, k: int, n_seq: int, repeats: int, clock: str = "wall"
) -> tuple[list[str], list]:
    z, labels = make_data(np.random.default_rng(1), b, n, k)
    zj, yj = jnp.asarray(z), jnp.asarray(labels)
    cal = calibrators.temperature_scaling()
    batched = jax.jit(jax.vmap(cal.fit))
    compile_s = sum(compile_seconds(jax.vmap(cal.fit), zj, yj))
    sk_fit, sk_note = sklearn_fitter()
    n_seq = min(n_seq, b)
    cases = {
        f"jaxcal vmap, {b} fits in one call": lambda: batched(zj, yj).temperature,
        f"scipy minimize_scalar, {n_seq} sequential fits": lambda: [
            scipy_fit(z[i], labels[i]) for i in range(n_seq)
        ],
    }
    if sk_fit is not None:
        cases[f"sklearn CalibratedClassifierCV, {n_seq} sequential fits"] = lambda: [
            sk_fit(z[i], labels[i]) for i in range(n_seq)
        ]
    cases[FLOOR] = read_floor(zj, yj)
    outputs: dict = {}
    times = time_interleaved(cases, repeats=repeats, budget_s=30.0, outputs=outputs, clock=clock)
    scipy_name = f"scipy minimize_scalar, {n_seq} sequential fits"
    t_ref = outputs[scipy_name]
    for name, out in outputs.items():
        if name != FLOOR:
            check(name, np.asarray(out)[:n_seq], z[:n_seq], labels[:n_seq], t_ref)
    scale = b / n_seq
    ref = times[scipy_name].median * scale
    iters = batched(zj, yj).info.n_iter
    lines = [
        f"### {b} fits, N = {n:,}, K = {k} each (float32)",
        "",
        f"Sequential peers timed on {n_seq} data sets and scaled by {scale:g} to {b} fits.",
        "",
        f"| implementation | median ms for {b} fits | speed-up vs scipy | compile s | note |",
        "|---|---|---|---|---|",
    ]
    rows = []
    for name, tm in times.items():
        seq = "sequential" in name
        total = tm.median * (scale if seq else 1)
        note = f"{fmt_ms(tm.median)} ms measured for {n_seq}" if seq and scale != 1 else ""
        if not seq and name != FLOOR:
            note = f"Newton iterations: max {int(iters.max())}, mean {float(iters.mean()):.1f}"
        jax_row = not seq and name != FLOOR
        lines.append(row(name, total, ref, compile_s if jax_row else None, note))
        kind = "floor" if name == FLOOR else "jaxcal" if "jaxcal" in name else "peer"
        name = name.replace(f"{n_seq} sequential fits", f"{b} sequential fits")
        if seq and scale != 1:
            name += f" (timed on {n_seq}, scaled)"
        rows.append(
            table_row(
                f"{b} x {size_label(n)}",
                name,
                total,
                kind=kind,
                compile_s=compile_s if jax_row else None,
            )
        )
    if sk_fit is None:
        lines.append(f"\nsklearn skipped: {sk_note}.")
    return lines, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--sequential", type=int, default=50, help="sequential peer fits timed")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (run_all.py)"
    )
    args = parser.parse_args()
    if args.quick:
        single = (10_000, 10)
        many = (100, 1_000, 10)
        args.repeats = min(args.repeats, 3)
        args.sequential = min(args.sequential, 20)
    else:
        single = (100_000, 100)
        many = (1000, 10_000, 10)
    start = time.perf_counter()
    print("## Temperature scaling fits\n")
    lines, single_rows = single_fit(*single, args.repeats, args.clock)
    print("\n".join(lines))
    print()
    lines, many_rows = many_fits(*many, args.sequential, args.repeats, args.clock)
    print("\n".join(lines))
    env = environment()
    print(f"\n{env}; total {time.perf_counter() - start:.0f} s")
    command = " ".join(["python benchmarks/bench_calibrators.py", *sys.argv[1:]])
    common = dict(command=command, environment=env, clock=args.clock, floor=FLOOR)
    single_title = (
        f"Temperature scaling, one fit, N = {size_label(single[0])}, K = {single[1]} (float32)"
    )
    many_title = (
        f"Temperature scaling, {many[0]} fits, N = {size_label(many[1])}, K = {many[2]} each"
    )
    write_tables(
        args.json,
        [
            Table(
                "calibrators-single",
                single_title,
                reference="jaxcal (Newton), jit",
                rows=single_rows,
                **common,
            ),
            Table(
                "calibrators-many",
                many_title,
                reference=f"jaxcal vmap, {many[0]} fits in one call",
                rows=many_rows,
                **common,
            ),
        ],
    )


if __name__ == "__main__":
    main()
