"""The calibration step of ``CalibratedClassifierCV``, run by jaxcal calibrators.

scikit-learn calibrates the classifier's response (``decision_function`` when it has
one, else ``predict_proba``), ``(N, C)`` with C = 1 (the positive class) for two
classes. Binary methods (sigmoid, isotonic, Venn-Abers, any binary ``Calibrator``) are
fitted one-vs-rest, one per column, all columns in one ``jax.vmap``; the rows are then
normalised (scikit-learn's rule: a row summing to 0 becomes uniform; two classes:
``p0 = 1 - p1``). Multiclass methods (temperature, any multiclass ``Calibrator``) read
the response as logits, converted as scikit-learn's ``_convert_to_logits`` does.

Everything runs in float64, as scikit-learn does, inside ``jax.enable_x64(True)`` (a
context local to the call and its thread; the process's setting is left alone): in
float32 isotonic regression merges scores closer than float32's resolution (1e-6) and
the fitted steps move by up to 0.02 at N = 1e5 (benchmarks/bench_selective.py).

Rows are padded with weight-0 rows up to the next power of two (and at least 16), so
that the many fold and batch sizes of a cross-validation share a few compiled programs;
jaxcal's fits ignore rows of weight 0.

Venn-Abers is discontinuous at its calibration scores (a test score equal to one is tied
with it; one a hair below or above is not), while an estimator's response is not
reproducible to the last bit: LinearSVC's decision value of one row differed by 4.4e-16
between a 1-row and a 30-row call on one machine (BLAS blocks the dot products by batch
size), and moved a probability from 0.667 to 0.5. Before Venn-Abers is applied, a test
score within ``SNAP_RTOL`` (relative to the largest calibration score's magnitude, at
least 1) of a calibration score is read as that score (``snap_to_calibration_scores``),
so predictions do not depend on the batch they are computed in.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal import calibrators as C
from jaxcal._core.eager import call_stored
from jaxcal.calibrators import VennAbersParams

METHODS = ("sigmoid", "isotonic", "temperature", "venn_abers")

#: Test scores this close (relative) to a Venn-Abers calibration score are read as it: far
#: above the round-off of a response computed in another batch (a few ulp of float64,
#: ~1e-15), far below any difference between scores that means something.
SNAP_RTOL = 1e-11

_BUILT: dict[tuple, Any] = {}


def calibrator_of(method: Any) -> Any:
    """The jaxcal ``Calibrator`` of a method name (built once per process), or ``method``."""
    if not isinstance(method, str):
        return method
    if method not in _BUILT:
        _BUILT[method] = {
            # scikit-learn's sigmoid: Platt on the raw response, with Platt's soft targets
            "sigmoid": lambda: C.platt_scaling(target_smoothing=True, inputs="logits"),
            "isotonic": lambda: C.isotonic(inputs="logits"),
            "temperature": lambda: C.temperature_scaling(inputs="logits"),
            "venn_abers": lambda: C.venn_abers(inputs="logits"),
        }[method]()
    return _BUILT[method]


def is_binary(calibrator: Any) -> bool:
    """A binary calibrator (fitted one-vs-rest) or a multiclass one."""
    return bool(getattr(calibrator.fit, "binary", True))


def padded_size(n: int) -> int:
    """The next power of two >= n (at least 16): a few shapes for every fold size."""
    return max(16, 1 << max(0, int(n - 1).bit_length()))


def _pad(x: np.ndarray, size: int, fill: float = 0.0) -> np.ndarray:
    pad = [(0, size - x.shape[0])] + [(0, 0)] * (x.ndim - 1)
    return np.pad(x, pad, constant_values=fill)


def to_logits(predictions: np.ndarray, from_proba: bool) -> np.ndarray:
    """scikit-learn's ``_convert_to_logits`` (and its two-class completion)."""
    p = np.asarray(predictions, np.float64)
    if p.ndim == 2 and p.shape[1] == 1:
        if from_proba:  # the positive class's probability: the two columns, then logs
            p = np.concatenate([1 - p, p], axis=1)
        else:
            return np.concatenate([-p, p], axis=1)
    rows_are_probs = np.all((p >= 0) & (p <= 1)) and np.allclose(p.sum(axis=1), 1.0)
    return np.log(p + 1e-12) if rows_are_probs else p


class Fitted(NamedTuple):
    """One fitted calibration: the method, its (stacked) params, the column map.

    The method is kept by name (its calibrator rebuilt on use) so that a fitted
    estimator pickles; a user's ``Calibrator`` is kept as it is.
    """

    method: Any
    params: Any
    class_index: np.ndarray  # column j of the response is class class_index[j]
    n_classes: int
    from_proba: bool


def _dtype():
    return jnp.float64  # the callers run under jax.enable_x64(True)


def fit_calibration(
    method: Any,
    predictions: np.ndarray,
    y: np.ndarray,
    class_index: np.ndarray,
    n_classes: int,
    sample_weight: np.ndarray | None,
    from_proba: bool,
) -> Fitted:
    """Fit the calibration of ``predictions`` ``(N, C)`` against labels ``y`` in
    ``[0, n_classes)``; response column j belongs to class ``class_index[j]``."""
    with jax.enable_x64(True):
        return _fit(method, predictions, y, class_index, n_classes, sample_weight, from_proba)


