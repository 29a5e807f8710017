"""Checks that keep the map of the tree true, which only a check keeps true (run by .ci/lint.sh):

(a) Sizes: no file of dlinterop/, src/, benchmarks/, .ci/ or tests/ is over MAX_LINES lines
    (binary files, such as the fuzzer's corpus, are not read), but those ALLOWED names, each
    with its reason; an entry whose file is gone or fits again is reported too, so that the
    list only shrinks.
(b) The package's map: every module of dlinterop/ (.py, .pyx and .pxd files; a .py.in as the
    module it is written as) and every folder of it is named in docs/architecture.md.
(c) The tests' map: every folder of tests/ is named in tests/README.md or in the README.md of
    the folder that holds it, and every module of tests/support/ in tests/README.md.
(d) What _core.pyx, frameworks.pyx and testing/_conformance.pyx import is used: they are
    lists of include files, which cython-lint does not follow, so here every name they cimport
    or import must be used by a file they include or by their own code outside the import
    lines.
(e) Lists that could be derived agree with what they list: pyproject.toml's isort
    known-local-folder names exactly the modules of tests/support/, and CMakeLists.txt builds
    every C and CUDA file of src/.

How a file or folder counts as named (b, c): the page holds its path from the repository
root, from its top folder (dlinterop/, tests/) or from the folder that holds it, or its name
alone (`values.py`, `interop/`: a folder's name ends with "/"), or a module's dotted name
(dlinterop._lib.values), each a whole word: not part of a longer name.

    python .ci/check_tree.py     exit status 0 when everything holds, else 1 with one line
                                 per problem
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 400
SIZED = ("dlinterop/", "src/", "benchmarks/", ".ci/", "tests/")
# Files allowed over MAX_LINES, each with the reason it may be.
ALLOWED = {}
# Names an include list imports that none of its files use, allowed with a reason (d).
UNUSED_ALLOWED = {}
# The package's files that are no module of their own: stubs go with their module, and
# include files are mapped by .ci/check_map.py (each with its Provides and Uses lines).
NOT_MODULES = (".pyi", ".pxi", "__init__.py", "py.typed")
INCLUDE_LISTS = (
    "dlinterop/_core.pyx",
    "dlinterop/frameworks.pyx",
    "dlinterop/testing/_conformance.pyx",
)


def tree_files(root=ROOT):
    """The repository's files (tracked, or new and not ignored), as paths from its root."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))})


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def line_count(root, path):
    """The file's lines, or None for a binary file (not text in UTF-8, or with a NUL)."""
    try:
        text = read(root, path)
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else len(text.splitlines())


def check_sizes(root, files, allowed=ALLOWED, limit=MAX_LINES):
    problems = []
    for path in files:
        if not path.startswith(SIZED):
            continue
        lines = line_count(root, path)
        if lines is not None and lines > limit and path not in allowed:
            problems.append(
                f"{path}: {lines} lines, over {limit}: cut it along its concerns (or allow it, "
                "with a reason, in .ci/check_tree.py's ALLOWED)"
            )
    for path, reason in sorted(allowed.items()):
        if not reason.strip():
            problems.append(f".ci/check_tree.py: ALLOWED gives {path} no reason")
        lines = line_count(root, path) if path in files else None
        if path not in files:
            problems.append(f".ci/check_tree.py: ALLOWED names {path}, which does not exist")
        elif lines is not None and lines <= limit:
            problems.append(
                f".ci/check_tree.py: ALLOWED names {path}, which has {lines} lines now: "
                "drop its entry"
            )
    return problems


def named(page, *names):
    """Whether the page's text holds one of `names` as a whole word (no letter, digit, "_",
    "." or "/" before it; none of those but a final "." after it)."""
    for name in names:
        pattern = rf"(?<![\w./]){re.escape(name)}(?![\w/]|\.\w)"
        if re.search(pattern, page):
            return True
    return False


def folders(files, top):
    """The folders under `top` (a path ending with "/") that hold files, `top` excluded."""
    out = set()
    for path in files:
        if path.startswith(top):
            parts = path[len(top) :].split("/")[:-1]
            out.update(top + "/".join(parts[: i + 1]) for i in range(len(parts)))
    return sorted(out)


def check_package_map(root, files, page_path="docs/architecture.md", package="dlinterop/"):
    page = read(root, page_path)
    problems = []
    for path in files:
        if not path.startswith(package) or path.endswith(NOT_MODULES):
            continue
        module = path[: -len(".in")] if path.endswith(".py.in") else path
        if not module.endswith((".py", ".pyx", ".pxd")):
            continue
        inner = module[len(package) :]
        dotted = (package + inner.rsplit(".", 1)[0]).replace("/", ".")
        names = [module, inner, inner.rsplit("/", 1)[-1]]
        if not module.endswith(".pxd"):
            names.append(dotted)
        if not named(page, *names):
            problems.append(f"{page_path}: names no module {module} ({dotted})")
    for folder in folders(files, package):
        inner = folder[len(package) :]
        names = [folder + "/", inner + "/", inner.rsplit("/", 1)[-1] + "/"]
        if not named(page, *names, folder.replace("/", ".")):
            problems.append(f"{page_path}: names no folder {folder}/")
    return problems


