"""Tests of .ci/check_tree.py on small made-up trees (python -m pytest .ci/test_check_tree.py)."""

import importlib.util
import os
import sys
import textwrap

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("check_tree", os.path.join(_here, "check_tree.py"))
check_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_tree)
sys.path.insert(0, _here)
from map_lexing import strip_code  # noqa: E402


def make_tree(root, files):
    """Writes `files` (path -> text, or bytes) under root; returns their paths, sorted."""
    for path, text in files.items():
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            full.write_bytes(text)
        else:
            full.write_text(textwrap.dedent(text).lstrip("\n"))
    return sorted(files)


def lines(n):
    return "".join(f"line {i}\n" for i in range(n))


def test_the_tree_passes():
    assert check_tree.main(["check_tree.py"]) == 0


# ---- (a) sizes


def test_a_file_over_the_limit_is_reported_unless_allowed(tmp_path):
    files = make_tree(
        tmp_path,
        {
            "src/big.c": lines(401),
            "tests/fits.py": lines(400),
            "dlinterop/allowed.py": lines(500),
            "docs/long.md": lines(900),  # not a folder that is sized
        },
    )
    allowed = {"dlinterop/allowed.py": "cut in another pass"}
    problems = check_tree.check_sizes(str(tmp_path), files, allowed)
    assert len(problems) == 1 and problems[0].startswith("src/big.c: 401 lines, over 400")


def test_a_binary_file_is_not_read(tmp_path):
    files = make_tree(tmp_path, {"tests/corpus/input": b"\n" * 500 + b"\0\xff"})
    assert check_tree.check_sizes(str(tmp_path), files, {}) == []


def test_allowed_entries_must_have_a_reason_and_still_be_needed(tmp_path):
    files = make_tree(tmp_path, {"src/small.c": lines(10), "src/big.c": lines(401)})
    allowed = {"src/small.c": "was big", "src/gone.c": "was big", "src/big.c": " "}
    problems = check_tree.check_sizes(str(tmp_path), files, allowed)
    assert any("gives src/big.c no reason" in p for p in problems)
    assert any("src/gone.c, which does not exist" in p for p in problems)
    assert any("src/small.c, which has 10 lines now: drop its entry" in p for p in problems)
    assert len(problems) == 3


# ---- (b) the package's map

PACKAGE = {
    "dlinterop/__init__.py": "",
    "dlinterop/cuda.py": "",
    "dlinterop/_core.pyx": "",
    "dlinterop/_core.pyi": "",
    "dlinterop/dlpack.pxd": "",
    "dlinterop/core/views.pxi": "",
    "dlinterop/_lib/__init__.py": "",
    "dlinterop/_lib/values.py": "",
    "dlinterop/_lib/build_config.py.in": "",
    "dlinterop/testing/_frameworks/__init__.py": "",
    "dlinterop/testing/_frameworks/ml.py": "",
    "dlinterop/py.typed": "",
}
PAGE = """
    `dlinterop/cuda.py`, the core `dlinterop._core` with its include files in `core/`;
    `dlpack.pxd`; `_lib/`: `_lib/values.py` and `build_config.py`; `dlinterop/testing/`
    and the frameworks, `dlinterop.testing._frameworks.ml` in `testing/_frameworks/`.
"""


def package_problems(tmp_path, page=PAGE, package=PACKAGE):
    files = make_tree(tmp_path, {**package, "docs/architecture.md": page})
    return check_tree.check_package_map(str(tmp_path), files)


def test_a_page_that_names_every_module_and_folder_passes(tmp_path):
    # Stubs, __init__.py, include files and py.typed need no name of their own.
    assert package_problems(tmp_path) == []


def test_a_module_or_folder_the_page_does_not_name_is_reported(tmp_path):
    page = PAGE.replace("`dlpack.pxd`;", "").replace("in `testing/_frameworks/`", "")
    assert package_problems(tmp_path, page) == [
        "docs/architecture.md: names no module dlinterop/dlpack.pxd (dlinterop.dlpack)",
        "docs/architecture.md: names no folder dlinterop/testing/_frameworks/",
    ]


def test_a_name_inside_a_longer_name_does_not_count(tmp_path):
    page = PAGE.replace("`_lib/values.py`", "`_lib/values.pyx`, `other_values.py`, `values.pyi`")
    assert package_problems(tmp_path, page) == [
        "docs/architecture.md: names no module dlinterop/_lib/values.py (dlinterop._lib.values)"
    ]


def test_a_py_in_file_is_named_as_the_module_it_is_written_as(tmp_path):
    page = PAGE.replace("and `build_config.py`", "")
    assert package_problems(tmp_path, page) == [
        "docs/architecture.md: names no module dlinterop/_lib/build_config.py "
        "(dlinterop._lib.build_config)"
    ]


# ---- (c) the tests' map


