#!/usr/bin/env bash
# Valgrind memcheck over dlinterop's core tests: invalid reads and writes, uses of
# uninitialised memory, and memory definitely lost at exit. Exits non-zero on any error.
#
#   bash tests/memory_checkers/valgrind.sh           # tests/test_malformed*.py tests/test_lifetimes*.py
#   bash tests/memory_checkers/valgrind.sh tests/test_tensor.py -k copy   # any pytest arguments
#
# It runs the dlinterop that `python` imports (the ordinary build, no sanitizer), with
# PYTHONMALLOC=malloc so that every Python allocation is one memcheck tracks, CPython's own
# suppressions (Misc/valgrind-python.supp; Debian's python3 package installs it as
# /usr/lib/valgrind/python3.supp) and tests/memory_checkers/valgrind.supp for what NumPy leaves at
# exit. Processes the tests spawn are not traced (--trace-children=no): the ASan script
# covers those. Expect 30-50x the normal run time (about 5 minutes for the default files on
# two cores).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/memory_checkers"
# The interpreter binary itself: a wrapper (pyenv's shim) would be all that memcheck traced.
PYTHON="$("${PYTHON:-python}" -c 'import sys; print(sys.executable)')"

if ! command -v valgrind >/dev/null; then
  echo "valgrind.sh: valgrind is not installed (Debian: apt-get install valgrind)" >&2
  exit 2
fi

suppressions=(--suppressions="$HERE/valgrind.supp")
cpython_supp=""
srcdir="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("srcdir") or "")')"
for candidate in "$srcdir/Misc/valgrind-python.supp" /usr/lib/valgrind/python3.supp \
                 /usr/lib/valgrind/python.supp; do
  if [[ -f "$candidate" ]]; then
    cpython_supp="$candidate"
    break
  fi
done
if [[ -n "$cpython_supp" ]]; then
  suppressions+=(--suppressions="$cpython_supp")
  echo "valgrind.sh: CPython suppressions from $cpython_supp"
else
  echo "valgrind.sh: no CPython valgrind-python.supp found; PYTHONMALLOC=malloc avoids most" \
       "of what it suppresses" >&2
fi

cd "$ROOT"
if [[ $# -eq 0 ]]; then
  set -- tests/test_malformed*.py tests/test_lifetimes*.py
fi

export PYTHONMALLOC=malloc
export PYTHONDONTWRITEBYTECODE=1
# Deterministic and short: the property tests' example count does not matter here.
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
echo "valgrind.sh: memcheck over pytest $*"
status=0
valgrind --tool=memcheck --error-exitcode=99 --trace-children=no --child-silent-after-fork=yes \
  --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
  --num-callers=40 "${suppressions[@]}" \
  "$PYTHON" -m pytest -q -p no:cacheprovider --run-slow "$@" || status=$?
if (( status == 99 )); then
  echo "valgrind.sh: memcheck reported errors (see above)" >&2
  exit 1
elif (( status != 0 )); then
  echo "valgrind.sh: pytest exited with $status" >&2
  exit "$status"
fi
echo "valgrind.sh: memcheck clean"
