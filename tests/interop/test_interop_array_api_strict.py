"""Interop with array-api-strict (the Python array API standard's reference namespace, on
NumPy memory), both directions: its dtypes, every layout, from_dlpack's copy and device
keywords, lifetimes and read-only memory.

array-api-strict hides its NumPy array; the address of element 0 is read through
np.from_dlpack, which itself shares memory.
"""

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")
xp = pytest.importorskip("array_api_strict")

XP_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
]


def pointer(x):
    return np.from_dlpack(x).ctypes.data


def xp_source(name, shape=(2, 3)):
    dtype = getattr(xp, name)
    if name == "bool":
        return xp.reshape(xp.arange(6) % 2 == 0, shape)
    values = xp.reshape(xp.arange(6, dtype=xp.int64) - 2, shape)
    if name.startswith("uint"):
        values = values + 2
    if name.startswith("complex"):
        return xp.astype(values, dtype) * (1 + 2j)
    return xp.astype(values, dtype)


# -- dtypes -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", XP_DTYPES)
def test_xp_to_dl_every_dtype_zero_copy(name):
    x = xp_source(name)
    t = dl.from_dlpack(x)
    assert t.dtype == name and t.shape == x.shape
    assert t.data_ptr == pointer(x)
    assert not t.readonly
    assert np.array_equal(np.from_dlpack(t), np.from_dlpack(x))


@pytest.mark.parametrize("name", XP_DTYPES)
def test_dl_to_xp_every_dtype_zero_copy(name):
    t = dl.full((2, 3), True if name == "bool" else 3, dtype=name)
    y = xp.from_dlpack(t)
    assert y.dtype == getattr(xp, name)
    assert pointer(y) == t.data_ptr
    assert xp.all(y == xp.full((2, 3), True if name == "bool" else 3, dtype=getattr(xp, name)))


def _numpy_takes(name):
    """Whether NumPy's DLPack import (array-api-strict's underneath) takes the type."""
    try:
        np.from_dlpack(dl.zeros((2,), dtype=name))
    except (RuntimeError, BufferError):
        return False
    return True


@pytest.mark.parametrize("name", ["float16", "bfloat16", "complex32", "float8_e4m3fn"])
def test_dl_to_xp_types_outside_the_standard_are_refused(name):
    t = dl.zeros((2,), dtype=name)
    if _numpy_takes(name):
        # The array API rule, applied by array-api-strict itself.
        with pytest.raises(TypeError, match=f"does not support the dtype '{name}'"):
            xp.from_dlpack(t)
    else:
        # Refused by the NumPy underneath (RuntimeError before NumPy 2.5, BufferError from).
        with pytest.raises((RuntimeError, BufferError), match="Unsupported dtype"):
            xp.from_dlpack(t)


# -- layouts ----------------------------------------------------------------------------


def _xp_layouts():
    base = xp.reshape(xp.arange(24, dtype=xp.float32), (2, 3, 4))
    return {
        "0d": base[1, 2, 3],
        "zero_size_(0,)": xp.reshape(base, (24,))[:0],
        "zero_size_(3,0)": base[0, :, :0],
        "zero_size_(2,0,1)": base[:, :0, :1],
        "32_dims": xp.reshape(xp.arange(4.0), (2, 2) + (1,) * 30),
        "slice": base[:, ::2, 1:],
        "permute_dims": xp.permute_dims(base, (2, 0, 1)),
        "matrix_transpose": base.mT,
        "zero_strides": xp.broadcast_to(base[0, 0, :], (3, 4)),
        "negative_strides": base[:, ::-1, :],
        "offset_view": base[1, 1:, 2:],
    }


