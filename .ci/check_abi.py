"""The stable ABI's table (include/dlinterop/abi.h) only ever grows at its end.

The entries of every released table are frozen in .ci/abi/table-<major>.txt, one per line,
in order, as `name: declaration` with the declaration's whitespace collapsed. This check
fails when the header's table does not start with exactly those entries (one moved,
removed, renamed or given another signature), when DLINTEROP_ABI_MINOR is not the newest
"/* MAJOR.MINOR */" section of the table, when the table gained entries the file does not
list (append them to it in the same commit), or when dlinterop/_abi_table.pxd, which fills
the table, names other fields or another order.

    python .ci/check_abi.py [include/dlinterop/abi.h]
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def table_entries(header_text):
    """(major, minor, entries, sections): the header's version and its table's fields as
    (name, declaration) in order, with the minor version of each section marker seen."""
    major = int(re.search(r"#define DLINTEROP_ABI_MAJOR (\d+)", header_text).group(1))
    minor = int(re.search(r"#define DLINTEROP_ABI_MINOR (\d+)", header_text).group(1))
    body = re.search(r"typedef struct DLInteropABI \{(.*?)\} DLInteropABI;", header_text, re.S)
    if body is None:
        raise SystemExit("check_abi: no `typedef struct DLInteropABI { ... } DLInteropABI;`")
    text = body.group(1)
    sections = [tuple(map(int, m)) for m in re.findall(r"/\*\s*(\d+)\.(\d+)\s*\*/", text)]
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    entries = []
    for declaration in text.split(";"):
        declaration = " ".join(declaration.split())
        if not declaration:
            continue
        pointer = re.match(r".*\(\s*\*\s*(\w+)\s*\)\s*\(", declaration)
        name = pointer.group(1) if pointer else re.findall(r"(\w+)\s*$", declaration)[0]
        entries.append((name, declaration))
    return major, minor, entries, sections


def frozen_entries(path):
    with open(path) as f:
        lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]
    return [tuple(line.split(": ", 1)) for line in lines]


def pxd_field_names(pxd_text):
    body = re.search(r"ctypedef struct DLInteropABI:\n((?:        .*\n)+)", pxd_text)
    fields = []
    for line in body.group(1).splitlines():
        if line.strip().startswith("#"):
            continue  # a comment, such as a section's version
        if line.startswith(" " * 9) and fields:
            fields[-1] += " " + line.strip()  # a declaration continued
        else:
            fields.append(line.strip())
    names = []
    for field in fields:
        pointer = re.match(r"[^(]*\(\*(\w+)\)", field)
        names.append(pointer.group(1) if pointer else field.split()[-1])
    return names


def problems(header_text, frozen, pxd_text):
    """What is wrong, as messages (none when the table only grew at its end)."""
    major, minor, entries, sections = table_entries(header_text)
    found = []
    for i, (name, declaration) in enumerate(frozen):
        if i >= len(entries):
            found.append(f"entry {i} ({name}) is gone from the table")
        elif entries[i] != (name, declaration):
            found.append(
                f"entry {i} was `{name}: {declaration}`, is now "
                f"`{entries[i][0]}: {entries[i][1]}`: an entry's position and "
                "signature never change (append a new one instead)"
            )
    if len(entries) > len(frozen) and not found:
        new = ", ".join(name for name, _ in entries[len(frozen) :])
        found.append(
            f"the table gained {new}: append them to the frozen list "
            f".ci/abi/table-{major}.txt (and mark their section with the new "
            "minor version)"
        )
    newest = max((m for ma, m in sections if ma == major), default=None)
    if newest != minor:
        found.append(
            f"DLINTEROP_ABI_MINOR is {minor}, but the table's newest section is {major}.{newest}"
        )
    names = [name for name, _ in entries]
    in_pxd = pxd_field_names(pxd_text)
    if in_pxd != names:
        found.append(f"dlinterop/_abi_table.pxd declares {in_pxd}, the header {names}")
    return found


def main(argv):
    header = argv[1] if len(argv) > 1 else os.path.join(ROOT, "include/dlinterop/abi.h")
    with open(header) as f:
        header_text = f.read()
    major = table_entries(header_text)[0]
    frozen = frozen_entries(os.path.join(ROOT, ".ci", "abi", f"table-{major}.txt"))
    with open(os.path.join(ROOT, "dlinterop", "_abi_table.pxd")) as f:
        pxd_text = f.read()
    found = problems(header_text, frozen, pxd_text)
    for message in found:
        print(f"check_abi: {message}", file=sys.stderr)
    if not found:
        print(f"check_abi: the ABI table {major}.x keeps its {len(frozen)} frozen entries")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
