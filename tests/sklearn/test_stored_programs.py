"""CalibratedClassifierCV in a second process loads its programs from the executable
store (jaxcal/sklearn/_methods.py: one stored program per fit and per predict)."""

import pytest

from tests.helpers import run_with_cache_folder

_SCRIPT = """
import json, sys, jax
count = [0]
jax.monitoring.register_event_duration_secs_listener(
    lambda e, d, **_: count.__setitem__(0, count[0] + (e == "/jax/core/compile/backend_compile_duration")))
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from jaxcal.sklearn import CalibratedClassifierCV
X, y = make_classification(n_samples=300, n_features=8, n_classes=3, n_informative=4,
                           random_state=int(sys.argv[1]))
means = []
for method in ("sigmoid", "temperature"):
    clf = CalibratedClassifierCV(LogisticRegression(max_iter=500), cv=3, method=method)
    means.append(float(clf.fit(X, y).predict_proba(X)[:, 0].mean()))
print(json.dumps({"compiles": count[0], "means": means}))
"""


def _run(seed: int, folder) -> dict:
    return run_with_cache_folder(_SCRIPT, seed, folder)


@pytest.mark.slow  # two fresh processes, one of which compiles
def test_a_second_process_fits_and_predicts_without_compiling(tmp_path):
    first = _run(0, tmp_path)
    assert first["compiles"] >= 2  # one-vs-rest sigmoid and multiclass temperature
    second = _run(1, tmp_path)  # other data of the same shapes: loaded from the store
    assert second["compiles"] == 0
    assert second["means"] != first["means"]
