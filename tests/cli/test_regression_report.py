"""``jaxcal report`` on regression predictions (jaxcal/cli/_regression_report.py and
jaxcal/cli/_regression_input.py): each form from .npz, .csv and Parquet, the numbers
against ``jaxcal.regression`` called directly, the verdict, bad files, the JSON schema,
and a second process that compiles no kernel.

Every test shares N = ``N`` rows and ``RESAMPLES`` resamples, so each form's kernel
compiles once (three kernels in all).
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from jaxcal import regression as reg
from jaxcal import stats
from jaxcal._core import cache_dir as _cache
from jaxcal.cli import main
from jaxcal.cli._io import InputError
from jaxcal.cli._regression_input import task_of
from jaxcal.cli._regression_report import replicate_fn
from tests.helpers import assert_close

N = 200
RESAMPLES = 30
LEVELS = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
# No sample PIT u = (2k + 1) / 56 (S = 27) lies exactly on a level of the report's curves,
# where float rounding (eager, or inside the report's kernel with other compiler options)
# decides the tie: |u - 1/2| = m / 56 (m odd) is none of the thresholds l / 198 of the
# 100-level grid (99 m = 28 l has no odd m), nor 0.1, 0.25, 0.4, 0.45, 0.475; u is none of
# 0.05, 0.25, 0.5, 0.75, 0.95.
S = 27


def _data(seed=0):
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=N)
    y = mean + rng.normal(size=N)
    return rng, mean, y


def _gaussian_arrays(scale=1.0, shift=0.0):
    _, mean, y = _data()
    return {"y": y, "mean": mean + shift, "std": np.full(N, scale)}


def _quantile_arrays():
    _, mean, y = _data()
    return {"y": y, "quantiles": mean[:, None] + norm.ppf(LEVELS)[None, :], "levels": LEVELS}


def _sample_arrays():
    rng, mean, y = _data()
    return {"y": y, "samples": mean[:, None] + rng.normal(size=(N, S))}


def _columns(arrays) -> dict[str, np.ndarray]:
    """The table columns of a form's arrays (the documented names)."""
    cols = {"y": arrays["y"]}
    if "mean" in arrays:
        cols.update(mean=arrays["mean"], std=arrays["std"])
    elif "quantiles" in arrays:
        cols.update({f"q_{lv:g}": arrays["quantiles"][:, j] for j, lv in enumerate(LEVELS)})
    else:
        cols.update({f"sample_{j}": arrays["samples"][:, j] for j in range(S)})
    return cols


def _write(path: Path, arrays) -> Path:
    if path.suffix == ".npz":
        np.savez(path, **arrays)
    elif path.suffix == ".csv":
        cols = _columns(arrays) if {"quantiles", "samples"} & set(arrays) else arrays
        names = list(cols)
        rows = np.stack([np.asarray(cols[c], np.float64) for c in names], axis=1)
        lines = [",".join(names)] + [",".join(repr(float(v)) for v in row) for row in rows]
        path.write_text("\n".join(lines) + "\n")
    else:
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.table(_columns(arrays)), path)
    return path


