"""Resampling: consistency tests, bootstrap intervals, per-bin intervals and bands.

``consistency`` (Bröcker & Smith's consistency resampling and the batching every
resampling procedure shares), ``binned_null`` (its fast path for binned metrics),
``bootstrap`` (percentile and BCa intervals, paired comparisons), ``intervals`` (Wilson,
Clopper-Pearson and consistency bands per bin, on ``betainc``), ``corp`` (CORP bands and
intervals of the score decomposition).
"""
