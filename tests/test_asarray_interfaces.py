"""dl.asarray of objects exposing only __array_interface__ (v3) or __cuda_array_interface__
(metadata only: no GPU work here).

Zero-copy wherever the source allows it, proven by pointer equality; the source is kept
alive (and locked against resizing) for as long as a Tensor views it."""

import weakref

import pytest

import dlinterop as dl

from buffer_cases import (
    address_of,
)

np = pytest.importorskip("numpy")


class ArrayInterface:
    """Exposes only __array_interface__ (no buffer, no DLPack); keeps `keep` alive."""

    def __init__(self, interface, keep=None):
        self.__array_interface__ = interface
        self.keep = keep


class CudaArrayInterface:
    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


# -- __array_interface__ (v3) -----------------------------------------------------------


@pytest.mark.parametrize("read_only", [False, True])
def test_array_interface_pointer_zero_copy_and_read_only_bit(read_only):
    base = np.arange(12, dtype=np.float32)
    obj = ArrayInterface(
        {"shape": (3, 4), "typestr": "<f4", "version": 3, "data": (base.ctypes.data, read_only)},
        keep=base,
    )
    t = dl.asarray(obj)
    assert t.data_ptr == base.ctypes.data
    assert t.readonly is read_only
    assert t.shape == (3, 4) and t.strides == (4, 1)
    assert np.array_equal(np.from_dlpack(t), base.reshape(3, 4))


def test_array_interface_strides_in_bytes_become_elements():
    base = np.arange(24, dtype=np.int64)
    obj = ArrayInterface(
        {
            "shape": (3, 2),
            "typestr": "<i8",
            "version": 3,
            "strides": (64, 8),
            "data": (base.ctypes.data, False),
        },
        keep=base,
    )
    t = dl.asarray(obj)
    assert t.strides == (8, 1)
    assert np.array_equal(np.from_dlpack(t), base.reshape(3, 8)[:, :2])


def test_array_interface_negative_strides():
    base = np.arange(6, dtype=np.int32)
    obj = ArrayInterface(
        {
            "shape": (6,),
            "typestr": "<i4",
            "version": 3,
            "strides": (-4,),
            "data": (base.ctypes.data + 20, False),
        },
        keep=base,
    )
    t = dl.asarray(obj)
    assert t.strides == (-1,)
    assert np.from_dlpack(t).tolist() == [5, 4, 3, 2, 1, 0]


def test_array_interface_offset_into_a_buffer():
    ba = bytearray(np.arange(8, dtype=np.float32).tobytes())
    obj = ArrayInterface({"shape": (2, 2), "typestr": "<f4", "version": 3, "data": ba, "offset": 8})
    t = dl.asarray(obj)
    assert t.data_ptr == address_of(ba) + 8
    assert not t.readonly
    assert np.array_equal(np.from_dlpack(t), np.array([[2, 3], [4, 5]], dtype=np.float32))


def test_array_interface_buffer_data_read_only_follows_the_buffer():
    b = np.arange(4, dtype=np.int16).tobytes()
    t = dl.asarray(ArrayInterface({"shape": (4,), "typestr": "<i2", "version": 3, "data": b}))
    assert t.readonly and t.data_ptr == address_of(b)


def test_array_interface_without_data_uses_the_objects_own_buffer():
    """No 'data': the memory is the object's buffer. The interface wins over the buffer's
    own description (uint8, (8,))."""

    class Int16Pairs(bytearray):
        @property
        def __array_interface__(self):
            return {"shape": (2, 2), "typestr": "<i2", "version": 3}

    obj = Int16Pairs(np.array([1, 2, 3, 4], dtype=np.int16).tobytes())
    t = dl.asarray(obj)
    assert t.dtype == "int16" and t.shape == (2, 2)
    assert t.data_ptr == address_of(obj)
    assert np.array_equal(np.from_dlpack(t), [[1, 2], [3, 4]])