def _fit(method, predictions, y, class_index, n_classes, sample_weight, from_proba) -> Fitted:
    cal = calibrator_of(method)
    n = predictions.shape[0]
    size = padded_size(n)
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    w = _pad(w, size).astype(np.float64)
    if is_binary(cal):
        columns = np.asarray(predictions, np.float64).T  # (C, N)
        if n_classes == 2 and columns.shape[0] == 1:
            targets = (y == 1)[None, :]
        else:
            targets = y[None, :] == class_index[:, None]
        # NumPy arrays, contiguous: jnp.asarray of a transposed array compiles a program
        x = np.ascontiguousarray(_pad(columns.T, size).T)
        t = np.ascontiguousarray(_pad(targets.T.astype(np.int32), size).T)
        params = _stored(_fit_columns, method, x, t, w)
    else:
        logits = _pad(to_logits(predictions, from_proba), size)
        labels = _pad(np.asarray(y, np.int32), size)
        params = _stored(_fit_multiclass, method, logits, labels, w)
    # NumPy leaves: a pickled jax float64 array comes back as float32 without x64
    params = jax.tree.map(np.asarray, params)
    return Fitted(method, params, np.asarray(class_index), n_classes, from_proba)


def _stored(kernel: Any, method: Any, *arrays: Any) -> Any:
    """``kernel(*arrays, method=method)`` as one program: for a built-in method (named by
    its string) compiled once per padded size and kept in the executable store, so a new
    process loads it; a user's ``Calibrator`` is traced as it is."""
    if isinstance(method, str):
        return call_stored(kernel, *arrays, method=method)
    return kernel(*arrays, method=method)


def _fit_columns(x: jax.Array, t: jax.Array, w: jax.Array, *, method: Any) -> Any:
    """A binary calibrator fitted to each response column ``x`` ``(C, N)`` (one vmap)."""
    cal = calibrator_of(method)
    return jax.vmap(lambda xc, tc: cal.fit(xc, tc, weights=w))(x, t)


def _fit_multiclass(logits: jax.Array, labels: jax.Array, w: jax.Array, *, method: Any) -> Any:
    cal = calibrator_of(method)
    return cal.fit(_inputs_of(cal, logits), labels, weights=w)


def _apply_columns(params: Any, x: jax.Array, *, method: Any) -> jax.Array:
    return jax.vmap(calibrator_of(method).apply)(params, x)


def _apply_multiclass(params: Any, logits: jax.Array, *, method: Any) -> jax.Array:
    cal = calibrator_of(method)
    return cal.apply(params, _inputs_of(cal, logits))


def _inputs_of(cal: Any, logits: np.ndarray) -> jax.Array:
    z = jnp.asarray(logits, _dtype())
    inputs = getattr(cal.fit, "inputs", "logits")
    if inputs == "probs":
        return jax.nn.softmax(z, axis=1)
    if inputs == "log_probs":
        return jax.nn.log_softmax(z, axis=1)
    return z


def predict_calibrated(fitted: Fitted, predictions: np.ndarray) -> np.ndarray:
    """Calibrated probabilities ``(N, n_classes)`` (float64) of a response ``(N, C)``."""
    with jax.enable_x64(True):
        return _predict(fitted, predictions)


def snap_to_calibration_scores(params: VennAbersParams, scores: np.ndarray) -> np.ndarray:
    """``scores`` ``(C, N)`` with each one within ``SNAP_RTOL`` of a calibration score of
    its column's fitted Venn-Abers predictor (``params`` stacked over C) replaced by it.

    Example:
      >>> params = VennAbersParams(np.array([[0.2, 0.5, 0.5]]), None, None, np.array([2]))
      >>> snapped = snap_to_calibration_scores(params, np.array([[0.5 - 4e-16, 0.2 + 1e-9]]))
      >>> snapped[0, 0] == 0.5, snapped[0, 1] == 0.2 + 1e-9  # 1e-9 is a real difference
      (np.True_, np.True_)
    """
    out = np.array(scores, np.float64)
    for c, (x, size) in enumerate(zip(np.asarray(params.x), np.asarray(params.size), strict=True)):
        x = np.asarray(x[: int(size)], np.float64)
        if x.size == 0:
            continue
        tol = SNAP_RTOL * max(1.0, float(np.max(np.abs(x))))
        right = np.clip(np.searchsorted(x, out[c]), 0, x.size - 1)  # the neighbours
        left = np.maximum(right - 1, 0)
        closer_left = np.abs(out[c] - x[left]) <= np.abs(out[c] - x[right])
        near = np.where(closer_left, x[left], x[right])
        out[c] = np.where(np.abs(out[c] - near) <= tol, near, out[c])
    return out


def _predict(fitted: Fitted, predictions: np.ndarray) -> np.ndarray:
    cal, n = calibrator_of(fitted.method), predictions.shape[0]
    size = padded_size(n)
    if is_binary(cal):
        columns = np.asarray(predictions, np.float64)
        if isinstance(fitted.params, VennAbersParams):  # see the module docstring
            columns = snap_to_calibration_scores(fitted.params, columns.T).T
        x = np.ascontiguousarray(_pad(columns, size).T)
        cols = np.asarray(_stored(_apply_columns, fitted.method, fitted.params, x), np.float64)
        cols = cols[:, :n]
        proba = np.zeros((n, fitted.n_classes))
        if fitted.n_classes == 2 and cols.shape[0] == 1:
            proba[:, 1] = cols[0]
            proba[:, 0] = 1.0 - proba[:, 1]
        else:
            proba[:, fitted.class_index] = cols.T
            total = proba.sum(axis=1, keepdims=True)
            uniform = np.full_like(proba, 1 / fitted.n_classes)
            proba = np.divide(proba, total, out=uniform, where=total != 0)
    else:
        logits = _pad(to_logits(predictions, fitted.from_proba), size)
        out = _stored(_apply_multiclass, fitted.method, fitted.params, logits)
        out = np.asarray(out, np.float64)[:n]
        proba = np.zeros((n, fitted.n_classes))
        proba[:, fitted.class_index if out.shape[1] < fitted.n_classes else slice(None)] = out
    proba[(proba > 1.0) & (proba <= 1.0 + 1e-5)] = 1.0
    return proba
