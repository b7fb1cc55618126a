"""Training with calibration objectives on real data: which one lowers held-out ECE?

An MLP is trained long enough to be over-confident on two scikit-learn data sets, with
each objective of :mod:`jaxcal.losses` and the usual alternatives, ten seeds at a time:

* digits (1,797 8x8 images, 10 classes): softmax MLP 64 -> 128 -> 10, pixels / 16;
* breast cancer (569 samples, 30 features, binary): logistic MLP 30 -> 64 -> 1 (1-D
  logits: the losses' binary form), features standardised on the training split.

A seed draws its own stratified split 20 / 20 / 60 into train / validation / test
(``random_state=seed``), its own initialisation and minibatch order. The training split
is small and the run long, so that the network fits it perfectly and is clearly
over-confident on held-out data (test confidence above accuracy by 2-3 points, where the
error rate leaves room for it); the test split is large, so that the test ECE is measured
with less noise. Training: Adam (learning rate 2e-3), minibatches of 64, 3200 steps, no
weight decay, no early stopping. The initial parameters and the minibatch order of a
seed are drawn on the host (``np.random.default_rng(seed)``); all seeds and grid points of
one objective train in one ``jax.jit`` of a ``jax.vmap`` (grid) of a ``jax.vmap`` (seeds)
of a ``lax.scan`` over the steps.

Objectives (each regulariser is computed on the training minibatch, times lambda):

* ``CE``: cross-entropy (``optax.softmax_cross_entropy_with_integer_labels``; binary
  ``optax.sigmoid_binary_cross_entropy``);
* ``CE + lambda soft_ece_loss``, grid lambda x training temperature T;
* ``CE + lambda mmce_loss``, grid lambda x kernel bandwidth;
* ``CE + lambda dca_loss``, grid lambda;
* ``focal_loss`` with gamma = 3, and with FLSD-53;
* label smoothing 0.1 (``optax.smooth_labels``, then the cross-entropy);
* ``CE + temperature scaling``: the CE networks, then
  ``jaxcal.calibrators.temperature_scaling()`` fitted on the validation split.

Selection, on the validation split only: for each objective with a grid, the grid point
of lowest validation ECE (mean over seeds) relative to CE's, averaged over the two data
sets, among the points whose mean validation accuracy is within one point of CE's on both
(the same rule picks the focal loss's default between gamma = 3 and FLSD-53). One choice
for both data sets: it is the loss's documented default. The test split serves only the
tables: accuracy, mean confidence, NLL (``jaxcal.log_loss``), Brier (``jaxcal.brier_score``,
summed over classes), ECE (15 equal-width bins; top-label confidence, binary: positive
class), debiased l2 ECE (Kumar et al. 2019), smooth ECE (Błasiok & Nakkiran 2023), as
mean ± standard deviation over seeds, and the paired difference of the test ECE to CE's
(same seed: same split, initialisation and minibatch order). An objective "beats CE"
when its mean test ECE is lower by more than the seed spread (the larger of the two
standard deviations) at a cost of at most one point of mean test accuracy.

Run (13 minutes on 2 shared CPU cores at load average 14-25, 2.3 minutes of CPU time):
  nice python benchmarks/train_calibration.py
  nice python benchmarks/train_calibration.py --grid   # also every grid point
  nice python benchmarks/train_calibration.py --steps 300 --seeds 3   # a smoke run
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _timing import environment
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

import jaxcal
from jaxcal import losses

LAMBDAS = (0.25, 1.0, 4.0)
SOFT_ECE_TEMPERATURES = (0.002, 0.01, 0.05)
MMCE_BANDWIDTHS = (0.1, 0.4)
LABEL_SMOOTHING = 0.1
LEARNING_RATE = 2e-3
BATCH = 64
SPLIT = (0.2, 0.2, 0.6)  # train, validation, test (module docstring)
FOCAL = ("focal γ=3", "focal FLSD-53")
METRICS = ("accuracy", "confidence", "NLL", "Brier", "ECE", "debiased l2 ECE", "smooth ECE")


class Split(NamedTuple):
    """Features ``(S, N, D)`` float32 and labels ``(S, N)`` int32 of one split, per seed."""

    x: jax.Array
    y: jax.Array


class Dataset(NamedTuple):
    """A data set split three ways, with its MLP's widths."""

    name: str
    train: Split
    val: Split
    test: Split
    hidden: int
    outputs: int  # 1: binary log-odds (1-D logits); K: softmax over K classes


