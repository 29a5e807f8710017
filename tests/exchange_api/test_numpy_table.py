"""dl.exchange_api_for(numpy.ndarray): the exchange table that reads NumPy's arrays through
its C API, called through ctypes as a C consumer would: views, owning exports, the way
back, lifetimes and refusals."""

import ctypes
import gc
import os
import subprocess
import sys
import threading
import weakref
from ctypes import POINTER, byref, c_void_p

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core
from dlinterop.testing._frameworks.dtypes import numpy_shared_dtypes
from exchange_api.helpers import (
    ExchangeTable,
    ManagedFactory,
    assert_describes,
    assert_values,
    dltensor_layout,
)

from forge import IS_COPIED, READ_ONLY, DLManagedTensorVersioned, DLTensor

NUMPY = ExchangeTable(dl.exchange_api_for(np.ndarray))


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

DTYPES = numpy_shared_dtypes()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_numpy_view_is_the_array_in_place(layout):
    array = LAYOUTS[layout]()
    assert_describes(NUMPY.view(array), array)


@pytest.mark.parametrize("stride", [3, -3, 29, -29, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.uint16])
def test_numpy_view_of_any_stride_on_a_length_one_axis_is_numpys(stride, dtype):
    # NumPy ignores a length-1 axis's stride (the array is contiguous whatever it is): its
    # __dlpack__ writes the stride divided toward zero (NumPy 2.4 on) or the contiguous
    # one (NumPy 2.2). Neither addresses anything: the table divides, and the other axes'
    # strides, the shape and the memory are NumPy's.
    buffer = np.zeros(64, dtype)
    itemsize = buffer.itemsize
    array = np.lib.stride_tricks.as_strided(buffer[32:], (1, 4), (stride, itemsize))
    expected = dl.from_dlpack(array.__dlpack__(max_version=(1, 3)))
    managed = NUMPY.managed(array)
    try:
        for tensor in (NUMPY.view(array), managed.contents.dl_tensor):
            shape, strides = dltensor_layout(tensor)
            assert shape == expected.shape and strides[1] == expected.strides[1] == 1
            assert strides[0] == int(stride / itemsize)  # toward zero, as NumPy divides
            assert tensor.data == array.ctypes.data
    finally:
        managed.contents.deleter(managed)


def test_numpy_views_of_alternating_layouts_each_get_their_own():
    # The layout found last is tried first: a different one must not be taken for it.
    arrays = [base(), base()[:, ::2], base().T, base()[::-1], base()[:1], base()[:, :, :1]]
    for _ in range(3):
        for array in arrays:
            assert_describes(NUMPY.view(array), array)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_numpy_owned_tensor_is_the_array_in_place(layout):
    array = LAYOUTS[layout]()
    managed = NUMPY.managed(array)
    m = managed.contents
    try:
        if array.ndim:
            assert_describes(m.dl_tensor, array)
        else:  # as every export of dlinterop's: no shape or strides for 0-d tensors
            assert m.dl_tensor.ndim == 0 and m.dl_tensor.data == array.ctypes.data
        assert (m.version.major, m.version.minor) == (1, 3)
        assert m.flags == (0 if array.flags.writeable else READ_ONLY)
    finally:
        m.deleter(managed)


