"""The Dask and Ray example program (examples/dask_ray.py, named in docs/processes.md) runs as
written; the page's own examples run in tests/tools/test_docs.py."""

import os
import subprocess
import sys

import pytest

# Slow (Dask and Ray clusters): deselected unless --run-slow (tests/conftest.py).
pytestmark = pytest.mark.slow

pytest.importorskip("distributed", reason="Dask distributed is not installed (the 'dask' extra)")
pytest.importorskip("ray", reason="Ray is not installed (the 'ray' extra)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_dask_and_ray_example_runs():
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "dask_ray.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "Dask sees the Tensor's 4,000,000 bytes" in lines
    assert "Ray: get is a read-only view: True (1000, 1000)" in lines
    # Column means of arange(1e6).reshape(1000, 1000): 499500 + column (float32 sums).
    for prefix in ("Dask: Tensor (1000,) [", "Ray: 4 results ["):
        line = next(line for line in lines if line.startswith(prefix))
        means = [float(v) for v in line[len(prefix) :].rstrip("]").split()]
        assert means == pytest.approx([499500.0, 499501.0, 499502.0], rel=1e-5)
