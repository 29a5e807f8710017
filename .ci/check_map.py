"""Checks the map of dlinterop's core: which include file uses which (and the same of
dlinterop/frameworks.pyx, built from include files the same way).

    python .ci/check_map.py [dlinterop/_core.pyx | dlinterop/frameworks.pyx]

_core.pyx is one extension built from include files (`include "core/x.pxi"` lines, paths
relative to _core.pyx), in the order they build on each other. Each file opens with a
header that says what it provides and which earlier files it uses, and this script keeps
that header true. Exit status 0 when every file passes, 1 (with one line per problem) when
one does not, 2 when the files cannot be read.

The rules, per included file F:

(a) F uses only names defined in files included before it. A name defined in two included
    files is reported as such, wherever it is used: one module holds one of it.
(b) F's Uses line lists exactly the files whose names F uses: "lists X but does not use it",
    "uses Y (names: a, b) but does not list it".
(c) F opens with its header: the first line starts with "# Provides:", and a "# Uses:" line
    follows in the opening comment block.

The header format. The opening comment block is the lines from the top of the file that
start with "#". The Uses entry starts at the line that starts with "# Uses:" and continues
onto the following comment lines until a blank comment line ("#" alone), or the end of the
block, or a line that follows one whose text ends with a full stop (a new sentence). The
entry's text (the lines joined, without their "# ") is one sentence:

    Uses: ITEM, ITEM, ... .           or      Uses: nothing.
    Uses: ITEM, ITEM; a remark.

Each ITEM is a file name relative to F's directory (as the include line names it, less
the directory of F), optionally followed by a note in parentheses: "cuda.pxi (device
memory)". Commas and semicolons inside parentheses belong to the note. A ";" ends the list:
what follows is a remark the check does not read. "nothing" (with an optional note) says F
uses no other file.

What counts as defining a name: the top level of F (no indentation, and the bodies of
top-level if/for/while/try/with statements) binds it: def, cdef and cpdef functions
(inline ones too), cdef class and class, ctypedef (structs, enums, unions, fused types and
plain aliases, function pointer types included), cdef enum (named or not) and each of its
members, cdef struct and union, `cdef TYPE NAME` variables (several names on one line too),
`NAME = ...` assignments, for-loop targets, imports, and every name declared in a
`cdef extern from` block of F (functions, variables, types, enum members).

What counts as using a name: an identifier token of F, once comments and string literals
are removed (docstrings and the C code of `cdef extern from *:` blocks included; the
expressions inside f-strings are kept), that names something another included file
defines, except:
- attribute accesses (`.name`): the methods and fields of a cdef class cannot be resolved
  by name, so `t.foo()` never counts, whatever `foo` is;
- keyword argument and parameter-default names (`f(name=...)`);
- names that are local where they appear: parameters, names a function assigns or
  declares (cdef, for, with ... as, except ... as, import, lambda parameters; not those it
  declares global), and the fields and class attributes a class body declares;
- the names the module's own .pxd declares (for _core.pyx, _core.pxd: Tensor, DType,
  dtype_from_dl, ...) when the file defining them is included after F: the .pxd declares
  them ahead of every file, so that is neither an error nor a use of that file. Defined in
  an earlier file, they count like any other name.

Names defined by F itself, and names no included file defines (cimported, builtin), are
never uses of another file. Nested includes are not followed.
"""

from __future__ import annotations

import os
import re
import sys

# The script's own folder: map_lexing.py and map_source.py, its halves, sit beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from map_lexing import _split_top  # noqa: E402
from map_source import Source  # noqa: E402

INCLUDE = re.compile(r"""^[ \t]*include[ \t]+(['"])([^'"]+)\1""", re.MULTILINE)


# ---- the header -------------------------------------------------------------------------


def read_header(text):
    """(listed files with the line of the Uses entry, problems) from a file's header."""
    problems = []
    block = []
    for raw in text.split("\n"):
        if not raw.startswith("#"):
            break
        block.append(raw)
    if not block or not block[0].startswith("# Provides:"):
        problems.append((1, 'does not open with a "# Provides:" line'))
    start = next((i for i, raw in enumerate(block) if raw.startswith("# Uses:")), None)
    if start is None:
        problems.append((1, 'has no "# Uses:" line in its opening comment block'))
        return None, 1, problems
    parts = [block[start][len("# Uses:") :].strip()]
    for raw in block[start + 1 :]:
        if parts[-1].endswith(".") or raw.strip() == "#":
            break
        parts.append(raw[1:].strip())
    sentence = " ".join(parts)
    number = start + 1
    if not sentence.endswith("."):
        problems.append((number, "its Uses entry does not end with a full stop"))
        return None, number, problems
    sentence = sentence[:-1]
    items = _split_top(sentence, ";")[0]
    listed = []
    for item in _split_top(items, ","):
        item = item.strip()
        m = re.fullmatch(r"([^\s()]+)(\s*\(.*\))?", item, re.DOTALL)
        if m is None or not (m.group(1).endswith(".pxi") or m.group(1) == "nothing"):
            problems.append(
                (
                    number,
                    f"cannot read {item!r} in its Uses entry (a file name, "
                    "optionally with a note in parentheses, or nothing)",
                )
            )
            continue
        listed.append(m.group(1))
    if "nothing" in listed:
        if len(listed) > 1:
            problems.append((number, "its Uses entry says nothing and names files"))
        listed = []
    return listed, number, problems


