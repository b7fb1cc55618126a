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

import importlib

from jaxcal.cli._args import InputError
from jaxcal.cli._main import main

#: Public name -> its module, imported on first use (PEP 562): ``jaxcal report --help``
#: and a bad argument then answer before JAX and the kernels are imported.
_LAZY = {
    "compute_fit": "_fit",
    "FIT_LABELS": "_format",
    "format_p": "_format",
    "print_report": "_format",
    "report_json": "_format",
    "write_plot": "_format",
    "DEMO_DESCRIPTION": "_io",
    "DEMO_FILES": "_io",
    "LABEL_COLUMNS": "_io",
    "Model": "_io",
    "load": "_io",
    "load_csv": "_io",
    "load_demo": "_io",
    "load_npy": "_io",
    "load_npz": "_io",
    "CONFIDENCE": "_report",
    "DECOMPOSITION": "_report",
    "ROW_ORDER": "_report",
    "compute_report": "_report",
    "validate": "_validate",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"jaxcal.cli.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'jaxcal.cli' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


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
