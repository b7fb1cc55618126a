"""The shared machinery under every public namespace; no public names live here.

Everything in jaxcal imports from this folder and nothing here imports anything else in
jaxcal (``tests/test_layout.py`` checks it). One concept a module:

* ``numerics``: compute dtypes, safe division and square roots, blocked sums, loop carries
  typed from the data (``vary_like``);
* ``checks``: the argument checks every public function makes (shapes, options, ranges),
  and whether values are concrete enough to check (``values_checkable``);
* ``validity``: validity summaries computed inside the kernels and checked on the host;
* ``confidence``: scores and binary targets of each calibration view (binary, top label,
  classwise), with argmax's first-index rule;
* ``binning``: bin edges, bin indices and per-bin sums (the sufficient statistics);
* ``groups``: segment ids and membership matrices, and the segmented cumulative sum;
* ``sort``: the sorts (NumPy's on CPU, XLA's elsewhere), by value, by bits and by segment;
* ``isotonic``: pool-adjacent-violators, shared by the calibrators, CORP and LOESS;
* ``random``: Threefry words, seeds and the categorical draws of the resampling tests;
* ``cache``: option keys and cached factories (one compiled program per equal options);
* ``eager``: eager calls padded to size classes, their executables kept per process;
* ``store``: compiled executables on disk, shared by processes (the report's kernels too);
* ``cache_dir``: the cache folder and the switches that turn the store off.
"""
