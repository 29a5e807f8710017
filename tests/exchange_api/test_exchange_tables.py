"""dl.exchange_api_for: the DLPack 1.3 exchange tables dlinterop publishes for NumPy's
arrays and for any other __dlpack__ producer, called through ctypes as a C consumer would."""

import ctypes
import gc
import sys
import threading
import weakref
from ctypes import POINTER, byref, c_void_p

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core
from exchange_api.helpers import (
    API_NAME,
    CPU,
    CURRENT_STREAM,
    FROM_PY,
    FUNCTIONS,
    TO_PY,
    VIEW,
    DLPackExchangeAPI,
    ManagedFactory,
    dltensor_layout,
    producer_type,
    table_address,
    take_object,
)

from forge import READ_ONLY, DLManagedTensorVersioned, DLTensor, capsule_name

_capsule_pointer = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


class Table:
    """A table from exchange_api_for, its functions as ctypes callables."""

    def __init__(self, capsule):
        assert capsule_name(capsule) == API_NAME
        self.address = _capsule_pointer(capsule, API_NAME.encode())
        self.api = DLPackExchangeAPI.from_address(self.address)
        self.from_py = FROM_PY(self.api.managed_tensor_from_py_object_no_sync)
        self.to_py = TO_PY(self.api.managed_tensor_to_py_object_no_sync)
        self.view_of = VIEW(self.api.dltensor_from_py_object_no_sync)
        self.current_stream = CURRENT_STREAM(self.api.current_work_stream)

    def managed(self, obj):
        out = POINTER(DLManagedTensorVersioned)()
        assert self.from_py(id(obj), byref(out)) == 0
        return out

    def view(self, obj):
        out = DLTensor()
        assert self.view_of(id(obj), byref(out)) == 0
        return out

    def to_object(self, managed):
        out = c_void_p()
        assert self.to_py(managed, byref(out)) == 0
        return take_object(out.value)


NUMPY = Table(dl.exchange_api_for(np.ndarray))


def element_bytes(dl_tensor, itemsize, index):
    """The bytes of one element of a DLTensor, read at the address its strides give."""
    offset = sum(i * s for i, s in zip(index, dl_tensor.strides[: dl_tensor.ndim]))
    address = dl_tensor.data + dl_tensor.byte_offset + offset * itemsize
    return ctypes.string_at(address, itemsize)


DLPACK_CODES = {"b": 6, "i": 0, "u": 1, "f": 2, "c": 5}  # include/dlpack/dlpack.h


def assert_values(dl_tensor, values):
    """dl_tensor has the layout, dtype and every element of the array `values`."""
    assert dl_tensor.device.device_type == CPU
    assert bool(dl_tensor.shape) and bool(dl_tensor.strides), "shape and strides filled"
    shape, strides = dltensor_layout(dl_tensor)
    assert shape == values.shape
    assert len(strides) == values.ndim
    dtype = (dl_tensor.dtype.code, dl_tensor.dtype.bits, dl_tensor.dtype.lanes)
    assert dtype == (DLPACK_CODES[values.dtype.kind], 8 * values.itemsize, 1)
    for index in np.ndindex(*values.shape):
        assert element_bytes(dl_tensor, values.itemsize, index) == values[index].tobytes()


