"""Time the public kernels of two checkouts of jaxcal side by side, interleaved, in one run.

Used to check that a refactor slows no kernel down: each revision runs in its own worker
process (its own ``sys.path``, so the two copies of jaxcal never meet), both stay alive for
the whole run, and the driver alternates them case by case and round by round, so that the
load of a shared machine falls on both alike. Each timed sample is a batch of calls to an
already compiled function (steady state, ``jax.block_until_ready``); the report gives the
median per call of each revision and their ratio.

Usage (from the repository root; ``/work/base`` a checkout of the previous commit)::

    git worktree add /tmp/base HEAD~1
    python benchmarks/compare_revisions.py --base /tmp/base --new . --rounds 15

Cases run only where both revisions have what they call; add a case by adding an entry to
``CASES`` (a setup snippet that defines ``call``, a zero-argument function).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time

#: name -> setup code run once in the worker; it must define ``call()``. ``jaxcal``, ``jax``,
#: ``jnp``, ``np``, ``partial`` and the data below are in scope.
DATA = textwrap.dedent(
    """
    rng = np.random.default_rng(0)
    def softmax_rows(n, k, scale=3.0):
        z = rng.normal(size=(n, k)) * scale
        p = np.exp(z - z.max(1, keepdims=True))
        return (p / p.sum(1, keepdims=True)).astype(np.float32)
    P6 = jnp.asarray(softmax_rows(1_000_000, 10)); Y6 = jnp.asarray(rng.integers(0, 10, 1_000_000), jnp.int32)
    P5 = P6[:100_000]; Y5 = Y6[:100_000]
    B6 = jnp.asarray(rng.random(1_000_000), jnp.float32)
    YB6 = jnp.asarray((rng.random(1_000_000) < np.asarray(B6)).astype(np.int32))
    B5, YB5 = B6[:100_000], YB6[:100_000]
    B4, YB4 = B6[:10_000], YB6[:10_000]
    W6 = jnp.asarray(rng.random(1_000_000), jnp.float32)
    """
)

CASES = {
    "ece conf 1e6 (jit)": "f = jax.jit(jaxcal.ece); call = lambda: f(P6, Y6)",
    "ece conf 1e6 (eager)": "call = lambda: jaxcal.ece(P6, Y6)",
    "ece binary 1e6 (jit)": "f = jax.jit(jaxcal.ece); call = lambda: f(B6, YB6)",
    "ece weighted 1e6 (jit)": (
        "f = jax.jit(lambda p, y, w: jaxcal.ece(p, y, weights=w)); call = lambda: f(P6, Y6, W6)"
    ),
    "ece quantile 1e5 (jit)": (
        "f = jax.jit(partial(jaxcal.ece, binning='quantile')); call = lambda: f(P5, Y5)"
    ),
    "classwise_ece 1e5 (jit)": "f = jax.jit(jaxcal.classwise_ece); call = lambda: f(P5, Y5)",
    "top_label_ece 1e5 (jit)": "f = jax.jit(jaxcal.top_label_ece); call = lambda: f(P5, Y5)",
    "reliability_curve 1e6 (jit)": (
        "f = jax.jit(jaxcal.reliability_curve); call = lambda: f(P6, Y6)"
    ),
    "brier_score 1e6 (jit)": "f = jax.jit(jaxcal.brier_score); call = lambda: f(P6, Y6)",
    "log_loss 1e6 (jit)": "f = jax.jit(jaxcal.log_loss); call = lambda: f(P6, Y6)",
    "brier_decomposition 1e5 (jit)": (
        "f = jax.jit(jaxcal.brier_decomposition); call = lambda: f(P5, Y5)"
    ),
    "soft_ece value_and_grad 1e5": (
        "f = jax.jit(jax.value_and_grad(lambda p: jaxcal.soft_ece(p, Y5))); call = lambda: f(P5)"
    ),
    "mmce 1e4 (jit)": "f = jax.jit(jaxcal.mmce); call = lambda: f(P5[:10_000], Y5[:10_000])",
    "smooth_ece 1e5 (jit)": "f = jax.jit(jaxcal.smooth_ece); call = lambda: f(P5, Y5)",
    "calibration_tests 1e6 (jit)": (
        "f = jax.jit(jaxcal.stats.calibration_tests); call = lambda: f(B6, YB6)"
    ),
    "consistency_test ece 1e5 x 200": (
        "key = jax.random.key(0); m = partial(jaxcal.ece, n_bins=15)\n"
        "call = lambda: jaxcal.stats.consistency_test(m, B5, YB5, key=key, n_resamples=200)"
    ),
    "consistency_test ece binary 1e5 x 1000": (
        "key = jax.random.key(0); m = partial(jaxcal.ece, n_bins=15)\n"
        "call = lambda: jaxcal.stats.consistency_test(m, B5, YB5, key=key, n_resamples=1000)"
    ),
    "consistency_test ece conf K=10 1e5 x 1000": (
        "key = jax.random.key(0); m = partial(jaxcal.ece, n_bins=15)\n"
        "call = lambda: jaxcal.stats.consistency_test(m, P5, Y5, key=key, n_resamples=1000)"
    ),
    "consistency_test generic 1e5 x 200": (
        "key = jax.random.key(0); m = lambda p, y: jaxcal.ece(p, y, n_bins=15)\n"
        "call = lambda: jaxcal.stats.consistency_test(m, B5, YB5, key=key, n_resamples=200)"
    ),
    "consistency_bands conf K=10 1e5 x 1000": (
        "key = jax.random.key(0)\n"
        "call = lambda: jaxcal.stats.consistency_bands(P5, key=key, n_resamples=1000)"
    ),
    "bootstrap_ci ece 1e4 x 1000": (
        "key = jax.random.key(0)\n"
        "call = lambda: jaxcal.stats.bootstrap_ci(jaxcal.ece, B4, YB4, key=key, n_resamples=1000)"
    ),
    "bootstrap_ci brier 1e4 x 200": (
        "key = jax.random.key(0)\n"
        "call = lambda: jaxcal.stats.bootstrap_ci(jaxcal.brier_score, B4, YB4, key=key,"
        " n_resamples=200)"
    ),
    "streaming update 1e5 (jit)": (
        "from jaxcal import streaming\n"
        "s0 = streaming.init(15, 10); f = jax.jit(streaming.update)\n"
        "call = lambda: f(s0, P5, Y5)"
    ),
    "streaming compute (jit)": (
        "from jaxcal import streaming\n"
        "s1 = streaming.update(streaming.init(15, 10), P5, Y5)\n"
        "call = lambda: streaming.compute(s1)"
    ),
    "temperature fit 1e5 x 10": (
        "cal = jaxcal.calibrators.temperature_scaling(); z = jnp.log(P5)\n"
        "call = lambda: cal.fit(z, Y5)"
    ),
    "platt fit 1e5": ("cal = jaxcal.calibrators.platt_scaling(); call = lambda: cal.fit(B5, YB5)"),
    "histogram_binning fit 1e5": (
        "cal = jaxcal.calibrators.histogram_binning(15); call = lambda: cal.fit(B5, YB5)"
    ),
    "regression_coverage 1e6 (jit)": (
        "f = jax.jit(jaxcal.coverage.regression_coverage_score)\n"
        "call = lambda: f(B6, B6 - 0.1, B6 + W6 * 0.2)"
    ),
    "ece conf K=100 2e5 (jit)": (
        "Pw = jnp.asarray(softmax_rows(200_000, 100)); Yw = jnp.asarray(rng.integers(0, 100, 200_000))\n"
        "f = jax.jit(jaxcal.ece); call = lambda: f(Pw, Yw)"
    ),
    "top_label_ece K=1000 5e4 (jit)": (
        "Pw = jnp.asarray(softmax_rows(50_000, 1000)); Yw = jnp.asarray(rng.integers(0, 1000, 50_000))\n"
        "f = jax.jit(jaxcal.top_label_ece); call = lambda: f(Pw, Yw)"
    ),
    "ici loess 1e5 (jit)": "f = jax.jit(jaxcal.ici); call = lambda: f(B5, YB5)",
    "isotonic fit, new factory per call, 1e4": (
        "call = lambda: jaxcal.calibrators.isotonic().fit(B4, YB4)"
    ),
    "regression_ssc 1e5 (jit)": (
        "f = jax.jit(jaxcal.coverage.regression_ssc)\ncall = lambda: f(B5, B5 - 0.1, B5 + W6[:100_000])"
    ),
}

WORKER = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    now = time.process_time if sys.argv[2] == "cpu" else time.perf_counter
    import jax, jax.numpy as jnp, numpy as np
    from functools import partial
    import jaxcal
    assert jaxcal.__file__.startswith(sys.argv[1]), jaxcal.__file__
    scope = dict(jax=jax, jnp=jnp, np=np, partial=partial, jaxcal=jaxcal)
    exec(DATA, scope)
    calls = {}
    for line in sys.stdin:
        msg = json.loads(line)
        name = msg["case"]
        try:
            if name not in calls:
                local = dict(scope)
                exec(CASES[name], local)
                calls[name] = local["call"]
                t0 = time.perf_counter(); jax.block_until_ready(calls[name]())
                first = time.perf_counter() - t0
                jax.block_until_ready(calls[name]())  # second warm-up: caches, allocator
                reply = {"first": first}
            else:
                n = msg["calls"]
                t0 = now()
                for _ in range(n):
                    out = calls[name]()
                jax.block_until_ready(out)
                reply = {"per_call": (now() - t0) / n}
        except Exception as err:  # a case a revision does not support
            reply = {"error": f"{type(err).__name__}: {err}"[:200]}
        print(json.dumps(reply), flush=True)
    """
)