# ---- the module ---------------------------------------------------------------------------


def _shown(path):
    """path as messages give it: relative to the working directory where that is shorter."""
    relative = os.path.relpath(path)
    return (relative if len(relative) < len(path) else path).replace(os.sep, "/")


def check(pyx_path):
    """(the problems found, one line of text each; the files _core.pyx includes)."""
    base = os.path.dirname(os.path.abspath(pyx_path))
    pyx_name = os.path.basename(pyx_path)
    with open(pyx_path, encoding="utf-8") as f:
        includes = [m.group(2) for m in INCLUDE.finditer(f.read())]
    order = {inc: i for i, inc in enumerate(includes)}
    sources = {}
    for inc in includes:
        with open(os.path.join(base, inc), encoding="utf-8") as f:
            sources[inc] = Source(inc, f.read())
    shown = {inc: _shown(os.path.join(base, inc)) for inc in includes}

    pxd_path = os.path.splitext(pyx_path)[0] + ".pxd"
    forward = set()
    if os.path.exists(pxd_path):
        with open(pxd_path, encoding="utf-8") as f:
            forward = set(Source(pxd_path, f.read()).defined)

    definers = {}
    for inc in includes:
        for name in sources[inc].defined:
            definers.setdefault(name, []).append(inc)

    problems = []
    for name, files in sorted(definers.items()):
        if len(files) > 1:
            where = ", ".join(f"{shown[f]}:{sources[f].defined[name]}" for f in files)
            problems.append(
                f"{name} is defined in {len(files)} files ({where}); the module holds one"
            )

    for inc in includes:
        src = sources[inc]
        here = os.path.dirname(inc)
        used_files = {}
        candidates = {n for n in definers if n not in src.defined}
        for name, number in sorted(src.uses(candidates).items(), key=lambda kv: kv[1]):
            files = definers[name]
            if len(files) > 1:
                problems.append(
                    f"{shown[inc]}:{number}: uses {name}, which {len(files)} files "
                    f"define ({', '.join(shown[f] for f in files)})"
                )
            elif order[files[0]] > order[inc]:
                if name not in forward:
                    problems.append(
                        f"{shown[inc]}:{number}: uses {name}, defined in "
                        f"{shown[files[0]]}, which {pyx_name} includes after it"
                    )
            else:
                used_files.setdefault(files[0], []).append(name)

        listed, number, header_problems = read_header(src.text)
        where = f"{shown[inc]}:{number}"
        for line, problem in header_problems:
            problems.append(f"{shown[inc]}:{line}: {problem}")
        if listed is None:
            continue
        resolved = {}
        for name in listed:
            path = os.path.normpath(os.path.join(here, name)).replace(os.sep, "/")
            if path == inc:
                problems.append(f"{where}: lists itself")
            elif path not in order:
                problems.append(f"{where}: lists {name}, which {pyx_name} does not include")
            else:
                resolved[path] = name
        for path, name in resolved.items():
            if path not in used_files:
                problems.append(f"{where}: lists {name} but does not use it")
        for path in sorted(used_files, key=order.get):
            if path not in resolved:
                name = os.path.relpath(path, here or ".").replace(os.sep, "/")
                problems.append(
                    f"{where}: uses {name} (names: {', '.join(used_files[path])}) "
                    "but does not list it"
                )
    return problems, includes


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    pyx = (
        argv[0]
        if argv
        else os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dlinterop", "_core.pyx"
        )
    )
    try:
        problems, includes = check(pyx)
    except OSError as e:
        print(f"check_map: {e}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    if problems:
        print(
            f"check_map: {len(problems)} problem(s) in the map of the {len(includes)} files "
            f"{_shown(pyx)} includes (see the docstring of .ci/check_map.py)"
        )
        return 1
    print(f"check_map: the map of the {len(includes)} files {_shown(pyx)} includes is true")
    return 0


if __name__ == "__main__":
    sys.exit(main())
