"""Tests of .ci/check_map.py on small made-up modules (python -m pytest .ci/test_check_map.py)."""

import importlib.util
import os
import textwrap

import pytest

_spec = importlib.util.spec_from_file_location(
    "check_map", os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_map.py")
)
check_map = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_map)


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # messages name files relative to the working directory


def make_module(tmp_path, files, pxd=None, order=None):
    """_core.pyx including core/<name> for each of `files` (name -> text), in `order`."""
    (tmp_path / "core").mkdir()
    for name, text in files.items():
        (tmp_path / "core" / name).write_text(textwrap.dedent(text).lstrip("\n"))
    includes = "".join(f'include "core/{name}"   # a note\n' for name in order or files)
    (tmp_path / "_core.pyx").write_text('"""The module."""\n\ncimport cython\n\n' + includes)
    if pxd is not None:
        (tmp_path / "_core.pxd").write_text(textwrap.dedent(pxd))
    return str(tmp_path / "_core.pyx")


def problems(tmp_path, files, **kwargs):
    found, _ = check_map.check(make_module(tmp_path, files, **kwargs))
    return [p.split(": ", 1)[1] if p.startswith("core/") else p for p in found]


BASE = """
    # Provides: the basics.
    # Uses: nothing.

    cdef extern from "base.h" nogil:
        ctypedef struct base_stats:
            int64_t count
        int base_count(base_stats* stats)
        enum: BASE_LIMIT

    cdef extern from *:
        '''
        static int not_a_name(void) { return helper_in_c(); }
        '''
        int base_inline() noexcept

    cdef enum Colour:
        RED
        GREEN = 2

    ctypedef int (*base_callback)(int value) noexcept

    cdef int helper(int x) except -1:
        return x + RED

    cdef inline bint fast(int x) noexcept nogil:
        return x > BASE_LIMIT

    cdef class Holder:
        cdef object source
        def get(self):
            return self.source

    class PlainError(ValueError):
        pass

    cdef size_t ALIGNMENT = 256
    cdef int table[4]
    LIMIT = 10
    """


def test_a_true_map_passes(tmp_path):
    files = {
        "base.pxi": BASE,
        "user.pxi": """
            # Provides: things built on the basics, over two lines of text
            # that wrap.
            # Uses: base.pxi (helper, fast and the
            # extern names, Colour; all of them).
            #
            # More about the file, after a blank comment line.

            cdef int use_all(Holder h) except -1:
                cdef base_stats stats
                cdef base_callback callback = NULL
                helper(GREEN)
                raise PlainError(f"{LIMIT} {ALIGNMENT:>{table[0]}}")
                return fast(base_count(&stats)) + base_inline()
            """,
    }
    assert problems(tmp_path, files) == []
    assert check_map.main([str(tmp_path / "_core.pyx")]) == 0


def test_a_name_of_a_later_file_is_an_error(tmp_path):
    files = {
        "early.pxi": """
            # Provides: an early function.
            # Uses: nothing.

            cdef int early() except -1:
                return late()
            """,
        "late.pxi": """
            # Provides: a late function.
            # Uses: nothing.

            cdef int late() except -1:
                return 1
            """,
    }
    assert problems(tmp_path, files) == [
        "uses late, defined in core/late.pxi, which _core.pyx includes after it"
    ]


def test_a_name_the_pxd_declares_may_come_from_a_later_file(tmp_path):
    files = {
        "early.pxi": """
            # Provides: an early function.
            # Uses: nothing.

            cdef int early(Tensor t) except -1:
                return late(t)
            """,
        "late.pxi": """
            # Provides: the Tensor.
            # Uses: nothing.

            cdef class Tensor:
                pass

            cdef int late(Tensor t) except -1:
                return 1
            """,
        "after.pxi": """
            # Provides: a user of the Tensor.
            # Uses: nothing.

            cdef int after(Tensor t) except -1:
                return 2
            """,
    }
    pxd = """
        cdef class Tensor:
            pass

        cdef int late(Tensor t) except -1
        """
    # Declared ahead of every file: no error before late.pxi, a use after it.
    assert problems(tmp_path, files, pxd=pxd) == [
        "uses late.pxi (names: Tensor) but does not list it"
    ]


def test_the_uses_line_must_list_exactly_the_files_used(tmp_path):
    files = {
        "base.pxi": BASE,
        "other.pxi": """
            # Provides: another function.
            # Uses: nothing.

            cdef int other() except -1:
                return 0
            """,
        "user.pxi": """
            # Provides: a user.
            # Uses: other.pxi (said, not done).

            cdef int user() except -1:
                return helper(1) + fast(2)
            """,
    }
    assert problems(tmp_path, files) == [
        "lists other.pxi but does not use it",
        "uses base.pxi (names: helper, fast) but does not list it",
    ]


