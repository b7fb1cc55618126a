"""Selective prediction and scikit-learn calibration: jaxcal against torch-uncertainty and
scikit-learn, in one run.

Three tables:

1. **AURC** of ``(N, K = 10)`` float32 probabilities with int32 labels at N = 1e4, 1e5,
   1e6: ``jaxcal.selective.aurc(convention="trapezoid")`` (jitted, and eager with
   validation) against torch-uncertainty's ``AURC`` (``update`` + ``compute`` of a fresh
   metric on CPU tensors sharing the NumPy memory) and a NumPy port of it; floor: NumPy's
   sort of the packed (score bits, label) keys, the step every sort-based measure needs.
2. **Scaling** of every ``jaxcal.selective`` measure at the same sizes (jitted, (N,)
   confidences with 0/1 correctness): one sort, then O(N) scans, so ×10 in N should cost
   a little over ×10.
3. **CalibratedClassifierCV** at N = 1e5 (``--sklearn-n``): scikit-learn's and
   ``jaxcal.sklearn``'s, calibrating a frozen ``LogisticRegression`` (``FrozenEstimator``,
   so the time is the calibration's: the response, the fit and the probabilities) with
   ``method`` sigmoid, isotonic and temperature, K = 3; ``fit`` + ``predict_proba``.

    python benchmarks/bench_selective.py                 # the three tables
    python benchmarks/bench_selective.py --sizes 2000 --sklearn-n 5000 --repeats 2   # smoke
    /path/to/torch-env/python benchmarks/bench_selective.py   # with torch-uncertainty

torch-uncertainty (torch-based) is never in the test extra: install torch==2.13.0,
torchmetrics and torch-uncertainty in an environment of their own and run this script
with that interpreter (``run_all.py --torch-python``). Its ``AURC`` is loaded from the
installed package's ``metrics/classification/risk_coverage.py`` on its own (importing the
package itself pulls in Lightning and torchvision, which the metric does not use).
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _timing import Table, environment, row, sort_floor, time_interleaved, write_tables

from jaxcal import selective

K = 10
DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
JIT = "jaxcal jit"
EAGER = "jaxcal eager (validated)"
FLOOR = "floor: np.sort of packed keys"


def make_data(n: int, k: int = K, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Overconfident softmax probabilities ``(n, k)`` float32 and int32 labels."""
    rng = np.random.default_rng(seed)
    logits = 2.5 * rng.standard_normal((n, k)).astype(np.float32)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    tempered = np.exp((logits - logits.max(1, keepdims=True)) / np.float32(1.5))
    cum = np.cumsum(tempered, 1)
    u = rng.random(n).astype(np.float32) * cum[:, -1]
    labels = np.minimum((cum < u[:, None]).sum(1), k - 1).astype(np.int32)
    return probs, labels


def numpy_aurc(probs: np.ndarray, labels: np.ndarray) -> float:
    """torch-uncertainty's AURC in NumPy: argsort, cumsum, trapezoid / (1 - 1/N)."""
    scores, errors = probs.max(1), (probs.argmax(1) != labels).astype(np.float64)
    rates = np.cumsum(errors[np.argsort(-scores)]) / np.arange(1, len(scores) + 1)
    n = rates.size
    area = np.sum((rates[1:] + rates[:-1]) / 2) / n
    return float(area / (1 - 1 / n))


def torch_uncertainty_aurc(notes: list[str]) -> Callable | None:
    """``AURC`` of the installed torch-uncertainty (its module loaded alone), or None."""
    spec = importlib.util.find_spec("torch_uncertainty")
    if spec is None or importlib.util.find_spec("torchmetrics") is None:
        notes.append(
            "torch-uncertainty is not installed: skipped (an environment with torch==2.13.0, "
            "torchmetrics and torch-uncertainty; `run_all.py --torch-python`)."
        )
        return None
    path = pathlib.Path(next(iter(spec.submodule_search_locations)))
    module_spec = importlib.util.spec_from_file_location(
        "tu_risk_coverage", path / "metrics" / "classification" / "risk_coverage.py"
    )
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.AURC


