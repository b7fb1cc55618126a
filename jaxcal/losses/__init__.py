"""Training losses on logits: calibration regularisers, focal loss, and the held-out and
meta-learned forms of a calibration objective (public namespace).

Optax-style pure functions ``loss(logits, labels, *, ..., weights=None) -> scalar``, for
``jit``, ``vmap`` and ``grad``. Label smoothing is optax's ``optax.smooth_labels``.
"""

from jaxcal.losses._dece import dece_loss
from jaxcal.losses._focal import flsd53_gamma, focal_loss
from jaxcal.losses._heldout import (
    BatchIndices,
    HeldoutTerms,
    heldout_batch_indices,
    heldout_objective,
)
from jaxcal.losses._kde import ece_kde_loss
from jaxcal.losses._meta import (
    MetaCalibration,
    MetaCalibrationInfo,
    MetaCalibrationState,
    hyper_cross_entropy,
    meta_calibration,
)
from jaxcal.losses._regularizers import dca_loss, mmce_loss, soft_ece_loss
from jaxcal.losses._saturation import SaturationStats, saturation_stats

__all__ = [
    "BatchIndices",
    "HeldoutTerms",
    "MetaCalibration",
    "MetaCalibrationInfo",
    "MetaCalibrationState",
    "SaturationStats",
    "dca_loss",
    "dece_loss",
    "ece_kde_loss",
    "flsd53_gamma",
    "focal_loss",
    "heldout_batch_indices",
    "heldout_objective",
    "hyper_cross_entropy",
    "meta_calibration",
    "mmce_loss",
    "saturation_stats",
    "soft_ece_loss",
]