def test_numpy_owned_tensor_of_a_read_only_array_says_so():
    array = base()
    array.flags.writeable = False
    managed = NUMPY.managed(array)
    assert managed.contents.flags == READ_ONLY
    managed.contents.deleter(managed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_numpy_view_of_every_dtype(dtype):
    array = (np.arange(12) % 3).astype(dtype).reshape(3, 4)[:, ::-2]
    assert_describes(NUMPY.view(array), array)


def test_numpy_view_of_a_subclass():
    class Sub(np.ndarray):
        pass

    array = np.arange(6, dtype=np.int32).reshape(2, 3).view(Sub)[:, 1:]
    assert_describes(ExchangeTable(dl.exchange_api_for(Sub)).view(array), array)


def test_numpy_views_of_one_layout_share_a_block_that_outlives_them():
    first_array, second_array = base()[:, 1:, ::2], (base() + 1)[:, 1:, ::2]
    first, second = NUMPY.view(first_array), NUMPY.view(second_array)
    assert ctypes.addressof(first.strides.contents) == ctypes.addressof(second.strides.contents)
    assert_describes(second, second_array)
    layout = (first_array.shape, tuple(s // 4 for s in first_array.strides))
    del first_array, second_array
    gc.collect()
    assert dltensor_layout(first) == layout
    assert _core._numpy_view_block_count() == 0, "no array needed a block of its own"


BLOCKS_PER_ARRAY_ONCE_FULL = """
import gc, numpy as np, dlinterop as dl
from dlinterop import _core
from exchange_api.helpers import ExchangeTable, assert_describes
NUMPY = ExchangeTable(dl.exchange_api_for(np.ndarray))
kept = [np.zeros(n, np.int8) for n in range(1, 6000)]  # more layouts than the table holds
views = [NUMPY.view(a) for a in kept]
count = _core._numpy_view_block_count()
assert 0 < count < len(kept), count
for view, array in zip(views[::97], kept[::97]):
    assert_describes(view, array)
    assert_describes(NUMPY.view(array), array)
assert _core._numpy_view_block_count() == count, "a second view reuses the array's block"
del kept[:], views[:], view, array
gc.collect()
assert _core._numpy_view_block_count() == 0, "blocks freed with their arrays"
print("ok")
"""


def test_numpy_views_keep_blocks_per_array_once_layouts_are_full():
    # In a child: the layouts it interns stay for the life of its process.
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join([tests, os.path.join(tests, "support")])
    out = subprocess.run(
        [
            sys.executable,
            *(["-P"] if sys.version_info >= (3, 11) else []),
            "-c",
            BLOCKS_PER_ARRAY_ONCE_FULL,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        cwd=tests,  # without -P (Python 3.10), the checkout's dlinterop/ stays off sys.path
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr


def test_numpy_view_does_not_hold_the_array():
    array = base()
    count = sys.getrefcount(array)
    NUMPY.view(array)
    assert sys.getrefcount(array) == count


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


ML_WHOLE_BYTES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"]
ML_SUB_BYTE = ["int4", "uint4", "float4_e2m1fn", "float6_e2m3fn", "int2"]


@pytest.mark.parametrize("name", ML_WHOLE_BYTES)
def test_numpy_table_views_and_exports_ml_dtypes_arrays_in_place(name):
    # ml_dtypes' types are NumPy user types, which NumPy's __dlpack__ refuses before 2.5:
    # the table reads them itself, every one of whole bytes, in place.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if not hasattr(ml_dtypes, name):
        pytest.skip(f"this ml_dtypes has no {name}")
    array = (np.arange(12) % 5).astype(getattr(ml_dtypes, name)).reshape(3, 4)[:, ::-2]
    expected = dl.dtype(array.dtype)
    view = NUMPY.view(array)
    managed = NUMPY.managed(array)
    try:
        for tensor in (view, managed.contents.dl_tensor):
            assert tensor.data == array.ctypes.data
            assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (
                expected.code,
                expected.bits,
                1,
            )
            assert dltensor_layout(tensor) == ((3, 2), (4, -2))
        assert managed.contents.flags == 0
    finally:
        managed.contents.deleter(managed)


def test_numpy_to_py_of_an_ml_dtypes_tensor_is_an_ml_dtypes_array_in_place():
    # NumPy's from_dlpack refuses bfloat16 before NumPy 2.5: the way back makes the
    # ml_dtypes array over the same memory itself.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    array = np.arange(6).astype(ml_dtypes.bfloat16)
    result = NUMPY.to_object(NUMPY.managed(array))
    assert type(result) is np.ndarray and result.dtype == array.dtype
    assert result.ctypes.data == array.ctypes.data
    assert result.tolist() == array.tolist()


@pytest.mark.parametrize("name", ML_SUB_BYTE)
def test_numpy_table_gives_sub_byte_arrays_packed_and_copied(name):
    # NumPy holds one sub-byte element per byte, DLPack packs them: no view; the owned
    # tensor is the packed copy dl.asarray makes, flagged IS_COPIED.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if not hasattr(ml_dtypes, name):
        pytest.skip(f"this ml_dtypes has no {name}")
    array = (np.arange(8) % 3).astype(getattr(ml_dtypes, name))
    with pytest.raises(BufferError, match="packs sub-byte types"):
        NUMPY.view_of(id(array), byref(DLTensor()))
    managed = NUMPY.managed(array)
    try:
        m = managed.contents
        packed = dl.asarray(array)
        assert m.flags == IS_COPIED
        assert m.dl_tensor.data != array.ctypes.data
        assert (m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits) == (
            packed.dtype.code,
            packed.dtype.bits,
        )
        got = ctypes.string_at(m.dl_tensor.data, packed.nbytes)
        assert got == ctypes.string_at(packed.data_ptr, packed.nbytes)
    finally:
        managed.contents.deleter(managed)


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


def test_the_benchmarks_c_loop_calls_the_table_and_raises_its_errors():
    # dlinterop.testing._conformance.exchange_loop: what python -m dlinterop bench and the
    # asv suite time. Its calls leave nothing behind and raise what the table raises.
    from dlinterop.testing._conformance import exchange_loop

    table, array = dl.exchange_api_for(np.ndarray), base()
    count = sys.getrefcount(array)
    for kind in ("view", "owned", "dlpack"):
        assert exchange_loop(table, array, 50, kind) is None
    gc.collect()
    assert sys.getrefcount(array) == count
    with pytest.raises(TypeError, match="takes numpy.ndarray objects, got list"):
        exchange_loop(table, [1.0], 1, "view")
    with pytest.raises(BufferError, match="cannot view"):
        exchange_loop(table, base().astype(">f4"), 1, "view")
    with pytest.raises(TypeError, match="dlpack_exchange_api"):
        exchange_loop(array, array, 1, "view")
    with pytest.raises(ValueError, match="kind must be"):
        exchange_loop(table, array, 1, "copy")
