"""Tables of ``train_calibration.py`` from its raw results: the selection rule, E1, E2,
accuracy, secondary metrics, the regime logs and every grid point (module docstring of
``train_calibration.py``).

  python benchmarks/_train_report.py [--results DIR] [--write FILE.md] [--guide GUIDE.md]

``--write`` stores every table (benchmarks/results/train_calibration.md); ``--guide``
refreshes the compact tables between ``<!-- train:tables -->`` markers of the guide.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy import stats as sps

RESULTS = Path(__file__).parent / "results" / "train_calibration"
CE, ES, TS_ONLY = "CE", "CE + early stopping", "CE + TS (temperature scaling alone)"
ALPHA, MARGIN = 0.05, -0.01


class Run(NamedTuple):
    meta: dict
    a: dict[str, np.ndarray]  # (G, S) or (G, S, T)


ORDER = ("mnist1d-long", "mnist1d", "wa_churn", "hpc_data", "diamonds", "mnist1d-1.5k",
         "digits", "breast cancer")  # fmt: skip


def load(results: Path) -> dict[str, dict[str, Run]]:
    """Raw results by data set (in ORDER) and arm; the regime label is the design's
    (``_train_data.SPECS``) where the data set is known."""
    try:
        from _train_data import SPECS
    except ImportError:  # imported from elsewhere than benchmarks/
        SPECS = {}
    out: dict[str, dict[str, Run]] = {}
    paths = sorted(results.glob("*/*.npz"))
    rank = {name: i for i, name in enumerate(ORDER)}
    paths.sort(key=lambda p: (rank.get(p.parent.name, len(ORDER)), p.parent.name))
    for path in paths:
        z = np.load(path)
        arrays = {k: z[k] for k in z.files if k != "meta"}
        meta = json.loads(str(z["meta"]))
        if path.parent.name in SPECS:
            meta["regime"] = SPECS[path.parent.name].regime
        out.setdefault(path.parent.name, {})[path.stem] = Run(meta, arrays)
    return out


def select(runs: dict[str, Run], arm: str, ts: bool) -> tuple[int, bool]:
    """The grid point chosen on validation, and whether it met the accuracy constraint."""
    run, ce = runs[arm], runs[CE]
    acc = run.a["val accuracy"].mean(axis=1)
    ece = run.a["val+TS ECE" if ts else "val ECE"].mean(axis=1)
    ok = acc >= ce.a["val accuracy"].mean() - 0.01
    if ok.any():
        return int(np.argmin(np.where(ok, ece, np.inf))), True
    return int(np.argmax(acc)), False


class Comparison(NamedTuple):
    data: str
    arm: str
    diff: np.ndarray  # per seed
    p: float
    low: float
    high: float


def paired(data: str, arm: str, diff: np.ndarray) -> Comparison:
    n = diff.size
    mean, se = diff.mean(), diff.std(ddof=1) / np.sqrt(n)
    if se == 0:
        p = 1.0 if mean == 0 else 0.0
        return Comparison(data, arm, diff, p, mean, mean)
    t = mean / se
    p = float(2 * sps.t.sf(abs(t), n - 1))
    q = sps.t.ppf(1 - ALPHA / 2, n - 1)
    return Comparison(data, arm, diff, p, mean - q * se, mean + q * se)


def holm(ps: list[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values, through jaxcal's ``holm_log`` (float64 logs)."""
    import jax
    import jax.numpy as jnp

    from jaxcal.stats._paths.multicalibration import holm_log

    # Local to the call: a global config update here leaked float64 into every test that
    # ran after this one in the same pytest worker (CI's doctests then printed float64).
    with jax.enable_x64(True):
        log_p = jnp.log(jnp.maximum(jnp.asarray(ps, jnp.float64), 1e-300))
        return np.exp(np.asarray(holm_log(log_p)))


def bonferroni_interval(c: Comparison, m: int) -> tuple[float, float]:
    n = c.diff.size
    se = c.diff.std(ddof=1) / np.sqrt(n)
    q = sps.t.ppf(1 - ALPHA / (2 * m), n - 1)
    return c.diff.mean() - q * se, c.diff.mean() + q * se


def arms_of(runs: dict[str, Run]) -> list[str]:
    order = [CE, ES, "soft_ece (batch)", "soft_ece (held-out)", "mmce (batch)", "mmce (held-out)",
             "dca (batch)", "dca (held-out)", "meta-calibration", "focal FLSD-53",
             "label smoothing 0.1"]  # fmt: skip
    return [a for a in order if a in runs]


