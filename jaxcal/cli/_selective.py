"""The selective-prediction block of ``jaxcal report``: AURC, E-AURC, AUGRC, risk at coverage.

Accept the most confident predictions, abstain on the rest: how fast does the error rate
fall as fewer are accepted? The confidence is the top-label probability (binary ``(N,)``
probabilities, as :mod:`jaxcal.selective` reads them, as the rows ``(1 - p, p)``, so
max(p, 1 - p), wrong when the argmax, class 0 at p = 1/2, is not the label). Every number is a function of :mod:`jaxcal.selective`
with its default convention, with a percentile bootstrap interval from
:func:`jaxcal.stats.bootstrap_ci` over the report's own resamples (the same key, so the
same resamples as every row of the metrics table). Self-contained like
``jaxcal/cli/_clinical.py``: ``selective_numbers()`` runs inside the report's second
jitted kernel (``_extras_kernel`` in ``jaxcal/cli/_report.py``, with the SKCE test),
``print_selective()`` after the tests, ``risk_coverage_panel()`` draws the ``--plot``
panel.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal import selective
from jaxcal.stats._resampling.bootstrap import bootstrap_padded

#: Coverage levels of the "risk at c coverage" rows.
COVERAGES = (0.8, 0.9, 0.95)


def as_rows(probs):
    """``(N, K)`` probabilities as they are; binary ``(N,)`` as the rows ``(1 - p, p)``
    (the harness block's top-label view; :mod:`jaxcal.selective` reads ``(N,)`` so)."""
    return probs if probs.ndim == 2 else jnp.stack([1 - probs, probs], axis=1)


def aurc(probs, labels, *, weights=None):
    """:func:`jaxcal.selective.aurc` (``convention="mean"``) of the top-label confidence."""
    return selective.aurc(probs, labels, weights=weights)


def e_aurc(probs, labels, *, weights=None):
    """:func:`jaxcal.selective.e_aurc` (mean convention, exact optimum)."""
    return selective.e_aurc(probs, labels, weights=weights)


def augrc(probs, labels, *, weights=None):
    """:func:`jaxcal.selective.augrc` (``convention="traub"``)."""
    return selective.augrc(probs, labels, weights=weights)


def risk_at(probs, labels, *, coverage: float, weights=None):
    """:func:`jaxcal.selective.risk_at_coverage` at one level."""
    return selective.risk_at_coverage(probs, labels, coverage=coverage, weights=weights)


#: (key, display name, metric) of the rows, top to bottom; the keys are metric NAMEs of
#: the ``--json`` document.
ROWS = (
    ("aurc", "AURC (mean of running error rates)", aurc),
    ("e_aurc", "E-AURC (AURC - best ranking's)", e_aurc),
    ("augrc", "AUGRC (Traub et al. 2024)", augrc),
    *(
        (
            f"risk_at_coverage_{round(100 * c)}",
            f"risk at {round(100 * c)}% coverage",
            partial(risk_at, coverage=c),
        )
        for c in COVERAGES
    ),
)
KEYS = tuple(key for key, _, _ in ROWS)


def selective_numbers(
    probs, labels, weights, rows, key, n_resamples: int, confidence: float
) -> dict:
    """``{key: (estimate, low, high)}`` 0-d arrays (called inside the report's kernel, on
    rows padded past ``rows`` with weight 0: ``bootstrap_padded``)."""
    metrics = [metric for _, _, metric in ROWS]
    boots = bootstrap_padded(
        metrics,
        probs,
        labels,
        weights,
        rows,
        key=key,
        n_resamples=n_resamples,
        confidence=confidence,
    )
    return {name: (r.estimate, r.low, r.high) for (name, _, _), r in zip(ROWS, boots, strict=True)}


def print_selective(models, results, pct: int, cells, table, out) -> None:
    """The block: one interval/value column pair per model, then the conventions."""
    if not all(all(k in r["metrics"] for k in KEYS) for r in results):
        return
    print(
        f"\nSelective prediction (accept the most confident, abstain on the rest; lower is "
        f"better; {pct}% intervals, the same resamples)",
        file=out,
    )
    rows = [["measure"] + [h for m in models for h in (f"{pct}% interval", m.name)]]
    rows += [[label, *cells(results, key)] for key, label, _ in ROWS]
    table(rows, out)
    print(
        "  Confidence: the top-label probability (binary: max(p, 1 - p)); wrong when the argmax\n"
        "  is not the label. AURC in Geifman & El-Yaniv's convention (the mean of the running\n"
        "  error rates; jaxcal.selective.aurc's default convention='mean'); E-AURC subtracts the\n"
        "  AURC of the best ranking of the same samples; AUGRC is Traub et al.'s trapezoid of\n"
        "  the generalized risk; risk at c coverage: the error rate of the ceil(c N) most\n"
        "  confident. Tied confidences are averaged over their orders.",
        file=out,
    )


#: Points of a drawn risk-coverage curve at most (evenly thinned; the last always kept).
MAX_POINTS = 2000


def risk_coverage_panel(ax, models, results) -> None:
    """Risk against coverage, one line per model (:func:`jaxcal.selective.risk_coverage_curve`)."""
    for i, model in enumerate(models):
        curve = selective.risk_coverage_curve(jax.device_put(model.probs), model.labels)
        coverage, risk = np.asarray(curve.coverage), np.asarray(curve.risk)
        if coverage.shape[0] > MAX_POINTS:
            keep = np.unique(np.linspace(0, coverage.shape[0] - 1, MAX_POINTS).astype(int))
            coverage, risk = coverage[keep], risk[keep]
        value = results[i]["metrics"].get("aurc", {}).get("value")
        label = model.name if value is None else f"{model.name} (AURC {value:.4f})"
        ax.plot(coverage, risk, color=f"C{i}", label=label)
    for c in COVERAGES:  # the rows "risk at 80/90/95% coverage" of the table (N13: labelled)
        ax.axvline(c, color="0.8", linewidth=0.8, zorder=0)
        ax.annotate(
            f"{round(100 * c)}%",
            (c, 1),
            xycoords=("data", "axes fraction"),
            xytext=(0, -10),
            textcoords="offset points",
            ha="center",
            fontsize="x-small",
            color="0.4",
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("coverage (share of predictions accepted, most confident first)")
    ax.set_ylabel("selective risk (error rate of the accepted)")
    ax.set_title("Risk-coverage curve")
    ax.legend(loc="upper left", fontsize="small")