def test_a_name_defined_in_two_files_is_an_error(tmp_path):
    files = {
        "one.pxi": """
            # Provides: one.
            # Uses: nothing.

            cdef extern from "Python.h":
                void PyErr_Clear()
            """,
        "two.pxi": """
            # Provides: two.
            # Uses: nothing.

            cdef extern from "Python.h":
                void PyErr_Clear()
            """,
        "three.pxi": """
            # Provides: three.
            # Uses: one.pxi.

            cdef int three() except -1:
                PyErr_Clear()
            """,
    }
    found, _ = check_map.check(make_module(tmp_path, files))
    assert len(found) == 3
    assert found[0].startswith("PyErr_Clear is defined in 2 files (")
    assert found[1].endswith("uses PyErr_Clear, which 2 files define (core/one.pxi, core/two.pxi)")
    assert found[2].endswith("lists one.pxi but does not use it")


def test_comments_strings_and_c_code_are_no_uses(tmp_path):
    files = {
        "base.pxi": BASE,
        "user.pxi": '''
            # Provides: a user in words only: helper, fast.
            # Uses: nothing.

            cdef extern from *:
                """
                static int user_c(void) { return helper(1) + fast(2); }
                """
                int user_c()

            def user():
                """Calls helper() and fast(), says the docstring."""
                message = "helper"   # helper() in a comment
                return f"{{helper}} {message!r}" + b'fast' + r"LIMIT" + \'\'\'
                ALIGNMENT\'\'\'
            ''',
    }
    assert problems(tmp_path, files) == []


def test_a_name_inside_an_f_string_expression_is_a_use(tmp_path):
    files = {
        "base.pxi": BASE,
        "user.pxi": """
            # Provides: a message.
            # Uses: base.pxi.

            def user():
                return f"limit {{LIMIT}}: {helper(1)!r:>{4}}"
            """,
    }
    assert problems(tmp_path, files) == []


def test_attributes_keywords_and_locals_are_no_uses(tmp_path):
    files = {
        "base.pxi": BASE,
        "user.pxi": """
            # Provides: names that match the basics' but are not theirs.
            # Uses: nothing.

            cdef class User:
                cdef int helper          # a field
                LIMIT = 3                # a class attribute

                def run(self, fast, *, table=None):
                    cdef int ALIGNMENT = 0
                    for Holder in range(2):
                        pass
                    squares = [RED * RED for RED in range(3)]
                    key = lambda GREEN: GREEN
                    with open("f") as PlainError:
                        pass
                    return self.helper + fast + table + ALIGNMENT + obj.LIMIT + dict(helper=1)

            cdef int user(int helper, int base_count=0) except -1:
                return helper + base_count
            """,
    }
    assert problems(tmp_path, files) == []


def test_a_global_declaration_makes_a_use(tmp_path):
    files = {
        "base.pxi": BASE,
        "user.pxi": """
            # Provides: a user that changes a module variable.
            # Uses: base.pxi.

            def user():
                global LIMIT
                LIMIT = 20
            """,
    }
    assert problems(tmp_path, files) == []


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ("# Uses: nothing.\n", 'does not open with a "# Provides:" line'),
        ("# Provides: x.\n#\n# Some text.\n", 'has no "# Uses:" line in its opening comment block'),
        ("# Provides: x.\n# Uses: base.pxi\n#\n", "its Uses entry does not end with a full stop"),
        (
            "# Provides: x.\n# Uses: every file above.\n",
            "cannot read 'every file above' in its Uses entry (a file name, optionally with a "
            "note in parentheses, or nothing)",
        ),
        ("# Provides: x.\n# Uses: gone.pxi.\n", "lists gone.pxi, which _core.pyx does not include"),
        ("# Provides: x.\n# Uses: user.pxi.\n", "lists itself"),
        (
            "# Provides: x.\n# Uses: nothing, base.pxi.\n",
            "its Uses entry says nothing and names files",
        ),
    ],
)
def test_a_header_that_cannot_be_read_is_reported(tmp_path, header, problem):
    files = {"base.pxi": BASE, "user.pxi": header + "\nX = 1\n"}
    assert problem in problems(tmp_path, files)


def test_a_remark_after_a_semicolon_and_notes_with_commas_are_allowed(tmp_path):
    files = {
        "base.pxi": BASE,
        "user.pxi": """
            # Provides: a user.
            # Uses: base.pxi (helper, fast; and more); last, so that nothing uses it.
            # The next sentence is no part of the entry: other.pxi.

            X = helper(1)
            """,
    }
    assert problems(tmp_path, files) == []


def test_main_prints_each_problem_and_fails(tmp_path, capsys):
    files = {
        "base.pxi": BASE,
        "user.pxi": "# Provides: a user.\n# Uses: nothing.\n\nX = helper(1)\n",
    }
    assert check_map.main([make_module(tmp_path, files)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("core/user.pxi:2: uses base.pxi (names: helper) but does not list it")
    assert out[1].startswith("check_map: 1 problem(s) in the map of the 2 files")


def test_a_missing_file_is_exit_status_2(tmp_path, capsys):
    (tmp_path / "_core.pyx").write_text('include "core/gone.pxi"\n')
    assert check_map.main([str(tmp_path / "_core.pyx")]) == 2
    assert "gone.pxi" in capsys.readouterr().err