def comparisons(all_runs, endpoint: str) -> list[Comparison]:
    """E1 (raw vs CE), E2 (+TS vs CE+TS) or accuracy, for every data set and arm."""
    out = []
    for data, runs in all_runs.items():
        if CE not in runs:
            continue
        ts = endpoint == "E2"
        key = "test+TS ECE" if ts else "test accuracy" if endpoint == "accuracy" else "test ECE"
        base = runs[CE].a[key][0]
        for arm in arms_of(runs):
            if arm == CE:
                continue
            g, _ = select(runs, arm, ts)
            out.append(paired(data, arm, runs[arm].a[key][g] - base))
        if endpoint == "E1":
            out.append(paired(data, TS_ONLY, runs[CE].a["test+TS ECE"][0] - base))
    return out


def _fmt(x: float, d: int = 4) -> str:
    return f"{x:+.{d}f}" if x else f"{0:.{d}f}"


def endpoint_table(all_runs, endpoint: str) -> tuple[str, list[Comparison], np.ndarray]:
    comps = comparisons(all_runs, endpoint)
    if not comps:
        return "", [], np.zeros(0)
    adj = holm([c.p for c in comps])
    m = len(comps)
    datas = list(dict.fromkeys(c.data for c in comps))
    arms = list(dict.fromkeys(c.arm for c in comps))
    lines = ["| arm | " + " | ".join(datas) + " |", "|---|" + "---:|" * len(datas)]
    cell = {}
    for c, p in zip(comps, adj, strict=True):
        lo, hi = bonferroni_interval(c, m)
        if endpoint == "accuracy":
            mark = "" if c.low >= MARGIN else " ✗"
            cell[c.data, c.arm] = (
                f"{_fmt(100 * c.diff.mean(), 2)} [{_fmt(100 * c.low, 2)}, {_fmt(100 * c.high, 2)}]{mark}"
            )
        else:
            star = "**" if p < ALPHA and c.diff.mean() < 0 else ""
            cell[c.data, c.arm] = (
                f"{star}{_fmt(c.diff.mean())}{star} [{_fmt(c.low)}, {_fmt(c.high)}] "
                f"p_Holm {p:.2g}; Bonf. [{_fmt(lo)}, {_fmt(hi)}]"
            )
    for arm in arms:
        lines.append(f"| {arm} | " + " | ".join(cell.get((d, arm), "") for d in datas) + " |")
    return "\n".join(lines), comps, adj


def compact_table(all_runs, endpoint: str) -> str:
    """The guide's form: ``mean [95 % interval]``, ``↓``/``↑`` where the Holm-adjusted p < 0.05
    (accuracy: points, ``✗`` where the interval reaches below the −1 point margin)."""
    comps = comparisons(all_runs, endpoint)
    if not comps:
        return ""
    adj = holm([c.p for c in comps])
    datas = list(dict.fromkeys(c.data for c in comps))
    arms = list(dict.fromkeys(c.arm for c in comps))
    cell = {}
    for c, p in zip(comps, adj, strict=True):
        if endpoint == "accuracy":
            mark = " ✗" if c.low < MARGIN else ""
            cell[c.data, c.arm] = (
                f"{100 * c.diff.mean():+.1f} [{100 * c.low:+.1f}, {100 * c.high:+.1f}]{mark}"
            )
        else:
            mark = (" ↓" if c.diff.mean() < 0 else " ↑") if p < ALPHA else ""
            cell[c.data, c.arm] = f"{c.diff.mean():+.4f} [{c.low:+.4f}, {c.high:+.4f}]{mark}"
    lines = ["| arm | " + " | ".join(datas) + " |", "|---|" + "---:|" * len(datas)]
    for arm in arms:
        lines.append(f"| {arm} | " + " | ".join(cell.get((d, arm), "") for d in datas) + " |")
    return "\n".join(lines)


