"""The stable ABI: the versioned table of dlinterop/abi.h, which dlinterop._capi publishes,
called from a Cython extension through dlinterop/abi.pxd and from a C extension through the
header alone (built with the Limited API), and the version checks of its import."""

import ctypes
import gc
import os
import re
import weakref

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _capi
from tests.support.cython_build import build_extension, import_strictly

HEADER = os.path.join(dl.get_include(), "dlinterop", "abi.h")

CYTHON_SOURCE = """
# cython: language_level=3
from libc.stdint cimport int64_t, uint64_t
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
from dlinterop.abi cimport abi_minor, from_dlpack, tensor_flags   # 1.1: built with target 1
from cpython.object cimport PyTypeObject
from dlinterop.abi cimport exchange_api_for
from dlinterop.dlpack cimport DLPackExchangeAPI

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


def installed_minor():
    return abi_minor()


def imported(obj, device, int copy):
    cdef DLDevice dev
    if device is None:
        return from_dlpack(obj, NULL, copy)
    if type(device) is tuple:    # as a C caller may fill it, unchecked
        dev.device_type, dev.device_id = device
    else:
        parse_device(device, &dev)
    return from_dlpack(obj, &dev, copy)


def flags(t):
    cdef uint64_t found = 12345
    tensor_flags(t, &found)
    return found


def exchange_table(cls):
    return <size_t>exchange_api_for(<PyTypeObject*>cls)


cdef int raised(int status) except -1:   # -1: the table's function set the exception
    return status


def exchange_view(obj):
    cls = type(obj)
    cdef const DLPackExchangeAPI* api = exchange_api_for(<PyTypeObject*>cls)
    cdef DLTensor view
    raised(api.dltensor_from_py_object_no_sync(<void*>obj, &view))
    return (<size_t>view.data + view.byte_offset, tuple([view.shape[i] for i in range(view.ndim)]),
            tuple([view.strides[i] for i in range(view.ndim)]),
            (view.dtype.code, view.dtype.bits, view.dtype.lanes))
"""


@pytest.fixture(scope="module")
def abi_ext(tmp_path_factory):
    path = build_extension(
        CYTHON_SOURCE,
        "abi_ext",
        str(tmp_path_factory.mktemp("abi")),
        defines=["DLINTEROP_TARGET_MINOR=1"],
    )
    return import_strictly("abi_ext", path)


def test_the_table_is_published_with_its_version(abi_ext):
    assert type(_capi.abi_table).__name__ == "PyCapsule"
    assert re.search(r'capsule object "dlinterop._capi.abi_table"', repr(_capi.abi_table))
    assert abi_ext.versions() == (1, 1, 1)
    assert abi_ext.installed_minor() == _capi.abi_version()[1] == 1


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


# -- the entries of table 1.1 --------------------------------------------------------------


def test_from_dlpack_shares_unless_a_copy_is_asked_for(abi_ext):
    a = np.arange(4, dtype=np.float32)
    shared = abi_ext.imported(a, None, -1)
    assert type(shared) is dl.Tensor and shared.data_ptr == a.ctypes.data
    assert abi_ext.imported(a, "cpu", 0).data_ptr == a.ctypes.data
    copied = abi_ext.imported(a, None, 1)
    assert copied.data_ptr != a.ctypes.data and copied.tolist() == a.tolist()


def test_from_dlpack_refuses_a_copy_that_copy_false_forbids(abi_ext):
    with pytest.raises(dl.CopyError, match="from cpu:0 to cuda:0 needs a copy"):
        abi_ext.imported(dl.zeros(3), "cuda:0", 0)


@pytest.mark.parametrize("copy", [-2, 2, 7])
def test_from_dlpack_names_a_copy_value_it_does_not_know(abi_ext, copy):
    with pytest.raises(
        ValueError,
        match=rf"copy must be -1 \(None\), 0 \(False\) or 1 "
        rf"\(True\), got {copy}",
    ):
        abi_ext.imported(np.zeros(2), None, copy)


def test_from_dlpack_refuses_a_device_no_import_takes(abi_ext):
    with pytest.raises(ValueError, match="device index must be >= 0"):
        abi_ext.imported(np.zeros(2), (1, -1), -1)


def test_tensor_flags_are_dlpacks_read_only_and_is_copied(abi_ext):
    frozen = np.zeros(3, np.float32)
    frozen.flags.writeable = False
    read_only, is_copied = 1, 2  # DLPACK_FLAG_BITMASK_READ_ONLY, _IS_COPIED
    assert abi_ext.flags(dl.zeros(3)) == 0
    assert abi_ext.flags(dl.from_dlpack(frozen)) == read_only
    assert abi_ext.flags(dl.from_dlpack(np.zeros(3), copy=True)) == is_copied
    legacy = dl.from_dlpack(np.zeros(3).__dlpack__())  # assumed read-only: DLPack's bit only
    assert legacy.readonly and abi_ext.flags(legacy) == read_only
    with pytest.raises(TypeError, match="expected a dlinterop Tensor, got list"):
        abi_ext.flags([1.0])


def _capsule_pointer(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, b"dlpack_exchange_api")


class Producer:
    """A type dlinterop has no table of its own for: the generic table's."""

    def __dlpack__(self, **kwargs):
        return np.zeros(2).__dlpack__(**kwargs)


@pytest.mark.parametrize("cls", [dl.Tensor, np.ndarray, Producer], ids=lambda c: c.__name__)
def test_exchange_api_for_is_the_table_of_dl_exchange_api_for(abi_ext, cls):
    address = abi_ext.exchange_table(cls)
    assert address == _capsule_pointer(dl.exchange_api_for(cls)) != 0
    assert abi_ext.exchange_table(cls) == address  # cached: the same table again


def test_exchange_api_for_tables_differ_by_type(abi_ext):
    found = {abi_ext.exchange_table(cls) for cls in (dl.Tensor, np.ndarray, Producer)}
    assert len(found) == 3


def test_exchange_api_for_numpy_views_the_array_in_place(abi_ext):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    assert abi_ext.exchange_view(a) == (a.ctypes.data, (3, 2), (4, 2), (2, 32, 1))
    with pytest.raises(BufferError, match="generic exchange table cannot give a non-owning"):
        abi_ext.exchange_view(Producer())


def test_exchange_api_for_refuses_a_type_without_dlpack(abi_ext):
    with pytest.raises(TypeError, match="int objects have no __dlpack__"):
        abi_ext.exchange_table(int)
    with pytest.raises(TypeError, match="exchange_api_for takes a type, got int"):
        abi_ext.exchange_table(3)


def test_exchange_api_for_follows_a_type_that_changes(abi_ext):
    class Late:
        pass

    with pytest.raises(TypeError, match="Late objects have no __dlpack__"):
        abi_ext.exchange_table(Late)
    Late.__dlpack__ = Producer.__dlpack__
    assert abi_ext.exchange_table(Late) == abi_ext.exchange_table(Producer)


def test_exchange_api_for_lets_the_type_die(abi_ext, classes_can_die):
    class Passing(Producer):
        pass

    assert abi_ext.exchange_table(Passing) == abi_ext.exchange_table(Producer)
    ref = weakref.ref(Passing)
    del Passing
    gc.collect()
    assert ref() is None
