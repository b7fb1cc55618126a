"""``calibration_curve`` and ``CalibrationDisplay``: scikit-learn's, with the cube-root
rule for the bin count and multiclass (top-label) inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.calibration import CalibrationDisplay as _SklearnDisplay
from sklearn.utils import column_or_1d
from sklearn.utils.validation import _check_pos_label_consistency, check_consistent_length

from jaxcal._core.binning import cube_root_bins

STRATEGIES = ("uniform", "quantile")


def _n_bins(n_bins: Any, n: int) -> int:
    if isinstance(n_bins, str):
        if n_bins != "cube_root":
            raise ValueError(f"`n_bins` must be an integer >= 1 or 'cube_root'; got {n_bins!r}.")
        return cube_root_bins(n)
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"`n_bins` must be an integer >= 1 or 'cube_root'; got {n_bins!r}.")
    return int(n_bins)


def _top_label(y_true: np.ndarray, y_prob: np.ndarray, classes: Any):
    """(confidence, correct) of ``(N, K)`` probabilities whose columns are ``classes``."""
    k = y_prob.shape[1]
    if classes is None:
        present = np.unique(y_true)
        if present.size == k:
            classes = present
        elif np.issubdtype(present.dtype, np.integer) and present.min() >= 0 and present.max() < k:
            classes = np.arange(k)
        else:
            raise ValueError(
                f"`y_prob` has {k} columns but `y_true` holds {present.size} classes; pass "
                "`classes` (the label of each column, e.g. estimator.classes_)."
            )
    classes = np.asarray(classes)
    if classes.shape != (k,):
        raise ValueError(f"`classes` must name the {k} columns of `y_prob`; got {classes.shape}.")
    return y_prob.max(axis=1), classes[np.argmax(y_prob, axis=1)] == y_true


def calibration_curve(
    y_true: Any,
    y_prob: Any,
    *,
    pos_label: Any = None,
    n_bins: int | str = 5,
    strategy: str = "uniform",
    classes: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """True and predicted probabilities per bin, as :func:`sklearn.calibration.calibration_curve`.

    For ``(N,)`` probabilities of the positive class, exactly scikit-learn's result:
    the edges ``np.linspace(0, 1, n_bins + 1)`` (``"uniform"``) or the percentiles of
    ``y_prob`` (``"quantile"``), bin of each value ``np.searchsorted(inner_edges, p)``
    (a value equal to an inner edge in the lower bin), empty bins dropped, in float64.
    Beyond it:

    * ``n_bins="cube_root"``: ⌈N^(1/3)⌉ bins, the rule scikit-learn adopts (with
      ``strategy="quantile"``, its future default);
    * ``(N, K)`` probabilities: the top-label curve, the accuracy of the predicted
      class against the mean top probability per bin (columns labelled by ``classes``,
      by default the sorted labels of ``y_true`` when all K occur, or 0..K-1); NaN
      or inf in a row is refused with a ``ValueError`` (the ``(N,)`` path, like
      scikit-learn's, bins a NaN silently into NaN bin means).

    Args:
      y_true: ``(N,)`` labels.
      y_prob: ``(N,)`` positive-class probabilities or ``(N, K)`` rows.
      pos_label: the positive class (binary), as scikit-learn.
      n_bins: an integer >= 1 or ``"cube_root"``.
      strategy: ``"uniform"`` or ``"quantile"``.
      classes: the label of each column of ``(N, K)`` ``y_prob``.

    Returns:
      ``(prob_true, prob_pred)``, float64 arrays of the non-empty bins.

    Example:
      >>> import numpy as np
      >>> y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
      >>> p = np.array([0.1, 0.2, 0.3, 0.4, 0.65, 0.7, 0.8, 0.9, 1.0])
      >>> prob_true, prob_pred = calibration_curve(y, p, n_bins="cube_root")  # 3 bins
      >>> prob_true.tolist(), [round(v, 3) for v in prob_pred.tolist()]
      ([0.0, 0.5, 1.0], [0.2, 0.525, 0.85])

    References:
      Niculescu-Mizil & Caruana (2005); scikit-learn ``sklearn/calibration.py``
      (``calibration_curve``).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of 'uniform', 'quantile'; got {strategy!r}.")
    y_true = column_or_1d(y_true)
    y_prob = np.asarray(y_prob, dtype=np.float64)
    check_consistent_length(y_true, y_prob)
    if y_prob.ndim == 2 and y_prob.shape[1] > 1:
        # jaxcal's own top-label extension validates (the (N,) path stays scikit-learn's,
        # which bins NaN silently): a NaN would pass min/max and give NaN bin means
        bad = np.flatnonzero(~np.isfinite(y_prob).all(axis=1))
        if bad.size:
            raise ValueError(
                f"`y_prob` must be finite; got {y_prob[bad[0]].tolist()} in row {bad[0]} "
                f"({bad.size} row(s) with NaN or inf). Drop or repair those rows first."
            )
        scores, target = _top_label(y_true, y_prob, classes)
    else:
        scores = column_or_1d(y_prob)
        labels = np.unique(y_true)
        if labels.size > 2:
            raise ValueError(
                f"Only binary classification is supported for (N,) `y_prob`; got labels "
                f"{labels}. Pass (N, K) probabilities for the top-label curve."
            )
        pos_label = _check_pos_label_consistency(pos_label, y_true)
        target = y_true == pos_label
    if scores.size and (scores.min() < 0 or scores.max() > 1):
        raise ValueError("`y_prob` has values outside [0, 1].")
    m = _n_bins(n_bins, scores.size)
    if strategy == "quantile":
        edges = np.percentile(scores, np.linspace(0, 1, m + 1) * 100)
    else:
        edges = np.linspace(0.0, 1.0, m + 1)
    ids = np.searchsorted(edges[1:-1], scores)
    sums = np.bincount(ids, weights=scores, minlength=m)
    hits = np.bincount(ids, weights=target.astype(np.float64), minlength=m)
    counts = np.bincount(ids, minlength=m)
    keep = counts != 0
    return hits[keep] / counts[keep], sums[keep] / counts[keep]


class CalibrationDisplay(_SklearnDisplay):
    """Calibration curve (reliability diagram) display, scikit-learn's with more inputs.

    :class:`sklearn.calibration.CalibrationDisplay` whose ``from_predictions`` and
    ``from_estimator`` compute the curve with :func:`~jaxcal.sklearn.calibration_curve`:
    ``n_bins="cube_root"``, and multiclass predictions drawn as the top-label curve
    (accuracy of the predicted class against its mean probability). ``plot`` and the
    attributes are scikit-learn's (needs matplotlib).

    Attributes:
      prob_true: accuracy (binary: fraction of positives) per non-empty bin.
      prob_pred: mean predicted probability per non-empty bin.
      y_prob: the predictions the curve was computed from.
      estimator_name: the curve's name in the legend.
      pos_label: the positive class (binary), None for the top-label curve.

    Example:
      >>> import numpy as np
      >>> rng = np.random.default_rng(0)
      >>> p = rng.dirichlet(np.ones(3), 200)
      >>> y = np.array([rng.choice(3, p=r) for r in p])
      >>> disp = CalibrationDisplay.from_predictions(y, p, n_bins="cube_root")  # 6 bins
      >>> disp.prob_true.shape  # top probabilities >= 1/3: the two lowest bins are empty
      (4,)
      >>> import matplotlib.pyplot as plt; plt.close("all")
    """

    @classmethod
    def from_predictions(
        cls,
        y_true: Any,
        y_prob: Any,
        *,
        n_bins: int | str = 5,
        strategy: str = "uniform",
        pos_label: Any = None,
        name: str | None = None,
        ax: Any = None,
        ref_line: bool = True,
        classes: Any = None,
        **kwargs: Any,
    ) -> CalibrationDisplay:
        """Plot the calibration curve of predictions (binary, or top label of ``(N, K)``).

        Args:
          y_true: ``(N,)`` labels.
          y_prob: ``(N,)`` positive-class probabilities or ``(N, K)`` rows.
          n_bins: an integer >= 1 or ``"cube_root"``.
          strategy: ``"uniform"`` or ``"quantile"``.
          pos_label: the positive class (binary).
          name: the legend's label.
          ax: matplotlib axes (None: a new figure).
          ref_line: draw the diagonal.
          classes: the labels of the columns of ``(N, K)`` ``y_prob``.
          **kwargs: passed to ``matplotlib.pyplot.plot``.

        Returns:
          the display.
        """
        probs = np.asarray(y_prob)
        multiclass = probs.ndim == 2 and probs.shape[1] > 1
        if multiclass:
            validated = None
        else:
            validated, name = cls._validate_from_predictions_params(
                y_true, y_prob, sample_weight=None, pos_label=pos_label, name=name
            )
        prob_true, prob_pred = calibration_curve(
            y_true, y_prob, n_bins=n_bins, strategy=strategy, pos_label=pos_label, classes=classes
        )
        disp = cls(prob_true, prob_pred, y_prob, estimator_name=name, pos_label=validated)
        disp.plot(ax=ax, ref_line=ref_line, **kwargs)
        if multiclass:
            disp.ax_.set(xlabel="Mean top-label probability", ylabel="Accuracy of the top label")
        return disp

    @classmethod
    def from_estimator(
        cls,
        estimator: Any,
        X: Any,
        y: Any,
        *,
        n_bins: int | str = 5,
        strategy: str = "uniform",
        pos_label: Any = None,
        name: str | None = None,
        ax: Any = None,
        ref_line: bool = True,
        **kwargs: Any,
    ) -> CalibrationDisplay:
        """Plot the calibration curve of a fitted classifier's ``predict_proba`` on X.

        Args:
          estimator: a fitted classifier with ``predict_proba``.
          X: the samples.
          y: their labels.
          n_bins, strategy, pos_label, name, ax, ref_line, **kwargs: as
            :meth:`~jaxcal.sklearn.CalibrationDisplay.from_predictions`.

        Returns:
          the display.
        """
        classes = getattr(estimator, "classes_", None)
        if classes is not None and len(classes) > 2:
            y_prob = estimator.predict_proba(X)
            name = type(estimator).__name__ if name is None else name
            return cls.from_predictions(
                y, y_prob, n_bins=n_bins, strategy=strategy, name=name, ax=ax,
                ref_line=ref_line, classes=classes, **kwargs,
            )  # fmt: skip
        y_prob, pos_label, name = cls._validate_and_get_response_values(
            estimator, X, y, response_method="predict_proba", pos_label=pos_label, name=name
        )
        return cls.from_predictions(
            y, y_prob, n_bins=n_bins, strategy=strategy, pos_label=pos_label, name=name,
            ax=ax, ref_line=ref_line, **kwargs,
        )  # fmt: skip
