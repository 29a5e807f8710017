#!/usr/bin/env bash
# Builds the documentation site into OUTDIR: bash docs/build.sh OUTDIR
# Needs the installed dlinterop and the docs extra (pip install ".[docs]"). The benchmark
# figure, docs/_generated/benchmarks.svg, is drawn first if it is missing (the quick
# benchmark runner, about half a minute); delete it to draw it again. Warnings are errors.
set -euo pipefail
out=${1:?usage: bash docs/build.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)            # OUTDIR as given, relative to where this was called
cd "$(dirname "$0")/.."
if [ ! -f docs/_generated/benchmarks.svg ]; then
    mkdir -p docs/_generated
    python -m benchmarks --quick --plot docs/_generated/benchmarks.svg
fi
python -P -m sphinx -W --keep-going -b html docs "$out"
