"""dl.asarray, the bridge for objects without DLPack: bytes, bytearray, array.array, mmap,
memoryview, ctypes arrays; which protocol takes precedence, and what is refused.

Zero-copy wherever the source allows it, proven by pointer equality; the source is kept
alive (and locked against resizing) for as long as a Tensor views it."""

import array
import ctypes
import mmap

import pytest

import dlinterop as dl

from buffer_cases import (
    address_of,
)

np = pytest.importorskip("numpy")


# -- bytes, bytearray -------------------------------------------------------------------


def test_bytes_zero_copy_read_only():
    b = b"\x00\x01\x02\x03\x04\x05\x06\x07"
    t = dl.asarray(b)
    assert t.dtype == "uint8" and t.shape == (8,) and t.strides == (1,)
    assert t.data_ptr == address_of(b)
    assert t.readonly
    assert np.from_dlpack(t).tolist() == list(range(8))
    with pytest.raises(BufferError, match="read-only"):
        dl.to_dlpack(t)


def test_empty_bytes():
    t = dl.asarray(b"")
    assert t.shape == (0,) and t.size == 0 and t.dtype == "uint8"


def test_bytes_copy_true_is_a_writable_copy():
    b = bytes(range(16))
    t = dl.asarray(b, copy=True)
    assert t.data_ptr != address_of(b) and not t.readonly
    assert t.data_ptr % 256 == 0
    assert np.from_dlpack(t).tobytes() == b


def test_bytearray_zero_copy_writable_and_locked_while_viewed():
    ba = bytearray(range(8))
    t = dl.asarray(ba)
    assert t.data_ptr == address_of(ba) and not t.readonly
    np.from_dlpack(t)[0] = 200
    assert ba[0] == 200
    with pytest.raises(BufferError):
        ba.append(1)  # the export pins the memory
    del t
    ba.append(1)


# -- array.array ------------------------------------------------------------------------


def _expected_dtype(code):
    size = array.array(code).itemsize
    if code in "fd":
        return f"float{8 * size}"
    return f"{'u' if code.isupper() else ''}int{8 * size}"


@pytest.mark.parametrize("code", list("bBhHiIlLqQfd"))
def test_array_array_zero_copy(code):
    a = array.array(code, [1, 2, 3, 4, 5])
    t = dl.asarray(a)
    assert t.dtype == _expected_dtype(code)
    assert t.shape == (5,)
    assert t.data_ptr == a.buffer_info()[0]
    assert not t.readonly
    assert np.from_dlpack(t).tolist() == [1, 2, 3, 4, 5]


def test_array_array_unicode_has_no_dlpack_type():
    with pytest.raises(TypeError, match="no DLPack data type"):
        dl.asarray(array.array("u", "abc"))


def test_array_array_source_outlives_its_name():
    a = array.array("d", [1.5, 2.5])
    t = dl.asarray(a)
    del a
    assert np.from_dlpack(t).tolist() == [1.5, 2.5]


# -- mmap -------------------------------------------------------------------------------


def test_anonymous_mmap_zero_copy_and_close_blocked_while_viewed():
    m = mmap.mmap(-1, 64)
    t = dl.asarray(m)
    assert t.shape == (64,) and t.dtype == "uint8" and not t.readonly
    assert t.data_ptr == address_of(m)
    np.from_dlpack(t)[3] = 9
    assert m[3] == 9
    with pytest.raises(BufferError):
        m.close()
    del t
    m.close()


