"""The stable ABI: the versioned table of dlinterop/abi.h, which dlinterop._capi publishes,
called from a Cython extension through dlinterop/abi.pxd and from a C extension through the
header alone (built with the Limited API), and the version checks of its import."""

import gc
import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import textwrap

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _capi
from tests.support.cython_build import build_extension, import_strictly

HEADER = os.path.join(dl.get_include(), "dlinterop", "abi.h")

CYTHON_SOURCE = """
# cython: language_level=3
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from dlinterop.dlpack cimport (
    DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor, kDLCPU, kDLFloat,
)
from dlinterop.abi cimport (
    ArgSpec, DLINTEROP_ABI_MAJOR, DLINTEROP_ABI_MINOR, DLINTEROP_TARGET_MINOR, arg_spec,
    borrow, check_arg, copy_error, device_object, dltensor, dtype_object, empty_like,
    empty_tensor, import_dlinterop, is_tensor, parse_device, parse_dtype, tensor_from_managed,
    tensor_from_object, to_capsule, to_framework, zeros_like,
)

import_dlinterop()

cdef long deleter_calls = 0

cdef void free_block(DLManagedTensorVersioned* managed) noexcept nogil:
    global deleter_calls
    free(managed)
    deleter_calls += 1


def versions():
    return DLINTEROP_ABI_MAJOR, DLINTEROP_ABI_MINOR, DLINTEROP_TARGET_MINOR


def describe(obj):
    t = tensor_from_object(obj)
    cdef DLTensor* d = dltensor(t)
    return (d.ndim, tuple([d.shape[i] for i in range(d.ndim)]),
            tuple([d.strides[i] for i in range(d.ndim)]), <size_t>d.data + d.byte_offset,
            (d.dtype.code, d.dtype.bits, d.dtype.lanes), is_tensor(t), is_tensor(obj))


def dltensor_of(obj):
    dltensor(obj)


def ramp(int64_t n, bint readonly):
    cdef DLManagedTensorVersioned* m = <DLManagedTensorVersioned*>malloc(
        sizeof(DLManagedTensorVersioned) + sizeof(int64_t) + n * sizeof(float))
    cdef int64_t* shape = <int64_t*>(m + 1)
    cdef float* data = <float*>(shape + 1)
    cdef int64_t i
    for i in range(n):
        data[i] = i
    shape[0] = n
    m.version.major, m.version.minor = 1, 3
    m.manager_ctx = NULL
    m.deleter = free_block
    m.flags = 0
    m.dl_tensor.data = data
    m.dl_tensor.device.device_type, m.dl_tensor.device.device_id = kDLCPU, 0
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits, m.dl_tensor.dtype.lanes = kDLFloat, 32, 1
    m.dl_tensor.shape = shape
    m.dl_tensor.strides = NULL
    m.dl_tensor.byte_offset = 0
    return tensor_from_managed(m, readonly)


def deleters():
    return deleter_calls


def capsule(t, bint versioned):
    return to_capsule(t, versioned)


def empty(shape, dtype, device):
    cdef int64_t dims[8]
    cdef DLDataType dt
    cdef DLDevice dev
    for i, extent in enumerate(shape):
        dims[i] = extent
    parse_dtype(dtype, &dt)
    parse_device(device, &dev)
    return empty_tensor(len(shape), dims, dt, dev)


def doubled(x, bint zeros=False):
    cdef DLTensor src
    cdef bint readonly
    cdef ArgSpec spec = arg_spec()
    spec.dtype_code, spec.dtype_bits, spec.device_type, spec.c_contiguous = kDLFloat, 32, kDLCPU, 1
    keeper = borrow(x, &src, &readonly)
    check_arg(&src, readonly, "x", &spec)
    make = zeros_like if zeros else empty_like
    out = make(x, src.ndim, src.shape, src.dtype, src.device)
    cdef float* b = <float*>dltensor(out).data
    cdef const float* a = <const float*>(<char*>src.data + src.byte_offset)
    cdef int64_t n = 1, i
    for i in range(src.ndim):
        n *= src.shape[i]
    if not zeros:
        for i in range(n):
            b[i] = 2 * a[i]
    return to_framework(out, x)


def writable(x):
    cdef DLTensor src
    cdef bint readonly
    cdef ArgSpec spec = arg_spec()
    spec.writable = 1
    keeper = borrow(x, &src, &readonly)
    check_arg(&src, readonly, "out", &spec)
    return readonly


def named(dtype, device):
    cdef DLDataType dt
    cdef DLDevice dev
    parse_dtype(dtype, &dt)
    parse_device(device, &dev)
    return dtype_object(dt), device_object(dev)


def copy_error_class():
    return copy_error()
"""


@pytest.fixture(scope="module")
def abi_ext(tmp_path_factory):
    path = build_extension(CYTHON_SOURCE, "abi_ext", str(tmp_path_factory.mktemp("abi")))
    return import_strictly("abi_ext", path)


def test_the_table_is_published_with_its_version(abi_ext):
    assert type(_capi.abi_table).__name__ == "PyCapsule"
    assert re.search(r'capsule object "dlinterop._capi.abi_table"', repr(_capi.abi_table))
    assert abi_ext.versions() == (1, 0, 0)