def assert_describes(dl_tensor, array):
    """dl_tensor is a view of `array`: same memory, strides, dtype and every element."""
    assert dl_tensor.data == array.ctypes.data
    assert_values(dl_tensor, array)
    assert dltensor_layout(dl_tensor)[1] == tuple(s // array.itemsize for s in array.strides)


def base():
    return np.arange(60, dtype=np.float32).reshape(3, 4, 5)


LAYOUTS = {
    "C": lambda: base(),
    "Fortran": lambda: np.asfortranarray(base()),
    "sliced": lambda: base()[1:, ::2, 1::3],
    "negative strides": lambda: base()[::-1, :, ::-2],
    "0-d": lambda: np.array(3.5, dtype=np.float32),
    "empty": lambda: base()[:, :0],
    "transposed": lambda: base().transpose(2, 0, 1),
    "broadcast": lambda: np.broadcast_to(np.arange(3.0), (4, 3)),
}

DTYPES = "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64".split()
DTYPES += ["complex64", "complex128"]


def test_tables_are_version_1_3_capsules_with_all_functions():
    for cls in (np.ndarray, producer_type()):
        table = Table(dl.exchange_api_for(cls))
        assert (table.api.header.version.major, table.api.header.version.minor) == (1, 3)
        assert not table.api.header.prev_api
        for name in FUNCTIONS:
            assert getattr(table.api, name), f"{name} is NULL"


def test_dl_tensor_gets_its_own_published_table():
    assert dl.exchange_api_for(dl.Tensor) is dl.Tensor.__dlpack_c_exchange_api__
    assert dl.exchange_api_for(dl.zeros(2)) is dl.Tensor.__dlpack_c_exchange_api__


def test_tables_are_cached_per_type():
    class Sub(np.ndarray):
        pass

    numpy_table = dl.exchange_api_for(np.ndarray)
    assert dl.exchange_api_for(np.zeros(2)) is numpy_table
    assert dl.exchange_api_for(Sub) is numpy_table
    producer = producer_type()
    assert dl.exchange_api_for(producer) is dl.exchange_api_for(producer())
    generic = Table(dl.exchange_api_for(producer)).address
    assert generic != NUMPY.address != table_address(dl.Tensor)


@pytest.mark.parametrize("obj", [3, "text", object(), int, [1.0, 2.0]])
def test_objects_without_dlpack_are_refused(obj):
    with pytest.raises(TypeError, match="no __dlpack__"):
        dl.exchange_api_for(obj)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_numpy_view_is_the_array_in_place(layout):
    array = LAYOUTS[layout]()
    assert_describes(NUMPY.view(array), array)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_numpy_view_of_every_dtype(dtype):
    array = (np.arange(12) % 3).astype(dtype).reshape(3, 4)[:, ::-2]
    assert_describes(NUMPY.view(array), array)


def test_numpy_view_of_a_subclass():
    class Sub(np.ndarray):
        pass

    array = np.arange(6, dtype=np.int32).reshape(2, 3).view(Sub)[:, 1:]
    assert_describes(Table(dl.exchange_api_for(Sub)).view(array), array)


def test_numpy_view_layout_lives_with_the_array():
    array = base()[:, 1:, ::2]
    first = NUMPY.view(array)
    second = NUMPY.view(array)
    # Same layout, same block: a view stays valid however many are taken.
    assert ctypes.addressof(first.strides.contents) == ctypes.addressof(second.strides.contents)
    gc.collect()
    assert_describes(first, array)
    ref = weakref.ref(array)
    before = _core._numpy_view_block_count()
    del array
    assert ref() is None
    assert _core._numpy_view_block_count() == before - 1


def test_numpy_view_does_not_hold_the_array():
    array = base()
    count = sys.getrefcount(array)
    NUMPY.view(array)
    assert sys.getrefcount(array) == count


def test_numpy_owned_tensor_outlives_its_array():
    array = np.arange(24, dtype=np.int64).reshape(4, 6)[::-1, 1::2]
    expected = array.copy()
    managed = NUMPY.managed(array)
    m = managed.contents
    assert (m.version.major, m.version.minor) == (1, 3)
    assert m.flags & READ_ONLY == 0
    ref = weakref.ref(array)
    del array
    gc.collect()
    assert ref() is not None, "the managed tensor holds the array"
    assert_values(m.dl_tensor, expected)
    m.deleter(managed)
    gc.collect()
    assert ref() is None, "the deleter released the array"


def test_numpy_owned_tensor_deleter_releases_exactly_its_reference():
    array = base()[:, ::2]
    count = sys.getrefcount(array)
    managed = NUMPY.managed(array)
    assert sys.getrefcount(array) > count
    managed.contents.deleter(managed)
    gc.collect()
    assert sys.getrefcount(array) == count


@pytest.mark.parametrize("table", ["numpy", "generic"])
def test_read_only_array_gives_a_read_only_tensor(table):
    array = base()
    array.flags.writeable = False
    source = array if table == "numpy" else producer_type()(array)
    owner = NUMPY if table == "numpy" else Table(dl.exchange_api_for(source))
    managed = owner.managed(source)
    try:
        assert managed.contents.flags & READ_ONLY
        assert_describes(managed.contents.dl_tensor, array)
    finally:
        managed.contents.deleter(managed)


def test_numpy_to_py_returns_an_array_sharing_the_memory_and_steals():
    array = base()[1:, ::-1]
    count = sys.getrefcount(array)
    result = NUMPY.to_object(NUMPY.managed(array))
    assert type(result) is np.ndarray
    assert result.ctypes.data == array.ctypes.data
    assert result.strides == array.strides and result.dtype == array.dtype
    np.testing.assert_array_equal(result, array)
    result[0, 0, 0] = -1.0
    assert array[0, 0, 0] == -1.0
    del result
    gc.collect()
    # The tensor was the array's: its deleter ran once, when the result died.
    assert sys.getrefcount(array) == count


def test_numpy_to_py_keeps_read_only():
    array = base()
    array.flags.writeable = False
    assert not NUMPY.to_object(NUMPY.managed(array)).flags.writeable


def test_numpy_to_py_of_a_foreign_tensor_calls_its_deleter_once():
    factory = ManagedFactory()
    result = NUMPY.to_object(ctypes.pointer(factory.make()))
    np.testing.assert_array_equal(result, [1, 2, 3, 4])
    assert factory.deleted == 0
    del result
    gc.collect()
    assert factory.deleted == 1


def test_numpy_to_py_steals_on_failure():
    factory = ManagedFactory()
    managed = factory.make()
    managed.dl_tensor.ndim = -1
    out = c_void_p()
    with pytest.raises(BufferError, match="-1 dimensions"):
        NUMPY.to_py(ctypes.pointer(managed), byref(out))
    assert factory.deleted == 1


@pytest.mark.parametrize("make", [lambda: dl.zeros(3), lambda: [1.0], lambda: 3.0])
def test_numpy_table_refuses_other_objects(make):
    obj = make()
    out = DLTensor()
    with pytest.raises(TypeError, match="numpy.ndarray"):
        NUMPY.view_of(id(obj), byref(out))
    managed = POINTER(DLManagedTensorVersioned)()
    with pytest.raises(TypeError, match="numpy.ndarray"):
        NUMPY.from_py(id(obj), byref(managed))
    assert not managed


def refused_arrays():
    yield "non-native byte order", np.arange(6, dtype=np.float32).astype(">f4")
    yield "strides not whole items", np.zeros(4, dtype="i4,i2")["f0"]
    try:
        import ml_dtypes
    except ImportError:
        return
    yield "ml_dtypes bfloat16", np.arange(4, dtype=ml_dtypes.bfloat16)


@pytest.mark.parametrize("case", list(refused_arrays()), ids=lambda case: case[0])
def test_numpy_table_refuses_what_it_cannot_describe(case):
    array = case[1]
    out = DLTensor()
    with pytest.raises(BufferError, match="cannot view"):
        NUMPY.view_of(id(array), byref(out))
    managed = POINTER(DLManagedTensorVersioned)()
    with pytest.raises(BufferError):
        NUMPY.from_py(id(array), byref(managed))
    assert not managed


def test_numpy_table_owning_export_falls_back_to_numpys_dlpack():
    # An array NumPy made from a capsule: the C route leaves it to NumPy's __dlpack__.
    array = np.from_dlpack(dl.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(BufferError, match="cannot view"):
        NUMPY.view_of(id(array), byref(DLTensor()))
    managed = NUMPY.managed(array)
    try:
        assert_describes(managed.contents.dl_tensor, array)
    finally:
        managed.contents.deleter(managed)


def test_allocator_and_stream_are_dlinterops():
    dl_api = DLPackExchangeAPI.from_address(table_address(dl.Tensor))
    for cls in (np.ndarray, producer_type()):
        table = Table(dl.exchange_api_for(cls))
        assert table.api.managed_tensor_allocator == dl_api.managed_tensor_allocator
        stream = c_void_p(1)
        assert table.current_stream(CPU, 0, byref(stream)) == 0
        assert stream.value is None


def test_generic_table_calls_dlpack_once_per_export():
    producer = producer_type()
    obj = producer(np.arange(6, dtype=np.float64).reshape(2, 3)[:, ::-1])
    table = Table(dl.exchange_api_for(producer))
    managed = table.managed(obj)
    assert producer.dlpack_calls == 1
    assert_describes(managed.contents.dl_tensor, obj.array)
    result = table.to_object(managed)
    assert type(result) is dl.Tensor
    np.testing.assert_array_equal(np.from_dlpack(result), obj.array)


def test_generic_table_refuses_a_view():
    producer = producer_type()
    obj = producer()
    with pytest.raises(BufferError, match="managed_tensor_from_py_object_no_sync"):
        Table(dl.exchange_api_for(producer)).view_of(id(obj), byref(DLTensor()))
    assert producer.dlpack_calls == 0


def test_generic_table_refuses_objects_without_dlpack():
    table = Table(dl.exchange_api_for(producer_type()))
    obj = object()
    with pytest.raises(TypeError, match="__dlpack__"):
        table.from_py(id(obj), byref(POINTER(DLManagedTensorVersioned)()))


@pytest.mark.parametrize("module", ["array_api_strict", "torch"])
def test_generic_table_on_installed_producers(module):
    xp = pytest.importorskip(module)
    x = xp.reshape(xp.arange(12, dtype=xp.float32), (3, 4))[:, 1:]
    expected = np.from_dlpack(x)
    table = Table(dl.exchange_api_for(type(x)))
    assert table.address == Table(dl.exchange_api_for(producer_type())).address != NUMPY.address
    managed = table.managed(x)
    try:
        assert_describes(managed.contents.dl_tensor, expected)
    finally:
        managed.contents.deleter(managed)


def test_numpy_views_from_threads_agree():
    arrays = [base()[:, i % 4 :, :: 1 + i % 3] for i in range(8)]
    layouts = [(a.shape, tuple(s // a.itemsize for s in a.strides)) for a in arrays]
    barrier = threading.Barrier(4)
    failures = []

    def view_all():
        barrier.wait()
        for _ in range(50):
            for array, layout in zip(arrays, layouts):
                if dltensor_layout(NUMPY.view(array)) != layout:
                    failures.append(layout)

    threads = [threading.Thread(target=view_all) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
