"""Regression calibration: jaxcal.regression against uncertainty-toolbox, properscoring,
scoringrules (NumPy backend) and netcal, in one run, with the read floor.

    python benchmarks/bench_regression.py            # N = 1e4, 1e5, 1e6
    python benchmarks/bench_regression.py --quick    # N = 1e4, few repeats
    python benchmarks/bench_regression.py --json out.json

Data: a heteroscedastic Gaussian forecaster (mean, std) with t-distributed targets, and a
32-member ensemble drawn around it. jaxcal gets float32 device arrays and is timed jitted
(validation skipped under tracing, as in an evaluation loop); the peers get float64 NumPy.
Peers not installed are skipped with a note (netcal pulls in PyTorch: the ``bench-torch``
extra). Each jaxcal row's value is printed beside the peer's so that agreement is visible.
"""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

import jax
import numpy as np
from _timing import Table, environment, fmt_ms, read_floor, row, time_interleaved, write_tables

from jaxcal import regression as R

FLOOR = "floor: jax.jit read of the inputs"
MEMBERS = 32


def make_data(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=n)
    std = rng.uniform(0.5, 2.0, n)
    y = mean + 1.2 * std * rng.standard_t(5, size=n)
    ens = mean[:, None] + std[:, None] * rng.normal(size=(n, MEMBERS))
    return dict(mean=mean, std=std, y=y, ens=ens)


def _have(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def cases(n: int) -> list[dict[str, Any]]:
    """(name, jaxcal jitted call, peers {name: call}) per measure."""
    d = make_data(n)
    f32 = {k: jax.device_put(v.astype(np.float32)) for k, v in d.items()}
    g = R.Gaussian(f32["mean"], f32["std"])
    mean, std, y, ens = d["mean"], d["std"], d["y"], d["ens"]
    out: list[dict[str, Any]] = []

    def add(name, fn, args, peers):
        out.append(dict(name=name, fn=jax.jit(fn), args=args, peers=peers))

    uct = {}
    if _have("uncertainty_toolbox"):
        import uncertainty_toolbox as ut

        uct = {
            "mace": lambda: ut.mean_absolute_calibration_error(mean, std, y, vectorized=True),
            "area": lambda: ut.miscalibration_area(mean, std, y, vectorized=True),
        }
    add(
        "mean_absolute_calibration_error",
        lambda g, y: R.mean_absolute_calibration_error(g, y),
        (g, f32["y"]),
        {"uncertainty-toolbox": uct["mace"]} if uct else {},
    )
    add(
        "miscalibration_area",
        lambda g, y: R.miscalibration_area(g, y),
        (g, f32["y"]),
        {"uncertainty-toolbox": uct["area"]} if uct else {},
    )
    peers: dict[str, Any] = {}
    if _have("properscoring"):
        import properscoring as ps

        peers["properscoring"] = lambda: ps.crps_gaussian(y, mean, std).mean()
    if _have("scoringrules"):
        import scoringrules as sr

        peers["scoringrules (numpy)"] = lambda: sr.crps_normal(y, mean, std).mean()
    add(
        "crps_gaussian",
        lambda m, s, y: R.crps_gaussian(m, s, y),
        (f32["mean"], f32["std"], f32["y"]),
        peers,
    )
    peers = {}
    if _have("properscoring"):
        peers["properscoring (plug-in)"] = lambda: ps.crps_ensemble(y, ens).mean()
    if _have("scoringrules"):
        peers["scoringrules fair (numpy)"] = lambda: sr.crps_ensemble(
            y, ens, estimator="fair"
        ).mean()
    add(
        f"crps_ensemble fair (S = {MEMBERS})",
        lambda e, y: R.crps_ensemble(e, y),
        (f32["ens"], f32["y"]),
        peers,
    )
    peers = {}
    if _have("netcal"):
        from netcal.metrics.regression import ENCE, UCE

        peers["netcal ENCE"] = lambda: ENCE(bins=10).measure((mean, std), y)
        out_uce = {"netcal UCE": lambda: UCE(bins=10).measure((mean, std), y)}
    else:
        out_uce = {}
    add("ence (10 bins)", lambda g, y: R.ence(g, y), (g, f32["y"]), peers)
    add("uce (10 bins)", lambda g, y: R.uce(g, y), (g, f32["y"]), out_uce)
    return out


def run(sizes: list[int], repeats: int, budget: float) -> Table:
    rows: list[dict[str, Any]] = []
    notes = [
        f"{name} is not installed: skipped."
        for name in ("uncertainty_toolbox", "properscoring", "scoringrules", "netcal")
        if not _have(name)
    ]
    for n in sizes:
        for case in cases(n):
            calls = {"jaxcal jit": lambda c=case: c["fn"](*c["args"])}
            calls.update(case["peers"])
            calls[FLOOR] = read_floor(*jax.tree.leaves(case["args"]))
            values: dict[str, Any] = {}
            timings = time_interleaved(calls, repeats, budget, outputs=values)
            group = f"{case['name']}, N = {n:.0e}"
            for name, t in timings.items():
                kind = "jaxcal" if name == "jaxcal jit" else "floor" if name == FLOOR else "peer"
                value = None if kind == "floor" else f"{float(np.asarray(values[name])):.6g}"
                rows.append(row(group, name, t.median, kind=kind, value=value))
                print(f"{group:50s} {name:28s} {fmt_ms(t.median):>9s} ms  {value or ''}")
    return Table(
        key="regression",
        title="Regression calibration measures and scores",
        command="python benchmarks/bench_regression.py",
        environment=environment(),
        clock="wall",
        reference="jaxcal jit",
        floor=FLOOR,
        rows=rows,
        notes=notes,
        group="measure, N",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1e4, few repeats")
    parser.add_argument("--n", type=int, nargs="*", help="sizes (default 1e4 1e5 1e6)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", help="write the table as JSON here")
    args = parser.parse_args()
    sizes = args.n or ([10_000] if args.quick else [10_000, 100_000, 1_000_000])
    repeats = 3 if args.quick else args.repeats
    table = run(sizes, repeats, budget=1.0 if args.quick else 10.0)
    write_tables(args.json, [table])


if __name__ == "__main__":
    main()