def _worker(root: str, clock: str) -> subprocess.Popen:
    code = f"DATA = {DATA!r}\nCASES = {CASES!r}\n" + WORKER
    env = dict(os.environ, PYTHONPATH=root)
    return subprocess.Popen(
        [sys.executable, "-c", code, os.path.abspath(root), clock],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _ask(worker: subprocess.Popen, **msg) -> dict:
    worker.stdin.write(json.dumps(msg) + "\n")
    worker.stdin.flush()
    return json.loads(worker.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="root of the previous checkout")
    parser.add_argument("--new", default=".", help="root of the checkout under test")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--target-s", type=float, default=0.05, help="seconds per sample")
    parser.add_argument("--only", nargs="*", help="substrings of the case names to run")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time, or CPU time of the worker process (all threads): steadier on a "
        "loaded machine, best under `taskset -c 0`",
    )
    args = parser.parse_args()
    names = [n for n in CASES if not args.only or any(o in n for o in args.only)]
    workers = {"base": _worker(args.base, args.clock), "new": _worker(args.new, args.clock)}
    rows = []
    load = os.getloadavg()[0]
    for name in names:
        first = {rev: _ask(w, case=name) for rev, w in workers.items()}
        if any("error" in r for r in first.values()):
            rows.append(
                (name, None, None, None, "; ".join(r.get("error", "") for r in first.values()))
            )
            continue
        n_calls = max(1, int(args.target_s / max(min(r["first"] for r in first.values()), 1e-5)))
        samples = {rev: [] for rev in workers}
        for _ in range(args.rounds):
            for rev, w in workers.items():
                samples[rev].append(_ask(w, case=name, calls=n_calls)["per_call"])
        base, new = (statistics.median(samples[r]) for r in ("base", "new"))
        rows.append((name, base, new, new / base, ""))
        print(
            f"{name:36s} base {base * 1e3:9.3f} ms  new {new * 1e3:9.3f} ms  ratio {new / base:5.3f}",
            flush=True,
        )
    for w in workers.values():
        w.stdin.close()
        w.wait()
    print(
        f"\nload average at start {load:.1f}; {args.clock} clock; medians of {args.rounds} "
        "interleaved samples"
    )
    print("\n| kernel | base ms | new ms | new / base |\n|---|---:|---:|---:|")
    for name, base, new, ratio, err in rows:
        if base is None:
            print(f"| {name} | | | {err} |")
        else:
            print(f"| {name} | {base * 1e3:.3f} | {new * 1e3:.3f} | {ratio:.3f} |")


if __name__ == "__main__":
    time.perf_counter()
    main()
