"""The stable ABI's versions: an extension targets the oldest table by default (as NumPy's
NPY_TARGET_VERSION), runs on every table of its major version from its target on, gets an
ImportError naming the release it needs otherwise, and uses a later minor version's entries
only where it asks for them. Plain C extensions built with the Limited API; an older table is
the installed one with its minor version lowered (CI runs the example downstream package on
a real older dlinterop too: .ci/downstream-abi.sh)."""

import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import textwrap

import pytest

import dlinterop as dl

HEADER = os.path.join(dl.get_include(), "dlinterop", "abi.h")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

C_SOURCE = r"""
#include <Python.h>
#include "dlpack/dlpack.h"
#include "dlinterop/abi.h"

static PyObject* total(PyObject* self, PyObject* obj) {
  PyObject* t = DLInterop_TensorFromObject(obj);
  if (t == NULL) return NULL;
  DLTensor* d = DLInterop_DLTensor(t);
  double sum = 0;
  if (d != NULL) {
    const float* first = (const float*)((const char*)d->data + d->byte_offset);
    for (int64_t i = 0; i < d->shape[0]; i++) sum += first[i * d->strides[0]];
  }
  Py_DECREF(t);
  return d == NULL ? NULL : PyFloat_FromDouble(sum);
}

static PyObject* target(PyObject* self, PyObject* unused) {
  return PyLong_FromLong(DLINTEROP_TARGET_MINOR);
}

#if DLINTEROP_TARGET_MINOR >= 1 || defined(DLINTEROP_ALLOW_NEWER_ENTRIES)
/* A 1.1 entry: with DLINTEROP_ALLOW_NEWER_ENTRIES, NotImplementedError on a 1.0 table. */
static PyObject* flags(PyObject* self, PyObject* obj) {
  uint64_t found;
  return DLInterop_TensorFlags(obj, &found) < 0 ? NULL : PyLong_FromUnsignedLongLong(found);
}
#elif defined(USE_NEWER_ENTRY)
static PyObject* flags(PyObject* self, PyObject* obj) {  /* must not compile */
  uint64_t found;
  return DLInterop_TensorFlags(obj, &found) < 0 ? NULL : PyLong_FromUnsignedLongLong(found);
}
#else
static PyObject* flags(PyObject* self, PyObject* obj) { return PyLong_FromLong(-1); }
#endif

#if DLINTEROP_TARGET_MINOR >= 1 || defined(DLINTEROP_ALLOW_NEWER_ENTRIES) || \
    defined(USE_NEWER_EXCHANGE) /* the last: must not compile */
/* Another 1.1 entry: the address of the exchange table for obj's type. */
static PyObject* exchange(PyObject* self, PyObject* obj) {
  const DLPackExchangeAPI* api = DLInterop_ExchangeAPIFor(Py_TYPE(obj));
  return api == NULL ? NULL : PyLong_FromVoidPtr((void*)api);
}
#else
static PyObject* exchange(PyObject* self, PyObject* obj) { return PyLong_FromLong(-1); }
#endif

static PyMethodDef methods[] = {{"total", total, METH_O, NULL},
                                {"exchange", exchange, METH_O, NULL},
                                {"target", target, METH_NOARGS, NULL},
                                {"flags", flags, METH_O, NULL},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "abi_c", NULL, -1, methods};

PyMODINIT_FUNC PyInit_abi_c(void) {
  if (DLInterop_Import() < 0) return NULL;
  return PyModule_Create(&module);
}
"""


# Free-threaded CPython 3.13 has no Limited API (Python.h refuses Py_LIMITED_API there):
# the same extension is built with the full C API, and the table is what it calls either way.
LIMITED_API = [] if sysconfig.get_config_var("Py_GIL_DISABLED") else ["-DPy_LIMITED_API=0x030A0000"]


