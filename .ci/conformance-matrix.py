"""docs/conformance.md's matrix against the results the checker just wrote (its --json):
every cell of the two tables, and each framework's count line, must be what was measured,
so that the page never describes an older run. Usage: python .ci/conformance-matrix.py JSON"""

import json
import os
import re
import sys

CELL = {"pass": "pass", "fail": "FAIL", "n/a": "n/a"}
page = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "conformance.md")
results = json.load(open(sys.argv[1]))["results"]
measured = {(r["rule"], r["framework"]): CELL[r["result"]] for r in results}
text = open(page).read()
wrong = []
names = None
for line in text.splitlines():
    header = re.match(r"\| rule \|(.*)\|$", line)
    if header:
        names = [n.strip() for n in header.group(1).split("|")]
        continue
    row = re.match(r"\| `([\w.-]+)` \|(.*)\|$", line)
    if row and names:
        for name, cell in zip(names, (c.strip() for c in row.group(2).split("|"))):
            if measured.get((row.group(1), name), "") != cell:
                wrong.append(
                    f"{row.group(1)} {name}: page {cell!r}, measured "
                    f"{measured.get((row.group(1), name), '')!r}"
                )
for name in sorted({f for _, f in measured}):
    counts = {
        k: sum(1 for (rule, f), v in measured.items() if f == name and v == CELL[k]) for k in CELL
    }
    line = f"{name}: {counts['pass']} passed, {counts['fail']} failed, {counts['n/a']} n/a"
    if line not in text:
        wrong.append(f"count line missing or different: {line!r}")
if names is None:
    wrong.append("no matrix found")
if wrong:
    sys.exit("docs/conformance.md does not match this run:\n  " + "\n  ".join(wrong))
print(f"docs/conformance.md matches the checker's results ({len(measured)} cells)")