def _report(capsys, *paths, extra=()) -> dict:
    argv = ["report", *map(str, paths), "--json", "-", "--quiet"]
    assert main([*argv, "--resamples", str(RESAMPLES), *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _pred(arrays):
    f32 = {k: np.asarray(v, np.float32) for k, v in arrays.items()}
    if "mean" in f32:
        return reg.Gaussian(f32["mean"], f32["std"]), f32["y"]
    if "quantiles" in f32:
        return reg.Quantiles(f32["quantiles"], f32["levels"]), f32["y"]
    return reg.Samples(f32["samples"]), f32["y"]


def _direct(arrays) -> dict[str, float]:
    """The report's numbers from jaxcal.regression and jaxcal.stats, called directly."""
    pred, y = _pred(arrays)
    out = {
        "miscalibration_area": reg.miscalibration_area(pred, y),
        "mace": reg.mean_absolute_calibration_error(pred, y),
        "rmsce": reg.root_mean_squared_calibration_error(pred, y),
        "coverage_90": reg.calibration_curve(pred, y, levels=(0.9,)).observed[0],
    }
    if isinstance(pred, reg.Gaussian):
        out["crps"] = reg.crps_gaussian(pred.mean, pred.std, y)
        out["log_score"] = reg.log_score_gaussian(pred.mean, pred.std, y)
        out["ence"] = reg.ence(pred, y, n_bins=15)
        out["uce"] = reg.uce(pred, y, n_bins=15)
    elif isinstance(pred, reg.Quantiles):
        out["crps"] = reg.crps_quantile(pred.values, pred.levels, y)
        out["pinball"] = reg.pinball_loss(pred.values, pred.levels, y)
    else:
        out["crps"] = reg.crps_ensemble(pred.values, y)
    return {k: float(v) for k, v in out.items()}


FORMS = {"gaussian": _gaussian_arrays, "quantiles": _quantile_arrays, "samples": _sample_arrays}


@pytest.mark.parametrize("form", list(FORMS))
def test_each_form_from_npz_csv_and_parquet_equals_the_library(tmp_path, capsys, form):
    arrays = FORMS[form]()
    paths = [_write(tmp_path / f"{form}.npz", arrays), _write(tmp_path / f"{form}.csv", arrays)]
    try:
        import pyarrow  # noqa: F401

        paths.append(_write(tmp_path / f"{form}.parquet", arrays))
    except ImportError:
        pass
    doc = _report(capsys, *paths)
    direct = _direct(arrays)
    pred, y = _pred(arrays)
    pit = stats.pit_test(reg.pit(pred, y))
    first = doc["models"][0]
    for entry in doc["models"]:
        assert entry["form"] == form and entry["n"] == N
        assert set(entry["metrics"]) == set(direct)
        for key, value in direct.items():
            m = entry["metrics"][key]
            assert_close(m["value"], value, rtol=1e-5, atol=1e-6, err_msg=key)
            assert m["low"] <= m["high"]
        # The files hold the same numbers: the same resamples give the same intervals.
        assert entry["metrics"] == first["metrics"] and entry["tests"] == first["tests"]
        assert_close(entry["tests"]["pit_kuiper"]["p_value"], float(pit.kuiper.p_value), rtol=1e-5)
        assert_close(entry["tests"]["pit_ks"]["statistic"], float(pit.ks.statistic), rtol=1e-5)
        curve = reg.calibration_curve(pred, y, levels=(0.2, 0.5, 0.8, 0.9, 0.95))
        observed = [c["observed"] for c in entry["curve"]["interval"]]
        assert_close(np.array(observed), np.asarray(curve.observed), rtol=1e-6)
    if form == "quantiles":
        assert first["corp"] is None
    else:
        mean = pred.mean if form == "gaussian" else pred.values.mean(axis=1)
        dec = reg.mean_score_decomposition(mean, y)
        for field in dec._fields:
            assert_close(first["corp"][field], float(getattr(dec, field)), rtol=1e-5, atol=1e-6)
    # The printed table names the form and its rows.
    assert main(["report", str(paths[0]), "--resamples", str(RESAMPLES), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "jaxcal report (regression predictions)" in out and "CRPS" in out
    assert "Kuiper" in out and "central 90% interval" in out


@pytest.mark.parametrize("form", list(FORMS))
def test_a_bootstrap_replicate_equals_the_library_on_the_resampled_rows(form):
    """The kernel's replicates come from per-row terms and resample counts (no sort per
    resample): each equals jaxcal.regression called on the resampled rows."""
    arrays = FORMS[form]()
    idx = np.random.default_rng(1).integers(0, N, N)
    resampled = {k: v if k == "levels" else v[idx] for k, v in arrays.items()}
    pred, y = _pred(arrays)
    one = replicate_fn(form, tuple(pred), y, 15)
    got = {k: float(v) for k, v in jax.jit(one)(jnp.asarray(idx, jnp.int32)).items()}
    want = _direct(resampled)
    assert set(got) == set(want)
    for key, value in want.items():
        assert_close(got[key], value, rtol=2e-5, atol=2e-6, err_msg=key)


def test_the_verdict_reads_calibrated_over_under_dispersed_and_biased(tmp_path, capsys):
    cases = {
        "calibrated": _gaussian_arrays(),
        "wide": _gaussian_arrays(scale=2.0),
        "narrow": _gaussian_arrays(scale=0.5),
        "high": _gaussian_arrays(shift=1.0),
    }
    paths = [_write(tmp_path / f"{name}.npz", a) for name, a in cases.items()]
    doc = _report(capsys, *paths)
    v = {m["name"]: m["verdict"] for m in doc["models"]}
    assert not v["calibrated"]["miscalibrated"]
    assert v["calibrated"]["reads"] == "no evidence of miscalibration"
    assert v["wide"]["miscalibrated"] and v["wide"]["dispersion"] == "over-dispersed"
    assert v["narrow"]["miscalibrated"] and v["narrow"]["dispersion"] == "under-dispersed"
    assert v["high"]["miscalibrated"] and v["high"]["location"] == "forecasts too high"
    assert v["wide"]["location"] is None and v["narrow"]["location"] is None
    for name in ("wide", "narrow"):
        assert v[name]["text"].startswith(f"{name}: {v[name]['dispersion']}: PIT Kuiper test p")
        assert "std_scaling" in v[name]["advice"]
    # The evidence: over-dispersed intervals cover more than 90%, under-dispersed less.
    assert v["wide"]["coverage_90"]["value"] > 0.97 > 0.75 > v["narrow"]["coverage_90"]["value"]


def test_json_schema(tmp_path, capsys):
    doc = _report(capsys, _write(tmp_path / "g.npz", _gaussian_arrays()))
    assert doc["schema"] == "jaxcal.regression_report/1"
    assert doc["settings"] == {
        "task": "regression",
        "n_bins": 15,
        "n_levels": 100,
        "resamples": RESAMPLES,
        "confidence": 0.95,
        "seed": 0,
        "interval": "percentile bootstrap",
    }
    (m,) = doc["models"]
    assert set(m) == {
        *("name", "source", "n", "form", "crps_variant", "metrics", "tests", "curve"),
        *("pit", "corp", "verdict"),
    }
    assert set(m["tests"]) == {"pit_ks", "pit_kuiper"}
    for t in m["tests"].values():
        assert set(t) == {"statistic", "p_value", "log10_p_value"}
    for v in m["metrics"].values():
        assert set(v) == {"value", "low", "high"}
    assert [c["expected"] for c in m["curve"]["quantile"]] == [0.05, 0.25, 0.5, 0.75, 0.95]
    assert set(m["pit"]) == {"mean", "mean_se", "variance", "variance_expected", "variance_se"}
    assert set(m["corp"]) == {
        "score",
        "miscalibration",
        "discrimination",
        "uncertainty",
        "forecast",
    }
    assert set(m["verdict"]) == {
        *("reads", "miscalibrated", "alpha", "dispersion", "location"),
        *("pit_kuiper_p_value", "pit_ks_p_value", "coverage_90", "advice", "text"),
    }


def _bad(tmp_path, name, arrays):
    return _write(tmp_path / name, arrays)


BAD = {
    "missing y": ("a.npz", {"mean": np.zeros(N), "std": np.ones(N)}, "no targets"),
    "std <= 0": (
        "b.npz",
        {"y": np.zeros(N), "mean": np.zeros(N), "std": np.r_[np.ones(N - 1), 0.0]},
        f"`std` must be > 0 (a standard deviation); got 0.0 in row {N}",
    ),
    "levels not increasing": (
        "c.npz",
        {"y": np.zeros(N), "quantiles": np.zeros((N, 2)), "levels": np.array([0.9, 0.1])},
        "strictly increasing",
    ),
    "levels not increasing (csv)": (
        "c.csv",
        {"y": np.zeros(3), "q_0.9": np.zeros(3), "q_0.1": np.zeros(3)},
        "strictly increasing (in the file's order); got ['q_0.9', 'q_0.1']",
    ),
    "levels outside (0, 1)": (
        "d.csv",
        {"y": np.zeros(3), "q_0.1": np.zeros(3), "q_1.5": np.zeros(3)},
        "levels must lie in (0, 1)",
    ),
    "mixed forms": (
        "e.npz",
        {"y": np.zeros(N), "mean": np.zeros(N), "std": np.ones(N), "samples": np.zeros((N, 2))},
        "mixed forms (found Gaussian: mean, std; samples: samples)",
    ),
    "mixed forms (csv)": (
        "e.csv",
        {"y": np.zeros(3), "mean": np.zeros(3), "std": np.ones(3), "q_0.5": np.zeros(3)},
        "mixed forms (found Gaussian: mean, std; quantiles: q_0.5)",
    ),
    "incomplete": ("f.npz", {"y": np.zeros(N), "mean": np.zeros(N)}, "missing std"),
    "incomplete quantiles": (
        "g.npz",
        {"y": np.zeros(N), "quantiles": np.zeros((N, 2))},
        "incomplete quantiles predictions: missing levels",
    ),
    "shape": ("h.npz", {"y": np.zeros(N), "samples": np.zeros(N)}, "`samples` must have shape"),
    "non-finite": (
        "i.csv",
        {"y": np.zeros(3), "mean": [0.0, np.nan, 0.0], "std": np.ones(3)},
        "column 'mean' must be finite; got nan in data row 2",
    ),
    "classifier columns named mean": (
        "j.csv",
        {"y": np.zeros(3), "p_0": np.zeros(3), "mean": np.ones(3)},
        "missing std (found Gaussian: mean); expected one form",
    ),
    "regression and classifier": (
        "k.npz",
        {"labels": np.zeros(N, int), "probs": np.full(N, 0.5), "mean": np.zeros(N)},
        "holds both regression predictions (mean) and a classifier's (probs)",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_files_give_one_line_and_exit_code_2(tmp_path, capsys, case):
    name, arrays, message = BAD[case]
    path = _bad(tmp_path, name, arrays)
    assert main(["report", str(path), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err
    assert err.startswith("jaxcal: error: ") and err.count("\n") == 1, err
    assert message in err, err


def test_task_option_and_classifier_only_options(tmp_path, capsys):
    # The task from the names, or --task (the classifier's report is tested elsewhere).
    cols = {"y": np.zeros(3, int), "p_1": np.full(3, 0.5), "mean": np.full(3, 0.5)}
    path = _write(tmp_path / "c.csv", cols)
    auto = argparse.Namespace(task=None, probs=None, logits=None)
    assert task_of(path, auto) == "regression"
    assert task_of(path, argparse.Namespace(task="classification")) == "classification"
    with pytest.raises(InputError, match=r"holds both regression predictions \(mean\)"):
        task_of(path, argparse.Namespace(task=None, probs="p_*", logits=None))
    gauss = _write(tmp_path / "g.npz", _gaussian_arrays())
    for flags, text in ((["--fit"], "--fit"), (["--by", "y"], "--by")):
        assert main(["report", str(gauss), *flags, "--quiet"]) == 2
        assert f"{text} is not available for regression predictions" in capsys.readouterr().err
    # A classifier's file under --task regression: the regression reader's error.
    clf = _write(tmp_path / "c.npz", {"probs": np.full(4, 0.5), "labels": np.zeros(4, int)})
    assert main(["report", str(clf), "--task", "regression", "--quiet"]) == 2
    assert "no regression predictions (found none)" in capsys.readouterr().err


_COUNT = """
import sys, jax
names = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: names.append(kw.get("fun_name"))
    if event == "/jax/core/compile/backend_compile_duration" else None
)
from jaxcal.cli import main
from jaxcal.cli._io import InputError
from jaxcal.cli._regression_input import task_of
from jaxcal.cli._regression_report import replicate_fn
code = main(sys.argv[1:])
print("COMPILED", names, file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.slow  # two fresh processes: ~25 s
def test_a_second_process_compiles_no_kernel(tmp_path):
    if _cache.cache_disabled() or not _cache.store_enabled():
        pytest.skip("the executable store is off")
    path = _write(tmp_path / "g.npz", _gaussian_arrays())
    env = dict(os.environ, JAXCAL_CACHE_DIR=str(tmp_path / "cache"))
    root = str(Path(__file__).parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    argv = [sys.executable, "-c", _COUNT, "report", str(path), "--quiet", "--resamples", "30"]
    runs = [subprocess.run(argv, capture_output=True, text=True, env=env) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first, second = (eval(r.stderr.rsplit("COMPILED", 1)[1]) for r in runs)
    assert "jit(_regression_kernel)" in first
    # The second run loads the kernel from the store: only the PRNG key's two tiny
    # programs compile (jax.random.key(seed)), as in the classifier report's second run.
    assert set(second) <= {"jit(stage)", "jit(_threefry_seed)"}, second
    assert runs[0].stdout == runs[1].stdout
    assert any((tmp_path / "cache" / "kernels").glob("report_regression-*.bin"))