def load(name: str, seeds: int) -> Dataset:
    """One stratified split 20 / 20 / 60 (train / validation / test) per seed
    (``random_state=seed``); every array has a leading seed axis. Digits' pixels (0..16) are divided by 16; breast cancer's
    features are standardised with the training split's statistics (standardising pixels
    would divide by a zero training variance where a corner pixel is blank in every
    training image but not in a test image)."""
    loader, hidden = {"digits": (load_digits, 128), "breast cancer": (load_breast_cancer, 64)}[name]
    x, y = loader(return_X_y=True)
    parts: list[list[Split]] = []
    for seed in range(seeds):
        x_tr, x_rest, y_tr, y_rest = train_test_split(
            x, y, train_size=SPLIT[0], random_state=seed, stratify=y
        )
        x_va, x_te, y_va, y_te = train_test_split(
            x_rest, y_rest, test_size=SPLIT[2] / (1 - SPLIT[0]), random_state=seed, stratify=y_rest
        )
        if name == "digits":
            mean, scale = 0.0, 16.0
        else:
            mean, scale = x_tr.mean(axis=0), x_tr.std(axis=0)
        parts.append(
            [Split((a - mean) / scale, b) for a, b in [(x_tr, y_tr), (x_va, y_va), (x_te, y_te)]]
        )

    def stacked(i):
        return Split(
            jnp.asarray(np.stack([p[i].x for p in parts]), jnp.float32),
            jnp.asarray(np.stack([p[i].y for p in parts]), jnp.int32),
        )

    classes = int(y.max()) + 1
    outputs = 1 if classes == 2 else classes
    return Dataset(name, stacked(0), stacked(1), stacked(2), hidden, outputs)


def init_mlp(rng: np.random.Generator, d_in: int, hidden: int, d_out: int) -> dict[str, Any]:
    """He-initialised first layer, LeCun-initialised output layer, zero biases (float32)."""
    return {
        "w1": (rng.standard_normal((d_in, hidden)) * (2.0 / d_in) ** 0.5).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, d_out)) * (1.0 / hidden) ** 0.5).astype(np.float32),
        "b2": np.zeros(d_out, np.float32),
    }


