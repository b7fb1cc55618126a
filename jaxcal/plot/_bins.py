"""The numbers a reliability diagram draws, all from jaxcal's kernels.

The predictions of one model are reduced to binary *panels* (scores against 0/1
targets: the top-label confidence against correctness, the positive class, or each
class one-vs-rest); each panel's per-bin means and binomial intervals come from
:func:`jaxcal.stats.reliability_intervals`, its consistency bands from
:func:`jaxcal.stats.consistency_bands` and its ECE from :func:`jaxcal.ece`, all with
the same bins.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_option, check_probs_labels
from jaxcal._core.confidence import confidence_and_correctness
from jaxcal.metrics._ece import ece
from jaxcal.stats._resampling.intervals import consistency_bands, reliability_intervals

KINDS = ("confidence", "binary", "classwise")


class Panel(NamedTuple):
    """One binary reliability problem: scores (N,) against 0/1 targets (N,)."""

    scores: jax.Array
    targets: jax.Array
    xlabel: str
    ylabel: str
    title: str


class BinSummary(NamedTuple):
    """Per-bin numbers of one model in one panel (host NumPy arrays).

    ``edges`` and ``counts`` cover all M bins (the histogram); the other arrays only the
    non-empty bins (the markers); ``ece`` is :func:`jaxcal.ece` of the panel, same bins.
    """

    edges: np.ndarray
    counts: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    interval_low: np.ndarray
    interval_high: np.ndarray
    band_low: np.ndarray
    band_high: np.ndarray
    ece: float


def binary_panels(probs: Any, labels: Any, kind: str | None) -> tuple[str, list[Panel]]:
    """Validate and reduce the predictions of one model to binary panels."""
    probs, labels, _ = check_probs_labels(probs, labels)
    if kind is None:
        kind = "binary" if probs.ndim == 1 else "confidence"
    check_option("kind", kind, KINDS)
    if kind == "confidence":
        conf, correct = confidence_and_correctness(probs, labels)
        panel = Panel(
            conf,
            correct.astype(jnp.int32),
            "confidence (top-label probability)",
            "accuracy",
            "confidence reliability diagram",
        )
        return kind, [panel]
    if kind == "binary":
        if probs.ndim == 2:
            if probs.shape[1] != 2:
                raise ValueError(
                    f'kind="binary" needs (N,) or (N, 2) `probs`; got shape {probs.shape}. '
                    'Use kind="confidence" or kind="classwise" for K > 2 classes.'
                )
            probs = probs[:, 1]
        panel = Panel(
            probs,
            labels,
            "predicted probability of the positive class",
            "observed frequency of the positive class",
            "reliability diagram",
        )
        return kind, [panel]
    if probs.ndim == 1:
        probs = jnp.stack([1 - probs, probs], axis=1)
    k = probs.shape[1]
    classes = jnp.arange(k, dtype=jnp.int32)
    targets = (labels[:, None] == classes[None, :]).astype(jnp.int32)
    return kind, [
        Panel(
            probs[:, c],
            targets[:, c],
            f"predicted probability of class {c}",
            f"frequency of class {c}",
            f"class {c}",
        )
        for c in range(k)
    ]


def bin_summary(
    panel: Panel,
    *,
    n_bins: int,
    binning: str,
    closed: str,
    bands: bool,
    interval_method: str,
    confidence: float,
    n_resamples: int,
    key: jax.Array,
) -> BinSummary:
    """The per-bin numbers drawn for one panel, and its ECE (legend)."""
    binned = dict(n_bins=n_bins, binning=binning, closed=closed, confidence=confidence)
    rel = reliability_intervals(panel.scores, panel.targets, method=interval_method, **binned)
    counts = np.asarray(rel.counts)
    conf = np.asarray(rel.mean_confidence, dtype=np.float64)
    acc = np.asarray(rel.mean_accuracy, dtype=np.float64)
    if bands:
        band = consistency_bands(panel.scores, key=key, n_resamples=n_resamples, **binned)
        band_low, band_high = np.asarray(band.low), np.asarray(band.high)
    else:
        band_low = band_high = np.full(counts.shape, np.nan)
    keep = counts > 0
    return BinSummary(
        edges=np.asarray(rel.edges, dtype=np.float64),
        counts=counts,
        confidence=conf[keep],
        accuracy=acc[keep],
        interval_low=np.asarray(rel.low, dtype=np.float64)[keep],
        interval_high=np.asarray(rel.high, dtype=np.float64)[keep],
        band_low=np.asarray(band_low, dtype=np.float64)[keep],
        band_high=np.asarray(band_high, dtype=np.float64)[keep],
        ece=float(ece(panel.scores, panel.targets, n_bins=n_bins, binning=binning, closed=closed)),
    )
