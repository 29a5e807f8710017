#!/usr/bin/env bash
# The DLPack test suites NumPy, pyarrow and Warp ship in their wheels, against the installed
# peers: each plain, then under dlinterop's pytest plugin (dlinterop.pytest_plugin,
# docs/finding-bugs.md) with every exchange relayed through dlinterop (np.from_dlpack(x)
# receives dl.from_dlpack(x), ...) and checked call by call against the conformance rules,
# violations failing the test that made them. Then the project's own tests/interop, relayed
# and checked the same way. Run away from the checkout, so that the installed dlinterop is
# the one relaying (tests/interop runs with -P, from the checkout's tests/).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# The peers' known deviations (docs/conformance.md's matrix; docs/finding-bugs.md lists each):
# JAX, Warp and MLX never pass max_version, MLX leaves the capsule named dltensor, torch has
# no read-only tensors, pyarrow raises TypeError for arrays it cannot export; and Warp's own
# suite hands its consumer broken producers on purpose.
allow=consumer.passes-max-version:jax,consumer.passes-max-version:warp.from_dlpack
allow+=,consumer.passes-max-version:mlx,consumer.renames-capsule:mlx
allow+=,consumer.read-only:torch,producer.unexportable-buffer-error:pyarrow
allow+=,producer.well-formed:warp.tests,producer.unexportable-buffer-error:warp.tests
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
cd "$repo"
python -P -m pytest -q -p no:cacheprovider "${checked[@]}" tests/interop