def compact_regime_table(all_runs) -> str:
    """Per data set: CE's training and test accuracy and ECE at the end, and how often the
    regulariser's batch was all correct (in-batch and held-out MMCE, chosen points)."""
    lines = ["| data set | CE train acc. | CE test acc. | CE train ECE | CE test ECE | all-correct batches: CE | mmce (batch) | mmce (held-out) | MMCE value: batch / held-out |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for data, runs in all_runs.items():
        if CE not in runs:
            continue
        r = runs[CE]
        cells = [f"{r.a['log train_accuracy'][0, :, -1].mean():.3f}", f"{r.a['test accuracy'][0].mean():.3f}",
                 f"{r.a['log train_ECE'][0, :, -1].mean():.3f}", f"{r.a['test ECE'][0].mean():.3f}",
                 f"{r.a['sat all_correct'][0].mean():.2f}"]  # fmt: skip
        values = []
        for arm in ("mmce (batch)", "mmce (held-out)"):
            if arm in runs:
                g = select(runs, arm, False)[0]
                cells.append(f"{runs[arm].a['sat all_correct'][g].mean():.2f}")
                values.append(f"{runs[arm].a['sat regularizer'][g].mean():.3f}")
            else:
                cells.append("")
        lines.append(f"| {data} | " + " | ".join(cells) + f" | {' / '.join(values)} |")
    return "\n".join(lines)


def timing(all_runs) -> str:
    rows = []
    for data, runs in all_runs.items():
        wall = sum(r.meta["seconds"] for a, r in runs.items() if a != ES)
        cpu = sum(r.meta["cpu_seconds"] for a, r in runs.items() if a != ES)
        steps = runs[CE].meta["steps"]
        rows.append(f"{data} {wall / 60:.0f} min wall / {cpu / 60:.0f} min CPU ({steps:,} steps)")
    return "; ".join(rows)


def guide(results: Path) -> str:
    """The guide's block: baseline, E1, E2, accuracy, regime (compact forms)."""
    all_runs = load(results)
    return "\n\n".join(
        ["Data sets and the cross-entropy baseline (test split, mean ± std over seeds):",
         baseline_table(all_runs),
         "**E1**, paired Δ test ECE of each arm against cross-entropy (each arm at the grid "
         "point the rule chose on validation, per data set): mean [95 % t-interval over "
         "seeds]; ↓ / ↑: significant after Holm's correction over all arms × data sets.",
         compact_table(all_runs, "E1"),
         "**E2**, paired Δ test ECE of arm + temperature scaling against cross-entropy + "
         "temperature scaling (temperature fitted on the validation split):",
         compact_table(all_runs, "E2"),
         "**Accuracy**, paired Δ test accuracy in points [95 %]; ✗: not non-inferior at the "
         "−1 point margin (the interval reaches below −1):",
         compact_table(all_runs, "accuracy"),
         "**Regime logs**: the cross-entropy network's training and test accuracy and ECE at "
         "the end; the share of all-correct batches among the training batches of "
         "cross-entropy and among the batches `mmce_loss` saw (in-batch and held-out, chosen "
         "grid points), and the mean MMCE_w on them:",
         compact_regime_table(all_runs),
         f"Training time (all arms, grid points and seeds of a data set): {timing(all_runs)}."]
    )  # fmt: skip


def replace_block(path: Path, text: str) -> None:
    """Put ``text`` between ``<!-- train:tables -->`` and ``<!-- /train:tables -->``."""
    doc = path.read_text()
    start, end = "<!-- train:tables -->\n", "<!-- /train:tables -->"
    a, b = doc.index(start) + len(start), doc.index(end)
    path.write_text(doc[:a] + text + "\n" + doc[b:])


def baseline_table(all_runs) -> str:
    lines = ["| data set | regime (design) | seeds | train / cal / val / test | CE test accuracy | CE test ECE | CE+TS test ECE | CE train accuracy (end) | CE train ECE (end) |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for data, runs in all_runs.items():
        if CE not in runs:
            continue
        r = runs[CE]
        s = r.meta["sizes"]
        lines.append(
            f"| {data} | {r.meta['regime']} | {r.meta['seeds']} | {s['tr_y']} / {s['cal_y']} / "
            f"{s['val_y']} / {s['test_y']} | {r.a['test accuracy'][0].mean():.4f} | "
            f"{r.a['test ECE'][0].mean():.4f} ± {r.a['test ECE'][0].std():.4f} | "
            f"{r.a['test+TS ECE'][0].mean():.4f} ± {r.a['test+TS ECE'][0].std():.4f} | "
            f"{r.a['log train_accuracy'][0, :, -1].mean():.4f} | {r.a['log train_ECE'][0, :, -1].mean():.4f} |"
        )
    return "\n".join(lines)


def _hp(grid: dict) -> str:
    names = {"lam": "λ", "T": "T", "h": "bandwidth", "hlr": "hyper lr"}
    return ", ".join(f"{names.get(k, k)} {v:g}" for k, v in grid.items()) or "-"


def regime_table(all_runs) -> str:
    lines = ["| data set | arm | chosen (E1) | chosen (E2) | train acc. start → end | train ECE start → end | regulariser batch: acc. / conf. / all-correct share / R | learned label smoothing |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for data, runs in all_runs.items():
        for arm in arms_of(runs):
            r = runs[arm]
            g, ok = select(runs, arm, False) if arm != CE else (0, True)
            g2, ok2 = select(runs, arm, True) if arm != CE else (0, True)
            ta, te = r.a["log train_accuracy"][g].mean(0), r.a["log train_ECE"][g].mean(0)
            sat = " / ".join(
                f"{r.a[f'sat {k}'][g].mean():.3f}"
                for k in ("accuracy", "confidence", "all_correct", "regularizer")
            )
            ls = r.a["log label_smoothing"][g].mean(0)[-1] if r.meta["kind"] == "meta" else None
            lines.append(
                f"| {data} | {arm} | {_hp(r.meta['grid'][g])}{'' if ok else ' (none within 1 pt)'} | "
                f"{_hp(r.meta['grid'][g2])}{'' if ok2 else ' (none within 1 pt)'} | "
                f"{ta[0]:.3f} → {ta[-1]:.3f} | {te[0]:.3f} → {te[-1]:.3f} | {sat} | "
                f"{'' if ls is None else f'{ls:.3f}'} |"
            )
    return "\n".join(lines)


def secondary_table(all_runs) -> str:
    keys = ("accuracy", "confidence", "NLL", "Brier", "ECE", "smooth ECE")
    lines = ["| data set | arm | " + " | ".join(keys) + " | +TS: NLL | +TS: ECE | +TS: smooth ECE | train s (wall / CPU, all grid points) |",
             "|---|---|" + "---:|" * (len(keys) + 4)]  # fmt: skip
    for data, runs in all_runs.items():
        for arm in arms_of(runs):
            r = runs[arm]
            g = select(runs, arm, False)[0] if arm != CE else 0
            g2 = select(runs, arm, True)[0] if arm != CE else 0
            cells = [f"{r.a[f'test {k}'][g].mean():.4f}" for k in keys]
            cells += [f"{r.a[f'test+TS {k}'][g2].mean():.4f}" for k in ("NLL", "ECE", "smooth ECE")]
            t = "" if arm == ES else f"{r.meta['seconds']:.0f} / {r.meta['cpu_seconds']:.0f}"
            lines.append(f"| {data} | {arm} | " + " | ".join(cells) + f" | {t} |")
    return "\n".join(lines)


def grid_table(all_runs) -> str:
    lines = ["| data set | arm | grid point | val acc. | val ECE | val+TS ECE | test acc. | test ECE | test+TS ECE | Δ test ECE vs CE | all-correct share |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for data, runs in all_runs.items():
        base = runs[CE].a["test ECE"][0]
        for arm in arms_of(runs):
            r = runs[arm]
            for g, grid in enumerate(r.meta["grid"]):
                m = lambda k, g=g, r=r: r.a[k][g].mean()  # noqa: E731
                d = r.a["test ECE"][g] - base
                lines.append(
                    f"| {data} | {arm} | {_hp(grid)} | {m('val accuracy'):.4f} | {m('val ECE'):.4f} | "
                    f"{m('val+TS ECE'):.4f} | {m('test accuracy'):.4f} | {m('test ECE'):.4f} | "
                    f"{m('test+TS ECE'):.4f} | {_fmt(d.mean())} ± {d.std(ddof=1):.4f} | {m('sat all_correct'):.3f} |"
                )
    return "\n".join(lines)


REGULARISERS = ("soft_ece (batch)", "soft_ece (held-out)", "mmce (batch)", "mmce (held-out)",
                "dca (batch)", "dca (held-out)", "meta-calibration")  # fmt: skip


def default_point(all_runs, arm: str) -> int | None:
    """The rule written before the run: the grid point chosen (E1 rule) on the most
    non-memorising data sets; ties: lowest mean validation ECE relative to CE's."""
    picks, rel = Counter(), {}
    for runs in all_runs.values():
        if arm in runs and runs[arm].meta["regime"] == "non-memorising":
            picks[select(runs, arm, False)[0]] += 1
            ratio = runs[arm].a["val ECE"].mean(axis=1) / runs[CE].a["val ECE"].mean()
            for g, v in enumerate(ratio):
                rel.setdefault(g, []).append(v)
    if not picks:
        return None
    top = max(picks.values())
    return min((g for g, c in picks.items() if c == top), key=lambda g: np.mean(rel[g]))


def default_table(all_runs) -> str:
    """E1, E2 and Δ accuracy of each regulariser at its default point on every data set;
    Holm over this table's arms × data sets, per endpoint."""
    rows, comps = [], {"E1": [], "E2": [], "acc": []}
    for arm in REGULARISERS:
        g = default_point(all_runs, arm)
        if g is None:
            continue
        for data, runs in all_runs.items():
            if arm not in runs:
                continue
            a, ce = runs[arm].a, runs[CE].a
            rows.append((arm, _hp(runs[arm].meta["grid"][g]), data))
            comps["E1"].append(paired(data, arm, a["test ECE"][g] - ce["test ECE"][0]))
            comps["E2"].append(paired(data, arm, a["test+TS ECE"][g] - ce["test+TS ECE"][0]))
            comps["acc"].append(paired(data, arm, a["test accuracy"][g] - ce["test accuracy"][0]))
    if not rows:
        return ""
    adj = {k: holm([c.p for c in v]) for k, v in comps.items() if k != "acc"}
    lines = ["| arm | default | data set | E1: Δ ECE [95 %] | E2: Δ ECE after TS [95 %] | Δ accuracy, points [95 %] |",
             "|---|---|---|---:|---:|---:|"]  # fmt: skip

    def cell(c, p):
        mark = (" ↓" if c.diff.mean() < 0 else " ↑") if p < ALPHA else ""
        return f"{c.diff.mean():+.4f} [{c.low:+.4f}, {c.high:+.4f}]{mark}"

    for i, (arm, hp, data) in enumerate(rows):
        acc = comps["acc"][i]
        mark = " ✗" if acc.low < MARGIN else ""
        lines.append(
            f"| {arm} | {hp} | {data} | {cell(comps['E1'][i], adj['E1'][i])} | "
            f"{cell(comps['E2'][i], adj['E2'][i])} | "
            f"{100 * acc.diff.mean():+.1f} [{100 * acc.low:+.1f}, {100 * acc.high:+.1f}]{mark} |"
        )
    return "\n".join(lines)


def defaults(all_runs) -> str:
    """The grid point each loss's rule picks most often on the non-memorising data sets."""
    lines = []
    for arm in ("soft_ece (batch)", "soft_ece (held-out)", "mmce (batch)", "mmce (held-out)",
                "dca (batch)", "dca (held-out)", "meta-calibration"):  # fmt: skip
        picks = Counter()
        for runs in all_runs.values():
            if arm in runs and runs[arm].meta["regime"] == "non-memorising":
                picks[_hp(runs[arm].meta["grid"][select(runs, arm, False)[0]])] += 1
        if picks:
            lines.append(f"- {arm}: " + ", ".join(f"{k} ({v}×)" for k, v in picks.most_common()))
    return "\n".join(lines)


def report(results: Path) -> str:
    all_runs = load(results)
    parts = [
        "## Data sets and the CE baseline (test split, mean ± std over seeds)",
        baseline_table(all_runs),
    ]
    for endpoint, title in (
        ("E1", "E1: paired Δ test ECE, arm − CE (mean [95 % t-interval over seeds], Holm-adjusted p over all arms × data sets, Bonferroni interval); bold: Holm-significant decrease"),
        ("E2", "E2: paired Δ test ECE, (arm + TS) − (CE + TS), the same statistics"),
        ("accuracy", "Accuracy: paired Δ test accuracy, arm − CE, in points [95 % t-interval]; ✗: the interval's lower end is below the −1 point margin"),
    ):  # fmt: skip
        table, _, _ = endpoint_table(all_runs, endpoint)
        parts += [f"## {title}", table]
    parts += ["## Regime logs (chosen grid point; means over seeds)", regime_table(all_runs)]
    parts += [
        "## Secondary metrics (test split, chosen grid points, means over seeds)",
        secondary_table(all_runs),
    ]
    parts += ["## Defaults the rule selects (non-memorising data sets)", defaults(all_runs)]
    parts += [
        "## Each regulariser at its default, on every data set (Holm over this table)",
        default_table(all_runs),
    ]
    parts += ["## Every grid point (means over seeds)", grid_table(all_runs)]
    return "\n\n".join(parts) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--guide", type=Path, default=None, help="refresh a guide's block")
    args = parser.parse_args(argv)
    text = report(args.results)
    if args.write:
        args.write.write_text(text)
    if args.guide:
        replace_block(args.guide, guide(args.results))
    print(text)


if __name__ == "__main__":
    main()
