"""The Cython API (docs/cython.md): a downstream Cython extension, built here against the installed
dlinterop (its .pxd files and dl.get_include()), cimports the public API and calls every entry
point.

The consumer is compiled once per session. It is imported with RuntimeWarnings turned into
errors, so a Tensor layout that no longer matches the .pxd fails instead of warning."""

import gc
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dlinterop as dl

from cython_build import build_extension, import_strictly, pxd_root

CONSUMER = r'''
# cython: language_level=3, boundscheck=False, wraparound=False
from libc.stdint cimport int64_t, uintptr_t
from libc.stdlib cimport free, malloc

from dlinterop.dlpack cimport (
    DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor, DLPACK_FLAG_BITMASK_READ_ONLY,
    kDLCPU, kDLFloat, kDLInt,
)
from dlinterop.tensor cimport (
    DType, Device, Tensor, device_from_dl, dtype_from_dl, empty_tensor, tensor_from_managed,
    tensor_from_object, to_capsule,
)

cdef Py_ssize_t freed = 0


cdef void free_block(DLManagedTensorVersioned* managed) noexcept nogil:
    global freed
    free(managed)
    freed += 1


def deleter_calls():
    return freed


def from_managed(int64_t n, bint readonly, flags=0, major=1):
    """An int64 [0..n) Tensor over one malloc'd block, through tensor_from_managed."""
    cdef size_t header = sizeof(DLManagedTensorVersioned) + sizeof(int64_t)
    cdef DLManagedTensorVersioned* m = <DLManagedTensorVersioned*>malloc(
        header + n * sizeof(int64_t))
    cdef int64_t* data = <int64_t*>(<char*>m + header)
    cdef int64_t i
    for i in range(n):
        data[i] = i
    (<int64_t*>(m + 1))[0] = n
    m.version.major = major
    m.version.minor = 3
    m.manager_ctx = NULL
    m.deleter = free_block
    m.flags = flags
    m.dl_tensor.data = data
    m.dl_tensor.device.device_type = kDLCPU
    m.dl_tensor.device.device_id = 0
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype.code = kDLInt
    m.dl_tensor.dtype.bits = 64
    m.dl_tensor.dtype.lanes = 1
    m.dl_tensor.shape = <int64_t*>(m + 1)
    m.dl_tensor.strides = NULL
    m.dl_tensor.byte_offset = 0
    return tensor_from_managed(m, readonly)


def fields(Tensor t):
    """Every DLTensor field, read through dltensor() without the GIL."""
    cdef const DLTensor* d
    cdef int ndim, i
    cdef int64_t dims[64]
    cdef int64_t steps[64]
    cdef uintptr_t address
    with nogil:
        d = t.dltensor()
        ndim = d.ndim
        for i in range(ndim):
            dims[i] = d.shape[i]
            steps[i] = d.strides[i]
        address = <uintptr_t>d.data + d.byte_offset
    return (ndim, tuple([dims[i] for i in range(ndim)]), tuple([steps[i] for i in range(ndim)]),
            address, (d.dtype.code, d.dtype.bits, d.dtype.lanes),
            (<int>d.device.device_type, d.device.device_id))


def from_object(obj):
    return tensor_from_object(obj)


def capsule(Tensor t, bint versioned):
    return to_capsule(t, versioned)


def empty(shape, int code, int bits):
    cdef int64_t dims[64]
    cdef DLDataType dt
    cdef DLDevice cpu
    for i, extent in enumerate(shape):
        dims[i] = extent
    dt.code = code
    dt.bits = bits
    dt.lanes = 1
    cpu.device_type = kDLCPU
    cpu.device_id = 0
    return empty_tensor(len(shape), dims, dt, cpu)


def dtype_and_device(Tensor t):
    """dtype_from_dl / device_from_dl, and the cdef fields of DType and Device."""
    cdef DType dt = dtype_from_dl(t.dltensor().dtype)
    cdef Device dev = device_from_dl(t.dltensor().device)
    return dt, dev, dt.name, dt.itemsize, dt.dl.bits, <int>dev.dl.device_type


def fill_with_memoryview(Tensor t, float value):
    """A typed memoryview over a 2-d C-contiguous float32 Tensor (the buffer protocol)."""
    cdef float[:, ::1] v = t
    cdef Py_ssize_t i, j
    with nogil:
        for i in range(v.shape[0]):
            for j in range(v.shape[1]):
                v[i, j] = value + i * v.shape[1] + j


def tensor_from_object_loop(obj, Py_ssize_t n):
    """n calls of tensor_from_object, for the per-call cost."""
    cdef Py_ssize_t k
    for k in range(n):
        tensor_from_object(obj)


def read_loop(Tensor t, Py_ssize_t n):
    """n reads of the shape and data pointer through dltensor(), for the per-call cost."""
    cdef Py_ssize_t k
    cdef int i
    cdef const DLTensor* d
    cdef uintptr_t acc = 0
    for k in range(n):
        d = t.dltensor()
        for i in range(d.ndim):
            acc += <uintptr_t>d.shape[i]
        acc += <uintptr_t>d.data + d.byte_offset
    return acc
'''


