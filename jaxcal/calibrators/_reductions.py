"""Multiclass-to-binary reductions (Gupta & Ramdas 2021): top-label and classwise."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.cache import cached_factory
from jaxcal._core.checks import check_option
from jaxcal._core.confidence import top_label as _top_label
from jaxcal._core.numerics import safe_divide
from jaxcal.calibrators._base import Calibrator, from_kernels
from jaxcal.calibrators._inputs import MULTICLASS_INPUTS, probs_of
from jaxcal.calibrators._params import stacked_spec


def _check_binary(binary: Any) -> None:
    if not isinstance(binary, Calibrator):
        raise ValueError(
            "`binary` must be a Calibrator (e.g. jaxcal.calibrators.platt_scaling()); "
            f"got {type(binary).__name__}."
        )
    # jaxcal's calibrators carry their space on ``fit`` (a ValidatedFit); one built by hand
    # from two functions has none and is trusted to take probabilities.
    space = getattr(binary.fit, "inputs", "probs")
    if space != "probs":
        raise ValueError(
            '`binary` must be built with inputs="probs": the reductions pass it '
            f"probabilities; got a calibrator built with inputs={space!r}."
        )


def _keep_top(out: jax.Array, is_top: jax.Array) -> jax.Array:
    """Make the top entry strictly the largest of its row (raise it by one ulp on a tie).

    Ties matter because argmax takes the first maximal index; the row sum then exceeds 1
    by at most one ulp.
    """
    top = jnp.max(jnp.where(is_top, out, -jnp.inf), axis=1)
    other = jnp.max(jnp.where(is_top, -jnp.inf, out), axis=1)
    # One ulp above ``other``, exactly, with the derivative of ``other`` (nextafter has
    # no derivative rule).
    ulp = jax.lax.stop_gradient(jnp.nextafter(other, jnp.ones_like(other) * 2) - other)
    top = jnp.where(top > other, top, other + ulp)
    return jnp.where(is_top, top[:, None], out)


@cached_factory
def top_label(binary: Calibrator, *, inputs: str = "probs") -> Calibrator:
    """Top-label calibration (Gupta & Ramdas 2021): one binary calibrator per predicted class.

    ``fit``: the predicted class of each row is ``argmax_k p_k`` (first index among ties)
    and its confidence ``c = max_k p_k``. For each class l, ``binary`` is fitted on
    ``(c, c's prediction is right)`` of the rows predicted l only: all K fits run in one
    ``vmap``, the other rows masked with zero weight. A class never predicted in the
    fitting data gets a zero-weight fit, which every jaxcal binary calibrator turns into
    the identity.

    ``apply``: the top entry becomes ``q = binary.apply(params_l, c)`` for the row's
    predicted class l, and the remaining mass ``1 - q`` is shared among the other classes
    in proportion to their input probabilities (uniformly if the input puts all its mass
    on the top class). The argmax is kept: q is raised, where needed, to the least value
    that keeps it the largest entry, ``s / (1 + s)`` with s the largest share of the
    others (and by one ulp on an exact tie). Rows are on the simplex.

    Args:
      binary: a binary :class:`~jaxcal.calibrators.Calibrator` built with ``inputs="probs"`` (it receives
        top-label confidences in [1/K, 1]), e.g. ``platt_scaling()``, ``isotonic()``.
      inputs: the space of the ``(N, K)`` inputs: ``"probs"``, ``"logits"``,
        ``"log_probs"`` (converted with a softmax).

    Returns:
      ``Calibrator``: ``fit(x (N, K), labels (N,), *, weights=None) -> params`` (the
      binary calibrator's params stacked over the K classes, leading axis K);
      ``apply(params, x (N, K)) -> probs (N, K)``. Memory O(K N) while fitting.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import histogram_binning, top_label
      >>> p = jnp.array([[0.9, 0.05, 0.05], [0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1]])
      >>> cal = top_label(histogram_binning(2))
      >>> q = cal.apply(cal.fit(p, jnp.array([0, 1, 1, 0])), p)
      >>> [round(float(v), 3) for v in q[1]], q.argmax(axis=1).tolist()
      ([0.667, 0.167, 0.167], [0, 0, 1, 0])

    References:
      Gupta & Ramdas (2021), "Top-label calibration and multiclass-to-binary reductions",
      ICLR 2022.
    """
    _check_binary(binary)
    check_option("inputs", inputs, MULTICLASS_INPUTS)

    @jax.jit
    def _fit(x, labels, weights):
        p = probs_of(x, inputs)
        k = p.shape[1]
        conf, pred = _top_label(p)
        correct = pred == labels
        w = jnp.ones_like(conf) if weights is None else weights.astype(conf.dtype)

        def one(c):
            return binary.fit(conf, correct, weights=jnp.where(pred == c, w, 0))

        return jax.vmap(one)(jnp.arange(k, dtype=jnp.int32))

    @jax.jit
    def _apply(params, x):
        p = probs_of(x, inputs)
        k = p.shape[1]
        conf, pred = _top_label(p)

        def step(q, class_params):
            c, pc = class_params
            return jnp.where(pred == c, binary.apply(pc, conf).astype(q.dtype), q), None

        q, _ = jax.lax.scan(step, conf, (jnp.arange(k, dtype=jnp.int32), params))
        is_top = pred[:, None] == jnp.arange(k, dtype=jnp.int32)[None, :]
        others = jnp.where(is_top, 0, p)
        rest = jnp.sum(others, axis=1, keepdims=True)
        uniform = jnp.where(is_top, 0, 1 / (k - 1))  # all the input's mass on the top class
        share = jnp.where(rest > 0, safe_divide(others, rest), uniform)
        s2 = jnp.max(share, axis=1)
        q = jnp.maximum(jnp.clip(q, 0, 1), s2 / (1 + s2))
        out = jnp.where(is_top, q[:, None], (1 - q)[:, None] * share)
        return _keep_top(out, is_top)

    spec = stacked_spec(getattr(binary.apply, "params", None), "top_label(binary)")
    return from_kernels(_fit, _apply, inputs, binary=False, params=spec)


@cached_factory
def classwise(binary: Calibrator, *, inputs: str = "probs") -> Calibrator:
    """Classwise calibration: one binary calibrator per class, one-vs-rest, renormalised.

    ``fit``: for each class k, ``binary`` is fitted on ``(p_k, labels == k)`` over all
    rows (K fits in one ``vmap``). A class absent from the labels (no positive weight)
    gets a zero-weight fit, i.e. the identity.

    ``apply``: ``q_k = binary.apply(params_k, p_k)``; the entry of the row's predicted
    class ``argmax_k p_k`` is raised to the largest ``q_k`` if another class overtook it
    (so the argmax is kept; one more ulp on an exact tie), and the row is divided by its
    sum. The non-top mass is thus the calibrated one-vs-rest scores of the other classes,
    renormalised. A row whose calibrated scores are all 0 keeps its input probabilities.

    Args:
      binary: a binary :class:`~jaxcal.calibrators.Calibrator` built with ``inputs="probs"``.
      inputs: the space of the ``(N, K)`` inputs: ``"probs"``, ``"logits"``,
        ``"log_probs"``.

    Returns:
      ``Calibrator``: ``fit(x (N, K), labels (N,), *, weights=None) -> params`` (stacked
      over the K classes); ``apply(params, x (N, K)) -> probs (N, K)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import classwise, histogram_binning
      >>> p = jnp.array([[0.9, 0.05, 0.05], [0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1]])
      >>> cal = classwise(histogram_binning(2))
      >>> q = cal.apply(cal.fit(p, jnp.array([0, 1, 1, 0])), p)
      >>> q.argmax(axis=1).tolist(), bool(jnp.allclose(q.sum(axis=1), 1))
      ([0, 0, 1, 0], True)

    References:
      Zadrozny & Elkan (2002), "Transforming classifier scores into accurate multiclass
      probability estimates", KDD; Gupta & Ramdas (2021), "Top-label calibration and
      multiclass-to-binary reductions", ICLR 2022.
    """
    _check_binary(binary)
    check_option("inputs", inputs, MULTICLASS_INPUTS)

    @jax.jit
    def _fit(x, labels, weights):
        p = probs_of(x, inputs)
        k = p.shape[1]
        w = jnp.ones(p.shape[:1], p.dtype) if weights is None else weights.astype(p.dtype)

        def one(column, c):
            target = labels == c
            present = jnp.sum(jnp.where(target, w, 0)) > 0
            return binary.fit(column, target, weights=jnp.where(present, w, 0))

        return jax.vmap(one)(p.T, jnp.arange(k, dtype=jnp.int32))

    @jax.jit
    def _apply(params, x):
        p = probs_of(x, inputs)
        k = p.shape[1]
        _, pred = _top_label(p)
        q = jax.vmap(binary.apply, in_axes=(0, 1), out_axes=1)(params, p).astype(p.dtype)
        q = jnp.clip(q, 0, 1)
        is_top = pred[:, None] == jnp.arange(k, dtype=jnp.int32)[None, :]
        biggest = jnp.max(q, axis=1, keepdims=True)
        q = jnp.where(is_top, biggest, q)
        total = jnp.sum(q, axis=1, keepdims=True)
        out = jnp.where(total > 0, safe_divide(q, total), p)  # all 0: keep the input
        return _keep_top(out, is_top)

    spec = stacked_spec(getattr(binary.apply, "params", None), "classwise(binary)")
    return from_kernels(_fit, _apply, inputs, binary=False, params=spec)
