"""First touch: "the typical script" in a new process, jaxcal against NumPy/SciPy/scikit-learn.

    nice python benchmarks/bench_first_touch.py              # 3 rounds
    python benchmarks/bench_first_touch.py --quick           # 1 round, small N (smoke)

Most evaluation is a few calls per process on a new N each time, so what a user waits
for is the first call, import included. The script: three models of N = 2,000, 5,000 and
10,000 rows, K = 10 (deterministic synthetic logits; the labels drawn from the
probabilities softened by a temperature of 1.6, 1.2 and 1: overconfident, mildly so, calibrated), six numbers each: the ECE (15 equal-width bins, top label), the
debiased l2 ECE (Kumar et al. 2019), the Brier score, the log loss, the Kuiper test's
p-value (top label; Tygert 2022) and the ECE after temperature scaling. It is written
once with jaxcal (:data:`JAXCAL_SCRIPT`) and once with NumPy, SciPy and scikit-learn
(:data:`NUMPY_SCRIPT`); each run is a new ``python`` process, timed by wall clock from
outside (interpreter start, imports, reading the three ``.npz`` files, the numbers):

* floors: ``python -c "import jax"`` and ``python -c "import jaxcal"`` (which loads its
  namespaces, and JAX, on first use), and ``import jaxcal; jaxcal.ece`` (JAX and
  ``jaxcal.metrics`` loaded: the import cost the first call pays);
* the NumPy/SciPy/scikit-learn script;
* jaxcal cold: an empty ``JAXCAL_CACHE_DIR`` (and no JAX cache folder set);
* jaxcal second run: the same script again with the same cache folder (what a user's
  second run of the script waits for).

Then ``jaxcal.sklearn.CalibratedClassifierCV(cv=5)`` (sigmoid, the default) around a
``LogisticRegression``, fit and ``predict_proba`` on 300 rows (binary,
``make_classification``): the first fit of a new process (cold cache folder, then the
second process with the same folder) and a fit on another 300 rows in a process that has
fitted once, beside scikit-learn's own ``CalibratedClassifierCV``; these are timed inside
the process (after the imports, which are reported apart).

The values of the two scripts are printed side by side (they agree to float32 round-off;
the Kuiper p-values also differ where jaxcal aggregates tied scores). The cache folder is
whatever the code does with ``JAXCAL_CACHE_DIR``: the script measures it, it does not set
anything else up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _timing import Table, environment, write_tables

ROOT = Path(__file__).resolve().parents[1]
K = 10

#: The typical script, jaxcal. argv: the .npz files (logits, labels).
JAXCAL_SCRIPT = """
import json, sys
import numpy as np
import jaxcal
from jaxcal import calibrators, stats

ts = calibrators.temperature_scaling()
out = []
for path in sys.argv[1:]:
    data = np.load(path)
    logits, labels = data["logits"], data["labels"]
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    params = ts.fit(logits, labels)
    row = [
        jaxcal.ece(probs, labels),
        jaxcal.ece(probs, labels, norm="l2", debias=True),
        jaxcal.brier_score(probs, labels),
        jaxcal.log_loss(probs, labels),
        stats.kuiper_test(probs, labels).p_value,
        jaxcal.ece(ts.apply(params, logits), labels),
    ]
    out.append([float(v) for v in row])
print(json.dumps(out))
"""

#: The typical script, NumPy / SciPy / scikit-learn (the same definitions).
NUMPY_SCRIPT = """
import json, sys
import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, ndtr, softmax
from sklearn.metrics import log_loss

def ece(probs, labels, n_bins=15, debiased_l2=False):
    conf, correct = probs.max(1), probs.argmax(1) == labels
    b = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    n = np.bincount(b, minlength=n_bins)
    keep = n > 0
    c = np.bincount(b, conf, n_bins)[keep] / n[keep]
    a = np.bincount(b, correct, n_bins)[keep] / n[keep]
    w = n[keep] / len(conf)
    if not debiased_l2:
        return np.sum(w * np.abs(c - a))
    nb = n[keep]
    sq = np.where(nb >= 2, (c - a) ** 2 - a * (1 - a) / np.maximum(nb - 1, 1), 0.0)
    return np.sqrt(max(np.sum(w * sq), 0.0))

def kuiper_p(probs, labels):
    conf, correct = probs.max(1), probs.argmax(1) == labels
    order = np.argsort(conf, kind="stable")
    path = np.concatenate([[0.0], np.cumsum((correct - conf)[order])]) / len(conf)
    sigma = np.sqrt(np.sum(conf * (1 - conf))) / len(conf)
    h = (path.max() - path.min()) / sigma
    k = np.arange(1, 401)
    return min(1.0, 8 * np.sum((-1.0) ** (k - 1) * k * ndtr(-k * h)))