def support_modules(files):
    """The modules of tests/support/ by the name tests import them by (a .py file's stem, a
    package's folder name)."""
    return {
        path[len("tests/support/") :].split("/")[0].rsplit(".py", 1)[0]
        for path in files
        if path.startswith("tests/support/")
        and (path.count("/") == 2 and path.endswith(".py") or path.endswith("/__init__.py"))
    }


def check_test_map(root, files, top="tests/"):
    problems = []
    pages = {top + "README.md": read(root, top + "README.md") if top + "README.md" in files else ""}
    for name in sorted(support_modules(files)):
        if not named(pages[top + "README.md"], name + ".py", name + "/"):
            problems.append(f"{top}README.md: names no module {name} of tests/support/")
    for folder in folders(files, top):
        parent = folder.rsplit("/", 1)[0]
        readmes = [top + "README.md"]
        if parent + "/" != top:
            readmes.append(parent + "/README.md")
        inner = folder[len(top) :]
        names = [folder + "/", inner + "/", inner.rsplit("/", 1)[-1] + "/"]
        for readme in readmes:
            if readme not in pages:
                pages[readme] = read(root, readme) if readme in files else ""
        if not any(named(pages[readme], *names) for readme in readmes):
            problems.append(f"{' or '.join(readmes)}: names no folder {folder}/")
    return problems


IMPORT_STATEMENT = re.compile(
    r"^(?:from[ \t]+[\w.]+[ \t]+c?import[ \t]+(?:\([^)]*\)|[^\n]*)|c?import[ \t]+[^\n]*)",
    re.MULTILINE,
)
INCLUDE_LINE = re.compile(r"""^[ \t]*include[ \t]+(['"])([^'"]+)\1""", re.MULTILINE)


def imported_names(statement):
    """The names an import or cimport statement binds (none for a star import)."""
    names = []
    if statement.startswith("from"):
        listed = re.split(r"c?import", statement, maxsplit=1)[1].strip().strip("()")
        items = [item for item in listed.replace("\n", " ").split(",") if item.strip()]
    else:
        items = re.split(r"c?import", statement, maxsplit=1)[1].split(",")
    for item in items:
        words = item.split()
        if not words or words == ["*"]:
            continue
        name = words[-1] if "as" in words else words[0]
        names.append(name.split(".")[0])
    return names


def used_identifiers(text, strip_code):
    """The identifiers of the code (comments and strings blanked), attribute names left out."""
    code = strip_code(text)
    return {m.group(1) for m in re.finditer(r"(?<![\w.])([A-Za-z_]\w*)", code)}


def check_imports(root, path, strip_code, allowed=UNUSED_ALLOWED):
    """Names the include list at `path` imports that neither its code nor its files use, but
    those `allowed` names ((path, name) -> reason); and entries of `allowed` that are used."""
    text = read(root, path)
    statements = list(IMPORT_STATEMENT.finditer(strip_code(text)))
    rest = text
    for m in reversed(statements):
        rest = rest[: m.start()] + rest[m.end() :]
    used = used_identifiers(rest, strip_code)
    folder = os.path.dirname(path)
    for m in INCLUDE_LINE.finditer(text):
        used |= used_identifiers(read(root, os.path.join(folder, m.group(2))), strip_code)
    problems = []
    imported = set()
    for m in statements:
        statement = text[m.start() : m.end()]
        for name in imported_names(statement):
            imported.add(name)
            if name not in used and (path, name) not in allowed:
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{path}:{line}: {name} is imported, but no included file uses it")
    for where, name in sorted(allowed):
        if where == path and (name in used or name not in imported):
            problems.append(
                f".ci/check_tree.py: UNUSED_ALLOWED names {name} of {path}, which it no longer "
                "imports unused: drop its entry"
            )
    return problems


def check_derived_lists(root, files):
    problems = []
    pyproject = read(root, "pyproject.toml")
    listed = re.search(r"known-local-folder\s*=\s*\[([^\]]*)\]", pyproject)
    listed = set(re.findall(r'"([^"]+)"', listed.group(1))) if listed else set()
    support = support_modules(files)
    for name in sorted(support - listed):
        problems.append(f"pyproject.toml: known-local-folder misses tests/support's {name}")
    for name in sorted(listed - support):
        problems.append(f"pyproject.toml: known-local-folder names {name}, not in tests/support")
    cmake = read(root, "CMakeLists.txt")
    for path in files:
        if path.startswith("src/") and path.endswith((".c", ".cu")) and not named(cmake, path):
            problems.append(f"CMakeLists.txt: builds no {path}")
    return problems


def main(argv=None):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from map_lexing import strip_code

    files = tree_files()
    problems = check_sizes(ROOT, files)
    problems += check_package_map(ROOT, files)
    problems += check_test_map(ROOT, files)
    for path in INCLUDE_LISTS:
        problems += check_imports(ROOT, path, strip_code)
    problems += check_derived_lists(ROOT, files)
    for problem in problems:
        print(problem)
    if not problems:
        print(
            f"check_tree: no file over {MAX_LINES} lines but {len(ALLOWED)} allowed; the "
            "package's and the tests' maps name every module and folder; the include lists "
            "import only what they use; the derived lists agree"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
