#!/usr/bin/env bash
# The DLPack test suites pyarrow and Warp ship in their wheels, against the installed peers:
# each plain, then with dlinterop relaying every tensor their tests hand to a consumer
# (tests/support/dlpack_relay.py: np.from_dlpack(x) receives dl.from_dlpack(x), ...).
# Run away from the checkout, so that the installed dlinterop is the one relaying.
set -euo pipefail
support="$(cd "$(dirname "$0")/../tests/support" && pwd)"
cd "${TMPDIR:-/tmp}"
run() {
    python -m pytest -q -p no:cacheprovider "$@"
    PYTHONPATH="$support" python -m pytest -q -p no:cacheprovider -p dlpack_relay "$@"
}
# pyarrow's conftest needs hypothesis (the test extra has it); one test skips without pyarrow.cuda.
run --pyargs pyarrow.tests.test_dlpack
# Warp's file also holds module-level helpers named test_* that pytest would take for tests:
# its TestDLPack class is the suite (its torch and JAX cases register when those import).
warp_suite=$(python -c "import os, warp; print(os.path.join(os.path.dirname(warp.__file__), 'tests', 'interop', 'test_dlpack.py'))")
run "$warp_suite" -k TestDLPack
