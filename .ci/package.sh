#!/usr/bin/env bash
# What a PyPI user gets: build the wheel and the sdist into $1, check their metadata
# (twine), the licence in both, and the wheel's platform tag and external libraries
# (auditwheel show). A release wheel is built by cibuildwheel in the manylinux_2_28 image
# ([tool.cibuildwheel] in pyproject.toml); built here, on glibc 2.36, the wheel needs
# GLIBC_2.34 (dlopen moved into libc there) and must never need more, nor any library
# outside the manylinux policy (the CUDA runtime is linked statically).
set -euo pipefail
cd "$(dirname "$0")/.."
dist="$1"
max_glibc="2.34"
tools="${TMPDIR:-/tmp}/dlinterop-package-tools"
rm -rf "$dist"
mkdir -p "$dist"
[ -x "$tools/bin/python" ] || python -m venv "$tools"
"$tools/bin/python" -m pip install --quiet "auditwheel>=6" "twine>=6" "build>=1.2"

python -m pip wheel --quiet --no-deps -w "$dist" .
"$tools/bin/python" -m build --sdist --outdir "$dist" . > "$dist/sdist.log" 2>&1 || { cat "$dist/sdist.log"; exit 1; }
wheel=$(ls "$dist"/dlinterop-*.whl)
sdist=$(ls "$dist"/dlinterop-*.tar.gz)
"$tools/bin/twine" check --strict "$wheel" "$sdist"

# The licence travels in both.
python - "$wheel" "$sdist" <<'PY'
import sys, tarfile, zipfile
wheel, sdist = sys.argv[1:]
names = zipfile.ZipFile(wheel).namelist()
assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "LICENSE not in the wheel"
with tarfile.open(sdist) as tar:
    members = tar.getnames()
assert any(n.count("/") == 1 and n.endswith("/LICENSE") for n in members), "LICENSE not in the sdist"
print(f"LICENSE shipped in {wheel.rsplit('/', 1)[-1]} and {sdist.rsplit('/', 1)[-1]}")
PY

show=$("$tools/bin/auditwheel" show "$wheel")
echo "$show"
python - "$max_glibc" "$show" <<'PY'
import re, sys
limit, show = sys.argv[1], sys.argv[2]
tags = re.findall(r"manylinux_(\d+)_(\d+)_x86_64", show)
assert tags, "auditwheel show named no manylinux tag:\n" + show
glibc = max((int(a), int(b)) for a, b in tags[:1])
assert glibc <= tuple(map(int, limit.split("."))), f"the wheel now needs glibc {glibc}, more than {limit}"
assert "libcudart" not in show and "libcuda.so" not in show, "the wheel needs a CUDA library"
print(f"platform tag manylinux_{glibc[0]}_{glibc[1]} (at most {limit} allowed)")
PY
