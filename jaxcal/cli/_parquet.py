"""``jaxcal report`` on Parquet files and folders, and with ``--stream`` on ``.npz`` and
``.npy`` files: streamed, in bounded memory.

The rows are read as record batches (:func:`jaxcal.streaming.parquet_state`), or sliced
from memory-mapped arrays (:func:`jaxcal.streaming.array_state`, :mod:`._stream`), into a
fine-histogram state (``--bins`` times enough to reach 4096 buckets) and, with
``--resamples B`` (0 for none), B Poisson-bootstrap replicates keyed by the row number
(seed ``--seed``), so memory is a few batches plus the states whatever the file size,
and the intervals do not depend on the batching. The replicates are summaries
(``jaxcal/streaming/_summary.py``: each one's state at ``--bins`` and the buckets of the
ECE's view, what the intervals read), B x 127 KB at K = 10 where whole states were
B x 3.3 MB. The metrics are those of the in-memory
report that a stream can give: the binned ECEs, MCE, the Brier score, its decomposition
and the log loss exactly (as the in-memory report computes them); the equal-mass ECE from
the buckets (within the bound printed); the CORP decomposition over the buckets (binary).
The tests of calibration (KS, Kuiper, Spiegelhalter, consistency) need every score
sorted or resampled, and are left out.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxcal
from jaxcal import streaming
from jaxcal._core.binning import BinStats
from jaxcal.cli._args import InputError, is_parquet
from jaxcal.cli._format import _cells, _json_safe, _num, _table, write_json
from jaxcal.cli._io import _select, label_column
from jaxcal.cli._report import CONFIDENCE, CORP_ROWS, DECOMPOSITION, ROW_ORDER, metric_specs
from jaxcal.cli._stream import Stream, array_stream
from jaxcal.streaming._corp import decomposition_of_cells
from jaxcal.streaming._parquet import BATCH_ROWS, dataset
from jaxcal.streaming._summary import SummaryReplicates, summary_cells
from jaxcal.streaming._views import equal_mass_of_cells

#: Buckets of the streamed state: the smallest multiple of ``--bins`` at least this.
MIN_RESOLUTION = 4096

#: Metrics without an interval (as in the in-memory report).
POINT_ONLY = ("mce", *(key for key, _, _ in DECOMPOSITION))


def _columns(path: Path, names: list[str], args: argparse.Namespace) -> tuple[list[str], str]:
    """The probability columns and the label column, chosen as for ``.csv`` files."""
    if args.logits is not None:
        raise InputError(f"{path}: --logits is not available for Parquet; give probabilities.")
    labels = label_column(path, names, args.labels)
    if args.probs:
        probs = [names[i] for i in _select(path, names, args.probs, "--probs")]
    else:
        probs = [n for n in names if n != labels]
    if labels in probs or not probs:
        raise InputError(f"{path}: the probability columns must be other than the label column.")
    return probs, labels


class _Bar:
    """A progress bar on stderr: rows read, share, rate (redrawn at most 5 times a second)."""

    def __init__(self, name: str, quiet: bool):
        self.name, self.quiet = name, quiet
        self.start = self.last = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if self.quiet or (now - self.last < 0.2 and done < total):
            return
        self.last = now
        share = done / total if total else 1.0
        bar = "#" * round(24 * share)
        rate = done / max(now - self.start, 1e-9)
        print(
            f"\rjaxcal: {self.name} [{bar:<24}] {100 * share:5.1f}% {done:,}/{total:,} rows, "
            f"{rate / 1e6:.2f} M rows/s",
            end="",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if not self.quiet:
            print(f" ({time.perf_counter() - self.start:.1f} s)", file=sys.stderr, flush=True)


def state_metrics(
    state: streaming.CalibrationState, n_bins: int, cells: BinStats | None = None
) -> dict[str, jax.Array]:
    """Every streamed metric of one state (works under ``vmap`` over replicates).

    ``cells``: the buckets of the ECE's view when ``state`` is kept at ``n_bins`` only (a
    summary replicate, ``replicate_metrics()``); None reads them from ``state``.
    """
    out = streaming.compute(state, n_bins=n_bins)
    top_sums, class_sums, totals = (
        h + lo
        for h, lo in zip(
            (state.top_sums, state.class_sums, state.totals), state.compensation, strict=True
        )
    )
    total = jnp.maximum(totals[0], jnp.finfo(totals.dtype).tiny)
    values = {
        "accuracy": top_sums[2].sum() / total,
        "ece": out["ece"],
        "ece_quantile": (
            streaming.equal_mass_ece(state, n_bins)
            if cells is None
            else equal_mass_of_cells(cells, n_bins, state.closed)
        ).ece,
        "ece_l2_debiased": streaming.compute(state, n_bins=n_bins, norm="l2", debias=True)["ece"],
        "mce": out["mce"],
        "brier": out["brier"],
        "log_loss": out["log_loss"],
    }
    values.update({key: out[field] for key, _, field in DECOMPOSITION})
    if state.binary:
        values["positive_rate"] = class_sums[2][1].sum() / total
        for score in ("brier", "log"):
            if cells is None:
                dec = streaming.corp_decomposition(state, score=score)
            else:
                dec = decomposition_of_cells(cells, totals, score)
            for suffix, value in zip(
                ("", "_miscalibration", "_discrimination", "_uncertainty"), dec, strict=True
            ):
                values[f"corp_{score}{suffix}"] = value
    else:
        values["classwise_ece"] = out["classwise_ece"]
        values["top_label_ece"] = out["top_label_ece"]
    return values


def replicate_metrics(reps: SummaryReplicates, n_bins: int) -> dict[str, np.ndarray]:
    """Every streamed metric of each summary replicate: ``(B,)`` NumPy arrays."""
    return jax.device_get(_replicate_metrics_kernel(reps, n_bins))


@partial(jax.jit, static_argnums=1)
def _replicate_metrics_kernel(reps, n_bins):
    # One compiled program: vmap run eagerly compiled each batched operation on its own
    # (binary, B = 2: 10 s and +370 MB resident, against 3 s and +80 MB).
    return jax.vmap(lambda rep: state_metrics(rep.states, n_bins, summary_cells(rep)))(reps)


def parquet_stream(path: Path, args: argparse.Namespace) -> Stream:
    """The chosen columns of a Parquet file or folder, read as record batches."""
    try:
        data = dataset(path)
        names = data.schema.names
        rows = data.count_rows()
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: cannot read as Parquet ({err}).") from err
    if getattr(data, "files", None) == []:
        raise InputError(f"{path}: no Parquet file (.parquet) in this folder.")
    probs, labels = _columns(path, names, args)
    return Stream(
        rows,
        len(probs),
        lambda **options: streaming.parquet_state(data, probs=probs, labels=labels, **options),
    )


def _report_one(path: Path, source: Stream, args: argparse.Namespace) -> tuple[dict, dict]:
    resolution = args.bins * math.ceil(MIN_RESOLUTION / args.bins)
    bar = _Bar(path.stem, args.quiet)
    # Batches no larger than the data (a power of two, at least 1024): small files run
    # small kernels; large ones stream at BATCH_ROWS.
    batch_rows = min(BATCH_ROWS, 1 << max(10, (source.rows - 1).bit_length()))
    try:
        out = source.states(
            n_bins=args.bins,
            resolution=resolution,
            n_replicates=args.resamples,
            key=jax.random.key(args.seed),
            batch_rows=batch_rows,
            progress=bar,
            replicates="summary",
        )
    except ValueError as err:
        raise InputError(f"{path}: {err}") from err
    finally:
        bar.close()
    if out.rows == 0:
        raise InputError(f"{path}: no rows.")
    point = jax.device_get(state_metrics(out.state, args.bins))
    metrics = {}
    if out.replicates is not None:
        reps = replicate_metrics(out.replicates, args.bins)
    for key in ROW_ORDER:
        if key not in point:
            continue
        value, low, high = float(point[key]), None, None
        if out.replicates is not None and key not in POINT_ONLY:
            q = (1 - CONFIDENCE) / 2
            low, high = (float(v) for v in np.quantile(reps[key], [q, 1 - q]))
        metrics[key] = {"value": value, "low": low, "high": high}
    bound = float(streaming.equal_mass_ece(out.state, args.bins).bound)
    model = {
        "name": path.stem,
        "source": str(path),
        "n": int(out.rows),
        "num_classes": 2 if source.columns == 1 else source.columns,
        "binary": source.columns == 1,
        "inputs": "probs",
        "metrics": metrics,
        "tests": {},
        "fit": None,
        "ece_quantile_bound": bound,
    }
    return model, {"resolution": resolution}


def report_streamed(args: argparse.Namespace) -> int:
    """``jaxcal report`` on Parquet FILEs (files or folders), or on any FILEs with
    ``--stream``: the streamed report."""
    what = "--stream" if args.stream else "Parquet input"
    # N7: say how to get the in-memory report that has these options.
    how = (
        "drop --stream (the in-memory report)"
        if args.stream
        else "convert the file to .npz first, e.g. df = pandas.read_parquet(FILE); "
        "numpy.savez('preds.npz', probs=df[PROB_COLUMNS].to_numpy(), "
        "labels=df[LABEL_COLUMN].to_numpy()), then jaxcal report preds.npz"
    )
    if args.fit:
        raise InputError(
            f"--fit needs the predictions in memory; it is not available for {what}: {how}."
        )
    for option, given in (("--plot", args.plot), ("--by", args.by)):
        if given is not None:
            raise InputError(f"{option} is not available for {what} (streamed report): {how}.")
    if args.renormalize:
        raise InputError(f"--renormalize is not available for {what}.")
    sources = [
        (path, parquet_stream(path, args) if is_parquet(path) else array_stream(path, args))
        for path in args.files
    ]
    models, extra = [], {}
    for path, source in sources:
        model, extra = _report_one(path, source, args)
        models.append(model)
    settings = {
        "n_bins": args.bins,
        "resamples": args.resamples,
        "confidence": CONFIDENCE,
        "seed": args.seed,
        "interval": "Poisson bootstrap (keyed by row number)" if args.resamples else None,
        "folds": None,
        "streamed": True,
        **extra,
    }
    document = _json_safe(
        {
            "schema": "jaxcal.report/1",
            "jaxcal_version": jaxcal.__version__,
            "settings": settings,
            "models": models,
        }
    )
    if args.json == "-":
        json.dump(document, sys.stdout, indent=2)
        print()
    else:
        kinds = {"Parquet" if is_parquet(p) else p.suffix.lower() for p in args.files}
        _print(models, settings, sys.stdout, ", ".join(sorted(kinds)), args.harness)
    write_json(args.json, document)
    return 0


def _print(models: list[dict], settings: dict, out, kinds: str, harness: bool = False) -> None:
    print(f"jaxcal report (streamed from {kinds})", file=out)
    for m in models:
        shape = "binary (N,)" if m["binary"] else f"{m['num_classes']} classes"
        print(f"  {m['name']}: {m['source']}\n    N = {m['n']:,}, {shape}", file=out)
    pct, resamples = round(100 * settings["confidence"]), settings["resamples"]
    how = (
        f"{pct}% Poisson-bootstrap intervals ({resamples} replicates keyed by row number, "
        f"seed {settings['seed']})"
        if resamples
        else "no intervals (--resamples 0)"
    )
    print(f"\nMetrics, with {how}", file=out)
    labels = {key: label for key, label, _ in metric_specs(settings["n_bins"], False)}
    labels.update({"positive_rate": "positive rate", "mce": "MCE (max gap)", **dict(CORP_ROWS)})
    labels.update({key: label for key, label, _ in DECOMPOSITION})
    labels["ece_quantile"] += " *"
    present = {key for m in models for key in m["metrics"]}
    rows = [["metric"] + [h for m in models for h in (f"{pct}% interval", m["name"])]]
    for key in ROW_ORDER:
        if key in present:
            rows.append([labels[key], *_cells(models, key)])
    _table(rows, out)
    bounds = ", ".join(_num(m["ece_quantile_bound"]) for m in models)
    print(
        f"  * equal-mass bins from {settings['resolution']} buckets: within {bounds} of the "
        "exact equal-mass ECE.",
        file=out,
    )
    if any(m["binary"] for m in models):
        print("  CORP rows: isotonic recalibration over the buckets (binary models).", file=out)
    if not all(m["binary"] for m in models):
        print(
            "  Multiclass input has no CORP rows in a streamed report (the top-label "
            "confidence's CORP\n  needs every score: the in-memory report has them).",
            file=out,
        )
    print(
        "  The tests of calibration need every score in memory: report an in-memory sample "
        "of the\n  predictions (.npz or .csv, without --stream) for them.",
        file=out,
    )
    print(
        "  SKCE, the selective-prediction block (AURC, E-AURC, AUGRC, risk at coverage) and "
        f"{'--harness' if harness else 'the harness presets'} need the in-memory report too.",
        file=out,
    )
