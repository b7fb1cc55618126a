"""Compile cost: trace, lower and XLA-compile times and the lowered program's size, per
public function, beside a plain ``jnp`` version where one is natural.

    nice python benchmarks/bench_compile.py                 # headline at N = 1e4 + registry
    python benchmarks/bench_compile.py --no-headline --shard 1/2 --log b.jsonl   # in parts
    python benchmarks/bench_compile.py --from-logs a.jsonl b.jsonl --json t.json # joined
    python benchmarks/bench_compile.py --quick              # the headline functions only
    python benchmarks/bench_compile.py --only ece kuiper_test --n 2000

Every entry of the API registry (``tests/api_registry.py``: a public call, static options
bound, on the registry's data) goes through JAX's ahead-of-time API with a fresh
``jax.jit``: ``trace`` (Python -> jaxpr), ``lower`` (jaxpr -> StableHLO), ``compile`` (XLA);
the lowered program's size is its StableHLO text (lines and bytes, ``Lowered.as_text()``).
The twenty most used kernels (:data:`HEADLINE`, also pinned by
``tests/test_program_size.py``) run first, on the registry's data at ``--n`` rows (1e4),
each beside its plain ``jnp`` version where one exists (:data:`PLAIN`: what the function
computes with no options, no validation summary, no weights); the other entries follow on
the registry's N = 24 rows (their compile cost hardly depends on N). Everything runs in one
process in that order, so an inner jitted kernel shared with an earlier entry is traced
once: later entries' trace times are lower bounds, while lowering and compiling redo the
whole program. The persistent compilation cache is off (JAX's default; jaxcal's report
turns it on only for itself).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
from _timing import CLOCKS, Table, environment, write_tables

#: The twenty most used kernels (also pinned by tests/test_program_size.py).
HEADLINE = (
    "ece",
    "classwise_ece",
    "top_label_ece",
    "mce",
    "brier_score",
    "log_loss",
    "brier_decomposition",
    "reliability_curve",
    "ks_test",
    "kuiper_test",
    "spiegelhalter_test",
    "calibration_tests",
    "bootstrap_ci",
    "reliability_intervals",
    "ici",
    "smooth_ece",
    "l2_ece_interval",
    "temperature_scaling.fit",
    "platt_scaling.fit",
    "isotonic.fit",
)

N_BINS = 15


def _top(probs):
    return jnp.max(probs, axis=1), jnp.argmax(probs, axis=1)


def plain_ece(probs, labels, weights):
    """Top-label ECE, 15 equal-width bins, unweighted (Guo et al. 2017)."""
    conf, pred = _top(probs)
    correct = (pred == labels).astype(conf.dtype)
    b = jnp.clip(jnp.ceil(conf * N_BINS).astype(jnp.int32) - 1, 0, N_BINS - 1)
    count = jnp.zeros(N_BINS).at[b].add(1.0)
    gap = jnp.zeros(N_BINS).at[b].add(conf - correct)
    return jnp.sum(jnp.abs(gap)) / jnp.maximum(jnp.sum(count), 1.0)


def plain_brier(probs, labels, weights):
    onehot = jax.nn.one_hot(labels, probs.shape[1], dtype=probs.dtype)
    return jnp.mean(jnp.sum((probs - onehot) ** 2, axis=1))


def plain_log_loss(probs, labels, weights):
    p = jnp.take_along_axis(probs, labels[:, None], axis=1)[:, 0]
    return -jnp.mean(jnp.log(jnp.clip(p, 1e-12, 1.0)))


def plain_reliability(probs, labels, weights):
    conf, pred = _top(probs)
    correct = (pred == labels).astype(conf.dtype)
    b = jnp.clip(jnp.ceil(conf * N_BINS).astype(jnp.int32) - 1, 0, N_BINS - 1)
    count = jnp.zeros(N_BINS).at[b].add(1.0)
    mean_conf = jnp.zeros(N_BINS).at[b].add(conf) / jnp.maximum(count, 1.0)
    accuracy = jnp.zeros(N_BINS).at[b].add(correct) / jnp.maximum(count, 1.0)
    return mean_conf, accuracy, count


def plain_ks(p, y, weights):
    """Binary KS calibration error (Gupta et al. 2021): max |cumsum(p - y)| / N, sorted by p."""
    order = jnp.argsort(p)
    path = jnp.cumsum(p[order] - y[order].astype(p.dtype)) / p.shape[0]
    return jnp.max(jnp.abs(path))


#: registry entry -> its plain jnp version (same arguments: probs, labels, weights).
PLAIN: dict[str, Callable[..., Any]] = {
    "ece": plain_ece,
    "brier_score": plain_brier,
    "log_loss": plain_log_loss,
    "reliability_curve": plain_reliability,
    "ks_test": plain_ks,
}


def measure(fn: Callable[..., Any], args: tuple, clock: str) -> dict[str, float]:
    """Trace, lower and compile seconds of a fresh ``jax.jit(fn)`` on ``args``, and the
    StableHLO text's lines and bytes."""
    now = CLOCKS[clock]
    jitted = jax.jit(fn)
    t0 = now()
    traced = jitted.trace(*args)
    t1 = now()
    lowered = traced.lower()
    t2 = now()
    lowered.compile()
    t3 = now()
    text = lowered.as_text()
    return dict(
        trace=t1 - t0,
        lower=t2 - t1,
        compile=t3 - t2,
        lines=text.count("\n"),
        bytes=len(text.encode()),
    )