def temperature(logits, labels):
    def nll(log_t):
        return -np.mean(log_softmax(logits / np.exp(log_t), axis=1)[np.arange(len(labels)), labels])
    return np.exp(minimize_scalar(nll, bounds=(-9.2, 9.2), method="bounded").x)

out = []
for path in sys.argv[1:]:
    data = np.load(path)
    logits, labels = data["logits"].astype(np.float64), data["labels"]
    probs = softmax(logits, axis=1)
    onehot = np.eye(probs.shape[1])[labels]
    row = [
        ece(probs, labels),
        ece(probs, labels, debiased_l2=True),
        np.mean(np.sum((probs - onehot) ** 2, axis=1)),
        log_loss(labels, probs, labels=np.arange(probs.shape[1])),
        kuiper_p(probs, labels),
        ece(softmax(logits / temperature(logits, labels), axis=1), labels),
    ]
    out.append([float(v) for v in row])
print(json.dumps(out))
"""

#: CalibratedClassifierCV(cv=5) on 300 rows: argv[1] is "jaxcal" or "sklearn".
SKLEARN_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
if sys.argv[1] == "jaxcal":
    from jaxcal.sklearn import CalibratedClassifierCV
else:
    from sklearn.calibration import CalibratedClassifierCV
t1 = time.perf_counter()
X, y = make_classification(n_samples=600, n_features=20, random_state=0)
times, means = [], []
for rows in (slice(0, 300), slice(300, 600)):
    start = time.perf_counter()
    clf = CalibratedClassifierCV(LogisticRegression(max_iter=1000), cv=5)
    p = clf.fit(X[rows], y[rows]).predict_proba(X[rows])
    times.append(time.perf_counter() - start)
    means.append(float(p[:, 1].mean()))
print(json.dumps({"import": t1 - t0, "first": times[0], "again": times[1], "mean": means}))
"""


def make_models(folder: Path, sizes: list[int]) -> list[str]:
    """Three models' held-out logits and labels as .npz files (deterministic)."""
    paths = []
    for i, n in enumerate(sizes):
        rng = np.random.default_rng(100 + i)
        logits = (2.5 + 0.5 * i) * rng.normal(size=(n, K))
        t = (1.6, 1.2, 1.0)[i % 3]  # overconfident, mildly so, calibrated
        soft = np.exp(logits / t - (logits / t).max(1, keepdims=True))
        soft /= soft.sum(1, keepdims=True)
        labels = (soft.cumsum(1) < rng.uniform(size=(n, 1))).sum(1).clip(0, K - 1)
        path = folder / f"model{i}_{n}.npz"
        np.savez(path, logits=logits.astype(np.float32), labels=labels.astype(np.int32))
        paths.append(str(path))
    return paths


def _env(cache: str | None) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    for name in ("JAXCAL_NO_COMPILATION_CACHE", "JAXCAL_KERNEL_STORE", "JAX_COMPILATION_CACHE_DIR"):
        env.pop(name, None)  # the code's defaults: whatever it does with its cache folder
    if cache is not None:
        env["JAXCAL_CACHE_DIR"] = cache
    return env


