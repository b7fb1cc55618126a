"""Check tests/reference_segments.mcgrad_segments against mcgrad itself, once.

Run in an environment with the ``bench-torch`` extra (mcgrad pulls PyTorch and botorch):
``python benchmarks/check_mcgrad_oracle.py``. Prints the largest relative differences of
the per-segment ECCE, sigma, sigma-scaled statistic and p-value, and of the MCE fields.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pandas as pd
from mcgrad import metrics as mcm

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from reference_segments import mcgrad_segments


def main(n: int = 20_000, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.random(n)
    country = rng.integers(0, 6, n)
    device = rng.integers(0, 4, n)
    # A miscalibrated segment so that some statistics pass MCGrad's clamp at 8.27.
    truth = np.where((country == 2) & (device == 1), np.clip(scores + 0.15, 0, 1), scores)
    labels = (rng.random(n) < truth).astype(np.int64)
    weights = rng.uniform(0.5, 2.0, n)
    df = pd.DataFrame(
        {"y": labels, "s": scores, "w": weights, "country": country, "device": device}
    )
    for weight_column in (None, "w"):
        mce = mcm.MulticalibrationError(
            df,
            "y",
            "s",
            weight_column,
            categorical_segment_columns=["country", "device"],
            max_depth=2,
            max_values_per_segment_feature=6,
            precision_dtype="float64",
        )
        masks = mce._segments[0].reshape(-1, len(mce.df))[: mce.total_number_segments].T
        sorted_df = mce.df
        w = None if weight_column is None else sorted_df["w"].to_numpy()
        (ecce, sigma, stat, p), (mce_sigma, mce_abs, mce_rel) = mcgrad_segments(
            sorted_df["s"].to_numpy(), sorted_df["y"].to_numpy(), masks, w
        )

        def rel(a, b):
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
            return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))

        print(f"weights={weight_column}: {masks.shape[1]} segments")
        print("  ecce       ", rel(ecce, mce.segments_ecce))
        print("  sigma      ", rel(sigma, mce._segments_ecce_std))
        print("  ecce_sigma ", rel(stat, mce.segments_ecce_sigma))
        print("  p-value    ", rel(p, mce.segments_ecce_pvalue))
        print("  clamped    ", int(np.sum(stat >= 8.26732673)), "segments at eps")
        print("  mce_sigma  ", rel(mce_sigma, mce.mce_sigma))
        print("  mce        ", rel(mce_abs, mce.mce))
        print("  mce_rel    ", rel(mce_rel, mce.mce_relative))


if __name__ == "__main__":
    main()
