"""The version has one home, dlinterop/__init__.py's __version__; what repeats it must agree.

- CHANGELOG.md's newest release heading ("## X.Y.Z") is that version: a change that raises
  the version lands with its entry;
- dlinterop/_same_build.pxd names it (SameBuild_X_Y_Z): the same-build tier's check;
- include/dlinterop/abi.h names a first release for each minor version of its table, in
  order, the newest no later than the version;
- examples/downstream declares a dlinterop that has the table it targets.

    python .ci/check_version.py
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def release(text):
    return tuple(int(part) for part in text.split("."))


def problems(init, changelog, same_build, header, downstream):
    found = []
    version = re.search(r'^__version__ = "([^"]+)"', init, re.M).group(1)
    headings = re.findall(r"^## (\d+\.\d+\.\d+)\s*$", changelog, re.M)
    if not headings or headings[0] != version:
        found.append(f"CHANGELOG.md's newest release is {headings[:1]}, the version {version}")
    tag = "SameBuild_" + re.sub(r"\W", "_", version)
    if not re.search(rf"\bclass dlinterop\._core\.{tag} ", same_build):
        found.append(f"dlinterop/_same_build.pxd does not name {tag}")
    minor = int(re.search(r"#define DLINTEROP_ABI_MINOR (\d+)", header).group(1))
    firsts = dict(re.findall(r'#define DLINTEROP_ABI_1_(\d+)_RELEASE "([^"]+)"', header))
    if sorted(map(int, firsts)) != list(range(minor + 1)):
        found.append(f"abi.h names first releases for tables {sorted(firsts)}, not 1.0-1.{minor}")
    else:
        ordered = [release(firsts[str(m)]) for m in range(minor + 1)]
        if ordered != sorted(set(ordered)) or ordered[-1] > release(version):
            found.append(f"abi.h's first releases {ordered} are not in order up to {version}")
        needed = re.search(r'"dlinterop>=([\d.]+),<1"', downstream)
        if needed is None or release(needed.group(1)) < ordered[0]:
            found.append("examples/downstream/pyproject.toml declares no dlinterop>=X,<1")
    return found


def main():
    found = problems(
        read("dlinterop/__init__.py"),
        read("CHANGELOG.md"),
        read("dlinterop/_same_build.pxd"),
        read("include/dlinterop/abi.h"),
        read("examples/downstream/pyproject.toml"),
    )
    for message in found:
        print(f"check_version: {message}", file=sys.stderr)
    if not found:
        print("check_version: the version and what repeats it agree")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