@pytest.mark.parametrize("layout", list(_xp_layouts()))
def test_xp_to_dl_every_layout_zero_copy(layout):
    x = _xp_layouts()[layout]
    reference = np.from_dlpack(x)
    t = dl.from_dlpack(x)
    assert t.shape == x.shape
    assert t.strides == tuple(s // reference.itemsize for s in reference.strides)
    assert t.data_ptr == reference.ctypes.data
    assert np.array_equal(np.from_dlpack(t), reference)
    # broadcast_to gives a read-only view, and the flag travels.
    assert t.readonly == (layout == "zero_strides")


@pytest.mark.parametrize(
    "layout",
    [
        "0d",
        "zero_size_(0,)",
        "zero_size_(3,0)",
        "zero_size_(2,0,1)",
        "size1_odd_strides",
        "32_dims",
        "slice",
        "transpose",
        "zero_strides",
        "offset_view",
        "negative_strides",
    ],
)
def test_dl_to_xp_every_layout_zero_copy(dl_layout, layout):
    t, view = dl_layout(layout)
    y = xp.from_dlpack(t)
    assert y.shape == t.shape
    assert pointer(y) == t.data_ptr
    assert np.array_equal(np.from_dlpack(y), view)


# -- from_dlpack keywords ---------------------------------------------------------------


def test_xp_from_dlpack_copy_keyword():
    t = dl.full((2, 3), 1.0)
    assert pointer(xp.from_dlpack(t, copy=False)) == t.data_ptr
    copied = xp.from_dlpack(t, copy=True)
    assert pointer(copied) != t.data_ptr
    assert xp.all(copied == 1.0)


def test_xp_from_dlpack_cpu_device_keyword():
    t = dl.full((2,), 1.0)
    y = xp.from_dlpack(t, device=xp.Device("CPU_DEVICE"))
    assert pointer(y) == t.data_ptr


def test_dl_from_dlpack_copy_keyword_on_xp_array():
    x = xp_source("float64")
    shared = dl.from_dlpack(x, copy=False)
    assert shared.data_ptr == pointer(x)
    copied = dl.from_dlpack(x, copy=True)
    assert copied.data_ptr != pointer(x) and not copied.readonly
    assert np.array_equal(np.from_dlpack(copied), np.from_dlpack(x))


# -- lifetimes --------------------------------------------------------------------------


def test_xp_producer_deleted_before_dl_consumer():
    x = xp.arange(1000, dtype=xp.float64)
    t = dl.from_dlpack(x)
    del x
    xp.zeros(1000, dtype=xp.float64)
    assert np.array_equal(np.from_dlpack(t), np.arange(1000.0))


def test_dl_consumer_deleted_before_xp_producer():
    x = xp.arange(10, dtype=xp.float64)
    t = dl.from_dlpack(x)
    del t
    x[0] = 5.0
    assert float(x[0]) == 5.0


def test_dl_producer_deleted_before_xp_consumer(live_counters):
    before = live_counters()
    t = dl.full((100,), 3.0, dtype="float64")
    y = xp.from_dlpack(t)
    del t
    assert live_counters()["live_buffers"] == before["live_buffers"] + 1
    assert float(xp.sum(y)) == 300.0
    del y
    assert live_counters() == before


def test_xp_consumer_deleted_before_dl_producer(live_counters):
    before = live_counters()
    t = dl.full((100,), 3.0, dtype="float64")
    y = xp.from_dlpack(t)
    del y
    assert live_counters()["live_exports"] == before["live_exports"]
    assert np.array_equal(np.from_dlpack(t), np.full(100, 3.0))


# -- read-only --------------------------------------------------------------------------


def test_read_only_dl_tensor_gives_read_only_xp_array():
    x = xp.broadcast_to(xp.asarray([1.0, 2.0]), (3, 2))
    t = dl.from_dlpack(x)
    assert t.readonly
    y = xp.from_dlpack(t)
    assert pointer(y) == t.data_ptr
    with pytest.raises(ValueError, match="read-only"):
        y[0, 0] = 5.0


def test_writes_through_xp_reach_dl_memory():
    t = dl.zeros((2, 2), dtype="int32")
    y = xp.from_dlpack(t)
    y[1, 1] = 7
    assert np.from_dlpack(t)[1, 1] == 7
