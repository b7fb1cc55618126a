"""Clinical calibration measures: slope and intercept, O:E, Hosmer-Lemeshow, ICI.

``slope`` (logistic recalibration by Newton's method, calibration-in-the-large),
``observed_expected`` (O:E ratios with prevalence weights), ``hosmer_lemeshow``
(the C statistic and its chi-square tail), ``ici`` on the ``loess`` smoother.
"""
