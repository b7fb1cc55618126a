"""Selective prediction: accept the most confident predictions, abstain on the rest.

The risk-coverage curve (:func:`~jaxcal.selective.risk_coverage_curve`) and the numbers
read off it: the area under it in both conventions in use (:func:`~jaxcal.selective.aurc`:
Geifman & El-Yaniv's mean of the running risks, torch-uncertainty's normalised
trapezoid), the excess over the best ranking (:func:`~jaxcal.selective.e_aurc`), the
area under the generalized risk (:func:`~jaxcal.selective.augrc`, Traub et al. 2024),
operating points (:func:`~jaxcal.selective.risk_at_coverage`,
:func:`~jaxcal.selective.coverage_at_risk`), the AUROC of correctness
(:func:`~jaxcal.selective.correctness_auroc`) and LM-Polygraph's prediction-rejection
ratio (:func:`~jaxcal.selective.prediction_rejection_ratio`).

Every function takes ``(probs, labels)`` as the rest of jaxcal: ``(N, K)`` class
probabilities with class labels (top-label confidence and correctness), or ``(N,)`` a
binary model's probability of the positive class with 0/1 labels (the rows
``(1 - p, p)``: confidence max(p, 1 - p)). Confidence scores of any scale with the
correctness of each prediction (0/1, or a float quality in [0, 1]), as LLM evaluations
have them, go by name: ``aurc(confidence=scores, correct=correct)``. ``weights=`` and
``groups=`` as in :mod:`jaxcal.metrics`.
Each sorts the samples once by confidence (O(N log N)), averages tied confidences over
their orders, and runs under ``jit`` and ``vmap``; derivatives flow to ``weights`` and a
float quality (the confidence enters through its order only).
"""

from jaxcal.selective._area import augrc, aurc, e_aurc, prediction_rejection_ratio
from jaxcal.selective._curve import RiskCoverageCurve, risk_coverage_curve
from jaxcal.selective._operating import correctness_auroc, coverage_at_risk, risk_at_coverage

__all__ = [
    "RiskCoverageCurve",
    "augrc",
    "aurc",
    "correctness_auroc",
    "coverage_at_risk",
    "e_aurc",
    "prediction_rejection_ratio",
    "risk_at_coverage",
    "risk_coverage_curve",
]