def registry_data(n: int):
    """The registry's data set at ``n`` rows (same recipe, seed 0)."""
    from tests import api_registry

    saved = api_registry.N
    api_registry.N = n
    try:
        api_registry.make_data.cache_clear()
        return api_registry.make_data(0)
    finally:
        api_registry.N = saved
        api_registry.make_data.cache_clear()


def _s(x: float) -> str:
    return f"{x:.3f}" if x < 1 else f"{x:.2f}"


def _row(name: str, n: int, m: dict[str, float], plain: dict[str, float] | None) -> str:
    total = m["trace"] + m["lower"] + m["compile"]
    cells = [
        name,
        f"{n:,}",
        _s(m["trace"]),
        _s(m["lower"]),
        _s(m["compile"]),
        _s(total),
        f"{m['lines']:,}",
        f"{m['bytes'] / 1024:.1f}",
    ]
    if plain is not None:
        p_total = plain["trace"] + plain["lower"] + plain["compile"]
        cells += [
            f"{plain['lines']:,}",
            _s(p_total),
            f"{m['lines'] / plain['lines']:.1f}",
            f"{total / p_total:.1f}",
        ]
    else:
        cells += ["", "", "", ""]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| function | N | trace s | lower s | compile s | total s | StableHLO lines | KiB "
    "| jnp lines | jnp total s | ÷ jnp lines | ÷ jnp time |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=10_000, help="rows of the headline functions")
    parser.add_argument("--quick", action="store_true", help="the headline functions only")
    parser.add_argument("--only", nargs="+", help="these registry entries only")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--no-headline", action="store_true", help="the other entries only")
    parser.add_argument(
        "--shard", default="0/1", help="I/M: every M-th other entry from the I-th (0/1: all)"
    )
    parser.add_argument("--log", metavar="PATH", help="append each row as a JSON line")
    parser.add_argument(
        "--from-logs",
        nargs="+",
        metavar="PATH",
        help="measure nothing: the tables of the rows of --log files (shards run apart)",
    )
    args = parser.parse_args(argv)

    from tests.api_registry import ENTRIES, N, make_data

    by_name = {e.name: e for e in ENTRIES}
    unknown = sorted(set(args.only or ()) - set(by_name))
    if unknown:
        parser.error(f"--only names no registry entry: {unknown}")
    headline = [n for n in HEADLINE if not args.only or n in args.only]
    headline = [] if args.no_headline else headline
    rest = [] if args.quick else [e.name for e in ENTRIES if e.name not in HEADLINE]
    if args.only:
        rest = [n for n in rest if n in args.only]
    shard, shards = (int(x) for x in args.shard.split("/"))
    rest = rest[shard::shards]
    start = time.perf_counter()
    heads, others, failed = [], [], []
    if args.from_logs:
        order: dict[str, int] = {}
        for name in [*HEADLINE, *by_name]:
            order.setdefault(name, len(order))
        logged = []
        for path in args.from_logs:
            logged += [json.loads(line) for line in Path(path).read_text().splitlines()]
        for r in sorted(logged, key=lambda r: order.get(r["name"], len(order))):
            if "error" in r:
                failed.append(f"{r['name']}: {r['error']}")
            else:
                out = heads if r["name"] in HEADLINE else others
                out.append((r["name"], r["n"], r["m"], r["plain"]))
        headline = [r[0] for r in heads]
        elapsed = sum(r.get("seconds", 0.0) for r in logged)
    big = registry_data(args.n) if headline and not args.from_logs else None
    small = make_data(0)
    for names, data, n, out in ((headline, big, args.n, heads), (rest, small, N, others)):
        for name in [] if args.from_logs else names:
            entry = by_name[name]
            began = time.perf_counter()
            try:
                call_args = entry.args(data, jnp.float32)
                m = measure(entry.fn, call_args, args.clock)
                plain = None
                if name in PLAIN:
                    plain = measure(PLAIN[name], call_args[:3], args.clock)
            except Exception as err:  # an entry that cannot be lowered: say so, go on
                failed.append(f"{name}: {type(err).__name__}: {str(err).splitlines()[0][:200]}")
                record = {"name": name, "error": failed[-1].split(": ", 1)[1]}
            else:
                out.append((name, n, m, plain))
                record = {"name": name, "n": n, "m": m, "plain": plain}
            record["seconds"] = time.perf_counter() - began
            print(f"bench_compile: {json.dumps(record)}", file=sys.stderr, flush=True)
            if args.log:
                with open(args.log, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
    if not args.from_logs:
        elapsed = time.perf_counter() - start
    env_line = environment()
    clock = "CPU time of the process" if args.clock == "cpu" else "wall clock"
    command = " ".join(["python benchmarks/bench_compile.py", *(argv or sys.argv[1:])])
    tables = []
    for key, title, rows in (
        (
            "compile",
            f"Compile cost of the twenty most used kernels (N = {args.n:,}), beside plain jnp",
            heads,
        ),
        (
            "compile-registry",
            f"Compile cost of every other registry entry (N = {N})",
            others,
        ),
    ):
        if not rows:
            continue
        md = "\n".join([HEADER, *(_row(*r) for r in rows)])
        notes = [
            "trace: Python -> jaxpr; lower: jaxpr -> StableHLO; compile: XLA:CPU; a fresh "
            "`jax.jit` per row, rows measured in table order within each process (an inner "
            "kernel shared with an earlier row is traced once, so later trace times are "
            "lower bounds); "
            f"{clock}; measuring took {elapsed:.0f} s of wall time (summed over processes).",
        ]
        if key == "compile":
            notes.append(
                "jnp: the same number written plainly in `jax.numpy` on the same arrays "
                "(top-label confidence, 15 equal-width bins; the binary KS for `ks_test`; no "
                "weights, no validation summary, no options): "
                + ", ".join(f"`{k}` = `{v.__name__}`" for k, v in PLAIN.items())
                + " in `benchmarks/bench_compile.py`."
            )
        if failed:
            notes.append("not lowered: " + "; ".join(failed))
        print(f"### {title}\n\n{env_line}\n\n{md}\n")
        tables.append(
            Table(
                key=key,
                title=title,
                command=command,
                environment=env_line,
                clock=args.clock,
                reference="",
                floor=None,
                rows=[],
                notes=notes,
                unit="s",
                markdown=md,
            )
        )
    if failed:
        print("bench_compile: not lowered:\n" + "\n".join(failed), file=sys.stderr)
    write_tables(args.json, tables)


if __name__ == "__main__":
    main()