@pytest.fixture(scope="session")
def consumer_path(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cython_consumer")
    try:
        return build_extension(CONSUMER, "dl_consumer", str(directory))
    except subprocess.CalledProcessError as e:
        pytest.fail(f"building the downstream consumer failed:\n{e.stdout}\n{e.stderr}")


@pytest.fixture(scope="session")
def consumer(consumer_path):
    return import_strictly("dl_consumer", consumer_path)


def test_public_pxd_files_ship_with_the_package():
    root = os.path.join(pxd_root(), "dlinterop")
    assert {"dlpack.pxd", "tensor.pxd", "_core.pxd", "frameworks.pxd", "_same_build.pxd"} <= set(
        os.listdir(root)
    )
    assert os.path.isfile(os.path.join(dl.get_include(), "dlpack", "dlpack.h"))


def test_consumer_imports_in_a_strict_interpreter(consumer_path):
    code = (
        "import importlib.util, sys; "
        "spec = importlib.util.spec_from_file_location('dl_consumer', sys.argv[1]); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
        "print(m.empty((2,), 2, 32).shape)"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", code, consumer_path],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(2,)"


def test_tensor_from_object_shares_numpy_memory(consumer):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1:]
    t = consumer.from_object(a)
    assert type(t) is dl.Tensor
    assert t.data_ptr == a.ctypes.data
    assert t.shape == (3, 3) and t.strides == (4, 1)


def test_tensor_from_object_of_a_capsule_and_a_tensor(consumer):
    src = dl.zeros((2, 2), "int32")
    assert consumer.from_object(src).data_ptr == src.data_ptr
    assert consumer.from_object(dl.to_dlpack(src)).data_ptr == src.data_ptr


def test_tensor_from_object_raises_type_error(consumer):
    with pytest.raises(TypeError):
        consumer.from_object(object())


def test_dltensor_fields_match_python_attributes(consumer):
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)[::-1, 1:, ::2]
    t = dl.from_dlpack(a)
    ndim, shape, strides, address, dtype, device = consumer.fields(t)
    assert (ndim, shape, strides, address) == (t.ndim, t.shape, t.strides, t.data_ptr)
    assert dtype == t.dtype.__dlpack_data_type__() == (2, 32, 1)
    assert device == (1, 0)


def test_a_view_is_a_tensor_to_the_cython_api(consumer):
    base = dl.from_dlpack(np.arange(24, dtype=np.float32).reshape(4, 6))
    view = base[1:3, ::-2].T
    ndim, shape, strides, address, dtype, device = consumer.fields(view)
    assert (ndim, shape, strides, address) == (2, (3, 2), (-2, 6), view.data_ptr)
    assert address == base.data_ptr + (6 + 5) * 4
    row = base[2]
    consumer.fill_with_memoryview(row.view(1, 6), 10.0)  # a typed memoryview writes it
    assert np.from_dlpack(base)[2].tolist() == [10, 11, 12, 13, 14, 15]


def test_dltensor_of_a_0d_tensor(consumer):
    t = dl.full((), 7, dtype="int64")
    assert consumer.fields(t)[:4] == (0, (), (), t.data_ptr)


@pytest.mark.parametrize("readonly", [False, True])
def test_tensor_from_managed_owns_the_block(consumer, readonly):
    before = consumer.deleter_calls()
    t = consumer.from_managed(5, readonly)
    assert t.shape == (5,) and t.dtype == dl.int64 and t.strides == (1,)
    assert t.readonly is readonly
    assert np.from_dlpack(t).tolist() == [0, 1, 2, 3, 4]
    assert consumer.deleter_calls() == before
    del t
    gc.collect()
    assert consumer.deleter_calls() == before + 1


def test_tensor_from_managed_honours_the_read_only_flag(consumer):
    t = consumer.from_managed(2, False, 1)  # DLPACK_FLAG_BITMASK_READ_ONLY
    assert t.readonly


def test_tensor_from_managed_failure_runs_the_deleter_once(consumer):
    before = consumer.deleter_calls()
    with pytest.raises(BufferError, match="major version"):
        consumer.from_managed(3, False, 0, 2)
    gc.collect()
    assert consumer.deleter_calls() == before + 1


@pytest.mark.parametrize("versioned,name", [(True, "dltensor_versioned"), (False, "dltensor")])
def test_to_capsule(consumer, versioned, name):
    t = dl.full((2, 3), 1.5)
    exports = dl.memory_stats()["live_exports"]
    c = consumer.capsule(t, versioned)
    assert f'"{name}"' in repr(c)
    assert dl.memory_stats()["live_exports"] == exports + 1
    back = dl.from_dlpack(c)
    assert back.data_ptr == t.data_ptr and back.shape == (2, 3)
    del c, back
    gc.collect()
    assert dl.memory_stats()["live_exports"] == exports