@pytest.mark.parametrize(
    "typestr, name",
    [
        ("|b1", "bool"),
        ("|i1", "int8"),
        ("<i2", "int16"),
        ("<i4", "int32"),
        ("<i8", "int64"),
        ("|u1", "uint8"),
        ("<u2", "uint16"),
        ("<u4", "uint32"),
        ("<u8", "uint64"),
        ("<f2", "float16"),
        ("<f4", "float32"),
        ("=f8", "float64"),
        ("<c8", "complex64"),
        ("<c16", "complex128"),
    ],
)
def test_array_interface_typestrs(typestr, name):
    npdt = np.dtype(typestr)
    base = np.zeros(4, dtype=npdt)
    t = dl.asarray(
        ArrayInterface(
            {"shape": (4,), "typestr": typestr, "version": 3, "data": (base.ctypes.data, False)},
            keep=base,
        )
    )
    assert t.dtype == name and t.itemsize == npdt.itemsize


@pytest.mark.parametrize(
    "typestr, error",
    [
        (">f4", ValueError),
        ("|V8", TypeError),
        ("<M8", TypeError),
        ("<c4", TypeError),
        ("f4", ValueError),
    ],
)
def test_array_interface_unsupported_typestrs(typestr, error):
    base = np.zeros(8, dtype=np.float64)
    obj = ArrayInterface(
        {"shape": (2,), "typestr": typestr, "version": 3, "data": (base.ctypes.data, False)},
        keep=base,
    )
    with pytest.raises(error):
        dl.asarray(obj)


def test_array_interface_mask_is_refused():
    base = np.zeros(2)
    obj = ArrayInterface(
        {
            "shape": (2,),
            "typestr": "<f8",
            "version": 3,
            "data": (base.ctypes.data, False),
            "mask": np.ones(2, bool),
        },
        keep=base,
    )
    with pytest.raises(BufferError, match="masked"):
        dl.asarray(obj)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (2, 0, 1), (1,) * 32])
def test_array_interface_shapes(shape):
    base = np.full(shape, 7.0) if 0 not in shape else np.zeros(shape)
    obj = ArrayInterface(
        {"shape": shape, "typestr": "<f8", "version": 3, "data": (base.ctypes.data, False)},
        keep=base,
    )
    t = dl.asarray(obj)
    assert t.shape == shape
    assert np.array_equal(np.from_dlpack(t), base)


def test_array_interface_object_is_kept_alive_by_the_tensor():
    base = np.arange(4.0)
    obj = ArrayInterface(
        {"shape": (4,), "typestr": "<f8", "version": 3, "data": (base.ctypes.data, False)},
        keep=base,
    )
    alive = weakref.ref(obj)
    t = dl.asarray(obj)
    del obj, base
    assert alive() is not None
    assert np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0, 3.0]
    del t
    assert alive() is None


def test_array_interface_copy_true():
    base = np.arange(4.0)
    obj = ArrayInterface(
        {"shape": (4,), "typestr": "<f8", "version": 3, "data": (base.ctypes.data, True)}, keep=base
    )
    t = dl.asarray(obj, copy=True)
    assert t.data_ptr != base.ctypes.data and not t.readonly
    assert np.array_equal(np.from_dlpack(t), base)


# -- __cuda_array_interface__ (metadata only: no GPU work here) -------------------------


def _no_gpu():
    if dl.cuda.device_count() > 0:
        pytest.skip("fake device pointers: this machine has a GPU (real CUDA tests cover it)")


FAKE_DEVICE_POINTER = 0x7F00_0000_1000


@pytest.mark.parametrize("read_only", [False, True])
def test_cuda_array_interface_metadata(read_only):
    _no_gpu()
    obj = CudaArrayInterface(
        {
            "shape": (2, 3),
            "typestr": "<f2",
            "version": 3,
            "data": (FAKE_DEVICE_POINTER, read_only),
            "strides": (2, 4),
            "stream": 1,
        }
    )
    t = dl.asarray(obj)
    assert t.device == "cuda:0"
    assert t.__dlpack_device__() == (dl.DeviceType.CUDA, 0)
    assert t.dtype == "float16" and t.shape == (2, 3) and t.strides == (1, 2)
    assert t.data_ptr == FAKE_DEVICE_POINTER
    assert t.readonly is read_only
    assert t.owner is obj
    with pytest.raises(BufferError, match="not host-accessible"):
        memoryview(t)


def test_cuda_array_interface_c_order_when_no_strides():
    _no_gpu()
    t = dl.asarray(
        CudaArrayInterface(
            {
                "shape": (2, 3, 4),
                "typestr": "<c16",
                "version": 3,
                "data": (FAKE_DEVICE_POINTER, False),
                "strides": None,
            }
        )
    )
    assert t.strides == (12, 4, 1) and t.dtype == "complex128" and t.is_contiguous()


