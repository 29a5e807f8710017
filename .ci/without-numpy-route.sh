#!/usr/bin/env bash
# dlinterop built without NumPy's headers (DLINTEROP_NUMPY=OFF, as where they cannot be had)
# still builds and works: the native NumPy route is absent and every import of a NumPy
# array takes NumPy's __dlpack__. A fresh virtualenv of this interpreter; the NumPy and
# DLPack protocol tests run there (their native-route half skips, saying why), and the
# build tests, which must respect its explicit DLINTEROP_CUDA=OFF although nvcc is on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
env="${TMPDIR:-/tmp}/dlinterop-no-numpy-route"
rm -rf "$env"
python -m venv "$env"
"$env/bin/python" -m pip install --quiet \
    -Ccmake.define.DLINTEROP_NUMPY=OFF -Ccmake.define.DLINTEROP_CUDA=OFF ".[test]"
"$env/bin/python" -c '
import dlinterop as dl, numpy as np
assert dl.build_info()["numpy_route_built"] is False
a = np.arange(3.0)
t = dl.from_dlpack(a)
assert t.data_ptr == a.ctypes.data and dl._core._numpy_route() is False
print("built without NumPy headers: imports take __dlpack__")'
"$env/bin/pytest" -q tests/interop/test_numpy_interop.py tests/test_export_protocol.py \
    tests/test_import_protocol.py tests/interop/test_interop_ml_dtypes.py \
    tests/test_cuda_build.py tests/tools/test_package.py
