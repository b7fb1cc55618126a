"""Binned and adaptive measures: the interval for the squared l2 ECE (Sun et al. 2024),
T-Cal (Lee et al. 2023) and TCE (Matsubara et al. 2023)."""