def _build_c(directory, header_text=None, defines=()):
    """Builds abi_c in `directory` with the Limited API of Python 3.10 where the interpreter
    has one (the header edited to `header_text` when given: an extension built against
    another dlinterop)."""
    include = os.path.join(directory, "include")
    os.makedirs(os.path.join(include, "dlinterop"), exist_ok=True)
    with open(os.path.join(include, "dlinterop", "abi.h"), "w") as f:
        f.write(header_text if header_text is not None else open(HEADER).read())
    source = os.path.join(directory, "abi_c.c")
    with open(source, "w") as f:
        f.write(C_SOURCE)
    out = os.path.join(directory, "abi_c" + sysconfig.get_config_var("EXT_SUFFIX"))
    flags = [sysconfig.get_config_var(v) or "" for v in ("LDSHARED", "CFLAGS", "CCSHARED")]
    command = " ".join(flags).split() + [
        "-O0", "-Werror=implicit-function-declaration", *LIMITED_API,
        *[f"-D{d}" for d in defines], "-I", include, "-I", sysconfig.get_paths()["include"],
        "-I", dl.get_include(), source, "-o", out,
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True)
    return out


# A child's prelude that lowers the installed table's minor version to `minor`, as a
# dlinterop of that version would publish it: the table copied (its first entries are that
# version's, in the same places) and published in a capsule of the same name.
OLDER_TABLE = """
import ctypes, dlinterop._capi as capi
NAME = b"dlinterop._capi.abi_table"
get = ctypes.pythonapi.PyCapsule_GetPointer
get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
new = ctypes.pythonapi.PyCapsule_New
new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
address = get(capi.abi_table, NAME)
size = ctypes.c_uint64.from_address(address + 8).value
copy = ctypes.create_string_buffer(ctypes.string_at(address, size), size)
ctypes.c_uint32.from_buffer(copy, 4).value = {minor}
capi.abi_table = new(ctypes.addressof(copy), NAME, None)
"""