def test_to_capsule_legacy_refuses_read_only(consumer):
    t = consumer.from_managed(2, True)
    with pytest.raises(BufferError):
        consumer.capsule(t, False)


@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 3), (1, 2, 3, 4, 5, 6)])
def test_empty_tensor(consumer, shape):
    t = consumer.empty(shape, 2, 32)
    assert t.shape == shape and t.dtype == dl.float32 and t.is_contiguous()
    assert t.owner is None and not t.readonly
    assert t.data_ptr % 256 == 0


def test_empty_tensor_rejects_an_unknown_dtype(consumer):
    with pytest.raises(ValueError, match="data type"):
        consumer.empty((2,), 2, 7)


def test_dtype_and_device_from_dl(consumer):
    dt, dev, name, itemsize, bits, device_type = consumer.dtype_and_device(dl.zeros(3, "float16"))
    assert dt is dl.float16 and dev == "cpu:0"
    assert (name, itemsize, bits, device_type) == ("float16", 2, 16, 1)


def test_typed_memoryview_writes_the_tensor(consumer):
    t = dl.zeros((2, 3), "float32")
    consumer.fill_with_memoryview(t, 10.0)
    assert np.from_dlpack(t).tolist() == [[10, 11, 12], [13, 14, 15]]


def test_typed_memoryview_refuses_a_read_only_tensor(consumer):
    a = np.zeros((2, 3), np.float32)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly
    with pytest.raises(BufferError, match="read-only"):
        consumer.fill_with_memoryview(t, 1.0)


def test_loops_run(consumer):
    a = np.zeros((2, 3), np.float32)
    consumer.tensor_from_object_loop(a, 3)
    t = dl.from_dlpack(a)
    assert consumer.read_loop(t, 1) == 5 + t.data_ptr


def test_changed_class_layout_is_an_error(tmp_path):
    """The guard the consumer fixture relies on: built against a Tensor layout that is
    smaller than the real one, an extension must fail to import under the strict filter."""
    stale = tmp_path / "pxd" / "dlinterop"
    stale.mkdir(parents=True)
    for name in ("dlpack.pxd", "tensor.pxd", "_core.pxd"):
        shutil.copy(os.path.join(pxd_root(), "dlinterop", name), stale / name)
    (stale / "__init__.pxd").write_text("")
    core = (stale / "_core.pxd").read_text()
    body = core[core.index("cdef class Tensor:") :]
    fields = [line for line in body.splitlines()[1:] if re.match(r"\s+cdef (?!.*\()", line)]
    core = core.replace(fields[-1] + "\n", "", 1)  # drop the last field of Tensor
    (stale / "_core.pxd").write_text(core)
    path = build_extension(
        "from dlinterop.tensor cimport Tensor\n",
        "dl_stale",
        str(tmp_path),
        include_root=str(tmp_path / "pxd"),
    )
    with pytest.raises(RuntimeWarning, match="size changed"):
        import_strictly("dl_stale", path)


def test_a_build_against_another_release_refuses_to_import(tmp_path):
    """The same-build tier compiles the layout of dlinterop's objects in: a module built
    against another release (here, its .pxd files as 0.1.0 had them) must refuse to import
    with an ImportError that says what to do, not read fields of another layout."""
    stale = tmp_path / "pxd" / "dlinterop"
    stale.mkdir(parents=True)
    for name in ("dlpack.pxd", "tensor.pxd", "_core.pxd", "_same_build.pxd"):
        shutil.copy(os.path.join(pxd_root(), "dlinterop", name), stale / name)
    (stale / "__init__.pxd").write_text("")
    tag = re.sub(r"\W", "_", dl.__version__)
    text = (stale / "_same_build.pxd").read_text()
    assert f"SameBuild_{tag} " in text
    (stale / "_same_build.pxd").write_text(text.replace(f"SameBuild_{tag} ", "SameBuild_0_1_0 "))
    path = build_extension(
        "from dlinterop.tensor cimport Tensor\n",
        "dl_other_release",
        str(tmp_path),
        include_root=str(tmp_path / "pxd"),
    )
    with pytest.raises(ImportError) as refused:
        import_strictly("dl_other_release", path)
    assert str(refused.value).startswith(
        "this extension was built against dlinterop 0.1.0's same-build Cython API "
        f"(dlinterop.tensor, dlinterop.frameworks), which compiles in the layout of "
        f"dlinterop's objects and runs only on that release; the installed dlinterop is "
        f"{dl.__version__}: rebuild the extension against it, or install dlinterop==0.1.0"
    )
