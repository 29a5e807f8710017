"""bfloat16 and the float8 types through NumPy with ml_dtypes.

NumPy's DLPack knows these types from NumPy 2.5 on (asked of NumPy itself, by
numpy_dlpack_has); before, both directions refuse them. The buffer protocol has no format
for them, so with such a NumPy the zero-copy road from dlinterop to NumPy is the Tensor's
pickle buffer (protocol 5, out of band) viewed with DType.to_numpy(), and the road back is
dl.asarray over the array's memory.
"""

import pickle

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

ML_TYPES = [
    "bfloat16",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
]


def numpy_view(t):
    """A NumPy array (ml_dtypes dtype) over a C-contiguous tensor's memory."""
    buffers = []
    pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    return np.frombuffer(buffers[0].raw(), dtype=t.dtype.to_numpy()).reshape(t.shape)


@pytest.mark.parametrize("name", ML_TYPES)
def test_ml_dtypes_types_map_both_ways(name):
    ml_type = getattr(ml_dtypes, name)
    assert dl.dtype(ml_type) == name
    assert dl.dtype(np.dtype(ml_type)) is getattr(dl, name)
    assert dl.dtype(name).to_numpy() == np.dtype(ml_type)
    assert dl.dtype(name).itemsize == np.dtype(ml_type).itemsize


@pytest.mark.parametrize("value", [1.0, -2.5, 0.125])
@pytest.mark.parametrize("name", ML_TYPES)
def test_dl_to_numpy_zero_copy_values_match_ml_dtypes(name, value):
    if name == "float8_e8m0fnu":
        value = abs(value)  # exponent-only type: no sign
    t = dl.full((2, 3), value, dtype=name)
    a = numpy_view(t)
    assert a.dtype == getattr(ml_dtypes, name)
    assert a.ctypes.data == t.data_ptr
    expected = np.full((2, 3), value, dtype=np.float64).astype(getattr(ml_dtypes, name))
    assert a.tobytes() == expected.tobytes()
    # The view is writable and shares memory with the tensor.
    a[0, 0] = getattr(ml_dtypes, name)(4.0)
    assert numpy_view(t)[0, 0] == 4.0


@pytest.mark.parametrize("name", ML_TYPES)
def test_numpy_view_outlives_the_tensor(live_counters, name):
    before = live_counters()
    t = dl.full((4,), 2.0, dtype=name)
    a = numpy_view(t)
    del t
    assert live_counters()["live_buffers"] == before["live_buffers"] + 1
    assert np.array_equal(a.astype(np.float32), np.full(4, 2.0, dtype=np.float32))
    del a
    assert live_counters() == before


def numpy_dlpack_has(name):
    """Whether this NumPy's own DLPack export takes the ml_dtypes type (NumPy 2.5 does;
    earlier versions speak only bool, int, uint, float and complex)."""
    try:
        np.zeros(2, dtype=getattr(ml_dtypes, name)).__dlpack__()
    except BufferError:
        return False
    return True


@pytest.mark.parametrize("name", ML_TYPES)
def test_ml_dtypes_through_numpy_dlpack_both_ways_where_numpy_has_them(name):
    ml_type = getattr(ml_dtypes, name)
    if not numpy_dlpack_has(name):
        # This NumPy's limitation, pinned: both directions refuse the type.
        with pytest.raises((RuntimeError, BufferError), match="Unsupported dtype"):
            np.from_dlpack(dl.zeros((2,), dtype=name))
        with pytest.raises(BufferError, match="DLPack only supports"):
            np.zeros(2, dtype=ml_type).__dlpack__()
        return
    value = 2.0 if name == "float8_e8m0fnu" else -1.5
    a = np.full((2, 3), value, dtype=np.float32).astype(ml_type)
    for source in (a, a[:, ::2]):
        t = dl.from_dlpack(source)  # NumPy -> dl: zero-copy, the right DType
        assert t.dtype is getattr(dl, name)
        assert t.data_ptr == source.ctypes.data and not t.readonly
        back = np.from_dlpack(t)  # dl -> NumPy: the ml_dtypes dtype
        assert back.dtype == np.dtype(ml_type)
        assert back.ctypes.data == source.ctypes.data
        assert back.tobytes() == source.tobytes()
    t = dl.full((4,), value, dtype=name)
    b = np.from_dlpack(t)
    assert b.ctypes.data == t.data_ptr and b.dtype == np.dtype(ml_type)
    assert b.tobytes() == np.full(4, value, np.float32).astype(ml_type).tobytes()
    a.flags.writeable = False
    assert dl.from_dlpack(a).readonly_reason == "flag"


@pytest.mark.parametrize("name", ML_TYPES)
def test_buffer_protocol_has_no_format_for_ml_dtypes_types(name):
    t = dl.zeros((2,), dtype=name)
    with pytest.raises(BufferError, match="no format"):
        memoryview(t)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_asarray_of_ml_dtypes_array_zero_copy(name):
    a = np.arange(6, dtype=np.float32).astype(getattr(ml_dtypes, name)).reshape(2, 3)
    t = dl.asarray(a)
    assert t.dtype == name and t.shape == (2, 3)
    assert t.data_ptr == a.ctypes.data
    assert numpy_view(t).tobytes() == a.tobytes()


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_values_from_torch_read_through_ml_dtypes(name):
    """Values a framework wrote (PyTorch rounding) read the same through ml_dtypes."""
    torch = pytest.importorskip("torch")
    values = [0.1, 1.5, -3.0, 7.25, 100.0, -0.001]
    x = torch.tensor(values).to(getattr(torch, name))
    t = dl.from_dlpack(x)
    a = numpy_view(t)
    assert a.ctypes.data == x.data_ptr()
    assert np.array_equal(a.astype(np.float32), x.float().numpy())
    expected = np.array(values, dtype=np.float32).astype(getattr(ml_dtypes, name))
    assert a.tobytes() == expected.tobytes()