def _import_apart(path, call="total(dl.arange(1, 4, dtype='float32'))", table_minor=None):
    """Imports the extension at `path` in a fresh interpreter (whose table has minor version
    `table_minor` when given) and calls `call` on it: what it printed, or the error it
    raised (as 'ImportError: ...')."""
    prelude = OLDER_TABLE.format(minor=table_minor) if table_minor is not None else ""
    code = prelude + textwrap.dedent(f"""
        import importlib.util, dlinterop as dl
        spec = importlib.util.spec_from_file_location("abi_c", {path!r})
        try:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except ImportError as error:
            print("ImportError:", error)
        else:
            try:
                print(module.{call})
            except NotImplementedError as error:
                print("NotImplementedError:", error)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _header_of_version(major, minor):
    text = open(HEADER).read()
    text = re.sub(r"#define DLINTEROP_ABI_MAJOR \d+", f"#define DLINTEROP_ABI_MAJOR {major}", text)
    return re.sub(r"#define DLINTEROP_ABI_MINOR \d+", f"#define DLINTEROP_ABI_MINOR {minor}", text)


def test_a_c_extension_with_the_limited_api_calls_the_table(tmp_path):
    assert _import_apart(_build_c(str(tmp_path))) == "6.0"


def test_the_default_target_is_the_oldest_table(tmp_path):
    path = _build_c(str(tmp_path))
    assert _import_apart(path, "target()") == "0"
    assert _import_apart(path, table_minor=0) == "6.0"


@pytest.mark.parametrize(
    "use, entry",
    [
        ("USE_NEWER_ENTRY", "DLInterop_TensorFlags"),
        ("USE_NEWER_EXCHANGE", "DLInterop_ExchangeAPIFor"),
    ],
)
def test_a_newer_tables_entry_does_not_compile_for_the_default_target(tmp_path, use, entry):
    with pytest.raises(subprocess.CalledProcessError) as failed:
        _build_c(str(tmp_path), defines=[use])
    assert f"{entry}_is_ABI_1_1_define_DLINTEROP_TARGET_MINOR_1" in failed.value.stderr


def test_targeting_a_newer_table_needs_it_at_import(tmp_path):
    path = _build_c(str(tmp_path), defines=["DLINTEROP_TARGET_MINOR=1"])
    assert _import_apart(path, "flags(dl.zeros(2))") == "0"
    said = _import_apart(path, table_minor=0)
    assert said == (
        f"ImportError: this extension needs dlinterop's C ABI 1.1 or newer (dlinterop 0.2.0 or "
        f"newer), and the installed dlinterop {dl.__version__} has C ABI 1.0: upgrade "
        f"dlinterop (or build the extension with DLINTEROP_TARGET_MINOR=0, if it calls only "
        f"what that version has)"
    )


def test_newer_entries_allowed_are_checked_at_run_time(tmp_path):
    path = _build_c(str(tmp_path), defines=["DLINTEROP_ALLOW_NEWER_ENTRIES"])
    assert _import_apart(path, "flags(dl.zeros(2))") == "0"
    assert _import_apart(path, table_minor=0) == "6.0"
    assert _import_apart(path, "flags(dl.zeros(2))", table_minor=0) == (
        f"NotImplementedError: DLInterop_TensorFlags needs dlinterop's C ABI 1.1 (dlinterop "
        f"0.2.0 or newer), and the installed dlinterop {dl.__version__} has C ABI 1.0: "
        f"upgrade dlinterop"
    )
    assert int(_import_apart(path, "exchange(dl.zeros(2))")) > 0
    assert _import_apart(path, "exchange(dl.zeros(2))", table_minor=0) == (
        f"NotImplementedError: DLInterop_ExchangeAPIFor needs dlinterop's C ABI 1.1 (dlinterop "
        f"0.2.0 or newer), and the installed dlinterop {dl.__version__} has C ABI 1.0: "
        f"upgrade dlinterop"
    )


def test_an_extension_needing_a_newer_table_gets_an_import_error(tmp_path):
    path = _build_c(str(tmp_path), _header_of_version(1, 7), ["DLINTEROP_TARGET_MINOR=7"])
    assert _import_apart(path) == (
        f"ImportError: this extension needs dlinterop's C ABI 1.7 or newer (a newer "
        f"dlinterop), and the installed dlinterop {dl.__version__} has C ABI 1.1: upgrade "
        f"dlinterop (or build the extension with DLINTEROP_TARGET_MINOR=1, if it calls only "
        f"what that version has)"
    )


def test_a_build_against_a_newer_header_runs_on_an_older_table(tmp_path):
    assert _import_apart(_build_c(str(tmp_path), _header_of_version(1, 7))) == "6.0"


def test_another_major_version_gets_an_import_error(tmp_path):
    said = _import_apart(_build_c(str(tmp_path), _header_of_version(2, 0)))
    assert said == (
        f"ImportError: this extension was built for dlinterop's C ABI 2.x, and the installed "
        f"dlinterop {dl.__version__} has C ABI 1.1: rebuild the extension against it, or "
        f"install a dlinterop with C ABI 2.x"
    )


def test_a_target_newer_than_the_header_does_not_compile(tmp_path):
    with pytest.raises(subprocess.CalledProcessError) as failed:
        _build_c(str(tmp_path), defines=["DLINTEROP_TARGET_MINOR=2"])
    assert "DLINTEROP_TARGET_MINOR is newer than this dlinterop/abi.h" in failed.value.stderr


def _release(text):
    return tuple(int(part) for part in text.split("."))


def test_the_header_names_the_first_release_of_each_table():
    """What a dependent declares (dlinterop>=that release), and what the ImportError asks
    for: a release per minor version, in order, each in the changelog saying so."""
    header = open(HEADER).read()
    releases = dict(re.findall(r'#define DLINTEROP_ABI_1_(\d+)_RELEASE "([^"]+)"', header))
    minor = int(re.search(r"#define DLINTEROP_ABI_MINOR (\d+)", header).group(1))
    assert sorted(map(int, releases)) == list(range(minor + 1))
    ordered = [_release(releases[str(m)]) for m in range(minor + 1)]
    assert ordered == sorted(set(ordered)) and ordered[-1] <= _release(dl.__version__)
    changelog = open(os.path.join(ROOT, "CHANGELOG.md")).read()
    for m in range(minor + 1):
        section = changelog.split(f"\n## {releases[str(m)]}", 1)[1].split("\n## ", 1)[0]
        assert f"C ABI table 1.{m}" in " ".join(section.split()), releases[str(m)]


def test_an_installed_dlinterop_without_the_table_gets_an_import_error(tmp_path):
    path = _build_c(str(tmp_path))
    code = textwrap.dedent(f"""
        import importlib.util, dlinterop._capi as capi
        del capi.abi_table   # as a dlinterop from before the stable ABI
        spec = importlib.util.spec_from_file_location("abi_c", {path!r})
        try:
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        except ImportError as error:
            print(error)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == (
        f"this extension was built for dlinterop's C ABI 1.0, and the installed dlinterop "
        f"{dl.__version__} has no C ABI table: upgrade dlinterop"
    ), proc.stderr


def test_importlib_finds_the_header_where_the_docs_say():
    assert os.path.isfile(HEADER)
    assert importlib.util.find_spec("dlinterop._capi") is not None
