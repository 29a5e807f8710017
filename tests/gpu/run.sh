#!/usr/bin/env bash
# Everything a machine with a CUDA GPU runs for dlinterop, in one go: install, build, GPU
# tests, GPU benchmarks. Meant to finish inside 8 minutes.
#
# The machine needs Python with Cython, scikit-build-core, cmake, ninja, pytest, nvcc, and
# (optionally) CuPy and CUDA builds of PyTorch. What it lacks (cython-cmake, at least) can
# be carried as wheels in .whl/ at the repository root, fetched on a machine with network:
#     python3 -m pip download --no-deps -d .whl cython-cmake==0.3.0
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
OUT_DIR=${OUT:-/tmp/dlinterop-gpu-out}
mkdir -p "$OUT_DIR"

if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/dlinterop-site .whl/*.whl
  export PYTHONPATH=/tmp/dlinterop-site${PYTHONPATH:+:$PYTHONPATH}
fi

echo "== build (DLINTEROP_CUDA=ON)"
start=$(date +%s)
$PY -m pip install -q --no-deps --no-build-isolation --no-index \
  -Ccmake.define.DLINTEROP_CUDA=ON -Cbuild-dir=build/gpu . 2>&1 | tail -20
echo "built in $(( $(date +%s) - start )) s"

cd /tmp   # import the installed package, not the checkout
$PY -m dlinterop | tee "$OUT_DIR/main.txt"

echo "== GPU tests"
$PY -m pytest -q -p no:cacheprovider -o addopts="" -m gpu "$OLDPWD/tests/gpu" \
  --rootdir "$OLDPWD" 2>&1 | tee "$OUT_DIR/tests.txt"
status=${PIPESTATUS[0]}

echo "== GPU benchmarks"
$PY "$OLDPWD/tests/gpu/bench_gpu.py" 2>&1 | tee "$OUT_DIR/bench.txt" || status=1
exit "$status"