def test_every_test_folder_and_support_module_is_named_in_the_readmes(tmp_path):
    files = make_tree(
        tmp_path,
        {
            "tests/README.md": "`interop/`, `support/` with `forge/` and `mp_workers.py` in it",
            "tests/interop/test_a.py": "",
            "tests/support/forge/__init__.py": "",
            "tests/support/mp_workers.py": "",
            "tests/support/new_cases.py": "",
            "tests/fuzz/README.md": "`corpus/` holds the inputs",
            "tests/fuzz/corpus/input": "",
            "tests/threads/test_b.py": "",
            "tests/threads/deeper/test_c.py": "",
        },
    )
    assert check_tree.check_test_map(str(tmp_path), files) == [
        "tests/README.md: names no module new_cases of tests/support/",
        "tests/README.md: names no folder tests/fuzz/",
        "tests/README.md: names no folder tests/threads/",
        "tests/README.md or tests/threads/README.md: names no folder tests/threads/deeper/",
    ]


# ---- (d) what the include lists import


def import_problems(tmp_path, pyx, parts, allowed=None):
    files = {"pkg/_mod.pyx": pyx}
    files.update({f"pkg/parts/{name}": text for name, text in parts.items()})
    make_tree(tmp_path, files)
    return check_tree.check_imports(str(tmp_path), "pkg/_mod.pyx", strip_code, allowed or {})


PYX = """
    '''The module: Py_DECREF is named in its docstring.'''
    cimport cython
    from cpython.ref cimport (
        Py_DECREF, Py_INCREF,
        PyObject,
    )
    from libc.stdint cimport int64_t as i64
    from dlinterop.dlpack cimport *
    import math

    include "parts/a.pxi"   # Py_DECREF in a comment
    include "parts/b.pxi"
"""


def test_names_used_by_some_included_file_pass(tmp_path):
    parts = {
        "a.pxi": "@cython.final\ncdef class A:\n    cdef PyObject* p\n",
        "b.pxi": "cdef i64 f(x):\n    Py_INCREF(x); Py_DECREF(x)\n    return math.floor(1)\n",
    }
    assert import_problems(tmp_path, PYX, parts) == []


def test_an_unused_name_is_reported_with_its_statements_line(tmp_path):
    parts = {
        "a.pxi": "@cython.final\ncdef class A:\n    cdef PyObject* p\n",
        # an attribute, a comment and a string are no uses
        "b.pxi": "cdef i64 f(x):\n    x.Py_DECREF()  # Py_DECREF\n    return 'Py_DECREF'\n",
    }
    assert import_problems(tmp_path, PYX, parts) == [
        "pkg/_mod.pyx:3: Py_DECREF is imported, but no included file uses it",
        "pkg/_mod.pyx:3: Py_INCREF is imported, but no included file uses it",
        "pkg/_mod.pyx:9: math is imported, but no included file uses it",
    ]


def test_the_modules_own_code_counts_as_a_use(tmp_path):
    pyx = PYX + 'cdef extern from "Python.h":\n    void use(PyObject* o, i64 n)\n'
    parts = {"a.pxi": "cython math Py_INCREF Py_DECREF\n", "b.pxi": ""}
    assert import_problems(tmp_path, pyx, parts) == []


def test_allowed_unused_names_pass_until_they_are_used_or_gone(tmp_path):
    parts = {"a.pxi": "cython PyObject i64 math Py_INCREF\n", "b.pxi": ""}
    path = "pkg/_mod.pyx"
    allowed = {(path, "Py_DECREF"): "dropped in another pass"}
    assert import_problems(tmp_path, PYX, parts, allowed) == []
    parts["b.pxi"] = "Py_DECREF\n"
    assert import_problems(tmp_path, PYX, parts, allowed) == [
        ".ci/check_tree.py: UNUSED_ALLOWED names Py_DECREF of pkg/_mod.pyx, which it no "
        "longer imports unused: drop its entry"
    ]


def test_imported_names_reads_every_form():
    assert check_tree.imported_names("cimport cython") == ["cython"]
    assert check_tree.imported_names("import os.path, sys as system") == ["os", "system"]
    assert check_tree.imported_names("from a cimport (b,\n c as d,\n)") == ["b", "d"]
    assert check_tree.imported_names("from a.b cimport *") == []


# ---- (e) lists that could be derived


def test_known_local_folder_and_the_c_sources_must_match_the_tree(tmp_path):
    files = make_tree(
        tmp_path,
        {
            "pyproject.toml": 'known-local-folder = ["forge", "gone",\n  "mp_workers"]\n',
            "tests/support/forge/__init__.py": "",
            "tests/support/forge/abi.py": "",
            "tests/support/mp_workers.py": "",
            "tests/support/new_cases.py": "",
            "tests/support/keeper.c": "",
            "CMakeLists.txt": "add(SOURCES src/a.c src/b_more.c src/layer.cu)\n",
            "src/a.c": "",
            "src/b.c": "",
            "src/layer.cu": "",
            "src/a.h": "",
        },
    )
    assert check_tree.check_derived_lists(str(tmp_path), files) == [
        "pyproject.toml: known-local-folder misses tests/support's new_cases",
        "pyproject.toml: known-local-folder names gone, not in tests/support",
        "CMakeLists.txt: builds no src/b.c",
    ]
