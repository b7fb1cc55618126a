"""mcgrad's side of benchmarks/bench_segments.py, run in the bench-torch environment.

``python benchmarks/_mcgrad_peer.py DATA.npz OUT.npz``: times
``mcgrad.metrics.MulticalibrationError`` on the data (whole metric: segment masks,
per-segment ECCE, sigma and p-values; and the per-segment part alone, masks cached), and
saves the segments (bit-packed, in mcgrad's sorted row order), its results and timings.
"""

from __future__ import annotations

import sys
import time

import mcgrad
import numpy as np
import pandas as pd
from mcgrad import metrics as mcm


def _metric(df, columns, n_segments):
    return mcm.MulticalibrationError(
        df,
        "y",
        "s",
        None,
        categorical_segment_columns=columns,
        max_depth=2,
        max_values_per_segment_feature=10,
        max_n_segments=n_segments,
    )


def main(data_path: str, out_path: str) -> None:
    data = np.load(data_path)
    columns = [k for k in data.files if k.startswith("c")]
    df = pd.DataFrame({"s": data["s"], "y": data["y"], **{c: data[c] for c in columns}})
    n_segments = int(data["n_segments"])
    start = time.perf_counter()
    mce = _metric(df, columns, n_segments)
    stats = mce.segments_ecce_sigma, mce.segments_ecce_pvalue, mce.mce_sigma
    full = time.perf_counter() - start
    # The per-segment part alone: masks already built (cached), statistics recomputed.
    again = _metric(df, columns, n_segments)
    masks = again._segments[0]
    start = time.perf_counter()
    _ = again.segments_ecce_sigma, again.segments_ecce_pvalue, again.mce_sigma
    metric_only = time.perf_counter() - start
    g = mce.total_number_segments
    flat = masks.reshape(-1, masks.shape[-1])[:g]
    np.savez(
        out_path,
        masks=np.packbits(flat, axis=1),
        n=flat.shape[1],
        s=mce.df["s"].to_numpy(),
        y=mce.df["y"].to_numpy(),
        statistic=np.asarray(stats[0], np.float64),
        p_value=np.asarray(stats[1], np.float64),
        full_s=full,
        metric_s=metric_only,
        version=mcgrad.__version__ if hasattr(mcgrad, "__version__") else "?",
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
