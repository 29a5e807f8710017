#!/usr/bin/env bash
# The asv recipe of docs/benchmarks.md, as a user runs it from a fresh clone, in a quick
# form: describe the machine, run the whole suite once against the installed dlinterop
# (every benchmark's setup and one call; a benchmark that fails fails this), publish the
# results as asv's HTML site, then `asv continuous` between the two last commits (each built
# into asv's own virtualenv) on one small benchmark. --quick figures are single calls and
# mean nothing; only that each step works is checked.
set -euo pipefail
cd "$(dirname "$0")/../benchmarks"
python -m pip install --quiet "asv>=0.6.4" "virtualenv>=20"
rm -rf results html
asv machine --yes > /dev/null
asv run --python=same --quick --show-stderr --set-commit-hash "$(git rev-parse HEAD)"
asv publish
test -s html/index.html
if git rev-parse -q --verify HEAD~1 > /dev/null; then
    # Exit 1 also means "a benchmark changed by more than the factor", which single quick
    # samples always risk: that is accepted, a failed build or benchmark is not.
    log="${TMPDIR:-/tmp}/dlinterop-asv-continuous.log"
    status=0
    asv continuous --quick --show-stderr -b "AllocateDefaults" HEAD~1 HEAD > "$log" 2>&1 \
        || status=$?
    cat "$log"
    if grep -q -E "Failed to build|failed$|Traceback" "$log" \
            || ! grep -q -E "BENCHMARKS (NOT SIGNIFICANTLY CHANGED|HAVE CHANGED SIGNIFICANTLY)" "$log" \
            || [ "$status" -gt 1 ]; then
        echo "asv continuous did not compare the two commits" >&2
        exit 1
    fi
fi