def test_read_only_file_mmap_gives_read_only_tensor(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(np.arange(16, dtype=np.float32).tobytes())
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    t = dl.asarray(memoryview(m).cast("f"))
    assert t.readonly and t.dtype == "float32" and t.shape == (16,)
    assert np.array_equal(np.from_dlpack(t), np.arange(16, dtype=np.float32))
    del t
    m.close()


# -- memoryview -------------------------------------------------------------------------


def test_memoryview_cast_to_2d_float():
    ba = bytearray(np.arange(6, dtype=np.float32).tobytes())
    t = dl.asarray(memoryview(ba).cast("f", (2, 3)))
    assert t.dtype == "float32" and t.shape == (2, 3) and t.strides == (3, 1)
    assert t.data_ptr == address_of(ba)
    assert np.array_equal(np.from_dlpack(t), np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("step", [2, 3, -1, -3])
def test_memoryview_strided_and_negative_slices(step):
    ba = bytearray(range(24))
    view = memoryview(ba)[::step]
    t = dl.asarray(view)
    assert t.strides == (step,)
    assert t.data_ptr == address_of(ba) + (0 if step > 0 else 23)
    assert np.from_dlpack(t).tolist() == list(range(24))[::step]


def test_memoryview_of_non_contiguous_numpy_array():
    a = np.arange(24, dtype=np.int16).reshape(4, 6)[::2, 1::2]
    t = dl.asarray(memoryview(a))
    assert t.shape == (2, 3) and t.strides == (12, 2)
    assert t.data_ptr == a.ctypes.data
    assert np.array_equal(np.from_dlpack(t), a)


def test_read_only_memoryview():
    t = dl.asarray(memoryview(b"abcd"))
    assert t.readonly


@pytest.mark.parametrize("source", ["numpy_0d", "numpy_scalar"])
def test_zero_dimensional_buffer_gives_0d_tensor(source):
    """Regression: a 0-d buffer (NULL shape by the buffer protocol's rules) came back as
    shape (1,)."""
    obj = np.array(2.5) if source == "numpy_0d" else np.float64(2.5)
    t = dl.asarray(memoryview(obj))
    assert t.shape == () and t.ndim == 0 and t.size == 1
    assert t.dtype == "float64"
    assert np.from_dlpack(t) == 2.5


def test_byte_strides_not_multiple_of_item_size_are_refused():
    raw = np.zeros(40, dtype=np.uint8)
    odd = np.lib.stride_tricks.as_strided(raw.view(np.float32), (3,), (6,))
    with pytest.raises(BufferError, match="not a multiple of the item size"):
        dl.asarray(memoryview(odd))


def test_struct_buffer_format_is_refused():
    class Pair(ctypes.Structure):
        _fields_ = [("a", ctypes.c_int), ("b", ctypes.c_double)]

    with pytest.raises(TypeError, match="no DLPack data type"):
        dl.asarray((Pair * 2)())


def test_ctypes_array_zero_copy():
    arr = (ctypes.c_int32 * 4)(1, 2, 3, 4)
    t = dl.asarray(arr)
    assert t.dtype == "int32" and t.data_ptr == ctypes.addressof(arr)
    np.from_dlpack(t)[0] = 10
    assert arr[0] == 10


# -- precedence and refusals ------------------------------------------------------------


def test_dlpack_takes_precedence_over_array_interface_and_buffer():
    calls = []

    class Producer:
        def __init__(self, array):
            self.array = array
            self.__array_interface__ = {
                "shape": (1,),
                "typestr": "|u1",
                "version": 3,
                "data": (array.ctypes.data, True),
            }

        def __dlpack__(self, **kwargs):
            calls.append(kwargs)
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    a = np.arange(6.0)
    t = dl.asarray(Producer(a))
    assert calls and t.shape == (6,) and t.dtype == "float64" and not t.readonly
    assert t.data_ptr == a.ctypes.data


def test_numpy_array_goes_through_dlpack_zero_copy():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)[:, ::2]
    t = dl.asarray(a)
    assert t.data_ptr == a.ctypes.data and t.strides == (3, 2)


def test_tensor_in_tensor_out():
    t = dl.zeros(3)
    assert dl.asarray(t).data_ptr == t.data_ptr
    assert dl.asarray(t, copy=True).data_ptr != t.data_ptr
    assert dl.asarray(t, device="cpu", copy=False).data_ptr == t.data_ptr


@pytest.mark.parametrize("obj", [object(), "abc", None, {1: 2}, [object()], ["a"]])
def test_objects_without_any_protocol_are_refused(obj):
    # (Numbers and nested lists or tuples of numbers are Python data: a new Tensor.)
    with pytest.raises(TypeError):
        dl.asarray(obj)


def test_copy_keyword_is_validated():
    with pytest.raises(TypeError):
        dl.asarray(b"ab", copy="yes")
