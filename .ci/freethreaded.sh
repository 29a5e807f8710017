#!/usr/bin/env bash
# dlinterop on free-threaded CPython 3.13 (no GIL): build the interpreter once per machine
# (.ci/freethreaded-python.sh), install dlinterop and its test tools into a fresh venv of it,
# prove that importing dlinterop leaves the GIL off, then run the whole suite with
# PYTHON_GIL=0.
# Where the interpreter's source cannot be had, says so and succeeds.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
start=$SECONDS
if ! python_ft=$(bash .ci/freethreaded-python.sh); then
  echo "free-threaded CPython not available here: skipping the free-threaded run"
  exit 0
fi
env="${TMPDIR:-/tmp}/dlinterop-freethreaded"
rm -rf "$env"
"$python_ft" -m venv "$env"
# Binary wheels only (building NumPy for cp313t takes longer than the rest of CI): NumPy 2.4
# is the newest with cp313t wheels; no ml_dtypes >= 0.7 and no mypy (its Rust parser) has one,
# so their tests skip here.
"$env/bin/python" -m pip install --quiet --only-binary=:all: "numpy>=2.2,<2.5" "pytest>=8" \
    "pytest-run-parallel>=0.4" "hypothesis>=6.100" "cython>=3.0" "nanobind>=2.0" \
    "scikit-build-core>=0.11" "cython-cmake>=0.3" ninja cmake
"$env/bin/python" -m pip install --quiet --no-build-isolation --no-deps .
# Importing every module keeps the GIL off, without PYTHON_GIL=0 forcing it.
(cd "${TMPDIR:-/tmp}" && "$env/bin/python" -W error::RuntimeWarning -c '
import sys
import dlinterop, dlinterop.frameworks, dlinterop.testing._conformance, dlinterop._capi
import dlinterop.cuda
dlinterop.cuda.device_count()
assert not sys._is_gil_enabled(), "importing dlinterop turned the GIL on"
print("free-threaded", sys.version.split()[0], "- GIL off after importing dlinterop")')
# The whole suite but the slow tests of the repository's tools (marked tooling), as in the
# version matrix (.ci/matrix.sh).
PYTHON_GIL=0 "$env/bin/pytest" -q -p no:cacheprovider --run-slow -m "not tooling" tests
# The suite above includes the thread tests at 8 threads and their run-parallel run (4 copies
# x 8 threads). Then the thread tests again at 16 threads, each test body run by 8 threads at
# once (pytest-run-parallel; the work divided between the copies): up to 128 threads in one
# test. This run found the producer-cache use-after-free (see tests/threads/).
PYTHON_GIL=0 DLINTEROP_THREADS=16 DLINTEROP_RUN_PARALLEL_COPIES=8 "$env/bin/pytest" -q \
    -p no:cacheprovider -p run-parallel --parallel-threads=8 --run-slow tests/threads \
    -k "not test_thread_tests_under_run_parallel"
# The downstream example's wheel for this interpreter: free-threaded CPython has no stable
# ABI, so its setup.py builds a cp313t wheel here (docs/cython.md, "For downstream package
# authors"). Built against the dlinterop above, imported with the GIL left off, then its tests.
"$env/bin/python" -m pip install --quiet --only-binary=:all: "setuptools>=70.1"
rm -rf "$env/downstream"
"$env/bin/python" -m pip wheel --quiet --no-build-isolation --no-deps -w "$env/downstream" \
    ./examples/downstream
downstream=$(ls "$env"/downstream/*.whl)
case "$downstream" in
  *-cp313-cp313t-*) echo "== the downstream example's free-threaded wheel: $(basename "$downstream")" ;;
  *) echo "the downstream wheel is not cp313t: $(basename "$downstream")"; exit 1 ;;
esac
"$env/bin/python" -m pip install --quiet --no-deps "$downstream"
(cd "${TMPDIR:-/tmp}" && "$env/bin/python" -W error::RuntimeWarning -c '
import sys, dlinterop_downstream
assert not sys._is_gil_enabled(), "importing the downstream example turned the GIL on"')
(cd "${TMPDIR:-/tmp}" && PYTHON_GIL=0 "$env/bin/python" -m pytest -q -p no:cacheprovider \
    -W error::RuntimeWarning "$checkout/examples/downstream/tests")
echo "free-threaded run took $((SECONDS - start)) s"
