#!/usr/bin/env bash
# The test suite on every other supported CPython found on this machine (3.10, 3.12, 3.13 by
# default; MATRIX_PYTHONS overrides), each in a fresh virtualenv with dlinterop built from
# this checkout and installed (not editable), the newest NumPy that version gets, and the
# framework peers where they install. torch is left to the main job: torch==2.13.0, the CPU
# wheel on this disk, exists for 3.11 only. A version that is absent is skipped and said so.
#
# Usage: bash .ci/matrix.sh            exit status non-zero if any present version fails
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PIP_DISABLE_PIP_VERSION_CHECK=1

versions="${MATRIX_PYTHONS:-3.10 3.12 3.13}"
work="${TMPDIR:-/tmp}/dlinterop-matrix"
mkdir -p "$work"

# The interop extra, read from pyproject.toml with this (3.11+) interpreter's tomllib: one
# requirement a line, markers included (pip skips those whose markers do not match).
peers=$(python -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb"))
print("\n".join(d["project"]["optional-dependencies"]["interop"]))')

find_python() {
    local v=$1 root found
    if command -v pyenv >/dev/null 2>&1; then
        root=$(pyenv root)
        found=$(cd "$root/versions" 2>/dev/null && printf '%s\n' "$v".* \
                | grep -E "^${v//./\\.}\.[0-9]+$" | sort -V | tail -1)
        if [ -n "$found" ] && [ -x "$root/versions/$found/bin/python" ]; then
            echo "$root/versions/$found/bin/python"
            return
        fi
    fi
    command -v "python$v" 2>/dev/null || true
}

status=0
summary=""
ready=""
# First every virtualenv, one after the other (each build uses every core) ...
for v in $versions; do
    py=$(find_python "$v")
    if [ -z "$py" ]; then
        echo "== Python $v: not found on this machine, skipped"
        summary+="Python $v: skipped (not installed)"$'\n'
        continue
    fi
    start=$SECONDS
    env="$work/py$v"
    rm -rf "$env" "$work/py$v-tmp"
    echo "== Python $v ($py): fresh venv in $env"
    if ! "$py" -m venv "$env" || ! "$env/bin/python" -m pip install --quiet --upgrade pip \
            || ! "$env/bin/python" -m pip install --quiet ".[test]"; then
        echo "== Python $v: installing dlinterop failed"
        summary+="Python $v: FAILED to install"$'\n'
        status=1
        continue
    fi
    # Each peer on its own, so that one that has no wheel for this version skips alone.
    while IFS= read -r peer; do
        "$env/bin/python" -m pip install --quiet "$peer" >/dev/null 2>&1 \
            || echo "== Python $v: peer $peer does not install here; its tests skip"
    done <<< "$peers"
    echo "== Python $v: ready in $((SECONDS - start)) s"
    ready+=" $v"
done

# ... then their test suites side by side: a suite mostly waits on one core (and on its
# child processes), so run one after the other they left the machine half idle. Each has a
# temporary folder of its own, so that nothing one builds or caches there meets another's.
start=$SECONDS
for v in $ready; do
    mkdir -p "$work/py$v-tmp"
    # The installed copy is tested: the venv's pytest script does not put the checkout on
    # sys.path (python -m pytest would, and the source tree would shadow the install).
    # The whole suite but the slow tests of the repository's tools (marked tooling: the
    # CUDA-off build, the benchmark and conformance runners, stubtest, the CLI's reports),
    # which the main job runs: they test the tools, not how dlinterop runs on each Python.
    (TMPDIR="$work/py$v-tmp" "$work/py$v/bin/pytest" -q --run-slow -m "not tooling" \
        > "$work/py$v.log" 2>&1
     echo $? > "$work/py$v.rc") &
done
wait
echo "== the suites ran side by side in $((SECONDS - start)) s"
for v in $ready; do
    echo "== Python $v"
    tail -3 "$work/py$v.log"
    numpy=$("$work/py$v/bin/python" -c "import numpy; print(numpy.__version__)")
    line=$(grep -E "^[0-9]+ (passed|failed)|^=+ .*(passed|failed)" "$work/py$v.log" | tail -1)
    summary+="Python $v (NumPy $numpy): ${line//=/}"$'\n'
    if [ "$(cat "$work/py$v.rc")" -ne 0 ]; then
        status=1
    fi
done
echo "== version matrix"
printf "%s" "$summary"
exit $status
