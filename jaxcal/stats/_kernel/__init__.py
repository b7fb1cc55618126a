"""Kernel calibration tests: the SKCE tests (asymptotic, block z-test, distribution-free
bounds) and the CME test (Widmann, Lindsten & Zachariah 2019, 2021)."""
