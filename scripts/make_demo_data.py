"""Regenerate the demo data shipped in ``jaxcal/data/`` (run from the repository root).

Real predictions of real models on real data: scikit-learn's handwritten-digits set
(UCI ML optical recognition of handwritten digits, 1,797 8x8 images, 10 classes), split in
half with a fixed seed; two models fitted on the first half predict the second half:

* ``digits_gaussian_nb.npz``: ``GaussianNB()``, a famously over-confident model (many
  probabilities of exactly 0 and 1).
* ``digits_mlp.npz``: ``MLPClassifier(hidden_layer_sizes=(32,), max_iter=1000)``, fairly
  well calibrated.

Each file holds ``probs`` (float32, N x 10, rows on the simplex), ``logits`` (float32,
``log(max(probs, tiny))``, tiny = 1.2e-38 the smallest normal float32: the log of the
probabilities shipped, so that their softmax gives ``probs`` back) and ``labels`` (int32,
N). Usage: ``python scripts/make_demo_data.py``.

The logits used to be GaussianNB's own ``predict_log_proba``, floored at -1e4: values
down to -1e4 where the float32 probabilities are 0. Temperature scaling then fitted
T = 563 (the optimum of the log loss, as scipy finds it: the few confident mistakes at
-3000 dominate it), and the demo's showcase row read ECE 0.16 -> 0.62 and Brier
0.32 -> 0.76, a correct fit that looks like a bug (finding E9). With the log of the
shipped probabilities (at least -87.3) it fits T ~ 14 and improves both.
"""

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.neural_network import MLPClassifier

OUT = Path(__file__).resolve().parents[1] / "jaxcal" / "data"


def main() -> None:
    x, y = load_digits(return_X_y=True)
    x_fit, x_test, y_fit, y_test = train_test_split(x, y, test_size=0.5, random_state=0, stratify=y)
    models = {
        "digits_gaussian_nb": GaussianNB(),
        "digits_mlp": MLPClassifier(hidden_layer_sizes=(32,), max_iter=1000, random_state=0),
    }
    for name, model in models.items():
        model.fit(x_fit / 16.0, y_fit)
        probs = model.predict_proba(x_test / 16.0).astype(np.float32)
        probs /= probs.sum(axis=1, keepdims=True)
        logits = np.log(np.maximum(probs, np.finfo(np.float32).tiny)).astype(np.float32)
        np.savez_compressed(
            OUT / f"{name}.npz", probs=probs, logits=logits, labels=y_test.astype(np.int32)
        )
        print(f"{name}: N={len(y_test)}, accuracy={np.mean(probs.argmax(1) == y_test):.3f}")


if __name__ == "__main__":
    main()
