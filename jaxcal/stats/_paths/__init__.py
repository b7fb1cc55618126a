"""Tests from cumulative-difference paths: KS, Kuiper, Spiegelhalter, within segments too.

``sorted_path`` walks the path of one sort, ``segments`` one path per segment,
``pvalues`` turns their extremes into statistics, with p-values from the Brownian laws of
``brownian``; ``cumulative`` holds the public tests, ``multicalibration`` and
``subpopulation`` the per-segment and subpopulation forms.
"""
