"""Two JAX processes on localhost (``jax.distributed``, CPU collectives): each streams its
shard, ``streaming.process_merge`` sums the states across processes, and every process
ends with the numbers of one process that read everything."""

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxcal import streaming
from tests.helpers import assert_close

ROOT = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent(
    """
    import sys
    import jax
    pid, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=pid)
    import numpy as np
    from jaxcal import streaming

    rng = np.random.default_rng(0)
    p = rng.random(4000).astype(np.float32)
    y = (rng.random(4000) < p**1.2).astype(np.int32)
    rows = np.arange(4000)[pid::2]  # interleaved shards
    key = jax.random.key(3)
    state = streaming.update(
        streaming.init(16, 2, binary=True, resolution=1024), p[rows], y[rows])
    reps = streaming.poisson_update(
        streaming.poisson_init(16, 2, 8, binary=True), p[rows], y[rows], rows, key=key)
    state, reps = streaming.process_merge((state, reps))
    out_values = {k: np.asarray(v) for k, v in streaming.compute(state).items()}
    out_values["top_count"] = np.asarray(state.top_count)
    out_values["class_count"] = np.asarray(state.class_count)
    out_values["rep_ece"] = np.asarray(streaming.poisson_compute(reps)["ece"])
    out_values["rep_count"] = np.asarray(reps.class_count)
    np.savez(out, **out_values)
    jax.distributed.shutdown()
    """
)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # two JAX start-ups and compiles: ~1 min on a loaded 2-core machine
def test_two_processes_merge_to_the_one_process_state(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env["JAX_PLATFORMS"] = "cpu"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(i), str(port), str(tmp_path / f"out{i}.npz")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    for proc in procs:
        try:
            output, _ = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("the two-process run did not finish in 240 s")
        assert proc.returncode == 0, output[-3000:]

    rng = np.random.default_rng(0)
    p = rng.random(4000).astype(np.float32)
    y = (rng.random(4000) < p**1.2).astype(np.int32)
    one = streaming.update(streaming.init(16, 2, binary=True, resolution=1024), p, y)
    reps = streaming.poisson_update(
        streaming.poisson_init(16, 2, 8, binary=True), p, y, np.arange(4000), key=jax.random.key(3)
    )
    want = streaming.compute(one)
    for i in range(2):
        got = np.load(tmp_path / f"out{i}.npz")
        np.testing.assert_array_equal(got["top_count"], one.top_count)
        np.testing.assert_array_equal(got["class_count"], one.class_count)
        np.testing.assert_array_equal(got["rep_count"], reps.class_count)
        for name in streaming.OUTPUTS:
            assert_close(got[name], want[name], err_msg=name)
        assert_close(got["rep_ece"], streaming.poisson_compute(reps)["ece"])
