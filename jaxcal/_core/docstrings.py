"""Docstring text shared by sibling public functions, written once.

Sibling functions (the metrics with a ``renormalize`` option, the training losses on
logits) document the same argument or the same rule in the same words. Those words live
here, in ``SHARED``, and a docstring names a block with a line that holds only
``{{name}}``, indented as the text around it; the decorator ``shared_doc`` replaces that
line by the block at that indentation (a block's own continuation lines keep their extra
indent), so ``help()``, the doctests and the API pages read the full text. An unknown
name is an error at import, never a docstring with a hole. The mechanism is SciPy's and
scikit-learn's docstring templates (``scipy._lib.doccer``), in its smallest form.

Example:
  >>> @shared_doc
  ... def f(probs, renormalize=False):
  ...     '''Args:
  ...       {{renormalize}}
  ...     '''
  >>> f.__doc__.splitlines()[1].split(":")[0].strip()
  'renormalize'
  >>> "{{" in f.__doc__
  False
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

#: The shared blocks, by name; first-line indentation is the placeholder's.
SHARED: dict[str, str] = {
    "renormalize": (
        "renormalize: divide each row of ``(N, K)`` probabilities by its sum first, for\n"
        "  probabilities rounded on export (keyword-only; default False: rows must sum to\n"
        "  1 within the simplex tolerance). No effect on ``(N,)`` probabilities."
    ),
    "traced_validation": (
        "Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value\n"
        "checks are skipped and the kernel trusts its input."
    ),
    "logits_labels": (
        "logits: ``(N, K)`` logits (K >= 2), or ``(N,)`` binary log-odds.\n"
        "labels: ``(N,)`` int labels in ``[0, K)`` (0/1 for 1-D logits)."
    ),
    "probs_labels": (
        "probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.\n"
        "labels: ``(N,)`` int (or bool) labels: 0/1 for 1-D probs, in ``[0, K)`` for 2-D."
    ),
}

_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)\{\{(?P<name>\w+)\}\}[ \t]*$", re.M)


def fill(doc: str) -> str:
    """``doc`` with every ``{{name}}`` line replaced by ``SHARED[name]``, re-indented.

    Raises:
      ValueError: a placeholder names no block of ``SHARED``.
    """

    def block(m: re.Match) -> str:
        name = m["name"]
        if name not in SHARED:
            raise ValueError(
                f"docstring placeholder {{{{{name}}}}} names no shared block; "
                f"known: {sorted(SHARED)} (jaxcal/_core/docstrings.py)."
            )
        return "\n".join(m["indent"] + line if line else "" for line in SHARED[name].split("\n"))

    return _PLACEHOLDER.sub(block, doc)


def shared_doc(fn: F) -> F:
    """Decorator: fill ``fn.__doc__``'s placeholders from ``SHARED`` (see ``fill``)."""
    if fn.__doc__:
        fn.__doc__ = fill(fn.__doc__)
    return fn