def as_float(value: Any) -> float:
    value = value.item() if hasattr(value, "item") else value
    return float(np.asarray(value).reshape(-1)[0])


def aurc_rows(n: int, args, notes: list[str], tu_aurc) -> list[dict]:
    probs, labels = make_data(n, seed=n)
    p_d, y_d = jnp.asarray(probs), jnp.asarray(labels)
    fn = partial(selective.aurc, convention="trapezoid")
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(p_d, y_d).compile()
    compile_s = time.perf_counter() - start
    cases: dict[str, Callable[[], Any]] = {
        JIT: partial(compiled, p_d, y_d),
        EAGER: partial(fn, p_d, y_d),
        "numpy port": partial(numpy_aurc, probs, labels),
    }
    if tu_aurc is not None:
        import torch

        p_t, y_t = torch.from_numpy(probs), torch.from_numpy(labels).long()

        def tu():
            metric = tu_aurc()
            metric.update(p_t, y_t)
            return metric.compute()

        cases["torch-uncertainty AURC"] = tu
    conf, correct = probs.max(1), (probs.argmax(1) == labels).astype(np.int32)
    cases[FLOOR] = sort_floor(conf, correct)
    values: dict[str, Any] = {}
    timings = time_interleaved(cases, args.repeats, args.budget_s, values, clock=args.clock)
    out = []
    for name, t in timings.items():
        kind = "floor" if name == FLOOR else "jaxcal" if "jaxcal" in name else "peer"
        value = None if kind == "floor" else f"{as_float(values[name]):.6f}"
        out.append(
            row(
                n,
                name,
                t.median,
                kind=kind,
                compile_s=compile_s if name == JIT else None,
                value=value,
            )
        )
    return out


SCALED = {
    "aurc (mean)": selective.aurc,
    "e_aurc": selective.e_aurc,
    "augrc": selective.augrc,
    "prediction_rejection_ratio": selective.prediction_rejection_ratio,
    "risk_at_coverage (3 levels)": partial(selective.risk_at_coverage, coverage=(0.8, 0.9, 0.95)),
    "coverage_at_risk": selective.coverage_at_risk,
    "correctness_auroc": selective.correctness_auroc,
    "risk_coverage_curve": selective.risk_coverage_curve,
}


def scaling_rows(sizes, args) -> list[dict]:
    out = []
    for n in sizes:
        probs, labels = make_data(n, seed=n)
        conf = jnp.asarray(probs.max(1))
        correct = jnp.asarray((probs.argmax(1) == labels).astype(np.int32))
        cases, compile_s = {}, {}
        for name, fn in SCALED.items():
            start = time.perf_counter()
            named = partial(lambda f, s, c: f(confidence=s, correct=c), fn)
            compiled = jax.jit(named).lower(conf, correct).compile()
            compile_s[name] = time.perf_counter() - start
            cases[name] = partial(compiled, conf, correct)
        cases[FLOOR] = sort_floor(np.asarray(conf), np.asarray(correct))
        timings = time_interleaved(cases, args.repeats, args.budget_s, clock=args.clock)
        for name, t in timings.items():
            kind = "floor" if name == FLOOR else "jaxcal"
            out.append(row(n, name, t.median, kind=kind, compile_s=compile_s.get(name)))
    return out


