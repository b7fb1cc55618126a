"""Training losses on logits: calibration regularisers and focal loss (public namespace).

Optax-style pure functions ``loss(logits, labels, *, ..., weights=None) -> scalar``, for
``jit``, ``vmap`` and ``grad``. Label smoothing is optax's ``optax.smooth_labels``.
"""

from jaxcal.losses._focal import flsd53_gamma, focal_loss
from jaxcal.losses._kde import ece_kde_loss
from jaxcal.losses._regularizers import dca_loss, mmce_loss, soft_ece_loss

__all__ = ["dca_loss", "ece_kde_loss", "flsd53_gamma", "focal_loss", "mmce_loss", "soft_ece_loss"]
