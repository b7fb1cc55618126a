"""Check tests/reference_kde.py (the NumPy ports) against the PyTorch reference code, once.

The references are not vendored: pass the paths of their files,

    /tmp/torch-venv/bin/python benchmarks/check_kde_torch_oracle.py \\
        path/to/ece-kde/ece_kde.py path/to/proper-calibration-error/src/calibration_error/bregman_ce.py

in an environment with torch (``torch==2.13.0`` was used; never in the test extra), NumPy
and SciPy. Prints the largest relative differences between the PyTorch code and the
NumPy ports for ECE-KDE (canonical, marginal, top-label; p = 1, 2; K = 3, 10, 70), the
bandwidth choices, and the proper calibration errors (KL, L2; canonical, classwise).

Expected: the proper calibration errors and the bandwidths agree to round-off (the
reference computes them in float64); ECE-KDE agrees to float32 round-off except where
the reference's float32 *linear* path (K <= 60) underflows at small bandwidths (K = 10,
b = 0.01: 4 % for p = 1 and 7 % for p = 2 on this data), where the NumPy port, like
jaxcal, gives the reference's own log path (``get_ratio_canonical_log``).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tests import reference_kde as ref


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(ece_kde_path: str, bregman_path: str) -> None:
    ece, breg = _load(ece_kde_path, "ece_kde_ref"), _load(bregman_path, "bregman_ref")
    rng = np.random.default_rng(0)
    for k in (3, 10, 70):
        f = rng.dirichlet(np.ones(k) * 0.7, 60)
        y = rng.integers(0, k, 60)
        f32 = f.astype(np.float32).astype(float)  # what the float32 reference sees
        ft, yt = torch.tensor(f, dtype=torch.float32), torch.tensor(y)
        worst = {}
        for kind in ("canonical", "marginal", "top_label"):
            for p in (1, 2):
                for b in (0.01, 0.1):
                    a = float(ece.get_ece_kde(ft, yt, b, p, kind, "cpu"))
                    r = ref.get_ece_kde(f32, y, b, p, kind)
                    worst[(kind, p, b)] = abs(a - r) / max(abs(r), 1e-300)
        key = max(worst, key=worst.get)
        print(f"K = {k}: ECE-KDE largest relative difference {worst[key]:.2e} at {key}")
        print(
            f"  bandwidth: torch {float(ece.get_bandwidth(ft, 'cpu')):.6g}, port {ref.get_bandwidth(f32):.6g}"
        )
        fd = torch.tensor(f, dtype=torch.float64)
        for div, ct, cr in (
            ("kl", breg.negative_entropy, ref.negative_entropy),
            ("l2", breg.l2_norm, ref.l2_norm),
        ):
            a = float(breg.get_bregman_ce(ct, fd, yt, 0.05).detach())
            b2 = float(breg.get_classwise_bregman_ce(ct, fd, yt, 0.05).detach())
            r, r2 = ref.get_bregman_ce(cr, f, y, 0.05), ref.get_classwise_bregman_ce(cr, f, y, 0.05)
            print(
                f"  proper CE {div}: canonical {abs(a - r) / abs(r):.1e}, classwise {abs(b2 - r2) / abs(r2):.1e}"
            )
        bp = float(breg.get_bandwidth(fd, "cpu"))
        print(f"  proper-CE bandwidth: torch {bp:.6g}, port {ref.get_bandwidth_proper(f):.6g}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