def sklearn_rows(n: int, args, notes: list[str]) -> list[dict]:
    from sklearn import calibration as skcal
    from sklearn.datasets import make_classification
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression

    from jaxcal import sklearn as jsk

    X, y = make_classification(
        n_samples=2 * n, n_features=20, n_informative=6, n_classes=3, random_state=0
    )
    model = FrozenEstimator(LogisticRegression(max_iter=500).fit(X[n:], y[n:]))
    Xc, yc = X[:n], y[:n]
    out = []
    for method in ("sigmoid", "isotonic", "temperature"):
        ours = partial(
            lambda m: jsk.CalibratedClassifierCV(model, method=m).fit(Xc, yc).predict_proba(Xc),
            method,
        )
        theirs = partial(
            lambda m: skcal.CalibratedClassifierCV(model, method=m).fit(Xc, yc).predict_proba(Xc),
            method,
        )
        start = time.perf_counter()
        first = ours()  # compiles jaxcal's kernels for these shapes
        compile_s = time.perf_counter() - start
        values: dict[str, Any] = {}
        cases = {"jaxcal.sklearn": ours, "scikit-learn": theirs}
        timings = time_interleaved(cases, args.repeats, args.budget_s, values, clock=args.clock)
        gap = float(np.abs(values["jaxcal.sklearn"] - values["scikit-learn"]).max())
        for name, t in timings.items():
            kind = "jaxcal" if name == "jaxcal.sklearn" else "peer"
            out.append(
                row(
                    f"{method}",
                    name,
                    t.median,
                    kind=kind,
                    compile_s=compile_s - t.median if kind == "jaxcal" else None,
                    value=f"max Δp {gap:.1e}" if kind == "jaxcal" else None,
                )
            )
        del first
    notes.append(
        f"CalibratedClassifierCV: {n:,} calibration samples, K = 3, a frozen LogisticRegression "
        "(the time is the calibration's); jaxcal's compile s is its first call minus a steady "
        "one; value: the largest difference of the two estimators' probabilities (both "
        "float64)."
    )
    return out


def _print(table: Table) -> None:
    print(f"### {table.title}\n")
    print(f"`{table.command}`  \n{table.environment}\n")
    print("| group | implementation | median ms | compile s | value |")
    print("|---|---|---:|---:|---|")
    for r in table.rows:
        median = "skipped" if r["seconds"] is None else f"{r['seconds'] * 1e3:.3g}"
        compile_s = "" if r["compile_s"] is None else f"{r['compile_s']:.2f}"
        print(f"| {r['size']} | {r['name']} | {median} | {compile_s} | {r['value'] or ''} |")
    for note in table.notes:
        print(f"- {note}")
    print()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--sklearn-n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget-s", type=float, default=5.0)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    command = " ".join(["python benchmarks/bench_selective.py", *(argv or sys.argv[1:])])
    env = environment()
    notes: list[str] = []
    tu_aurc = torch_uncertainty_aurc(notes)
    if tu_aurc is not None:
        import torch

        env += f"; torch {torch.__version__} ({torch.get_num_threads()} threads)"
    rows = []
    for n in args.sizes:
        print(f"AURC at N = {n:.0e} ...", file=sys.stderr, flush=True)
        rows += aurc_rows(n, args, notes, tu_aurc)
    common = dict(command=command, environment=env, clock=args.clock)
    tables = [
        Table(
            key="selective_aurc",
            title="AURC (trapezoid convention), K = 10, float32",
            reference=JIT,
            floor=FLOOR,
            rows=rows,
            notes=notes,
            **common,
        )
    ]
    print("scaling ...", file=sys.stderr, flush=True)
    tables.append(
        Table(
            key="selective_scaling",
            title="jaxcal.selective, (N,) confidences, jitted: one sort, then O(N)",
            reference="aurc (mean)",
            floor=FLOOR,
            rows=scaling_rows(args.sizes, args),
            **common,
        )
    )
    print("CalibratedClassifierCV ...", file=sys.stderr, flush=True)
    sk_notes: list[str] = []
    tables.append(
        Table(
            key="selective_sklearn",
            title=f"CalibratedClassifierCV, frozen estimator, N = {args.sklearn_n:,}",
            reference="jaxcal.sklearn",
            floor=None,
            rows=sklearn_rows(args.sklearn_n, args, sk_notes),
            notes=sk_notes,
            group="method",
            **common,
        )
    )
    for table in tables:
        _print(table)
    write_tables(args.json, tables)


if __name__ == "__main__":
    main()
