"""Every test of tests/threads/ under pytest-run-parallel: each test body then runs in several
threads at once, each starting its own eight. It can be run that way by hand:

    DLINTEROP_RUN_PARALLEL_COPIES=4 python -m pytest -p run-parallel --parallel-threads=4 \
        tests/threads

(DLINTEROP_RUN_PARALLEL_COPIES divides the iterations between the copies; leave it out to
give each copy the full 8 x 10,000.)"""

import os
import subprocess
import sys

import pytest

from thread_cases import (  # noqa: F401 (fixtures)
    _short_switch_interval,
)

# Slow (stress: many threads racing): deselected unless --run-slow (tests/conftest.py).
pytestmark = pytest.mark.slow


# --------------------------------------------------------------------------------------
# The whole folder under pytest-run-parallel
# --------------------------------------------------------------------------------------


def test_thread_tests_under_run_parallel():
    pytest.importorskip("pytest_run_parallel")
    if os.environ.get("DLINTEROP_RUN_PARALLEL_COPIES"):
        pytest.skip("already inside the run-parallel run")
    here = os.path.dirname(os.path.abspath(__file__))  # tests/threads
    env = dict(os.environ, DLINTEROP_RUN_PARALLEL_COPIES="4")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--run-slow",
            "-p",
            "run-parallel",
            "--parallel-threads=4",
            "-k",
            "not test_thread_tests_under_run_parallel",
            here,
        ],
        cwd=os.path.dirname(os.path.dirname(here)),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert " passed" in proc.stdout
