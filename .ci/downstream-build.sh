#!/usr/bin/env bash
# The downstream example (examples/downstream) built the ways a downstream author builds it,
# as docs/cython.md's "For downstream package authors" says, against dlinterop's wheel in a
# local folder of wheels (PIP_FIND_LINKS), as if dlinterop were not on any index:
#   - `python -m build`: an isolated sdist, then an isolated wheel from it; the sdist holds
#     the Cython source and no generated C, the wheel neither, and is tagged cp310-abi3;
#   - `pip wheel .`, isolated too;
#   - its cibuildwheel configuration, and dlinterop's own, read by the cibuildwheel release
#     they name, which must select the abi3 and the cp313t builds (cibuildwheel runs its
#     builds in containers, which this machine cannot run; the build it runs in each is
#     `python -m build`, above);
#   - the wheel installed with its declared dependencies resolved (dlinterop>=0.1,<1, from
#     the same folder), then its tests.
# Usage: bash .ci/downstream-build.sh DLINTEROP_WHEEL_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
export PIP_DISABLE_PIP_VERSION_CHECK=1
wheels=$(cd "${1:?usage: bash .ci/downstream-build.sh DLINTEROP_WHEEL_DIR}" && pwd)
work="${TMPDIR:-/tmp}/dlinterop-downstream-build"
rm -rf "$work"
mkdir -p "$work"
cibuildwheel=3.3.1

python -m pip install --quiet "build>=1.2"
PIP_FIND_LINKS="$wheels" python -m build --outdir "$work/build" examples/downstream \
    >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
PIP_FIND_LINKS="$wheels" python -m pip wheel --quiet --no-deps -w "$work/pip" \
    ./examples/downstream
python - "$work" <<'PY'
import glob, os, sys, tarfile, zipfile
work = sys.argv[1]
(sdist,) = glob.glob(os.path.join(work, "build", "*.tar.gz"))
wheels = glob.glob(os.path.join(work, "build", "*.whl")) + glob.glob(os.path.join(work, "pip", "*.whl"))
assert len(wheels) == 2, wheels
names = tarfile.open(sdist).getnames()
assert any(n.endswith("_kernels.pyx") for n in names), f"the sdist lacks the .pyx: {names}"
assert not [n for n in names if n.endswith((".c", ".so"))], f"the sdist has built files: {names}"
for wheel in wheels:
    assert "-cp310-abi3-" in os.path.basename(wheel), wheel
    inside = zipfile.ZipFile(wheel).namelist()
    extra = [n for n in inside if n.endswith((".c", ".pyx"))]
    assert not extra, f"{os.path.basename(wheel)} ships {extra}"
    print(f"== isolated build: {os.path.basename(wheel)}, {len(inside)} files, no .c or .pyx")
PY

tools="$work/cibuildwheel"
python -m venv "$tools"
"$tools/bin/python" -m pip install --quiet "cibuildwheel==$cibuildwheel"
identifiers=$("$tools/bin/cibuildwheel" --print-build-identifiers --platform linux \
    examples/downstream | tr '\n' ' ')
expected="cp310-manylinux_x86_64 cp311-manylinux_x86_64 cp312-manylinux_x86_64 \
cp313-manylinux_x86_64 cp313t-manylinux_x86_64 "
[ "$identifiers" = "$expected" ] || {
  echo "cibuildwheel $cibuildwheel selects: $identifiers (expected: $expected)"
  exit 1
}
echo "== cibuildwheel $cibuildwheel selects: $identifiers"
# dlinterop's own release table, the same way: its wheels for each CPython and for cp313t,
# which a downstream author's cp313t build installs.
identifiers=$("$tools/bin/cibuildwheel" --print-build-identifiers --platform linux . \
    | tr '\n' ' ')
[ "$identifiers" = "$expected" ] || {
  echo "cibuildwheel $cibuildwheel selects for dlinterop: $identifiers (expected: $expected)"
  exit 1
}
echo "== and for dlinterop itself: $identifiers"

# The wheel as a dependent installs it: its dependency on dlinterop resolved from the
# folder, in a fresh virtualenv, then its tests there.
python -m venv "$work/user"
wheel=$(ls "$work"/build/*.whl)
"$work/user/bin/python" -m pip install --quiet --find-links "$wheels" "$wheel" \
    "pytest>=8" "numpy>=2.1"
(cd "$work" && "$work/user/bin/python" -m pytest -q -p no:cacheprovider \
    -W error::RuntimeWarning "$checkout/examples/downstream/tests")
