#!/usr/bin/env bash
# The DLPack test suites the peers ship in their wheels (NumPy's, pyarrow's, Warp's and
# array-api-strict's), against the installed peers: each plain, then under dlinterop's pytest
# plugin (dlinterop.pytest_plugin, docs/finding-bugs.md) with every exchange relayed through
# dlinterop (np.from_dlpack(x) receives dl.from_dlpack(x), ...) and checked call by call
# against the conformance rules, violations failing the test that made them; each run's
# summary counts the exchanges checked. Then the project's own tests/interop, relayed and
# checked the same way. Run away from the checkout, so that the installed dlinterop is the
# one relaying (tests/interop runs with -P, from the checkout's tests/).
#
# PyTorch's test/test_dlpack.py, JAX's DLPack tests and MLX's are not run: PyPI has no
# distribution that holds them (PyTorch and MLX publish wheels only, without their tests;
# JAX's sdist has no tests/), and CI reaches PyPI alone. tests/interop exchanges with each.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# The peers' known deviations, each with its upstream link: .ci/peer-deviations.txt.
allow=$(grep -v '^#' "$repo/.ci/peer-deviations.txt" | awk 'NF {print $1}' | paste -sd, -)
checked=(-p dlinterop.pytest_plugin --dlpack-relay --dlpack-violations=fail "--dlpack-allow=$allow")
cd "${TMPDIR:-/tmp}"
run() {
    python -m pytest -q -p no:cacheprovider "$@"
    python -m pytest -q -p no:cacheprovider "${checked[@]}" "$@"
}
numpy_suite=$(python -c "import os, numpy; print(os.path.join(os.path.dirname(numpy.__file__), '_core', 'tests', 'test_dlpack.py'))")
run "$numpy_suite"
# pyarrow's conftest needs hypothesis (the test extra has it); one test skips without pyarrow.cuda.
run --pyargs pyarrow.tests.test_dlpack
# Warp's file also holds module-level helpers named test_* that pytest would take for tests:
# its TestDLPack class is the suite (its torch and JAX cases register when those import).
warp_suite=$(python -c "import os, warp; print(os.path.join(os.path.dirname(warp.__file__), 'tests', 'interop', 'test_dlpack.py'))")
run "$warp_suite" -k TestDLPack
# array-api-strict's DLPack tests mostly call __dlpack__ themselves, which no consumer sees:
# --dlpack-probe makes the checker's calls on the producer types its consumers meet.
python -m pytest -q -p no:cacheprovider --pyargs array_api_strict.tests -k dlpack
python -m pytest -q -p no:cacheprovider "${checked[@]}" --dlpack-probe \
    --pyargs array_api_strict.tests -k dlpack
cd "$repo"
python -P -m pytest -q -p no:cacheprovider "${checked[@]}" tests/interop