def test_cuda_array_interface_zero_size_null_pointer():
    _no_gpu()
    t = dl.asarray(
        CudaArrayInterface({"shape": (0, 3), "typestr": "<f4", "version": 3, "data": (0, False)})
    )
    assert t.shape == (0, 3) and t.size == 0 and t.device == "cuda:0"


def test_cuda_array_interface_to_cpu_without_copy_is_a_copy_error():
    _no_gpu()
    obj = CudaArrayInterface(
        {"shape": (4,), "typestr": "<f4", "version": 3, "data": (FAKE_DEVICE_POINTER, False)}
    )
    with pytest.raises(dl.CopyError):
        dl.asarray(obj, device="cpu", copy=False)


def test_cuda_array_interface_tensor_re_exports_as_opaque_view():
    _no_gpu()
    t = dl.asarray(
        CudaArrayInterface(
            {"shape": (4,), "typestr": "<f4", "version": 3, "data": (FAKE_DEVICE_POINTER, False)}
        )
    )
    u = dl.from_dlpack(dl.to_dlpack(t, versioned=True))
    assert u.device == "cuda:0" and u.data_ptr == FAKE_DEVICE_POINTER and u.shape == (4,)
    # NumPy's refusal: RuntimeError before NumPy 2.5, BufferError from it.
    with pytest.raises((RuntimeError, BufferError), match="Unsupported device"):
        np.from_dlpack(t)


def test_cuda_array_interface_takes_precedence_over_array_interface():
    _no_gpu()

    class Both(CudaArrayInterface):
        __array_interface__ = {
            "shape": (1,),
            "typestr": "<f4",
            "version": 3,
            "data": (FAKE_DEVICE_POINTER, False),
        }

    t = dl.asarray(
        Both({"shape": (4,), "typestr": "<f4", "version": 3, "data": (FAKE_DEVICE_POINTER, False)})
    )
    assert t.device == "cuda:0" and t.shape == (4,)


def test_cuda_array_interface_requires_a_pointer_tuple():
    obj = CudaArrayInterface({"shape": (4,), "typestr": "<f4", "version": 3, "data": bytearray(16)})
    with pytest.raises(TypeError):
        dl.asarray(obj)


# -- NumPy scalars: their __array_interface__ names a freed temporary array ---------------

try:
    import ml_dtypes
except ImportError:  # no wheel for free-threaded CPython 3.13
    ML_SCALARS = []
else:
    ML_SCALARS = [ml_dtypes.bfloat16(1.5), ml_dtypes.float8_e4m3fn(-2), ml_dtypes.int4(-3)]

NUMPY_SCALARS = [
    np.False_,
    np.True_,
    np.uint8(3),
    np.int8(-3),
    np.uint64(2**63 + 5),
    np.float16(-1.5),
    np.float32(1.5),
    np.float64(0.25),
    np.complex128(1 + 2j),
    *ML_SCALARS,
]


@pytest.mark.parametrize("scalar", NUMPY_SCALARS, ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("make", [dl.asarray, dl.tensor], ids=lambda f: f.__name__)
def test_numpy_scalar_is_a_new_zero_d_tensor_of_its_value(make, scalar):
    t = make(scalar)
    # Small arrays made after it take any buffer NumPy freed meanwhile (its cache of small
    # buffers, or malloc's): a Tensor over freed memory would read their values.
    size = np.asarray(scalar).dtype.itemsize
    scratch = [np.frombuffer(b"\x5a" * size, np.uint8).copy() for _ in range(64)]
    assert t.shape == () and t.dtype.to_numpy() == np.asarray(scalar).dtype
    assert np.asarray(t).tobytes() == np.asarray(scalar).tobytes()
    if not ML_SCALARS or type(scalar) not in map(type, ML_SCALARS):
        assert t.tolist() == scalar.item()
    del scratch


def test_numpy_scalar_without_a_copy_is_a_copy_error():
    with pytest.raises(dl.CopyError, match="NumPy scalar"):
        dl.asarray(np.float32(1.5), copy=False)
    t = dl.asarray(np.float32(1.5), dtype=dl.float64)
    assert t.dtype is dl.float64 and t.tolist() == 1.5
