"""The ``jaxcal`` command line: ``jaxcal report FILE`` and ``jaxcal report --demo``.

``main`` is the console script's entry point (``jaxcal = "jaxcal.cli:main"``); ``python
-m jaxcal.cli`` runs it too. Its documentation (input formats, options, the ``--json``
schema) is the reference on ``docs/guides/report.md``; ``jaxcal report --help`` lists the options.

Modules, from the bottom: ``_io`` reads the files, ``_report`` computes a model's
metrics, intervals and tests in one jit, ``_fit`` cross-fits the calibrators, ``_format``
writes the table, the JSON document and the figure, ``_main`` parses the arguments.
The streamed report (Parquet input, or ``--stream``) is ``_parquet``, its array inputs
``_stream``.
"""

from jaxcal.cli._fit import compute_fit
from jaxcal.cli._format import FIT_LABELS, format_p, print_report, report_json, write_plot
from jaxcal.cli._io import (
    DEMO_DESCRIPTION,
    DEMO_FILES,
    LABEL_COLUMNS,
    InputError,
    Model,
    load,
    load_csv,
    load_demo,
    load_npy,
    load_npz,
)
from jaxcal.cli._main import main
from jaxcal.cli._report import CONFIDENCE, DECOMPOSITION, ROW_ORDER, compute_report
from jaxcal.cli._validate import validate

__all__ = [
    "CONFIDENCE",
    "DECOMPOSITION",
    "DEMO_DESCRIPTION",
    "DEMO_FILES",
    "FIT_LABELS",
    "LABEL_COLUMNS",
    "ROW_ORDER",
    "InputError",
    "Model",
    "compute_fit",
    "compute_report",
    "format_p",
    "load",
    "load_csv",
    "load_demo",
    "load_npy",
    "load_npz",
    "main",
    "print_report",
    "report_json",
    "validate",
    "write_plot",
]