def test_tensors_cross_as_objects_and_dltensors(abi_ext):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    ndim, shape, strides, address, dtype, made, given = abi_ext.describe(a)
    assert (ndim, shape, strides, dtype) == (2, (3, 2), (4, 2), (2, 32, 1))
    assert address == a.ctypes.data and made == 1 and given == 0
    with pytest.raises(TypeError, match="expected a dlinterop Tensor, got list"):
        abi_ext.dltensor_of([1])
    with pytest.raises(TypeError, match="expected a dlinterop Tensor, got NoneType"):
        abi_ext.dltensor_of(None)


@pytest.mark.parametrize("readonly", [False, True])
def test_managed_tensors_are_owned_and_released_once(abi_ext, readonly):
    before = abi_ext.deleters()
    t = abi_ext.ramp(5, readonly)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and t.readonly is readonly
    del t
    gc.collect()
    assert abi_ext.deleters() == before + 1


def test_capsules_and_new_tensors(abi_ext):
    t = dl.arange(3, dtype="float32")
    assert dl.from_dlpack(abi_ext.capsule(t, True)).tolist() == [0.0, 1.0, 2.0]
    assert 'dltensor"' in repr(abi_ext.capsule(t, False))
    e = abi_ext.empty((2, 3), "int16", "cpu")
    assert (e.shape, e.dtype, e.device, e.data_ptr % 256) == ((2, 3), dl.int16, dl.Device("cpu"), 0)
    with pytest.raises(ValueError, match="unknown data type name 'no such type'"):
        abi_ext.empty((2,), "no such type", "cpu")
    with pytest.raises(ValueError, match="unknown device 'nope'"):
        abi_ext.empty((2,), "float32", "nope")


def test_the_way_out_returns_the_callers_type(abi_ext):
    x = np.arange(4, dtype=np.float32)
    y = abi_ext.doubled(x)
    assert type(y) is np.ndarray and y.tolist() == [0.0, 2.0, 4.0, 6.0]
    z = abi_ext.doubled(dl.asarray(x), zeros=True)
    assert type(z) is dl.Tensor and z.tolist() == [0.0] * 4
    with pytest.raises(TypeError, match="x: expected dtype float32, got float64"):
        abi_ext.doubled(np.zeros(2))
    frozen = np.zeros(2, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(BufferError, match="out"):
        abi_ext.writable(frozen)
    assert abi_ext.writable(np.zeros(2, np.float32)) == 0


def test_dtypes_devices_and_errors(abi_ext):
    assert abi_ext.named("bfloat16", "cpu") == (dl.bfloat16, dl.Device("cpu"))
    assert abi_ext.named(dl.float8_e4m3fn, "cuda:1") == (dl.float8_e4m3fn, dl.Device("cuda", 1))
    assert abi_ext.copy_error_class() is dl.CopyError


# -- plain C, with the Limited API, and the version checks ---------------------------------

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

static PyMethodDef methods[] = {{"total", total, METH_O, NULL}, {NULL, NULL, 0, NULL}};
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


def _import_apart(path):
    """Imports the extension at `path` in a fresh interpreter and sums [1, 2, 3] with it:
    what it printed, or the error it raised (as 'ImportError: ...')."""
    code = textwrap.dedent(f"""
        import importlib.util, dlinterop as dl
        spec = importlib.util.spec_from_file_location("abi_c", {path!r})
        try:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except ImportError as error:
            print("ImportError:", error)
        else:
            print(module.total(dl.arange(1, 4, dtype="float32")))
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


def test_an_extension_needing_a_newer_table_gets_an_import_error(tmp_path):
    said = _import_apart(_build_c(str(tmp_path), _header_of_version(1, 7)))
    assert said == (
        f"ImportError: this extension needs dlinterop's C ABI 1.7 or newer, and the "
        f"installed dlinterop {dl.__version__} has C ABI 1.0: upgrade dlinterop (or build "
        f"the extension with DLINTEROP_TARGET_MINOR=0, if it calls only what that version has)"
    )


def test_the_target_version_lets_a_newer_build_run_on_an_older_table(tmp_path):
    path = _build_c(str(tmp_path), _header_of_version(1, 7), ["DLINTEROP_TARGET_MINOR=0"])
    assert _import_apart(path) == "6.0"


def test_another_major_version_gets_an_import_error(tmp_path):
    said = _import_apart(_build_c(str(tmp_path), _header_of_version(2, 0)))
    assert said == (
        f"ImportError: this extension was built for dlinterop's C ABI 2.x, and the installed "
        f"dlinterop {dl.__version__} has C ABI 1.0: rebuild the extension against it, or "
        f"install a dlinterop with C ABI 2.x"
    )


def test_a_target_newer_than_the_header_does_not_compile(tmp_path):
    with pytest.raises(subprocess.CalledProcessError) as failed:
        _build_c(str(tmp_path), defines=["DLINTEROP_TARGET_MINOR=1"])
    assert "DLINTEROP_TARGET_MINOR is newer than this dlinterop/abi.h" in failed.value.stderr


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
