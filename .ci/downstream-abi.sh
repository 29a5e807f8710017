#!/usr/bin/env bash
# The stable ABI's promise, checked: the example downstream package (examples/downstream,
# built on dlinterop/abi.pxd) is built ONCE, as an abi3 wheel, against the dlinterop this
# run installed, then installed unchanged and tested
#   - on this Python and on every Python of the matrix (its virtualenvs, .ci/matrix.sh's);
#   - against a dlinterop built with DLINTEROP_TEST_ABI_SHIFT, whose Tensor object layout
#     differs and whose table gained an entry (minor version + 1), as a later release's may;
#   - against dlinterop 0.1.0, the first release of the table it targets (1.0), built from
#     this repository's history (.ci/abi/releases.txt): the wheel was built against a newer
#     header (table 1.1) and targets the oldest table by default.
# Usage: bash .ci/downstream-abi.sh    (after .ci/matrix.sh; its absent versions skip)
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
work="${TMPDIR:-/tmp}/dlinterop-abi"
rm -rf "$work"
mkdir -p "$work"

python -m pip install --quiet "setuptools>=70.1" "cython>=3.0"
python -m pip wheel --quiet --no-build-isolation --no-deps -w "$work/wheels" ./examples/downstream
wheel=$(ls "$work"/wheels/dlinterop_downstream_example-*.whl)
case "$wheel" in
  *-cp310-abi3-*) echo "== one abi3 wheel: $(basename "$wheel")" ;;
  *) echo "the downstream wheel is not cp310-abi3: $(basename "$wheel")"; exit 1 ;;
esac

# Its tests, run by `python` with the wheel installed in its environment, from outside the
# checkout, whose dlinterop/ must not shadow the installed one (the working directory is
# what puts a folder on sys.path here: Python 3.10 has no -P).
run_tests() {
  local python=$1 label=$2
  "$python" -m pip install --quiet --no-deps --force-reinstall "$wheel"
  echo "== $label: $("$python" -c 'import sys; print(sys.version.split()[0])'), dlinterop ABI" \
       "$(cd "$work" && "$python" -c 'import dlinterop._capi as c; print(c.abi_version())')"
  (cd "$work" && "$python" -m pytest -q -p no:cacheprovider -W error::RuntimeWarning \
      "$checkout/examples/downstream/tests")
}

run_tests python "this Python"
for env in "${TMPDIR:-/tmp}"/dlinterop-matrix/py3.*; do
  [ -x "$env/bin/python" ] || continue
  run_tests "$env/bin/python" "matrix $(basename "$env")"
done

# The layout-shifted dlinterop, in a virtualenv that sees this Python's packages (NumPy,
# pytest) but has its own dlinterop.
python -m venv --system-site-packages "$work/shifted"
"$work/shifted/bin/python" -m pip install --quiet --no-deps \
    -Ccmake.define.DLINTEROP_TEST_ABI_SHIFT=ON -Cbuild-dir="$work/shifted-build" .
normal=$(cd "$work" && python -c 'import dlinterop as dl; print(dl.Tensor.__basicsize__)')
shifted=$(cd "$work" && "$work/shifted/bin/python" -c '
import dlinterop as dl, dlinterop._capi as c
import re
header = open(dl.get_include() + "/dlinterop/abi.h").read()
minor = int(re.search(r"#define DLINTEROP_ABI_MINOR (\d+)", header).group(1))
assert c.abi_version() == (1, minor + 1), c.abi_version()
print(dl.Tensor.__basicsize__)')
if [ "$normal" = "$shifted" ]; then
  echo "the shifted build's Tensor is $shifted bytes, as the normal one's: no shift"
  exit 1
fi
echo "== shifted dlinterop: Tensor $shifted bytes (normal: $normal), ABI table grown by one"
run_tests "$work/shifted/bin/python" "layout-shifted dlinterop"

# The oldest release with the table the wheel targets, built from its commit (without the
# CUDA allocator: the table is what is tested, and the build is twice as fast).
read -r release table commit < <(grep -v '^#' .ci/abi/releases.txt | awk '$2 == "1.0"' | head -1)
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "dlinterop $release's commit $commit is not in this clone's history"
  exit 1
fi
mkdir -p "$work/release-src"
git archive "$commit" | tar -x -C "$work/release-src"
python -m venv --system-site-packages "$work/release"
"$work/release/bin/python" -m pip install --quiet --no-deps -Ccmake.define.DLINTEROP_CUDA=OFF \
    -Cbuild-dir="$work/release-build" "$work/release-src"
(cd "$work" && "$work/release/bin/python" -c "
import dlinterop as dl, dlinterop._capi as c
assert dl.__version__ == '$release' and c.abi_version() == (1, 0), (dl.__version__, c.abi_version())")
run_tests "$work/release/bin/python" "dlinterop $release (C ABI table $table)"
