#!/usr/bin/env bash
# A user's strictly type-checked script (tests/typing/user_script.py) with the oldest mypy
# the test extra allows, against the dlinterop installed in `python`: the stubs' floor is
# the floor pyproject.toml states. (The newest mypy runs it in tests/tools/test_package.py.)
set -euo pipefail
cd "$(dirname "$0")/.."
floor=$(python -c 'import re, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"]
print(next(re.fullmatch(r"mypy>=([\d.]+)", r).group(1) for r in extra if r.startswith("mypy")))')
env="${TMPDIR:-/tmp}/dlinterop-mypy-floor"
[ -x "$env/bin/python" ] || python -m venv "$env"
"$env/bin/python" -m pip install --quiet "mypy==$floor.*" typing_extensions
script="$PWD/tests/typing/user_script.py"
work=$(mktemp -d)
# Run away from the checkout, so that mypy reads the installed package.
(cd "$work" && "$env/bin/mypy" --strict --no-incremental --python-executable "$(command -v python)" "$script")
rm -rf "$work"
echo "mypy $floor (the test extra's floor): user script type-checks strictly"