def seed_draws(
    data: Dataset, seeds: int, total_steps: int
) -> tuple[dict[str, jax.Array], jax.Array]:
    """Per seed: the initial parameters and the minibatch indices of every step, drawn on
    the host (``np.random.default_rng(seed)``), leading axis S. Drawing them inside the
    jitted, vmapped training made XLA compile the random-bit generator for every objective
    (5-7x the compile time of the training itself)."""
    n, d_in = data.train.x.shape[1:]
    steps = n // BATCH  # per epoch: the remainder of each shuffled epoch is left out
    epochs = -(-total_steps // steps)
    params, batches = [], []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        params.append(init_mlp(rng, d_in, data.hidden, data.outputs))
        orders = [rng.permutation(n)[: steps * BATCH] for _ in range(epochs)]
        batches.append(np.concatenate(orders).reshape(epochs * steps, BATCH))
    stacked = {k: jnp.asarray(np.stack([p[k] for p in params])) for k in params[0]}
    return stacked, jnp.asarray(np.stack(batches), jnp.int32)


def mlp(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """Logits ``(N, K)``, or ``(N,)`` binary log-odds for a one-output network."""
    out = jax.nn.relu(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]
    return out[:, 0] if out.shape[1] == 1 else out


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    if logits.ndim == 1:
        return optax.sigmoid_binary_cross_entropy(logits, labels.astype(logits.dtype)).mean()
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def smoothed_cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Cross-entropy against ``optax.smooth_labels`` targets (binary: the positive column)."""
    num_classes = 2 if logits.ndim == 1 else logits.shape[1]
    targets = optax.smooth_labels(jax.nn.one_hot(labels, num_classes), LABEL_SMOOTHING)
    if logits.ndim == 1:
        return optax.sigmoid_binary_cross_entropy(logits, targets[:, 1]).mean()
    return optax.softmax_cross_entropy(logits, targets).mean()


class Objective(NamedTuple):
    """A training loss ``loss(logits, labels, hp)`` and its grid of hyperparameters."""

    loss: Callable[[jax.Array, jax.Array, dict[str, jax.Array]], jax.Array]
    grid: list[dict[str, float]]


def _grid(**axes: tuple[float, ...]) -> list[dict[str, float]]:
    names = list(axes)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*axes.values())]


OBJECTIVES: dict[str, Objective] = {
    "CE": Objective(lambda z, y, hp: cross_entropy(z, y), [{}]),
    "CE + λ·soft_ece_loss": Objective(
        lambda z, y, hp: (
            cross_entropy(z, y) + hp["lam"] * losses.soft_ece_loss(z, y, temperature=hp["T"])
        ),
        _grid(lam=LAMBDAS, T=SOFT_ECE_TEMPERATURES),
    ),
    "CE + λ·mmce_loss": Objective(
        lambda z, y, hp: (
            cross_entropy(z, y) + hp["lam"] * losses.mmce_loss(z, y, bandwidth=hp["h"])
        ),
        _grid(lam=LAMBDAS, h=MMCE_BANDWIDTHS),
    ),
    "CE + λ·dca_loss": Objective(
        lambda z, y, hp: cross_entropy(z, y) + hp["lam"] * losses.dca_loss(z, y),
        _grid(lam=LAMBDAS),
    ),
    FOCAL[0]: Objective(lambda z, y, hp: losses.focal_loss(z, y, gamma=3.0), [{}]),
    FOCAL[1]: Objective(lambda z, y, hp: losses.focal_loss(z, y, gamma="flsd53"), [{}]),
    f"label smoothing {LABEL_SMOOTHING}": Objective(
        lambda z, y, hp: smoothed_cross_entropy(z, y), [{}]
    ),
}


def make_train(data: Dataset, objective: Objective) -> Callable:
    """``train(params (S, ...), batches (S, steps, B), hp {name: (G,)}) -> params`` with
    leading axes (G, S)."""
    optimizer = optax.adam(LEARNING_RATE)

    def train_one(params, batches, x, y, hp):
        def step(carry, idx):
            params, state = carry
            grads = jax.grad(lambda p: objective.loss(mlp(p, x[idx]), y[idx], hp))(params)
            updates, state = optimizer.update(grads, state, params)
            return (optax.apply_updates(params, updates), state), None

        carry = (params, optimizer.init(params))
        return jax.lax.scan(step, carry, batches)[0][0]

    seeds = jax.vmap(train_one, (0, 0, 0, 0, None))
    grid = jax.vmap(seeds, (None, None, None, None, 0))
    return jax.jit(
        lambda params, batches, hp: grid(params, batches, data.train.x, data.train.y, hp)
    )


def probabilities(logits: jax.Array) -> jax.Array:
    return jax.nn.sigmoid(logits) if logits.ndim == 1 else jax.nn.softmax(logits, axis=-1)


def metrics(probs: jax.Array, labels: jax.Array) -> dict[str, jax.Array]:
    """The reported metrics of one model on one split (probs ``(N,)`` or ``(N, K)``)."""
    confidence, correct = jaxcal.confidence_and_correctness(probs, labels)
    return {
        "accuracy": jnp.mean(correct),
        "confidence": jnp.mean(confidence),
        "NLL": jaxcal.log_loss(probs, labels),
        "Brier": jaxcal.brier_score(probs, labels),
        "ECE": jaxcal.ece(probs, labels),
        "debiased l2 ECE": jaxcal.ece(probs, labels, norm="l2", debias=True),
        "smooth ECE": jaxcal.smooth_ece(probs, labels),
    }


@jax.jit
@jax.vmap
def _metrics_per_seed(params, x, y):
    return metrics(probabilities(mlp(params, x)), y)


def _evaluate(params, split: Split) -> dict[str, np.ndarray]:
    """Metrics of every model, arrays of shape (G, S): one grid point at a time, so that
    the metrics compile once per split shape, not once per objective."""
    grid = jax.tree.leaves(params)[0].shape[0]
    rows = [
        _metrics_per_seed(jax.tree.map(lambda a, g=g: a[g], params), split.x, split.y)
        for g in range(grid)
    ]
    return {k: np.asarray([r[k] for r in rows], np.float64) for k in rows[0]}


def temperature_scaled(ce_params, data: Dataset) -> dict[str, np.ndarray]:
    """Test metrics (1, S) of the CE networks after temperature scaling fitted on validation."""
    cal = jaxcal.calibrators.temperature_scaling()

    def as_two_columns(z):  # binary log-odds z are the logits (0, z) of softmax
        return jnp.stack([jnp.zeros_like(z), z], axis=-1) if z.ndim == 1 else z

    def one(p, val, test):
        fitted = cal.fit(as_two_columns(mlp(p, val.x)), val.y)
        probs = cal.apply(fitted, as_two_columns(mlp(p, test.x)))
        return metrics(probs[:, 1] if data.outputs == 1 else probs, test.y)

    out = jax.jit(jax.vmap(jax.vmap(one), (0, None, None)))(ce_params, data.val, data.test)
    return {k: np.asarray(v, np.float64) for k, v in out.items()}


class Result(NamedTuple):
    """Metrics of every (grid point, seed) of one objective, on each split."""

    grid: list[dict[str, float]]
    train: dict[str, np.ndarray] | None
    val: dict[str, np.ndarray]
    test: dict[str, np.ndarray]
    seconds: float


def run(data: Dataset, seeds: int, steps: int) -> dict[str, Result]:
    params0, batches = seed_draws(data, seeds, steps)
    results = {}
    for name, objective in OBJECTIVES.items():
        start = time.perf_counter()
        hp = {k: jnp.asarray([g[k] for g in objective.grid]) for k in objective.grid[0]}
        if not hp:  # no hyperparameter: a grid of one point
            hp = {"_": jnp.zeros(1)}
        params = jax.block_until_ready(make_train(data, objective)(params0, batches, hp))
        train, val, test = (_evaluate(params, split) for split in (data.train, data.val, data.test))
        results[name] = Result(objective.grid, train, val, test, time.perf_counter() - start)
        print(f"  {data.name}, {name}: {results[name].seconds:.0f} s", flush=True)
        if name == "CE":
            ts = temperature_scaled(params, data)
            results["CE + temperature scaling"] = Result([{}], None, val, ts, 0.0)
    return results


def _validation_scores(all_results: dict[str, dict[str, Result]], name: str) -> np.ndarray:
    """Per grid point: validation ECE relative to CE's, averaged over the data sets; inf
    where the validation accuracy falls more than one point below CE's on any of them."""
    scores, feasible = 0.0, True
    for results in all_results.values():
        ce, res = results["CE"].val, results[name].val
        scores = scores + res["ECE"].mean(axis=1) / ce["ECE"].mean() / len(all_results)
        feasible = feasible & (res["accuracy"].mean(axis=1) >= ce["accuracy"].mean() - 0.01)
    return np.where(feasible, scores, np.inf)


def select(all_results: dict[str, dict[str, Result]], name: str) -> int:
    """Index of the grid point chosen on validation (module docstring); -1 if none fits."""
    scores = _validation_scores(all_results, name)
    return int(np.argmin(scores)) if np.isfinite(scores).any() else -1


def beats_ce(results: dict[str, Result], name: str, i: int) -> bool:
    """Mean test ECE below CE's by more than the seed spread, accuracy within one point."""
    ce, res = results["CE"].test, results[name].test
    gain = ce["ECE"][0].mean() - res["ECE"][i].mean()
    spread = max(ce["ECE"][0].std(), res["ECE"][i].std())
    return bool(gain > spread and res["accuracy"][i].mean() >= ce["accuracy"][0].mean() - 0.01)


def _hp_text(hp: dict[str, float]) -> str:
    names = {"lam": "λ", "T": "T", "h": "bandwidth"}
    return ", ".join(f"{names[k]} = {v:g}" for k, v in hp.items())


def _cell(values: np.ndarray, digits: int = 4) -> str:
    return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def _paired(diff: np.ndarray) -> str:
    """Paired difference to CE: mean ± std, and on how many seeds it is negative."""
    return f"{_cell(diff)} ({int(np.sum(diff < 0))}/{diff.size})"


def print_table(data_name: str, results: dict[str, Result], chosen: dict[str, int]) -> None:
    print(f"\n### {data_name}: test split, mean ± std over seeds\n")
    print(
        "| objective | chosen on validation | "
        + " | ".join(METRICS)
        + " | ΔECE vs CE (seeds lower) |"
    )
    print("|---|---|" + "---:|" * (len(METRICS) + 1))
    base = results["CE"].test["ECE"][0]
    for name, res in results.items():
        i = chosen.get(name, 0)
        if i < 0:
            print(f"| {name} | none within 1 point of CE's accuracy |" + " |" * (len(METRICS) + 1))
            continue
        cells = " | ".join(_cell(res.test[m][i]) for m in METRICS)
        diff = res.test["ECE"][i] - base
        print(f"| {name} | {_hp_text(res.grid[i])} | {cells} | {_paired(diff)} |")


def print_grid(data_name: str, results: dict[str, Result]) -> None:
    print(f"\n### {data_name}: every grid point, mean over seeds (ΔECE: paired, ± std)\n")
    print(
        "| objective | hyperparameters | train accuracy | train ECE | val accuracy | val ECE "
        "| test accuracy | test ECE | test ΔECE vs CE (seeds lower) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    base = results["CE"].test["ECE"][0]
    for name, res in results.items():
        for i, hp in enumerate(res.grid):
            train = (
                f"{res.train['accuracy'][i].mean():.4f} | {res.train['ECE'][i].mean():.4f}"
                if res.train is not None
                else "- | -"
            )
            print(
                f"| {name} | {_hp_text(hp) or '-'} | {train} | "
                f"{res.val['accuracy'][i].mean():.4f} | {res.val['ECE'][i].mean():.4f} | "
                f"{res.test['accuracy'][i].mean():.4f} | {res.test['ECE'][i].mean():.4f} | "
                f"{_paired(res.test['ECE'][i] - base)} |"
            )


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=3200, help="Adam steps per network")
    parser.add_argument("--grid", action="store_true", help="also print every grid point")
    args = parser.parse_args(argv)
    print(environment())
    print(
        f"seeds {args.seeds}, {args.steps} steps, batch {BATCH}, Adam {LEARNING_RATE}, "
        f"split {SPLIT}, "
        f"λ grid {LAMBDAS}, soft-ECE T grid {SOFT_ECE_TEMPERATURES}, "
        f"MMCE bandwidths {MMCE_BANDWIDTHS}"
    )
    start = time.perf_counter()
    all_results = {}
    for name in ("digits", "breast cancer"):
        data = load(name, args.seeds)
        all_results[name] = run(data, args.seeds, args.steps)
        times = ", ".join(
            f"{k}: {r.seconds:.0f} s" for k, r in all_results[name].items() if r.seconds
        )
        print(
            f"{name}: train, val, test {data.train.y.shape[1]}, {data.val.y.shape[1]}, {data.test.y.shape[1]}; {times}"
        )
    chosen = {
        name: select(all_results, name) for name, obj in OBJECTIVES.items() if len(obj.grid) > 1
    }
    focal = {name: _validation_scores(all_results, name)[0] for name in FOCAL}
    print(f"focal_loss default (validation): {min(focal, key=focal.get)}")
    for name, results in all_results.items():
        print_table(name, results, chosen)
        better = [
            k
            for k in results
            if k != "CE" and chosen.get(k, 0) >= 0 and beats_ce(results, k, chosen.get(k, 0))
        ]
        print(f"\nBeats CE on {name} (module docstring): {', '.join(better) or 'none'}")
    if args.grid:
        for name, results in all_results.items():
            print_grid(name, results)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