def run(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of one new ``python ARGV`` process, and its last line of output."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *argv], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"python {' '.join(argv[:2])} failed:\n{proc.stderr[-3000:]}")
    return wall, (proc.stdout.strip().splitlines() or [""])[-1]


SCRIPT_CASES = (
    'floor: python -c "import jax"',
    'python -c "import jaxcal"',
    'python -c "import jaxcal; jaxcal.ece" (JAX and jaxcal.metrics loaded)',
    "NumPy / SciPy / scikit-learn script",
    "jaxcal script, cold (empty cache folder)",
    "jaxcal script, second run (same cache folder)",
)
SK_CASES = (
    "jaxcal CalibratedClassifierCV, first fit of a new process (empty cache folder)",
    "jaxcal CalibratedClassifierCV, first fit of a second process (same cache folder)",
    "jaxcal CalibratedClassifierCV, in a process that has fitted once",
    "scikit-learn CalibratedClassifierCV, first fit of a new process",
    "scikit-learn CalibratedClassifierCV, in a process that has fitted once",
)


def _fmt(ts: list[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in ts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs=3, default=[2000, 5000, 10000])
    parser.add_argument("--quick", action="store_true", help="one round, N = 500, 1000, 2000")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.sizes = 1, [500, 1000, 2000]
    times: dict[str, list[float]] = {name: [] for name in (*SCRIPT_CASES, *SK_CASES)}
    imports: dict[str, list[float]] = {"jaxcal": [], "sklearn": []}
    values: dict[str, list] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as data_dir:
        files = make_models(Path(data_dir), args.sizes)
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as sk:
                plain = _env(None)
                cached, sk_cached = _env(cache), _env(sk)
                jax_floor, jaxcal_floor, first_use, numpy_case, cold, warm = SCRIPT_CASES
                times[jax_floor].append(run(["-c", "import jax"], plain)[0])
                times[jaxcal_floor].append(run(["-c", "import jaxcal"], plain)[0])
                times[first_use].append(run(["-c", "import jaxcal; jaxcal.ece"], plain)[0])
                wall, out = run(["-c", NUMPY_SCRIPT, *files], plain)
                times[numpy_case].append(wall)
                values["numpy"] = json.loads(out)
                for case in (cold, warm):
                    wall, out = run(["-c", JAXCAL_SCRIPT, *files], cached)
                    times[case].append(wall)
                    values["jaxcal"] = json.loads(out)
                got = json.loads(run(["-c", SKLEARN_SCRIPT, "jaxcal"], sk_cached)[1])
                times[SK_CASES[0]].append(got["first"])
                times[SK_CASES[2]].append(got["again"])
                imports["jaxcal"].append(got["import"])
                second = json.loads(run(["-c", SKLEARN_SCRIPT, "jaxcal"], sk_cached)[1])
                times[SK_CASES[1]].append(second["first"])
                values["sk-jaxcal"] = got["mean"]
                got = json.loads(run(["-c", SKLEARN_SCRIPT, "sklearn"], plain)[1])
                times[SK_CASES[3]].append(got["first"])
                times[SK_CASES[4]].append(got["again"])
                imports["sklearn"].append(got["import"])
                values["sk-sklearn"] = got["mean"]
    elapsed = time.perf_counter() - started
    med = {name: statistics.median(ts) for name, ts in times.items() if ts}
    numpy_s, floor_s = med[SCRIPT_CASES[3]], med[SCRIPT_CASES[0]]
    lines = [
        "| case | median s | runs (s) | ÷ NumPy script | ÷ import jax |",
        "|---|---:|---|---:|---:|",
    ]
    for name in SCRIPT_CASES:
        lines.append(
            f"| {name} | {med[name]:.2f} | {_fmt(times[name])} "
            f"| {med[name] / numpy_s:.2f} | {med[name] / floor_s:.2f} |"
        )
    sk_lines = [
        "| case (fit + predict_proba, 300 rows, cv=5) | median s | runs (s) |",
        "|---|---:|---|",
    ]
    for name in SK_CASES:
        sk_lines.append(f"| {name} | {med[name]:.2f} | {_fmt(times[name])} |")
    for which, label in (("jaxcal", "jaxcal.sklearn"), ("sklearn", "sklearn.calibration")):
        ts = imports[which]
        sk_lines.append(
            f"| import of {label} + scikit-learn (in-process) "
            f"| {statistics.median(ts):.2f} | {_fmt(ts)} |"
        )
    names = ("ECE", "debiased l2 ECE", "Brier", "log loss", "Kuiper p", "ECE after TS")
    value_lines = ["| model | implementation | " + " | ".join(names) + " |"]
    value_lines.append("|---|---|" + "---:|" * len(names))
    for n, j_row, n_row in zip(args.sizes, values["jaxcal"], values["numpy"], strict=True):
        for impl, r in (("jaxcal", j_row), ("NumPy/SciPy/sklearn", n_row)):
            value_lines.append(
                f"| N = {n:,} | {impl} | " + " | ".join(f"{v:.5f}" for v in r) + " |"
            )
    env_line = environment()
    command = " ".join(["python benchmarks/bench_first_touch.py", *(argv or sys.argv[1:])])
    notes = [
        f"Each row is a new `python` process (wall clock from outside; the "
        f"CalibratedClassifierCV rows are timed inside it, after its imports); "
        f"median of {args.rounds} round(s), the run took {elapsed:.0f} s. Targets (issue "
        "33): jaxcal cold <= 2x the NumPy script, second run <= 1.3x; "
        "CalibratedClassifierCV <= 3 s cold, <= 0.5 s after a first fit; "
        "`import jaxcal` within 0.15 s of `import jax`.",
        "Mean predicted probability of the two CalibratedClassifierCV fits: jaxcal "
        f"{values['sk-jaxcal']}, scikit-learn {values['sk-sklearn']}.",
    ]
    md = "\n".join(
        [*lines, "", *sk_lines, "", "Values (the two scripts' numbers):", "", *value_lines]
    )
    title = (
        f"First touch: the typical script (N = {', '.join(f'{n:,}' for n in args.sizes)}, "
        f"K = {K}) and CalibratedClassifierCV, new processes"
    )
    print(f"### {title}\n\n{env_line}\n\n{md}\n\n" + "\n".join(f"- {n}" for n in notes))
    table = Table(
        key="first-touch",
        title=title,
        command=command,
        environment=env_line,
        clock="wall",
        reference="",
        floor=None,
        rows=[],
        notes=notes,
        unit="s",
        markdown=md,
    )
    write_tables(args.json, [table])


if __name__ == "__main__":
    main()
