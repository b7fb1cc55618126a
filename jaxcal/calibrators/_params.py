"""The parameters a calibrator's ``apply`` accepts, checked before its kernel runs.

``apply(params, x)`` is pure, so nothing stops a user from passing the parameters of
another calibrator, of another number of classes or bins, or a bare number; the kernel
would then fail deep inside JAX ("mul got incompatible shapes", "no attribute
temperature"). Each factory declares a ``ParamsSpec`` instead: the NamedTuple its
``fit`` returns and the shapes of the fields that depend on the input, checked at trace
time (shapes only, so it is free under ``jit`` and ``vmap``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np


class ParamsSpec(NamedTuple):
    """The parameters ``apply`` accepts.

    Attributes:
      type: the NamedTuple the calibrator's ``fit`` returns (None: any pytree, for a
        binary calibrator built by hand from two functions).
      shapes: ``shapes(x_shape) -> {field: shape}``, the fields whose shape follows from
        the input of ``apply`` or from the factory's options (number of bins).
      name: how the factory is called, for messages (``"temperature_scaling()"``).
      stacked: the reductions' parameters: the binary calibrator's, stacked over the K
        classes (every leaf has a leading axis K).
    """

    type: type | None
    shapes: Callable[[tuple[int, ...]], dict[str, tuple[int, ...]]]
    name: str
    stacked: bool = False


def _no_fields(x_shape: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    return {}


def stacked_spec(binary_spec: ParamsSpec | None, name: str) -> ParamsSpec:
    """The spec of a reduction's parameters: ``binary_spec``'s type, stacked over K."""
    kind = None if binary_spec is None else binary_spec.type
    return ParamsSpec(kind, _no_fields, name, stacked=True)


def check_params(params: Any, spec: ParamsSpec | None, x: Any, x_name: str) -> None:
    """Raise a ValueError naming ``params`` unless they are what ``spec`` says.

    Args:
      params: what the user passed to ``apply``.
      spec: the calibrator's ``ParamsSpec`` (None: nothing to check).
      x: the validated input of ``apply`` (its shape decides the expected shapes).
      x_name: the name of that argument in messages.
    """
    if spec is None:
        return
    source = f"{spec.name}.fit"
    if spec.type is not None and not isinstance(params, spec.type):
        what = "stacked over the classes, " if spec.stacked else ""
        raise ValueError(
            f"`params` must be the {spec.type.__name__} {what}that {source} returns; "
            f"got {type(params).__name__}. Fit this calibrator to get its parameters."
        )
    if spec.stacked:
        k = x.shape[1]
        for path, leaf in jax.tree_util.tree_leaves_with_path(params):
            shape = np.shape(leaf)
            if not shape or shape[0] != k:
                raise ValueError(
                    f"`params{jax.tree_util.keystr(path)}` must have a leading axis of {k} "
                    f"(one per class of `{x_name}` of shape {tuple(x.shape)}); got shape "
                    f"{shape}: parameters of {source} fitted with another number of classes?"
                )
        return
    for field, expected in spec.shapes(tuple(x.shape)).items():
        shape = np.shape(getattr(params, field))
        if shape != expected:
            raise ValueError(
                f"`params.{field}` must have shape {expected} for `{x_name}` of shape "
                f"{tuple(x.shape)}; got {shape}: parameters of {source} fitted with another "
                "number of classes (or bins)?"
            )
