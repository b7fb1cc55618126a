"""Write ``docs/api/NAMESPACE.rst``: one page per public namespace, every name of its
``__all__`` documented from its docstring (autodoc), once.

Run from the repository root after adding a public name (``tests/test_docs.py`` fails until
the name is on its page)::

    python docs/_ext/make_api_pages.py

An object exported by several namespaces is documented where ``jaxcal_refs`` says (the
first namespace that exports it) and linked from the others.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from jaxcal_refs import NAMESPACES, canonical_paths  # noqa: E402

API = HERE.parent / "api"

#: namespace -> (title, introduction)
PAGES = {
    "metrics": (
        "metrics",
        "Binned calibration errors (ECE family), reliability curves, proper scoring rules and "
        "their decompositions, CORP, Murphy diagrams, and the differentiable soft / smooth ECE "
        "and MMCE. Every name is also importable from the top level (``jaxcal.ece``).",
    ),
    "stats": (
        "statistics",
        "Tests of calibration with p-values (KS, Kuiper, Spiegelhalter, per segment and per "
        "subpopulation), the Brownian laws behind them, resampling (consistency tests, "
        "bootstrap intervals, per-bin intervals and bands) and the clinical measures (slope and "
        "intercept, O:E, Hosmer-Lemeshow, ICI).",
    ),
    "calibrators": (
        "calibrators",
        "``Calibrator(fit, apply)`` pairs of pure functions, optax style: ``params = "
        "cal.fit(logits, labels)``, ``probs = cal.apply(params, logits)``; ``fit`` runs under "
        "``jit`` and ``vmap``.",
    ),
    "losses": (
        "losses",
        "Training objectives on logits: calibration regularisers (soft-binned ECE, MMCE, DCA, "
        "DECE) and focal loss, for ``jit``, ``vmap`` and ``grad``; their held-out form and "
        "meta-calibration as pure training-step helpers; a saturation diagnostic to log.",
    ),
    "streaming": (
        "streaming",
        "``CalibrationState``: per-bin and per-class sums, O(bins x K) memory whatever N, merged "
        "by a sum (so ``jax.lax.psum`` is the multi-device merge); Arrow, Parquet, Dask and "
        "multi-host readers; the clu and Flax NNX adapters. ``RegressionState``: the PIT "
        "counts, std-binned variance sums and scores of regression predictions, merged the "
        "same way.",
    ),
    "coverage": (
        "coverage",
        "MAPIE's conformal coverage metrics with JAX-style arguments: interval bounds as two "
        "arrays, prediction sets as a boolean ``(N, K)`` mask.",
    ),
    "selective": (
        "selective prediction",
        "Risk-coverage curves and their areas (AURC in both conventions in use, E-AURC, AUGRC), "
        "operating points (risk at a coverage, coverage at a risk), the AUROC of correctness and "
        "the prediction-rejection ratio: how well a confidence ranks a model's errors. One sort; "
        "``weights=`` and ``groups=`` as everywhere.",
    ),
    "regression": (
        "regression",
        "Calibration of regression and quantile models: predictions as a Gaussian (mean, std), "
        "quantiles at levels or samples; the PIT, calibration curves and their areas "
        "(uncertainty-toolbox's), netcal's QCE, and the proper scores (CRPS, pinball, interval, "
        "log score); see :doc:`../guides/regression`.",
    ),
    "presets": (
        "harness presets",
        "The calibration numbers of evaluation harnesses reproduced exactly, quirks included: "
        "Humanity's Last Exam, HELM, and the temperature-tuned metrics requested of lm-eval; see "
        ":doc:`../guides/llm_evaluation`.",
    ),
    "plot": (
        "plots",
        "Reliability diagrams, CORP and Murphy diagrams, cumulative-difference plots "
        "(matplotlib, the ``plot`` extra; imported lazily).",
    ),
    "sklearn": (
        "scikit-learn",
        "Drop-ins for scikit-learn's calibration tools backed by jaxcal (the ``sklearn`` extra; "
        "``import jaxcal`` does not import it): ``CalibratedClassifierCV``, ``calibration_curve`` "
        "and ``CalibrationDisplay``; see :doc:`../guides/sklearn`.",
    ),
    "sql": (
        "SQL engines",
        "The calibration state computed where the rows live: the SQL of the state table "
        "(``jaxcal.streaming.to_table``'s schema) for DuckDB, Spark SQL, BigQuery, Snowflake "
        "and PostgreSQL, the input checks as counts, and DuckDB run in process (the ``sql`` "
        "extra); see :doc:`../guides/warehouse`.",
    ),
    "spark": (
        "Spark",
        "The calibration state of a Spark DataFrame: partial states per partition "
        "(``mapInArrow``) merged by Spark's ``groupBy().sum()``, never a shuffle of the rows "
        "(the ``spark`` extra and a Java runtime); see :doc:`../guides/warehouse`.",
    ),
    "cli": (
        "the report",
        "What ``jaxcal report`` is made of, for programs that build their own report: reading "
        "files, computing a model's numbers, printing and writing them. The command itself is "
        "described in :doc:`../guides/report`.",
    ),
}

#: Constants have no docstring of their own (autodoc would show their type's): one line each.
CONSTANTS = {
    "CONFIDENCE": "Level of the report's bootstrap intervals (0.95).",
    "DECOMPOSITION": "Keys of the Brier decomposition rows, in the order the report prints them.",
    "DEMO_DESCRIPTION": "One line describing the demo data (``jaxcal report --demo``).",
    "DEMO_FILES": "``(model name, file)`` pairs of the demo's held-out predictions in "
    "``jaxcal/data``.",
    "FIT_LABELS": "Calibrator key -> the label the ``--fit`` table prints.",
    "LABEL_COLUMNS": "Column names taken as the labels of a CSV file when ``--labels`` is not "
    "given.",
    "ROW_ORDER": "Rows of the metrics table, top to bottom (those a model lacks are left out).",
}


def page(ns: str, canonical: dict[int, str]) -> str:
    module = importlib.import_module(f"jaxcal.{ns}")
    title, intro = PAGES[ns]

    def documented_here(name):
        path = f"jaxcal.{ns}.{name}"
        return canonical.get(id(getattr(module, name)), path) == path

    names = [n for n in module.__all__ if documented_here(n)]
    elsewhere = [n for n in module.__all__ if not documented_here(n)]
    classes = [n for n in names if inspect.isclass(getattr(module, n))]
    functions = [n for n in names if n not in classes and callable(getattr(module, n))]
    constants = [n for n in names if n not in classes and n not in functions]
    out = [f"``jaxcal.{ns}``: {title}", "=" * 80, "", f".. py:module:: jaxcal.{ns}", "", intro, ""]
    for heading, items in (("Functions", functions), ("Types", classes)):
        if items:
            out += [heading, "-" * len(heading), "", ".. autosummary::", "   :nosignatures:", ""]
            out += [f"   {n}" for n in items] + [""]
    if constants:
        out += ["Constants", "---------", "", *(f"- :py:data:`{n}`" for n in constants), ""]
    if elsewhere:
        links = ", ".join(f":obj:`{canonical[id(getattr(module, n))]}`" for n in elsewhere)
        out += [f"Also exported here (documented where they are defined): {links}.", ""]
    out += ["Reference", "---------", ""]
    out += [line for n in functions for line in (f".. autofunction:: {n}", "")]
    out += [line for n in classes for line in (f".. autoclass:: {n}", "")]
    out += [line for n in constants for line in (f".. py:data:: {n}", "", f"   {CONSTANTS[n]}", "")]
    return "\n".join(out).rstrip() + "\n"


def main() -> None:
    canonical = canonical_paths()
    for ns in NAMESPACES:
        (API / f"{ns}.rst").write_text(page(ns, canonical))


if __name__ == "__main__":
    main()
